"""Attention-logit soft-capping (scores s * scale -> c tanh(s * scale / c), Gemma 2) against a float64
numpy formula: the reference and naive kernels, weights recomputed from lse and the overview, over a
grid of ragged sizes, masks with fully masked rows and logits from ordinary to huge. Flash refuses it.
"""

from __future__ import annotations

import numpy as np
import pytest

from attnviz.engine import attention, attention_overview, recompute_weights
from attnviz.engine.api import SOFTCAP_KERNELS
from engine_helpers import make_mask, qkv

SIZES = ((1, 1), (7, 5), (33, 65), (130, 97))  # (Tq, Tk), ragged against every tile size
MASKS = ("none", "causal", "random", "dead_rows")
LOGITS = (1.0, 400.0, 1e6)  # q and k scaled so scores are about this large (1e6: every score far past the cap)
CAPS = (50.0, 3.0)


def capped_formula(q, k, v, mask, scale, cap):
    """(weights, out, lse) in float64 numpy: softmax over allowed keys of cap * tanh(q k^T * scale / cap)."""
    q, k, v = (np.asarray(a, dtype=np.float64) for a in (q, k, v))
    s = cap * np.tanh((q @ np.swapaxes(k, -1, -2)) * scale / cap)  # (nh, Tq, Tk)
    allowed = np.ones(s.shape, bool) if mask is None else np.broadcast_to(mask, s.shape)  # (nh, Tq, Tk)
    has = allowed.any(-1)  # (nh, Tq)
    m = np.where(has, np.where(allowed, s, -np.inf).max(-1), 0.0)  # (nh, Tq)
    p = np.where(allowed, np.exp(s - m[..., None]), 0.0)  # (nh, Tq, Tk)
    z = np.where(has, p.sum(-1), 1.0)  # (nh, Tq)
    w = p / z[..., None]  # (nh, Tq, Tk)
    with np.errstate(divide="ignore"):
        lse = np.where(has, m + np.log(z), -np.inf)  # (nh, Tq)
    return w, w @ v, lse


def _case(Tq, Tk, mask_kind, logit, dtype, seed=0):
    q, k, v = qkv(2, Tq, Tk, 16, 6, dtype, seed=seed, logit_scale=logit / 4.0)  # q . k / 4 ~ logit
    return q, k, v, make_mask(mask_kind, 2, Tq, Tk, seed=seed)


def _tol(dtype, cap):
    # float32: the capped scores are rounded at about cap * 6e-8, and exp carries that to the weights
    return 1e-12 * max(cap, 1.0) if dtype == np.float64 else 2e-6 * max(cap, 1.0)


