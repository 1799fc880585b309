"""Display pooling: maxima survive, masked pixels stay masked, uneven sizes are covered."""

import numpy as np
import pytest

from attnviz.ui.widgets.pooling import pool_edges, pool_max, pool_mean


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
