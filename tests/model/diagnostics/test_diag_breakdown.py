"""The (query, key) breakdown reproduces seed 002's worked numbers for bank's row."""

import numpy as np
import pytest

from attnviz.model.diagnostics.breakdown import pair_breakdown


def test_bank_row_reproduces_the_seed(river_bank):
    q, k = river_bank
    b = pair_breakdown(q, k, i=3, j=2)
    assert np.array_equal(b.q, [2.3, 2.3, 0, 0])
    assert np.allclose(b.row_dots, [0.92, 0.0, 4.6, 1.38])
    assert b.scale == 0.5
    assert np.allclose(b.row_scores, [0.46, 0.0, 2.3, 0.69])
    assert np.array_equal(np.round(b.row_weights, 2), [0.11, 0.07, 0.69, 0.14])
    assert np.allclose(b.products, [2.3, 2.3, 0.0, 0.0])
    assert b.dot == pytest.approx(4.6) and b.score == pytest.approx(2.3)
    assert round(b.weight, 2) == 0.69 and b.allowed
    assert b.row_weights.sum() == pytest.approx(1.0)


def test_bank_to_itself_and_to_by(river_bank):
    q, k = river_bank
    self_ = pair_breakdown(q, k, 3, 3)
    assert self_.dot == pytest.approx(1.38) and round(self_.weight, 2) == 0.14
    by = pair_breakdown(q, k, 3, 0)
    assert by.score == pytest.approx(0.46) and round(by.weight, 2) == 0.11


def test_output_and_contribution_follow_the_weights(river_bank):
    q, k = river_bank
    v = np.arange(16, dtype=float).reshape(4, 4)
    b = pair_breakdown(q, k, 3, 2, v=v)
    assert np.allclose(b.output, b.row_weights @ v)
    assert np.allclose(b.contribution, b.weight * v[2])


def test_modes_and_mask(river_bank):
    q, k = river_bank
    un = pair_breakdown(q, k, 3, 2, mode="unscaled")
    assert un.scale == 1.0 and un.weight > pair_breakdown(q, k, 3, 2).weight
    uni = pair_breakdown(q, k, 3, 2, mode="uniform")
    assert np.allclose(uni.row_weights, 0.25)
    mask = np.tril(np.ones((4, 4), bool))
    mask[3, 2] = False
    m = pair_breakdown(q, k, 3, 2, mask=mask)
    assert not m.allowed and m.weight == 0.0 and m.row_scores[2] == -np.inf
    assert m.row_weights.sum() == pytest.approx(1.0)


def test_bad_cells_raise(river_bank):
    q, k = river_bank
    with pytest.raises(ValueError, match="outside"):
        pair_breakdown(q, k, 4, 0)
    with pytest.raises(ValueError, match="same hs"):
        pair_breakdown(q, k[:, :3], 0, 0)
    with pytest.raises(ValueError, match="normalisation"):
        pair_breakdown(q, k, 0, 0, mode="sparsemax")
