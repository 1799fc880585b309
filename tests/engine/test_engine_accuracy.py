"""Every kernel against the float64 reference over a grid of sizes, tiles, dtypes and masks.

The rule (flash-attention's): a kernel's max error against the float64 reference is at most twice the
error of plain numpy attention in the same precision, plus a tiny absolute floor. Fully masked rows must
give output 0 and lse -inf exactly.
"""

from __future__ import annotations

import numpy as np
import pytest

from attnviz.engine import BlockMask, attention
from engine_helpers import make_mask, numpy_attention, qkv

TS = (1, 7, 64, 65, 300, 1000)
MASKS = ("none", "causal", "random", "block", "dead_rows")
BLOCKS = ((16, 32), (64, 128), (128, 64))


def _tk(T):
    return T * 3 // 4 + 5  # Tq != Tk for every T


def _errors(res, ref, valid):
    out_err = float(np.max(np.abs(res.out.astype(np.float64) - ref.out), initial=0.0))
    diff = res.lse.astype(np.float64)[valid] - ref.lse[valid]  # rows with an allowed key
    lse_err = float(np.max(np.abs(diff), initial=0.0))
    return out_err, lse_err


def _check(kernel, q, k, v, mask, scale=None, floor_scale=1.0, **kw):
    nh, Tq, hs = q.shape
    scale = 1.0 / np.sqrt(hs) if scale is None else scale
    dense = mask.dense if isinstance(mask, BlockMask) else mask
    ref = attention(q.astype(np.float64), k.astype(np.float64), v.astype(np.float64), dense, kernel="reference",
                    scale=scale)
    valid = np.isfinite(ref.lse)  # (nh, Tq) rows with at least one allowed key
    base_out, base_lse = numpy_attention(q, k, v, dense, scale)
    base = _errors(type(ref)(base_out, base_lse), ref, valid)
    res = attention(q, k, v, mask, kernel=kernel, scale=scale, **kw)
    assert res.out.dtype == q.dtype and res.lse.dtype == q.dtype
    assert res.out.shape == (nh, Tq, v.shape[2]) and res.lse.shape == (nh, Tq)
    assert not np.isnan(res.out).any() and not np.isnan(res.lse).any()
    # fully masked rows: exactly 0 and -inf
    assert np.all(res.out[~valid] == 0)
    assert np.all(res.lse[~valid] == -np.inf)
    got = _errors(res, ref, valid)
    eps = np.finfo(q.dtype).eps
    floor_out = 8 * eps * max(1.0, float(np.abs(v).max(initial=0))) * floor_scale
    floor_lse = 8 * eps * max(1.0, float(np.abs(np.where(valid, ref.lse, 0)).max(initial=0))) * floor_scale
    assert got[0] <= 2 * base[0] + floor_out, f"out error {got[0]:.3g} vs numpy {base[0]:.3g}"
    assert got[1] <= 2 * base[1] + floor_lse, f"lse error {got[1]:.3g} vs numpy {base[1]:.3g}"


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("mask_kind", MASKS)
@pytest.mark.parametrize("T", TS)
def test_naive_matches_reference(T, mask_kind, dtype):
    q, k, v = qkv(2, T, _tk(T), 24, 40, dtype, seed=T)
    _check("naive", q, k, v, make_mask(mask_kind, 2, T, _tk(T), seed=T))


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("block", BLOCKS, ids=lambda b: f"{b[0]}x{b[1]}")
@pytest.mark.parametrize("mask_kind", MASKS)
@pytest.mark.parametrize("T", TS)
def test_flash_matches_reference(T, mask_kind, block, dtype):
    q, k, v = qkv(2, T, _tk(T), 24, 40, dtype, seed=T)
    _check("flash", q, k, v, make_mask(mask_kind, 2, T, _tk(T), seed=T), block_m=block[0], block_n=block[1])


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("mask_kind", ["none", "causal", "dead_rows"])
@pytest.mark.parametrize("T", [7, 65, 300])
def test_flash_with_blockmask(T, mask_kind, dtype):
    q, k, v = qkv(3, T, T + 9, 16, 8, dtype, seed=2 * T)
    dense = make_mask(mask_kind, 3, T, T + 9, seed=T)
    if dense is None:
        dense = np.ones((T, T + 9), bool)
    _check("flash", q, k, v, BlockMask.from_dense(dense, 32, 16))


