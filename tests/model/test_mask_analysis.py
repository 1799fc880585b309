"""Mask analysis: fully masked rows and flash-tile classification against a brute-force count."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attnviz.model.mask.analysis import EMPTY, FULL, PARTIAL, tile_summary
from attnviz.model.mask.presets import preset
from mask_oracles import fully_masked_row_indices, fully_masked_rows, segments_from_lengths, tile_states_bruteforce


def brute_counts(mask: np.ndarray, bm: int, bn: int) -> tuple[int, int, int]:
    """Count tiles cell by cell, without array tricks."""
    m = mask if mask.ndim == 3 else mask[None]
    nh, Tq, Tk = m.shape
    empty = partial = full = 0
    for h in range(nh):
        for r0 in range(0, Tq, bm):
            for c0 in range(0, Tk, bn):
                cells = [m[h, i, j] for i in range(r0, min(Tq, r0 + bm)) for j in range(c0, min(Tk, c0 + bn))]
                if not any(cells):
                    empty += 1
                elif all(cells):
                    full += 1
                else:
                    partial += 1
    return empty, partial, full


@pytest.mark.parametrize("T", [1, 3, 16, 37])
@pytest.mark.parametrize("bm,bn", [(16, 16), (4, 8), (1, 1), (64, 64)])
def test_tiles_of_vla_match_brute_force(T, bm, bn):
    sizes = [T // 4, T // 4, T // 4, T - 3 * (T // 4)]
    segs = segments_from_lengths(sizes, ["image", "prompt", "fast", "expert"])
    mask = preset("vla", segs).compile(segs)
    s = tile_summary(mask, bm, bn)
    assert (s.empty, s.partial, s.full) == brute_counts(mask, bm, bn)
    assert s.total == -(-T // bm) * -(-T // bn)
    assert 0.0 <= s.sparsity <= 100.0
    np.testing.assert_array_equal(s.tile_state, tile_states_bruteforce(mask, bm, bn))


@settings(max_examples=80, deadline=None)
@given(st.integers(1, 3), st.integers(0, 20), st.integers(0, 20), st.integers(1, 9), st.integers(1, 9),
       st.integers(0, 2**32 - 1), st.floats(0, 1))
def test_random_masks_match_brute_force(nh, Tq, Tk, bm, bn, seed, density):
    mask = np.random.default_rng(seed).random((nh, Tq, Tk)) < density
    s = tile_summary(mask, bm, bn)
    assert (s.empty, s.partial, s.full) == brute_counts(mask, bm, bn)
    assert 0.0 <= s.sparsity <= 100.0
    if s.total:
        assert s.sparsity == pytest.approx(100.0 * s.empty / s.total)


def test_mask_smaller_than_one_tile_never_negative():
    causal = np.tril(np.ones((5, 5), bool))
    s = tile_summary(causal, 128, 128)
    assert (s.empty, s.partial, s.full, s.sparsity) == (0, 1, 0, 0.0)
    s = tile_summary(np.ones((5, 5), bool), 128, 128)
    assert (s.full, s.sparsity) == (1, 0.0)
    s = tile_summary(np.zeros((5, 5), bool), 128, 128)
    assert (s.empty, s.sparsity) == (1, 100.0)
    s = tile_summary(np.zeros((0, 0), bool), 16, 16)
    assert s.total == 0 and s.sparsity == 0.0
    assert s.tile_state.dtype == np.int8 and {EMPTY, PARTIAL, FULL} == {0, 1, 2}
    from attnviz import engine

    assert (EMPTY, PARTIAL, FULL) == (engine.EMPTY, engine.PARTIAL, engine.FULL)
    with pytest.raises(ValueError):
        tile_summary(causal, 0, 16)


def test_fully_masked_rows_per_head():
    segs = segments_from_lengths([2, 3], ["image", "mystery"])
    m = preset("vla", segs, roles={"mystery": "A"}).compile(segs)
    assert not fully_masked_rows(m).any()
    mask = np.ones((2, 4, 3), bool)
    mask[0, 1] = False
    mask[1, 3] = False
    mask[1, 0] = False
    rows = fully_masked_rows(mask)
    assert rows.shape == (2, 4)
    idx = fully_masked_row_indices(mask)
    assert [i.tolist() for i in idx] == [[1], [0, 3]]
    assert [i.tolist() for i in fully_masked_row_indices(mask[0])] == [[1]]
