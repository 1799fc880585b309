"""recompute_weights and attention_overview against the reference weights."""

from __future__ import annotations

import numpy as np
import pytest

from attnviz.engine import BlockMask, attention, attention_overview, recompute_weights
from engine_helpers import make_mask, qkv


@pytest.mark.parametrize("dtype, tol", [(np.float64, 1e-13), (np.float32, 2e-6)], ids=["f64", "f32"])
@pytest.mark.parametrize("mask_kind", ["none", "causal", "random", "dead_rows"])
def test_recompute_all_rows_matches_reference(mask_kind, dtype, tol):
    q, k, v = qkv(2, 150, 97, 16, 8, dtype, seed=4)
    mask = make_mask(mask_kind, 2, 150, 97)
    ref = attention(q, k, v, mask, kernel="reference", return_weights=True)
    flash = attention(q, k, v, mask, kernel="flash", block_m=32, block_n=32)
    w = recompute_weights(q, k, flash.lse, mask, block_n=40)
    assert w.dtype == dtype and w.shape == (2, 150, 97)
    np.testing.assert_allclose(w, ref.weights, atol=tol)
    if mask is not None:
        assert np.all(w[~np.broadcast_to(mask, w.shape)] == 0)


def test_recompute_selected_rows_one_head_and_blockmask():
    q, k, v = qkv(1, 80, 60, 8, 4, np.float64, seed=6)
    dense = make_mask("dead_rows", 1, 80, 60)
    ref = attention(q[0], k[0], v[0], dense, kernel="reference", return_weights=True)
    rows = [0, 5, 79, 3]
    w = recompute_weights(q[0], k[0], ref.lse, BlockMask.from_dense(dense, 16, 16), rows=rows)
    assert w.shape == (4, 60)
    np.testing.assert_allclose(w, ref.weights[rows], atol=1e-13)
    assert np.all(w[0] == 0) and np.all(w[3] == 0)  # rows 0 and 3 are fully masked
    sl = recompute_weights(q[0], k[0], ref.lse, dense, rows=slice(10, 20))
    np.testing.assert_allclose(sl, ref.weights[10:20], atol=1e-13)


def test_recompute_rejects_bad_arguments():
    q, k, _ = qkv(2, 10, 12, 4, 4, np.float64)
    lse = np.zeros((2, 10))
    with pytest.raises(ValueError, match="lse"):
        recompute_weights(q, k, np.zeros((2, 9)))
    with pytest.raises(ValueError, match="rows"):
        recompute_weights(q, k, lse, rows=[10])
    with pytest.raises(ValueError, match="mask"):
        recompute_weights(q, k, lse, np.ones((10, 11), bool))
    with pytest.raises(ValueError, match="lse"):
        recompute_weights(q, k, np.full((2, 10), np.nan))


def _brute_overview(w, H, W, reduce):
    """(nh, R, C) weights -> (nh, H, W) by the documented pixel bands."""
    nh, R, C = w.shape
    Hp, Wp = min(H, R), min(W, C)
    re = (np.arange(Hp + 1) * R) // Hp
    ce = (np.arange(Wp + 1) * C) // Wp
    small = np.zeros((nh, Hp, Wp))
    for a in range(Hp):
        for b in range(Wp):
            blk = w[:, re[a]:re[a + 1], ce[b]:ce[b + 1]]
            small[:, a, b] = blk.max((1, 2)) if reduce == "max" else blk.mean((1, 2))
    return small[:, (np.arange(H) * Hp) // H][:, :, (np.arange(W) * Wp) // W]


@pytest.mark.parametrize("reduce", ["max", "mean"])
@pytest.mark.parametrize("mask_kind", ["none", "causal", "dead_rows"])
@pytest.mark.parametrize("shape, rows, cols", [
    ((37, 23), None, None),  # fewer pixels than cells
    ((100, 90), (3, 50), (1, 38)),  # more pixels than cells: rows/columns repeat
    ((16, 200), (100, 300), None),  # mixed
])
def test_overview_matches_brute_force(reduce, mask_kind, shape, rows, cols):
    q, k, v = qkv(2, 300, 200, 16, 8, np.float64, seed=8, logit_scale=4.0)
    mask = make_mask(mask_kind, 2, 300, 200)
    ref = attention(q, k, v, mask, kernel="reference", return_weights=True)
    r0, r1 = rows or (0, 300)
    c0, c1 = cols or (0, 200)
    img = attention_overview(q, k, ref.lse, mask, out_shape=shape, rows=rows, cols=cols, reduce=reduce,
                             block_n=48)
    assert img.shape == (2, *shape)
    np.testing.assert_allclose(img, _brute_overview(ref.weights[:, r0:r1, c0:c1], *shape, reduce), atol=1e-13)
    one = attention_overview(q[1], k[1], ref.lse[1], None if mask is None else np.broadcast_to(mask, (2, 300, 200))[1],
                             out_shape=shape, rows=rows, cols=cols, reduce=reduce)
    np.testing.assert_allclose(one, img[1], atol=1e-13)


def test_overview_float32_and_bad_arguments():
    q, k, v = qkv(1, 64, 64, 8, 8, np.float32, seed=1)
    res = attention(q[0], k[0], v[0])
    img = attention_overview(q[0], k[0], res.lse, out_shape=(8, 8))
    assert img.dtype == np.float32 and img.shape == (8, 8)
    assert np.all(img > 0) and np.all(img <= 1)
    with pytest.raises(ValueError, match="reduce"):
        attention_overview(q[0], k[0], res.lse, out_shape=(8, 8), reduce="sum")
    with pytest.raises(ValueError, match="rows"):
        attention_overview(q[0], k[0], res.lse, out_shape=(8, 8), rows=(10, 5))
    with pytest.raises(ValueError, match="out_shape"):
        attention_overview(q[0], k[0], res.lse, out_shape=(0, 8))


@pytest.mark.parametrize("logit_scale", [30.0, 1e3, 1e4])
def test_recomputed_float32_weights_keep_the_accuracy_rule_at_large_scores(logit_scale):
    """exp(s * scale - lse) alone would carry float32 lse's rounding (|lse| * 6e-8) into every weight."""
    q, k, v = qkv(2, 130, 70, 8, 4, np.float32, seed=9, logit_scale=logit_scale)
    mask = make_mask("dead_rows", 2, 130, 70)
    ref = attention(*(a.astype(np.float64) for a in (q, k, v)), mask, kernel="reference", return_weights=True)
    s = np.matmul(q, np.swapaxes(k, -1, -2)) * np.float32(1 / np.sqrt(8))  # (nh, Tq, Tk) numpy fp32 baseline
    s = np.where(mask, s, -np.inf)
    m = np.max(s, axis=-1, keepdims=True, initial=-np.inf)
    p = np.where(mask, np.exp(s - np.where(np.isfinite(m), m, 0)), 0)
    l = p.sum(-1, keepdims=True)
    base = np.abs(p / np.where(l > 0, l, 1) - ref.weights).max()
    flash = attention(q, k, v, mask, kernel="flash", block_m=32, block_n=32, return_weights=True)
    err = np.abs(flash.weights - ref.weights).max()
    assert np.abs(ref.lse[np.isfinite(ref.lse)]).max() > logit_scale  # the scores really are large
    assert err <= 2 * base + 8 * np.finfo(np.float32).eps, f"weights error {err:.3g} vs numpy {base:.3g}"
    assert np.all(flash.weights[:, ::3] == 0)  # the fully masked rows
