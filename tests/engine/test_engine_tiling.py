"""Automatic tile sizes: the prediction arithmetic, the measured cache, and small problems."""

from __future__ import annotations

import numpy as np

from attnviz.engine import tiling
from attnviz.engine.tiling import CANDIDATES, DEFAULT, TileCost, _predicted, choose_blocks


def test_prediction_counts_full_and_partial_cells_and_skips_empty_tiles():
    costs = {(64, 128): TileCost(1.0, 3.0), (256, 128): TileCost(0.5, 3.0)}
    T = 512
    dense_pred = _predicted(costs, None, T, T, nh=2)
    assert dense_pred == {(64, 128): 2 * T * T * 1.0, (256, 128): 2 * T * T * 0.5}
    causal = np.tri(T, dtype=bool)[None]  # (1, T, T)
    pred = _predicted(costs, causal, T, T, nh=2)
    # 64x128 tiles: 8 x 4 grid; tiles crossing the diagonal are partial, those above it empty
    rows, cols = np.arange(T) // 64, np.arange(T) // 128
    counts = np.zeros((8, 4))
    np.add.at(counts, (rows[:, None], cols[None, :]), np.tri(T))
    full = (counts == 64 * 128).sum() * 64 * 128
    partial = ((counts > 0) & (counts < 64 * 128)).sum() * 64 * 128
    assert pred[(64, 128)] == 2 * (full * 1.0 + partial * 3.0)
    # with expensive partial tiles, the finer tiling wins for causal though the coarse one wins dense
    assert min(dense_pred, key=dense_pred.get) == (256, 128)
    assert min(pred, key=pred.get) == (64, 128)


def test_ragged_sizes_use_real_tile_extents():
    costs = {(64, 128): TileCost(1.0, 1.0)}
    pred = _predicted(costs, np.ones((1, 70, 130), bool), 70, 130, nh=1)
    assert pred[(64, 128)] == 70 * 130


def test_small_problems_use_the_default_without_measuring():
    before = len(tiling.cached_costs())
    assert choose_blocks(2, 100, 100, 16, 16, np.float32) == DEFAULT
    assert len(tiling.cached_costs()) == before


def test_measured_choice_is_a_candidate_and_is_cached():
    choice = choose_blocks(2, 700, 900, 16, 8, np.float64)
    assert choice in CANDIDATES
    cached = tiling.cached_costs()
    sc = tiling.shape_class(700, 900, 16, 8, np.float64)
    assert sc in cached and all(c.full > 0 and c.partial > 0 for c in cached[sc].values())
    assert choose_blocks(2, 700, 900, 16, 8, np.float64) == choice  # same shape class: no new measurement
    assert tiling.cached_costs()[sc] == cached[sc]
