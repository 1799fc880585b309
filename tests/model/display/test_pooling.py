"""Display pooling: maxima survive, masked pixels stay masked, uneven sizes are covered."""

import numpy as np
import pytest

from attnviz.model.display.pooling import max_pool, pool_edges, pool_max, pool_mean


def test_isolated_maximum_stays_visible():
    v = np.full((1000, 1000), 1e-4, dtype=np.float32)
    v[613, 271] = 0.9
    pooled, ok = pool_max(v, None, (100, 100))
    assert pooled.shape == (100, 100) and ok.all()
    assert pooled.max() == pytest.approx(0.9)
    assert pooled[61, 27] == pytest.approx(0.9)
    mean, _ = pool_mean(v, None, (100, 100))
    assert mean.max() < 0.01  # mean pooling washes the peak out: why max is the display default


def test_masked_cells_never_contribute_and_fully_masked_pixels_are_masked():
    v = np.arange(16, dtype=np.float64).reshape(4, 4)
    mask = np.ones((4, 4), dtype=bool)
    mask[0:2, 0:2] = False  # first pixel fully masked
    mask[2, 3] = False  # hides 11, the max of pixel (1, 1)... 15 remains
    pooled, ok = pool_max(v, mask, (2, 2))
    assert not ok[0, 0] and np.isnan(pooled[0, 0])
    assert pooled[0, 1] == 7 and pooled[1, 0] == 13 and pooled[1, 1] == 15
    mean, ok_m = pool_mean(v, mask, (2, 2))
    assert np.isnan(mean[0, 0]) and not ok_m[0, 0]
    assert mean[1, 1] == pytest.approx((10 + 14 + 15) / 3)


def test_uneven_bins_cover_every_cell_once():
    edges = pool_edges(10, 3)
    assert edges.tolist() == [0, 3, 7, 10]  # pixel 1 spans view rows [3.33, 6.67): centres 3.5 .. 6.5
    v = np.random.default_rng(0).random((10, 7))
    s, _ = pool_mean(v, None, (3, 2))
    # weighted recombination of the means gives the total
    rows = np.diff(pool_edges(10, 3))[:, None]
    cols = np.diff(pool_edges(7, 2))[None, :]
    assert (s * rows * cols).sum() == pytest.approx(v.sum(), rel=1e-5)


def test_batched_maps_and_identity():
    v = np.random.default_rng(1).random((2, 3, 8, 8)).astype(np.float32)
    pooled, ok = pool_max(v, np.tri(8, dtype=bool), (4, 4))
    assert pooled.shape == (2, 3, 4, 4) and ok.shape == (2, 3, 4, 4)
    ref = np.where(np.tri(8, dtype=bool), v, -np.inf).reshape(2, 3, 4, 2, 4, 2).max(axis=(3, 5))
    np.testing.assert_allclose(pooled, np.where(np.isinf(ref), np.nan, ref))
    assert not ok[..., 0, 3].any() and ok[..., 3, 0].all()
    same, ok2 = pool_max(v[0, 0], None, (100, 100))  # asking for more pixels than cells: unchanged
    np.testing.assert_array_equal(same, v[0, 0])
    assert ok2.all()


def test_bad_input_raises_clear_errors():
    with pytest.raises(ValueError, match="NaN"):
        pool_max(np.array([[np.nan, 1.0]]), None, (1, 1))
    with pytest.raises(ValueError, match="bool"):
        pool_max(np.ones((2, 2)), np.ones((2, 2)), (1, 1))
    with pytest.raises(ValueError, match="does not fit"):
        pool_max(np.ones((2, 2)), np.ones((3, 3), bool), (1, 1))
    with pytest.raises(ValueError, match="positive"):
        pool_mean(np.ones((2, 2)), None, (0, 1))
    # a masked NaN/-inf is fine: it is never looked at
    p, ok = pool_max(np.array([[-np.inf, 2.0]]), np.array([[False, True]]), (1, 1))
    assert p[0, 0] == 2.0