@pytest.mark.parametrize("kernel", ["naive", "flash"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("mask_kind", ["none", "causal", "dead_rows"])
@pytest.mark.parametrize("T", [7, 300])
def test_large_logits(kernel, T, mask_kind, dtype):
    """Scores around +-1e4 (after scaling): no overflow, no NaN, same accuracy rule. In float64 plain numpy
    may share the reference's arithmetic (error 0), so the floor there is the rounding of scores of that
    size, as in test_extreme_scales: 8 eps max|s| (the reference's BLAS products sum in another order
    than a kernel's dot products)."""
    q, k, v = qkv(2, T, _tk(T), 64, 32, dtype, seed=T, logit_scale=1e4)  # |s * scale| ~ 1e4
    mask = make_mask(mask_kind, 2, T, _tk(T), seed=T)
    s = np.einsum("hqd,hkd->hqk", q.astype(np.float64), k.astype(np.float64)) / 8.0
    assert np.abs(s).max() > 5e3  # the test really has large logits
    floor_scale = float(np.abs(s).max()) if dtype == np.float64 else 1.0
    _check(kernel, q, k, v, mask, floor_scale=floor_scale,
           **({"block_m": 64, "block_n": 64} if kernel == "flash" else {}))


EXTREME_TILES = {"reference": [None], "naive": [None], "flash": [None, (16, 32), (64, 128), (128, 256)]}


@pytest.mark.parametrize("kernel, tiles", [(k, t) for k, ts in EXTREME_TILES.items() for t in ts],
                         ids=lambda x: "auto" if x is None else (f"{x[0]}x{x[1]}" if isinstance(x, tuple) else x))
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("mask_kind", MASKS)
@pytest.mark.parametrize("logit", [300.0, 3000.0])
def test_extreme_scales(kernel, tiles, dtype, mask_kind, logit):
    """scale = logit / sqrt(hs): scores of order 1e3-1e4 on ragged sizes (Tq = 513, Tk = 1025 leave
    one-row and one-key edge tiles), every mask family, fully masked rows included: within twice the
    error of plain numpy in the same precision. In float64 plain numpy is the reference's own arithmetic
    (error 0), so the floor there is the rounding of scores of that size: 8 eps max|s| (|v| <= 1 scale)."""
    hs = 64
    q, k, v = qkv(1, 513, 1025, hs, 64, dtype, seed=int(logit) + MASKS.index(mask_kind))
    scale = logit / np.sqrt(hs)
    smax = float(np.abs(q[0].astype(np.float64) @ k[0].astype(np.float64).T).max()) * scale
    kw = {} if tiles is None else {"block_m": tiles[0], "block_n": tiles[1]}
    _check(kernel, q, k, v, make_mask(mask_kind, 1, 513, 1025, seed=7), scale=scale,
           floor_scale=smax if dtype == np.float64 else 1.0, **kw)


@pytest.mark.parametrize("profile, rise", [("ramp", 0.0), ("ramp", 3.0), ("ramp", 12.0), ("step", 150.0)])
@pytest.mark.parametrize("mask_kind", ["none", "causal", "random"])
@pytest.mark.parametrize("tiles", [(64, 128), (128, 64)], ids=lambda t: f"{t[0]}x{t[1]}")
def test_scores_rising_from_tile_to_tile(profile, rise, mask_kind, tiles):
    """float32, hs = hv = 64 (the micro-kernel's exponentials): key scores that rise by about ``rise``
    (base 2) from one key tile to the next ("ramp") or once after the first tile ("step"). A full tile's
    exponentials are taken against the running maxima of the tiles before it (weights above 1) unless
    one exceeds 2**8; then the tile is redone the two-pass way (at 150 the lazy weights would overflow).
    Within the accuracy rule, and in float32 (the scores stay below F32_SCORE_BOUND)."""
    from attnviz.engine.api import F32_SCORE_BOUND

    q, k, v = qkv(2, 300, 600, 64, 64, np.float32, seed=int(rise * 10))
    scale = 1 / 8
    q *= 0.5
    q[..., 0] = 4.0
    keys = np.arange(600)
    tiles_up = keys / tiles[1] if profile == "ramp" else (keys >= tiles[1]).astype(float)
    k[..., 0] = tiles_up * rise / (4.0 * scale * np.log2(np.e))
    norm = np.sqrt((q.astype(np.float64) ** 2).sum(-1).max() * (k.astype(np.float64) ** 2).sum(-1).max())
    assert norm * scale < F32_SCORE_BOUND
    _check("flash", q, k, v, make_mask(mask_kind, 2, 300, 600, seed=3), scale=scale, block_m=tiles[0],
           block_n=tiles[1])


def test_float32_beyond_the_score_bound_is_computed_wide_and_returned_in_float32():
    from attnviz.engine.api import F32_SCORE_BOUND

    q, k, v = qkv(2, 40, 50, 16, 8, np.float32, seed=1)
    bound = np.sqrt((q.astype(np.float64) ** 2).sum(-1).max() * (k.astype(np.float64) ** 2).sum(-1).max())
    for scale in (0.9 * F32_SCORE_BOUND / bound, 1.1 * F32_SCORE_BOUND / bound):  # either side of the bound
        res = attention(q, k, v, scale=scale, return_weights=True)
        wide = attention(q.astype(np.float64), k.astype(np.float64), v.astype(np.float64), scale=scale)
        assert res.out.dtype == res.lse.dtype == res.weights.dtype == np.float32
        exact = np.array_equal(res.out, wide.out.astype(np.float32))
        assert exact == (scale * bound > F32_SCORE_BOUND)


@pytest.mark.parametrize("kernel", ["reference", "naive", "flash"])
def test_two_dimensional_inputs_give_one_head(kernel):
    q, k, v = qkv(1, 9, 11, 8, 5, np.float64, seed=3)
    m = np.tri(9, 11, dtype=bool)
    res2 = attention(q[0], k[0], v[0], m, kernel=kernel, return_weights=True)
    res3 = attention(q, k, v, m, kernel="reference", return_weights=True)
    assert res2.out.shape == (9, 5) and res2.lse.shape == (9,) and res2.weights.shape == (9, 11)
    np.testing.assert_allclose(res2.out, res3.out[0], atol=1e-12)
    np.testing.assert_allclose(res2.weights, res3.weights[0], atol=1e-12)


@pytest.mark.parametrize("kernel", ["naive", "flash"])
@pytest.mark.parametrize("mask_kind", ["none", "random", "dead_rows"])
def test_returned_weights_match_reference(kernel, mask_kind):
    q, k, v = qkv(2, 70, 45, 16, 8, np.float64, seed=5)
    mask = make_mask(mask_kind, 2, 70, 45)
    ref = attention(q, k, v, mask, kernel="reference", return_weights=True)
    res = attention(q, k, v, mask, kernel=kernel, return_weights=True)
    np.testing.assert_allclose(res.weights, ref.weights, atol=1e-13)
    if mask is not None:
        assert np.all(res.weights[~np.broadcast_to(mask, res.weights.shape)] == 0)


@pytest.mark.parametrize("kernel", ["reference", "naive", "flash"])
def test_negative_scale_and_empty_keys(kernel):
    q, k, v = qkv(2, 5, 6, 4, 3, np.float64, seed=9)
    ref = attention(-q, k, v, kernel="reference", scale=0.5)
    res = attention(q, k, v, kernel=kernel, scale=-0.5)
    np.testing.assert_allclose(res.out, ref.out, atol=1e-12)
    empty = attention(q, k[:, :0], v[:, :0], kernel=kernel)
    assert np.all(empty.out == 0) and np.all(empty.lse == -np.inf)


def test_default_kernel_is_flash_and_auto_blocks_are_accurate():
    q, k, v = qkv(4, 600, 500, 32, 32, np.float32, seed=11)  # large enough for the measured tile choice
    ref = attention(q, k, v, kernel="reference")
    res = attention(q, k, v)
    base_out, _ = numpy_attention(q, k, v, None, 1 / np.sqrt(32))
    assert np.abs(res.out - ref.out).max() <= 2 * np.abs(base_out - ref.out).max() + 1e-6
