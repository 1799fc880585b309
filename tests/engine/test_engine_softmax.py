"""masked_softmax and row_entropy: the float64 numpy softmax every non-kernel path shares."""

from __future__ import annotations

import math

import numpy as np

from attnviz.engine import masked_softmax, row_entropy


def test_masked_softmax_rows_and_fully_masked_row():
    s = np.array([[[1.0, 2.0, 3.0], [np.inf, 5.0, -np.inf], [7.0, np.nan, 1e4]]])  # (1, 3, 3)
    m = np.array([[True, True, False], [False, True, False], [False, False, False]])  # (3, 3) rows = queries
    w, lse = masked_softmax(s, m)
    e = np.exp([1.0, 2.0])
    np.testing.assert_allclose(w[0, 0], [e[0] / e.sum(), e[1] / e.sum(), 0.0], rtol=1e-15)
    assert np.isclose(lse[0, 0], np.log(e.sum()), rtol=1e-15)
    np.testing.assert_array_equal(w[0, 1], [0.0, 1.0, 0.0])  # masked inf cells take no part
    assert lse[0, 1] == 5.0
    np.testing.assert_array_equal(w[0, 2], [0.0, 0.0, 0.0])  # fully masked: weights 0, lse -inf, no NaN
    assert lse[0, 2] == -np.inf and w.dtype == np.float64


def test_masked_softmax_keeps_large_scores_finite():
    w, lse = masked_softmax(np.array([[1e4, -1e4, 1e4 - 1.0]]), True)
    assert np.isfinite(w).all() and np.isclose(w.sum(), 1.0) and np.isclose(lse[0], 1e4 + np.log1p(np.exp(-1.0)))


def test_row_entropy():
    w = np.array([[0.25, 0.25, 0.25, 0.25], [1.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0]])
    np.testing.assert_allclose(row_entropy(w), [math.log(4), 0.0, 0.0], atol=1e-15)
