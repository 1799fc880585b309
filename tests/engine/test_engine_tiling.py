"""Automatic tile sizes: the prediction arithmetic, the cost model, the same choice every time, small problems."""

from __future__ import annotations

import numpy as np

from attnviz.engine import tiling
from attnviz.engine.tiling import (CANDIDATES, DEFAULT, FINEST, TileCost, _predicted, choose_blocks, fine_counts,
                                   tile_state_from_fine)
from attnviz.engine.blockmask import classify, tile_counts


def test_prediction_counts_full_and_partial_cells_and_skips_empty_tiles():
    costs = {(64, 128): TileCost(1.0, 3.0), (256, 128): TileCost(0.5, 3.0)}
    T = 512
    dense_pred = _predicted(costs, None, T, T, nh=2)
    assert dense_pred == {(64, 128): 2 * T * T * 1.0, (256, 128): 2 * T * T * 0.5}
    causal = np.tri(T, dtype=bool)[None]  # (1, T, T)
    pred = _predicted(costs, fine_counts(causal), T, T, nh=2)
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
    pred = _predicted(costs, fine_counts(np.ones((1, 70, 130), bool)), 70, 130, nh=1)
    assert pred[(64, 128)] == 70 * 130


def test_small_problems_use_the_default():
    assert choose_blocks(2, 100, 100, 16, 16, np.float32) == DEFAULT


def test_larger_tiles_cost_less_per_cell_and_partial_tiles_more():
    costs = tiling.tile_costs(4096, 4096, 64, 64)
    assert set(costs) == set(CANDIDATES)
    assert costs[(256, 512)].full < costs[(128, 256)].full < costs[(64, 128)].full
    assert all(c.partial > c.full > 0 for c in costs.values())


def test_the_choice_is_the_same_every_time_and_follows_threads_and_mask():
    from attnviz.engine.runtime import num_threads

    causal = np.tri(4096, dtype=bool)[None]
    with num_threads(2):
        first = [choose_blocks(8, 4096, 4096, 64, 64, np.float32, m) for m in (None, causal)]
        assert all(first == [choose_blocks(8, 4096, 4096, 64, 64, np.float32, m) for m in (None, causal)]
                   for _ in range(3))
        assert first[0] in CANDIDATES and first[1] in CANDIDATES
        # a causal mask's diagonal tiles read the mask: smaller tiles than dense, fewer cells per partial tile
        assert first[1][0] * first[1][1] < first[0][0] * first[0][1]
    with num_threads(1):  # one head of few query tiles: large tiles would leave threads idle only with 2+
        one = choose_blocks(1, 1024, 1024, 64, 64, np.float32)
    with num_threads(2):
        two = choose_blocks(1, 1024, 1024, 64, 64, np.float32)
    assert 1024 // two[0] >= 2 and one[0] >= two[0]


def test_tile_states_from_fine_counts_equal_a_direct_classification():
    rng = np.random.default_rng(3)
    for shape in ((1, 300, 700), (2, 512, 512), (1, 64, 128), (3, 1000, 260)):
        m = rng.random(shape) < 0.7
        m[:, :, :100] = True  # some full tiles
        m[:, 50:, 300:] = False  # some empty ones
        fine = fine_counts(m)
        for bm, bn in CANDIDATES:
            np.testing.assert_array_equal(tile_state_from_fine(fine, shape[1], shape[2], bm, bn),
                                          classify(m, bm, bn), err_msg=f"{shape} {bm}x{bn}")
        assert fine.shape[1:] == (-(-shape[1] // FINEST[0]), -(-shape[2] // FINEST[1]))


def test_parallel_tile_counts_equal_the_serial_ones():
    rng = np.random.default_rng(4)
    m = rng.random((2, 700, 900)) < 0.5
    serial = tile_counts(m, 64, 128, serial=True)
    parallel = tile_counts(m, 64, 128, serial=False)
    np.testing.assert_array_equal(serial, parallel)
    # and both equal a numpy count
    pad = np.zeros((2, 704, 1024), bool)
    pad[:, :700, :900] = m
    expect = pad.reshape(2, 11, 64, 8, 128).sum(axis=(2, 4))
    np.testing.assert_array_equal(serial, expect)
