"""The public entry point: argument checking and dispatch to a kernel."""

from __future__ import annotations

import numpy as np

from attnviz.engine.blockmask import BlockMask, classify
from attnviz.engine.flash import flash_attention, full_tile_state
from attnviz.engine.naive import naive_kernel
from attnviz.engine.reference import reference_attention
from attnviz.engine.result import AttentionResult
from attnviz.engine.runtime import parallel_section
from attnviz.engine.tiled_mask import TiledMask
from attnviz.engine.tiling import FINEST, choose_blocks, fine_counts, tile_state_from_fine
from attnviz.engine.validate import (check_score_range, prepare_block, prepare_mask, prepare_qkv,
                                     prepare_scale, prepare_softcap)
from attnviz.engine.weights import recompute_weights

KERNELS = ("reference", "naive", "flash")
SOFTCAP_KERNELS = ("reference", "naive")  # the kernels that soft-cap scores (attention(..., softcap=c))

# float32 inputs whose scaled scores can exceed this (in nats) run the naive and flash kernels in float64.
# There the float32 rounding of the score products themselves (about 6e-8 x 256 = 1.5e-5 nats, 1e-3 at
# scores of 1e4) outweighs every other error, and how it falls depends on which keys a BLAS call computes
# together: flash's tiles and ragged edge tiles differ from one big product, and at scores of 1e4 that
# alone made flash float32 6x less accurate than plain numpy float32 on some rows.
F32_SCORE_BOUND = 256.0


def _tile_state(dense, block: BlockMask | None, Tq: int, Tk: int, bm: int, bn: int) -> np.ndarray:
    """(nh or 1, nQ, nK) tile states for this tile size, reusing a BlockMask's map when it matches."""
    if dense is None:
        return full_tile_state(Tq, Tk, bm, bn)
    if block is not None and (block.block_m, block.block_n) == (bm, bn):
        return block.kernel_arrays()[1]
    return classify(dense, bm, bn)


def _tiled_attention(q3, k3, v3, tm: TiledMask, s: float, kernel: str, bm, bn, return_weights: bool,
                     squeeze: bool) -> AttentionResult:
    """:func:`attention` with a TiledMask: the flash kernel at the mask's own tile size."""
    nh, Tq, _ = q3.shape
    Tk = k3.shape[1]
    if kernel != "flash":
        raise ValueError(f"a TiledMask runs on the flash kernel; the {kernel} kernel needs the dense mask "
                         "(TiledMask.to_dense())")
    if (tm.Tq, tm.Tk) != (Tq, Tk) or tm.n_heads not in (1, nh):
        raise ValueError(f"the TiledMask is for {tm.n_heads} head(s) x {tm.Tq} x {tm.Tk}, the inputs are "
                         f"{nh} x {Tq} x {Tk}")
    if (bm or tm.block_m, bn or tm.block_n) != (tm.block_m, tm.block_n):
        raise ValueError(f"a TiledMask of {tm.block_m} x {tm.block_n} tiles runs at that tile size, "
                         f"not {bm} x {bn}")
    qs, sf = (-q3, -s) if s < 0 else (q3, s)  # the kernel needs scale >= 0: negate q instead (exact)
    out, lse = flash_attention(qs, k3, v3, None, None, sf, tm.block_m, tm.block_n, tiled=tm)
    weights = recompute_weights(q3, k3, lse, tm, scale=s) if return_weights else None
    if squeeze:
        return AttentionResult(out[0], lse[0], None if weights is None else weights[0])
    return AttentionResult(out, lse, weights)


