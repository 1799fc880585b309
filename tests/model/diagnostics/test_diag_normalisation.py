"""The Scaled / No sqrt(d_k) / Uniform selector with row entropy and max weight."""

import math

import numpy as np
import pytest

from attnviz.model.diagnostics.normalisation import compare_modes, masked_softmax, normalise, row_entropy

BANK_DOTS = np.array([[0.92, 0.0, 4.6, 1.38]])


def test_scaled_row_is_the_seed_row():
    r = normalise(BANK_DOTS, mode="scaled", d_k=4)
    assert np.array_equal(np.round(r.weights, 2), [[0.11, 0.07, 0.69, 0.14]])
    assert r.argmax[0] == 2 and r.max_weight[0] == pytest.approx(0.6854, abs=1e-4)


def test_unscaled_is_sharper_than_scaled_on_the_bank_scores():
    modes = compare_modes(BANK_DOTS, d_k=4)
    sc, un, uni = modes["scaled"], modes["unscaled"], modes["uniform"]
    assert un.max_weight[0] > sc.max_weight[0] + 0.2
    assert un.entropy_nats[0] < sc.entropy_nats[0] < uni.entropy_nats[0]
    assert uni.entropy_nats[0] == pytest.approx(math.log(4))
    assert sc.entropy_bits[0] == pytest.approx(sc.entropy_nats[0] / math.log(2))


def test_uniform_rows_are_one_over_allowed_count():
    s = np.random.default_rng(0).normal(size=(5, 6))
    mask = np.tril(np.ones((5, 6), bool))
    r = normalise(s, mask, "uniform")
    for i in range(5):
        assert np.allclose(r.weights[i, : i + 1], 1 / (i + 1))
        assert np.all(r.weights[i, i + 1:] == 0)
    assert np.array_equal(r.n_allowed, [1, 2, 3, 4, 5])
    assert np.allclose(r.entropy_nats, np.log(np.arange(1, 6)))
    assert np.allclose(r.max_entropy_nats, r.entropy_nats)


def test_fully_masked_rows_are_zero_and_flagged():
    s = np.array([[1.0, 2.0], [3.0, -np.inf]])
    mask = np.array([[True, True], [False, False]])
    for mode in ("scaled", "unscaled", "uniform"):
        r = normalise(s, mask, mode, d_k=2)
        assert np.array_equal(r.empty_rows, [False, True])
        assert np.all(r.weights[1] == 0) and r.entropy_nats[1] == 0 and r.max_weight[1] == 0
        assert r.argmax[1] == -1
        assert np.all(np.isfinite(r.weights)) and r.weights[0].sum() == pytest.approx(1)


def test_huge_scores_do_not_overflow():
    w = masked_softmax(np.array([[1e4, -1e4, 0.0]]), np.array([[False, True, True]]))
    assert np.allclose(w, [[0, 0, 1]])
    assert row_entropy(w)[0] == 0.0


def test_leading_head_axis_and_bad_input():
    s = np.random.default_rng(1).normal(size=(2, 3, 4))
    r = normalise(s, np.ones((3, 4), bool), "scaled", d_k=4)
    assert r.weights.shape == (2, 3, 4) and r.entropy_nats.shape == (2, 3)
    with pytest.raises(ValueError, match="d_k"):
        normalise(s, mode="scaled")
    with pytest.raises(ValueError, match="unknown normalisation"):
        normalise(s, mode="sparse")
    with pytest.raises(ValueError, match="bool"):
        normalise(s, np.ones((3, 4)), "uniform")
    with pytest.raises(ValueError, match="finite"):
        normalise(np.array([[np.nan, 1.0]]), mode="unscaled")