@pytest.mark.parametrize("kernel", SOFTCAP_KERNELS)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("Tq,Tk", SIZES)
@pytest.mark.parametrize("mask_kind", MASKS)
@pytest.mark.parametrize("logit", LOGITS)
def test_kernels_match_the_float64_formula(kernel, dtype, Tq, Tk, mask_kind, logit):
    cap = CAPS[(Tq + len(mask_kind)) % 2]
    q, k, v, mask = _case(Tq, Tk, mask_kind, logit, dtype)
    scale = 0.25
    w0, out0, lse0 = capped_formula(q, k, v, mask, scale, cap)
    res = attention(q, k, v, mask, scale=scale, kernel=kernel, softcap=cap, return_weights=True)
    assert res.out.dtype == dtype and res.weights.dtype == dtype
    for a in (res.out, res.lse, res.weights):
        assert not np.isnan(a).any()
    dead = ~np.isfinite(lse0)  # (nh, Tq) rows that allow no key
    assert np.all(res.lse[dead] == -np.inf) and np.all(res.out[dead] == 0) and np.all(res.weights[dead] == 0)
    tol = _tol(dtype, cap)
    np.testing.assert_allclose(res.weights, w0, atol=tol, rtol=0)
    np.testing.assert_allclose(res.out, out0, atol=tol * 10, rtol=0)
    live = ~dead
    np.testing.assert_allclose(res.lse[live], lse0[live], atol=tol * 10, rtol=1e-6 if dtype == np.float32 else 1e-12)
    if mask is not None:
        assert np.all(res.weights[~np.broadcast_to(mask, res.weights.shape)] == 0)  # masked cells exactly 0


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("Tq,Tk", SIZES)
@pytest.mark.parametrize("mask_kind", MASKS)
@pytest.mark.parametrize("logit", LOGITS)
def test_weights_recomputed_from_lse_and_the_overview_follow_the_cap(dtype, Tq, Tk, mask_kind, logit):
    q, k, v, mask = _case(Tq, Tk, mask_kind, logit, dtype, seed=3)
    cap, scale = 50.0, 0.25
    w0, _, _ = capped_formula(q, k, v, mask, scale, cap)
    res = attention(q, k, v, mask, scale=scale, kernel="naive", softcap=cap)
    for serial in (True, False):
        w = recompute_weights(q, k, res.lse, mask, scale=scale, softcap=cap, block_n=32, serial=serial)
        assert not np.isnan(w).any()
        np.testing.assert_allclose(w, w0, atol=_tol(dtype, cap), rtol=0)
    rows = slice(Tq // 3, Tq)
    np.testing.assert_allclose(recompute_weights(q, k, res.lse, mask, scale=scale, softcap=cap, rows=rows),
                               w0[:, rows], atol=_tol(dtype, cap), rtol=0)
    img = attention_overview(q, k, res.lse, mask, scale=scale, softcap=cap, out_shape=(Tq, Tk))
    np.testing.assert_allclose(img, w0, atol=_tol(dtype, cap), rtol=0)
    small = attention_overview(q, k, res.lse, mask, scale=scale, softcap=cap, out_shape=(max(1, Tq // 4), 2))
    assert not np.isnan(small).any() and small.max() <= 1 + _tol(dtype, cap)  # exp(s - lse), lse rounded


def test_the_cap_changes_the_weights_only_where_scores_reach_it():
    q, k, v = qkv(1, 20, 20, 16, 4, np.float64, seed=1, logit_scale=1.0)
    plain = attention(q, k, v, kernel="reference", return_weights=True)
    loose = attention(q, k, v, kernel="reference", softcap=1e6, return_weights=True)
    np.testing.assert_allclose(loose.weights, plain.weights, atol=1e-9)  # tanh(s / c) ~ s / c far below c
    tight = attention(q, k, v, kernel="naive", softcap=0.5, return_weights=True)
    assert np.abs(tight.weights - plain.weights).max() > 0.05
    # every capped score lies in (-c, c): the weights of one row differ by a factor of at most e^(2c)
    w = tight.weights[0]  # (Tq, Tk)
    assert np.all(w.max(-1) / w.min(-1) <= np.exp(2 * 0.5) * (1 + 1e-9))


def test_huge_scores_stay_finite_under_the_cap():
    q, k, v = qkv(2, 9, 12, 8, 3, np.float32, seed=2, logit_scale=1e20)  # scores ~ 1e20, near the engine's bound
    mask = make_mask("dead_rows", 2, 9, 12)
    for kernel in SOFTCAP_KERNELS:
        res = attention(q, k, v, mask, kernel=kernel, softcap=50.0, return_weights=True)
        for a in (res.out, res.weights):
            assert np.isfinite(a).all()
        assert np.all(res.lse[:, ::3] == -np.inf) and np.isfinite(res.lse[:, 1::3]).all()
        w0, _, _ = capped_formula(q, k, v, mask, 8 ** -0.5, 50.0)
        np.testing.assert_allclose(res.weights, w0, atol=1e-4, rtol=0)


def test_negative_scale_and_one_head_2d_inputs():
    q, k, v = qkv(1, 10, 8, 4, 2, np.float64, seed=4, logit_scale=100.0)
    for kernel in SOFTCAP_KERNELS:
        res = attention(q[0], k[0], v[0], scale=-0.7, kernel=kernel, softcap=5.0, return_weights=True)
        w0, out0, _ = capped_formula(q, k, v, None, -0.7, 5.0)
        np.testing.assert_allclose(res.weights, w0[0], atol=1e-12)
        np.testing.assert_allclose(res.out, out0[0], atol=1e-12)
        np.testing.assert_allclose(recompute_weights(q[0], k[0], res.lse, scale=-0.7, softcap=5.0), w0[0], atol=1e-12)


def test_flash_refuses_and_bad_caps_are_named():
    q, k, v = qkv(1, 4, 4, 4, 2, np.float32)
    with pytest.raises(ValueError, match="flash kernel has no soft-capping; softcap runs on the reference and naive"):
        attention(q, k, v, kernel="flash", softcap=50.0)
    for bad in (0, -1.0, float("inf"), float("nan"), "50", True):
        with pytest.raises(ValueError, match="softcap must be"):
            attention(q, k, v, kernel="reference", softcap=bad)
        with pytest.raises(ValueError, match="softcap must be"):
            recompute_weights(q, k, np.zeros((1, 4), np.float32), softcap=bad)
    assert attention(q, k, v, kernel="flash", softcap=None).out.shape == (1, 4, 2)
