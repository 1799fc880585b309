"""TiledMask: a mask kept per tile gives the same attention, weights and overviews as the dense mask."""

from __future__ import annotations

import numpy as np
import pytest

from attnviz.engine import BlockMask, TiledMask, attention, attention_overview, recompute_weights


def masks(Tq, Tk, nh=2, seed=0):
    rng = np.random.default_rng(seed)
    i, j = np.arange(Tq)[:, None], np.arange(Tk)[None, :]
    causal = j <= i + (Tk - Tq)
    window = causal & (j > i + (Tk - Tq) - 40)
    rand = rng.random((Tq, Tk)) < 0.6
    rand[min(3, Tq - 1)] = False  # a fully masked row
    per_head = np.stack([causal, window] + [rand] * (nh - 2))[:nh] if nh >= 2 else causal[None]
    return {"causal": causal, "window": window, "random": rand, "per_head": per_head}


@pytest.mark.parametrize("Tq,Tk,bm,bn", [(300, 300, 64, 128), (130, 517, 64, 64), (64, 128, 64, 128),
                                         (1, 70, 16, 32), (257, 100, 128, 256)])
def test_round_trip_counts_and_fully_masked_rows(Tq, Tk, bm, bn):
    for name, m in masks(Tq, Tk).items():
        tm = TiledMask.from_dense(m, bm, bn)
        m3 = m if m.ndim == 3 else m[None]
        np.testing.assert_array_equal(tm.to_dense(), m3, err_msg=name)
        np.testing.assert_array_equal(tm.fully, ~m3.any(axis=-1))
        bmask = BlockMask.from_dense(m, bm, bn)
        assert tm.counts() == bmask.counts() and tm.sparsity() == pytest.approx(bmask.sparsity())
        np.testing.assert_array_equal(tm.tile_state, bmask.tile_state)
        rows = np.array([0, Tq - 1, Tq // 2])
        np.testing.assert_array_equal(tm.rows(rows), m3[:, rows])
        # only partial tiles are stored
        assert tm.blocks.shape[0] == max(1, tm.counts()["partial"])


def test_bands_are_asked_for_block_rows_at_a_time_and_checked():
    asked = []
    Tq, Tk = 200, 90

    def band(r0, r1):
        asked.append((r0, r1))
        return np.arange(Tk)[None, :] <= np.arange(r0, r1)[:, None]

    tm = TiledMask.from_bands(band, Tq, Tk, 64, 32)
    assert asked == [(0, 64), (64, 128), (128, 192), (192, 200)]
    np.testing.assert_array_equal(tm.to_dense()[0], np.tri(Tq, Tk, dtype=bool))
    with pytest.raises(ValueError, match="must give bool"):
        TiledMask.from_bands(lambda r0, r1: np.ones((r1 - r0, Tk + 1), bool), Tq, Tk, 64, 32)
    with pytest.raises(ValueError, match="heads"):
        TiledMask.from_bands(lambda r0, r1: np.ones((1 + (r0 > 0), r1 - r0, Tk), bool), Tq, Tk, 64, 32)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", ["causal", "window", "random", "per_head"])
def test_flash_with_a_tiled_mask_equals_flash_with_the_dense_mask(dtype, name):
    nh, Tq, Tk = 2, 300, 333
    rng = np.random.default_rng(1)
    q, k, v = (rng.standard_normal((nh, T, 16)).astype(dtype) for T in (Tq, Tk, Tk))
    m = masks(Tq, Tk, nh)[name]
    dense = attention(q, k, v, m, block_m=64, block_n=128)
    tiled = attention(q, k, v, TiledMask.from_dense(m, 64, 128), return_weights=True)
    np.testing.assert_array_equal(tiled.lse, dense.lse)
    np.testing.assert_array_equal(tiled.out, dense.out)
    ref = attention(q, k, v, m, kernel="reference", return_weights=True)
    np.testing.assert_allclose(tiled.weights, ref.weights, atol=1e-5 if dtype == np.float32 else 1e-12)
    if name == "random":
        assert np.all(tiled.lse[:, 3] == -np.inf) and np.all(tiled.out[:, 3] == 0)


def test_recomputed_rows_and_a_negative_scale():
    nh, T = 2, 260
    rng = np.random.default_rng(2)
    q, k, v = (rng.standard_normal((nh, T, 8)) for _ in range(3))
    m = masks(T, T, nh)["per_head"]
    tm = TiledMask.from_dense(m, 64, 64)
    res = attention(q, k, v, tm, scale=-0.3)
    dense = attention(q, k, v, m, scale=-0.3, block_m=64, block_n=64)
    np.testing.assert_array_equal(res.lse, dense.lse)
    rows = [0, 5, 259]
    np.testing.assert_allclose(recompute_weights(q, k, res.lse, tm, scale=-0.3, rows=rows),
                               recompute_weights(q, k, res.lse, m, scale=-0.3, rows=rows), rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("reduce", ["max", "mean"])
@pytest.mark.parametrize("region", [(None, None), ((7, 250), (13, 301)), ((100, 101), (0, 333))])
def test_overview_with_a_tiled_mask_equals_the_dense_one(reduce, region):
    nh, Tq, Tk = 2, 260, 333
    rng = np.random.default_rng(3)
    q, k, v = (rng.standard_normal((nh, T, 16)) for T in (Tq, Tk, Tk))
    for name, m in masks(Tq, Tk, nh).items():
        tm = TiledMask.from_dense(m, 64, 32)
        lse = attention(q, k, v, tm).lse
        kw = dict(out_shape=(37, 41), rows=region[0], cols=region[1], reduce=reduce)
        np.testing.assert_allclose(attention_overview(q, k, lse, tm, **kw), attention_overview(q, k, lse, m, **kw),
                                   rtol=1e-12, atol=1e-300, err_msg=name)


def test_a_tiled_mask_is_refused_where_it_cannot_run():
    q = k = v = np.zeros((1, 100, 8))
    tm = TiledMask.from_dense(np.tri(100, dtype=bool), 64, 64)
    with pytest.raises(ValueError, match="flash kernel"):
        attention(q, k, v, tm, kernel="naive")
    with pytest.raises(ValueError, match="64 x 64 tiles"):
        attention(q, k, v, tm, block_m=128)
    with pytest.raises(ValueError, match="inputs are"):
        attention(q[:, :50], k, v, tm)


def test_a_long_causal_mask_is_built_band_by_band_in_little_memory():
    T = 65536

    def band(r0, r1):  # (r1-r0, T): the only dense part ever made
        return np.arange(T)[None, :] <= np.arange(r0, r1)[:, None]

    tm = TiledMask.from_bands(band, T, T, 64, 128)
    assert tm.counts()["partial"] == T // 64  # the diagonal: one partial tile per tile row
    assert tm.nbytes < 16 << 20  # dense it would be 4 GiB
    assert 49 < tm.sparsity() < 50
    np.testing.assert_array_equal(tm.rows([0, 1000, T - 1])[0].sum(axis=1), [1, 1001, T])
