"""lse_summaries: per-head row statistics and thumbnails from q, k and lse, tile by tile, against the same
statistics computed in float64 from the full softmax of the float64 reference."""

from __future__ import annotations

import numpy as np
import pytest

from attnviz.engine import attention
from attnviz.engine.summaries import STATS, lse_summaries
from attnviz.engine.tiled_mask import TiledMask


def band_mask(T: int, window: int = 0, dead: tuple[int, ...] = ()):
    def band(r0, r1):
        i = np.arange(r0, r1)[:, None]
        j = np.arange(T)[None, :]
        m = j <= i
        if window:
            m &= j > i - window
        for d in dead:
            if r0 <= d < r1:
                m[d - r0] = False  # a row that sees nothing
        return m
    return band


def reference_stats(q, k, mask, scale, special, softcap=None):
    s = np.einsum("hid,hjd->hij", q.astype(np.float64), k.astype(np.float64)) * scale
    if softcap:
        s = softcap * np.tanh(s / softcap)
    s = np.where(mask[None], s, -np.inf)
    m = s.max(axis=-1, keepdims=True)
    live = np.isfinite(m)
    e = np.where(mask[None] & live, np.exp(s - np.where(live, m, 0)), 0.0)
    z = e.sum(axis=-1, keepdims=True)
    w = np.divide(e, z, out=np.zeros_like(e), where=z > 0)  # (nh, T, T)
    T = w.shape[1]
    i = np.arange(T)
    logw = np.log(np.where(w > 0, w, 1.0))
    out = {
        "entropy": -(w * logw).sum(axis=(1, 2)),
        "to_special": (w @ special).sum(axis=1),
        "to_self": w[:, i, i].sum(axis=1),
        "to_previous": w[:, i[1:], i[1:] - 1].sum(axis=1),
        "to_first": w[..., 0].sum(axis=1),
        "distance": (w * (i[:, None] - i[None, :])).sum(axis=(1, 2)),
    }
    return out, w


def pooled_max(w, side):
    T = w.shape[1]
    edges = (np.arange(side + 1) * T) // side
    out = np.zeros((w.shape[0], side, side))
    for a in range(side):
        for b in range(side):
            out[:, a, b] = w[:, edges[a]:edges[a + 1], edges[b]:edges[b + 1]].max(axis=(1, 2))
    return out


@pytest.mark.parametrize("T, window, softcap, dead", [(300, 0, None, ()), (517, 37, None, (5,)), (260, 0, 30.0, ())])
def test_summaries_and_thumbnails_equal_the_full_softmax(T, window, softcap, dead):
    rng = np.random.default_rng(T)
    nh, hs = 3, 16
    q = rng.standard_normal((nh, T, hs)).astype(np.float32) * 2
    k = rng.standard_normal((nh, T, hs)).astype(np.float32) * 2
    v = rng.standard_normal((nh, T, hs)).astype(np.float32)
    tm = TiledMask.from_bands(band_mask(T, window, dead), T, T, 64, 128)
    dense = band_mask(T, window, dead)(0, T)
    scale = hs ** -0.5
    if softcap:  # the engine's naive kernel soft-caps (flash does not)
        lse = attention(q, k, v, dense, scale=scale, kernel="naive", softcap=softcap).lse
    else:
        lse = attention(q, k, v, tm, scale=scale, kernel="flash").lse
    assert lse is not None
    special = np.zeros(T)
    special[[0, T // 2]] = 1.0
    got, thumbs = lse_summaries(q, k, lse, tm, scale=scale, softcap=softcap, special=special, side=40)
    want, w = reference_stats(q, k, dense, scale, special, softcap)
    assert tuple(got) == STATS
    for name in STATS:
        np.testing.assert_allclose(got[name], want[name], rtol=2e-5, atol=2e-4 * (T if name == "distance" else 1),
                                   err_msg=name)
    np.testing.assert_allclose(thumbs, pooled_max(w, 40), rtol=2e-5, atol=1e-6)


def test_bad_inputs_are_refused_in_one_line():
    q = np.zeros((2, 10, 4), np.float32)
    lse = np.zeros((2, 10), np.float32)
    with pytest.raises(ValueError, match="TiledMask"):
        lse_summaries(q, q, lse, np.ones((10, 10), bool))
    tm = TiledMask.from_bands(band_mask(12), 12, 12, 64, 128)
    with pytest.raises(ValueError, match="12 x 12"):
        lse_summaries(q, q, lse, tm)
    tm = TiledMask.from_bands(band_mask(10), 10, 10, 64, 128)
    with pytest.raises(ValueError, match="one value per key"):
        lse_summaries(q, q, lse, tm, special=np.zeros(3))