def attention(q, k, v, mask=None, *, scale=None, kernel="flash", block_m=None, block_n=None,
              return_weights=False, softcap=None) -> AttentionResult:
    """softmax(q k^T * scale, masked) v per head (mask convention in :mod:`attnviz.engine`).

    q (nh, Tq, hs), k (nh, Tk, hs), v (nh, Tk, hv); 2-D arrays mean one head and give 2-D results.
    ``mask``: None, bool (Tq, Tk) / (nh, Tq, Tk), a BlockMask, or a TiledMask (flash only, at its tile
    size). ``scale`` defaults to 1/sqrt(hs); ``block_m``/``block_n`` default to the BlockMask's tiles,
    else :func:`attnviz.engine.tiling.choose_blocks`. ``softcap`` None, or c > 0: every scaled score s
    becomes c tanh(s / c) before the mask and the softmax (Gemma 2's attention-logit soft-capping; the
    reference and naive kernels, see SOFTCAP_KERNELS: flash refuses it). Returns out (nh, Tq, hv), lse
    (nh, Tq) and, with ``return_weights``, weights (nh, Tq, Tk): float32 when every input is float32,
    else float64; float32 inputs whose scaled scores can exceed F32_SCORE_BOUND are computed in float64 first.
    """
    if kernel not in KERNELS:
        raise ValueError(f"kernel must be one of {', '.join(KERNELS)}, got {kernel!r}")
    cap = prepare_softcap(softcap)
    if cap and kernel not in SOFTCAP_KERNELS:
        raise ValueError(f"the {kernel} kernel has no soft-capping; softcap runs on the "
                         f"{' and '.join(SOFTCAP_KERNELS)} kernels")
    q3, k3, v3, squeeze, norms = prepare_qkv(q, k, v)
    nh, Tq, hs = q3.shape
    Tk = k3.shape[1]
    s = prepare_scale(scale, hs)
    bound = check_score_range(norms, s)
    bm = prepare_block("block_m", block_m)
    bn = prepare_block("block_n", block_n)
    if q3.dtype == np.float32 and kernel != "reference" and bound > F32_SCORE_BOUND:
        wide = attention(q3.astype(np.float64), k3.astype(np.float64), v3.astype(np.float64), mask, scale=s,
                         kernel=kernel, block_m=bm, block_n=bn, return_weights=return_weights, softcap=softcap)
        out, lse = wide.out.astype(np.float32), wide.lse.astype(np.float32)
        weights = None if wide.weights is None else wide.weights.astype(np.float32)
        if squeeze:
            return AttentionResult(out[0], lse[0], None if weights is None else weights[0])
        return AttentionResult(out, lse, weights)
    if isinstance(mask, TiledMask):
        return _tiled_attention(q3, k3, v3, mask, s, kernel, bm, bn, return_weights, squeeze)
    dense, block = prepare_mask(mask, nh, Tq, Tk)
    weights = None

    if kernel == "reference":
        full = np.ones((1, Tq, Tk), dtype=np.bool_) if dense is None else dense
        out, lse, w = reference_attention(q3, k3, v3, np.broadcast_to(full, (nh, Tq, Tk)), s, cap)
        out, lse = out.astype(q3.dtype), lse.astype(q3.dtype)
        weights = w.astype(q3.dtype) if return_weights else None
    elif kernel == "naive":
        out = np.empty((nh, Tq, v3.shape[2]), dtype=q3.dtype)  # (nh, Tq, hv)
        lse = np.empty((nh, Tq), dtype=q3.dtype)  # (nh, Tq)
        w = np.empty((nh, Tq, Tk) if return_weights else (1, 1, 1), dtype=q3.dtype)  # (nh, Tq, Tk) or dummy
        m = np.ones((1, 1, 1), dtype=np.bool_) if dense is None else dense
        if Tq:
            with parallel_section():
                naive_kernel(q3, k3, v3, m, dense is not None, s, cap, out, lse, w, return_weights)
        weights = w if return_weights else None
    else:
        if bm is None and bn is None and block is not None:
            bm, bn = block.block_m, block.block_n
        state = None
        if bm is None or bn is None:
            # a bool mask is read once: its counts per finest tile give the choice and the tile states
            fine = fine_counts(dense) if dense is not None and block is None else None
            auto_m, auto_n = choose_blocks(nh, Tq, Tk, hs, v3.shape[2], q3.dtype, dense, fine=fine)
            bm, bn = bm or auto_m, bn or auto_n
            if fine is not None and bm % FINEST[0] == 0 and bn % FINEST[1] == 0:
                state = tile_state_from_fine(fine, Tq, Tk, bm, bn)  # (nh|1, nQ, nK)
        if state is None:
            state = _tile_state(dense, block, Tq, Tk, bm, bn)
        qs, sf = (-q3, -s) if s < 0 else (q3, s)  # the kernel needs scale >= 0: negate q instead (exact)
        out, lse = flash_attention(qs, k3, v3, dense, state, sf, bm, bn)
        if return_weights:
            weights = recompute_weights(q3, k3, lse, dense, scale=s, block_n=bn)

    if squeeze:
        return AttentionResult(out[0], lse[0], None if weights is None else weights[0])
    return AttentionResult(out, lse, weights)