def _brute_max(v, allowed, H, W):
    """Max over allowed cells of each pool_edges bin, by loops (the readable twin)."""
    rows, cols = v.shape[-2:]
    H, W = min(H, rows), min(W, cols)
    re, ce = pool_edges(rows, H), pool_edges(cols, W)
    out = np.full(v.shape[:-2] + (H, W), np.nan, dtype=np.float32)
    for y in range(H):
        for x in range(W):
            block = v[..., re[y]:re[y + 1], ce[x]:ce[x + 1]]
            ok = allowed[..., re[y]:re[y + 1], ce[x]:ce[x + 1]]
            m = np.where(ok, block, -np.inf).max(axis=(-1, -2))
            out[..., y, x] = np.where(np.isinf(m), np.nan, m)
    return out


@pytest.mark.parametrize("shape,out", [((64, 64), (32, 32)), ((61, 97), (20, 13)), ((50, 40), (50, 7)),
                                       ((33, 30), (8, 64)), ((3, 2, 45, 45), (9, 10)), ((17, 200), (17, 37)),
                                       ((40, 40), (1, 1)), ((12, 12), (12, 12))])
def test_pool_max_matches_loops_over_bins(shape, out):
    rng = np.random.default_rng(sum(shape) + sum(out))
    v = rng.standard_normal(shape).astype(np.float32) - 3.0  # negative values: a masked zero would win
    mask = rng.random(shape[-2:]) < 0.3  # (rows, cols) broadcast over any batch axes
    mask[:, : shape[-1] // 3] = False  # whole masked stripes give fully masked pixels
    v = np.where(mask, v, np.float32(-np.inf))  # masked cells may hold -inf
    allowed = np.broadcast_to(mask, shape)
    pooled, ok = pool_max(v, mask, out)
    ref = _brute_max(v, allowed, *out)
    np.testing.assert_array_equal(np.isnan(pooled), np.isnan(ref))
    np.testing.assert_array_equal(ok, ~np.isnan(ref))
    np.testing.assert_array_equal(pooled[ok], ref[ok])
    unmasked, ok_all = pool_max(np.nan_to_num(v, neginf=-9.0), None, out)
    np.testing.assert_array_equal(unmasked, _brute_max(np.nan_to_num(v, neginf=-9.0), np.ones(shape, bool), *out))
    assert ok_all.all() and unmasked.dtype == np.float32 and unmasked.flags.c_contiguous


def test_pool_max_per_map_mask_and_max_pool_of_codes():
    rng = np.random.default_rng(3)
    v = rng.random((2, 3, 30, 30)).astype(np.float32)
    per_map = rng.random((2, 3, 1, 30)) < 0.5  # one key mask per map, broadcast over rows
    for out in ((7, 7), (6, 5), (15, 30)):  # uneven bins, even bins (one reduction of a view), rows only
        pooled, ok = pool_max(v, per_map, out)
        ref = _brute_max(v, np.broadcast_to(per_map, v.shape), *out)
        np.testing.assert_array_equal(ok, ~np.isnan(ref))
        np.testing.assert_array_equal(pooled[ok], ref[ok])
    strided = v[:, :, ::2, :]  # (2, 3, 15, 30) not reshapeable as a view: the per-pass path
    pooled, ok = pool_max(strided, per_map, (5, 10))
    np.testing.assert_array_equal(pooled, _brute_max(strided, np.broadcast_to(per_map, strided.shape), 5, 10))
    codes = np.zeros((300, 301), dtype=np.uint8)
    codes[123, 250] = 3
    codes[5, 5] = 1
    small = max_pool(codes, (40, 40))
    assert small.dtype == np.uint8 and small.shape == (40, 40)
    np.testing.assert_array_equal(small, _brute_max(codes.astype(np.float32), np.ones(codes.shape, bool), 40, 40))
    assert small.max() == 3 and (small == 1).sum() == 1
    with pytest.raises(ValueError, match="positive"):
        max_pool(codes, (0, 3))
