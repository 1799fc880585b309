"""display_matrices: fused float32 scores and weights against the float64 reference."""

from __future__ import annotations

import numpy as np
import pytest

from attnviz.engine import BlockMask, attention, display_matrices, recompute_weights, warmup
from attnviz.engine.display import _display_kernel, _display_serial
from attnviz.engine.weights import _weights_kernel, _weights_serial
from attnviz.engine.flash import flash_kernel
from engine_helpers import make_mask, qkv


def _plain_f32(q, k, mask, scale):
    """Scores and weights of a plain numpy float32 implementation (the accuracy yardstick)."""
    q32, k32 = q.astype(np.float32), k.astype(np.float32)
    s = (q32 * np.float32(scale)) @ k32.transpose(0, 2, 1)  # (nh, Tq, Tk)
    m = np.ones(s.shape, bool) if mask is None else np.broadcast_to(mask, s.shape)
    sm = np.where(m, s, -np.inf)
    mx = sm.max(axis=-1, keepdims=True)
    mx = np.where(np.isfinite(mx), mx, 0)
    e = np.exp(sm - mx)  # (nh, Tq, Tk)
    return s, e / np.maximum(e.sum(axis=-1, keepdims=True), np.float32(1e-30))


@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["f64", "f32"])
@pytest.mark.parametrize("mask_kind", ["none", "causal", "random", "dead_rows"])
def test_display_matrices_within_twice_the_plain_float32_error(mask_kind, dtype):
    q, k, v = qkv(2, 150, 97, 16, 8, dtype, seed=4)
    q, k = q * 3, k * 3  # large scores: the rounding of lse would show without the row normalisation
    mask = make_mask(mask_kind, 2, 150, 97)
    q64, k64, v64 = (a.astype(np.float64) for a in (q, k, v))
    ref = attention(q64, k64, v64, mask, kernel="reference", return_weights=True)
    s_ref = (q64 @ k64.transpose(0, 2, 1)) * 0.25  # (nh, Tq, Tk)
    lse = attention(q, k, v, mask, kernel="flash", block_m=32, block_n=32).lse
    w = np.full((2, 150, 97), np.nan, dtype=np.float32)
    s = np.full((2, 150, 97), np.nan, dtype=np.float32)
    display_matrices(q, k, lse, mask, weights=w, scores=s, block_m=32, block_n=40, serial=False)
    w_serial = np.empty_like(w)
    display_matrices(q, k, lse, mask, weights=w_serial, block_m=32, block_n=40, serial=True)
    assert np.array_equal(w_serial, w)
    s_plain, w_plain = _plain_f32(q, k, mask, 0.25)
    err_w, plain_w = np.abs(w - ref.weights).max(), np.abs(w_plain - ref.weights).max()
    assert err_w <= 2 * plain_w + 1e-7
    assert np.abs(s - s_ref).max() <= 2 * np.abs(s_plain - s_ref).max() + 1e-7
    if mask is not None:
        assert np.all(w[~np.broadcast_to(mask, w.shape)] == 0)
    # the same weights from the scores just written
    w2 = np.full_like(w, np.nan)
    display_matrices(q, k, lse, mask, weights=w2, given_scores=s, block_m=32, block_n=40)
    assert np.abs(w2 - ref.weights).max() <= 2 * plain_w + 1e-7


def test_display_fully_masked_rows_and_blockmask_negative_scale():
    q, k, v = qkv(1, 70, 50, 8, 4, np.float64, seed=2)
    dense = np.asarray(make_mask("dead_rows", 1, 70, 50)).reshape(70, 50)  # (Tq, Tk)
    ref = attention(q[0], k[0], v[0], dense, kernel="reference", scale=-0.5, return_weights=True)
    w = np.empty((70, 50), dtype=np.float32)
    s = np.empty((70, 50), dtype=np.float32)
    display_matrices(q[0], k[0], ref.lse, BlockMask.from_dense(dense, 16, 16), weights=w, scores=s, scale=-0.5)
    np.testing.assert_allclose(w, ref.weights, atol=2e-7)
    np.testing.assert_allclose(s, (q[0] @ k[0].T) * -0.5, rtol=1e-6, atol=1e-6)
    dead = ~dense.any(axis=1)
    assert dead.any() and np.all(w[dead] == 0) and not np.isnan(w).any()


def test_display_rejects_bad_outputs():
    q, k, _ = qkv(2, 10, 12, 4, 4, np.float64)
    lse = np.zeros((2, 10))
    with pytest.raises(ValueError, match="weights must be a float32"):
        display_matrices(q, k, lse, weights=np.empty((2, 10, 12)))
    with pytest.raises(ValueError, match="weights must be a float32"):
        display_matrices(q, k, lse, weights=np.empty((2, 10, 11), np.float32))
    with pytest.raises(ValueError, match="C-contiguous"):
        display_matrices(q, k, lse, weights=np.empty((2, 12, 10), np.float32).transpose(0, 2, 1))
    ro = np.empty((2, 10, 12), np.float32)
    ro.setflags(write=False)
    with pytest.raises(ValueError, match="writable"):
        display_matrices(q, k, lse, weights=ro)
    w = np.empty((2, 10, 12), np.float32)
    with pytest.raises(ValueError, match="not both"):
        display_matrices(q, k, lse, weights=w, scores=w.copy(), given_scores=w.copy())


def test_blockmask_share_keeps_arrays_and_compiles_nothing_new():
    warmup()
    kernels = (flash_kernel, _display_kernel, _display_serial, _weights_kernel, _weights_serial)
    n_sigs = [len(f.signatures) for f in kernels]
    rng = np.random.default_rng(0)
    mask = rng.random((3, 40, 40)) < 0.7  # (nh, Tq, Tk)
    from attnviz.engine.blockmask import classify
    bm = BlockMask.share(mask, 16, 16, classify(mask, 16, 16))
    assert np.shares_memory(bm.kernel_arrays()[0], mask) and not bm.dense.flags.writeable
    sub = bm.heads(1, 3)
    assert np.shares_memory(sub.kernel_arrays()[0], mask) and sub.dense.shape == (2, 40, 40)
    q = rng.standard_normal((2, 40, 8)).astype(np.float32)  # (nh, Tq, hs)
    res = attention(q, q, q, sub, kernel="flash")
    w = np.empty((2, 40, 40), np.float32)
    for serial in (True, False):
        display_matrices(q, q, res.lse, sub, weights=w, scores=np.empty_like(w), serial=serial)
        recompute_weights(q, q, res.lse, sub, rows=[0, 5], serial=serial)
    assert [len(f.signatures) for f in kernels] == n_sigs
    with pytest.raises(ValueError, match="tile_state"):
        BlockMask.share(mask, 16, 16, classify(mask, 8, 16))
