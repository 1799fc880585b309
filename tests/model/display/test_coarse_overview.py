"""The coarse overview drawn before a long sequence's full one: each pixel is the max (or mean) over
its key band of the one query row it samples, against a float64 softmax of that row, for a dense
mask and a mask kept per tile alike; a row with no allowed key is NaN."""

from __future__ import annotations

import numpy as np
import pytest

from attnviz.model.display.coarse_overview import coarse_overview, sampled_rows
from attnviz.model.display.response_views import engine_scale
from long_sessions import T, pair


def reference_rows(resp, dense_mask, head, rows, scale):
    """(n, Tk) float64 weights of query ``rows`` (0 where masked), from q and k alone."""
    h = 0 if head == "mean" else head
    heads = range(resp.q.shape[0]) if head == "mean" else [h]
    out = []
    for hh in heads:
        q = resp.q[hh, rows].astype(np.float64)
        k = resp.k[hh].astype(np.float64)
        m = dense_mask if dense_mask.ndim == 2 else dense_mask[hh]
        s = np.where(m[rows], (q @ k.T) * scale, -np.inf)  # (n, Tk)
        top = np.max(s, axis=1, keepdims=True)
        e = np.where(np.isfinite(s), np.exp(s - np.where(np.isfinite(top), top, 0.0)), 0.0)
        tot = e.sum(axis=1, keepdims=True)
        out.append(np.divide(e, tot, out=np.zeros_like(e), where=tot > 0))
    return np.stack(out)  # (heads, n, Tk)


@pytest.fixture(scope="module")
def responses():
    return pair()


def test_sampled_rows_sit_at_band_centres():
    idx = sampled_rows(2900, 96)
    assert idx.size == 96 and idx[0] == 15 and idx[-1] == 2884
    bands = (np.arange(97) * 2900) / 96
    assert np.all((idx >= bands[:-1]) & (idx < bands[1:]))
    np.testing.assert_array_equal(sampled_rows(10, 96), np.arange(10))


@pytest.mark.parametrize("which", ["tiled", "dense"])
@pytest.mark.parametrize("head,reduce", [(0, "max"), (1, "mean"), ("mean", "max")])
def test_each_pixel_reduces_its_sampled_row(responses, which, head, reduce):
    st, tiled, dense = responses
    resp = tiled if which == "tiled" else dense
    scale = engine_scale(st)
    n, W = 160, 50  # rows 1, 3, 5, ...: the fully masked row 9 among them
    img = coarse_overview(resp, head, scale, reduce, W, rows=n)
    assert img.shape == (n, W) and img.dtype == np.float32
    rows = sampled_rows(T, n)
    assert 9 in rows  # the fully masked row is sampled
    mask = dense.mask
    ref = reference_rows(dense, mask, head, rows, scale)  # (heads, n, Tk)
    m = mask if mask.ndim == 2 else mask.any(axis=0)
    edges = (np.arange(W + 1) * T) // W
    want = np.full((n, W), np.nan)
    for x in range(W):
        band = ref[:, :, edges[x]:edges[x + 1]]
        red = band.max(axis=2) if reduce == "max" else band.mean(axis=2)  # (heads, n)
        val = red.mean(axis=0)
        ok = m[rows][:, edges[x]:edges[x + 1]].any(axis=1)
        want[:, x] = np.where(ok, val, np.nan)
    np.testing.assert_array_equal(np.isnan(img), np.isnan(want))
    assert np.isnan(img[list(rows).index(9)]).all()
    np.testing.assert_allclose(img[~np.isnan(img)], want[~np.isnan(want)], rtol=2e-5, atol=1e-7)
