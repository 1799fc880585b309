"""Display matrices: float32 scores and weights of every cell, fused in one parallel pass over tiles.

A heatmap needs the scaled scores and ``exp(score - lse)`` of every cell; one BLAS product per tile
gives both, empty tiles skip the work and full ones the mask test. Every row is finally divided by
its float64 sum, so the rounding of lse (a factor common to the row) cancels.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from attnviz.engine.blockmask import EMPTY, PARTIAL, BlockMask, classify
from attnviz.engine.fastexp import FASTMATH, LOG2E, like
from attnviz.engine.fastexp import exp2
from attnviz.engine.flash import full_tile_state
from attnviz.engine.runtime import parallel_section
from attnviz.engine.validate import prepare_block, prepare_mask, prepare_qk_lse

DEFAULT_BLOCK_M = 64  # query rows per work item
DEFAULT_BLOCK_N = 256  # keys per tile
#: cells x hs at most this runs on the calling thread: a parallel launch on a busy 2-core machine cost
#: about 8 ms (waking the worker threads), a few rows of T = 1024 at 8 heads take well under 1 ms
SERIAL_WORK = 1 << 22


def _read_only(a: np.ndarray) -> np.ndarray:
    view = a.view()
    view.setflags(write=False)
    return view


_NO_SCORES_IN = _read_only(np.zeros((1, 1, 1), dtype=np.float32))  # (1, 1, 1) never read
_NO_SCORES_OUT = np.zeros((1, 1, 1), dtype=np.float32)  # (1, 1, 1) never written


@njit(nogil=True, cache=True, fastmath=FASTMATH)
def _display_item(q, k, lse, mask, tile_state, s_in, have_in, s_out, write_out, scale, BLOCK_M, BLOCK_N, w, t):
    """Work item t = h * nQ + qi of :func:`_display_kernel` (same arguments)."""
    Tq = q.shape[1]
    Tk = k.shape[1]
    nQ = tile_state.shape[1]
    nK = tile_state.shape[2]
    c = like(q, scale * LOG2E)
    s = like(q, scale)
    zero = np.float32(0.0)
    log2e32 = np.float32(LOG2E)
    h = t // nQ
    qi = t - h * nQ
    hm = h if mask.shape[0] > 1 else 0
    ht = h if tile_state.shape[0] > 1 else 0
    i0 = qi * BLOCK_M
    i1 = min(i0 + BLOCK_M, Tq)
    bm = i1 - i0
    q_tile = q[h, i0:i1]  # (bm, hs)
    s_buf = np.empty(BLOCK_M * BLOCK_N, dtype=q.dtype)  # scratch score tile
    lse2 = np.empty(bm, dtype=q.dtype)  # (bm,) lse in base 2, input precision
    lse2f = np.empty(bm, dtype=np.float32)  # (bm,) the same in float32 (given scores)
    dead = np.empty(bm, dtype=np.bool_)  # (bm,) fully masked rows
    rsum = np.zeros(bm, dtype=np.float64)  # (bm,) row sums of the weights
    for r in range(bm):
        dead[r] = lse[h, i0 + r] == -np.inf
        lse2[r] = zero if dead[r] else lse[h, i0 + r] * like(q, LOG2E)
        lse2f[r] = np.float32(lse2[r])
    for kj in range(nK):
        state = tile_state[ht, qi, kj]
        j0 = kj * BLOCK_N
        j1 = min(j0 + BLOCK_N, Tk)
        bn = j1 - j0
        S = s_buf[: bm * bn].reshape((bm, bn))  # (bm, bn)
        if not have_in and (write_out or state != EMPTY):
            np.dot(q_tile, k[h, j0:j1].T, out=S)
            if write_out:
                for r in range(bm):
                    orow = s_out[h, i0 + r, j0:j1]  # (bn,)
                    srow = S[r]  # (bn,)
                    for j in range(bn):
                        orow[j] = np.float32(srow[j] * s)
        partial = state == PARTIAL
        for r in range(bm):
            wrow = w[h, i0 + r, j0:j1]  # (bn,)
            if state == EMPTY or dead[r]:
                wrow[:] = zero
                continue
            mrow = mask[hm, i0 + r, j0:j1] if partial else mask[0, 0, 0:1]  # (bn,) or unused
            tot = zero
            if have_in:
                irow = s_in[h, i0 + r, j0:j1]  # (bn,)
                for j in range(bn):
                    p = exp2(irow[j] * log2e32 - lse2f[r])
                    if partial:
                        p = p if mrow[j] else zero
                    wrow[j] = p
                    tot += p
            else:
                srow = S[r]  # (bn,)
                for j in range(bn):
                    p = exp2(np.float32(srow[j] * c - lse2[r]))  # exponent in the input precision, then rounded
                    if partial:
                        p = p if mrow[j] else zero
                    wrow[j] = p
                    tot += p
            rsum[r] += tot
    for r in range(bm):  # divide out the rounding of lse (a factor common to the row)
        if rsum[r] > 0:
            inv = np.float32(1.0 / rsum[r])
            wrow = w[h, i0 + r]  # (Tk,)
            for j in range(Tk):
                wrow[j] *= inv


@njit(parallel=True, nogil=True, cache=True, fastmath=FASTMATH)
def _display_kernel(q, k, lse, mask, tile_state, s_in, have_in, s_out, write_out, scale, BLOCK_M, BLOCK_N, w):
    """q (nh, Tq, hs), k (nh, Tk, hs), lse (nh, Tq) one dtype; mask (nh|1, Tq, Tk) bool; tile_state
    (nh|1, nQ, nK) int8; s_in read-only float32 (nh, Tq, Tk) scores when ``have_in``; s_out float32
    (nh, Tq, Tk) receives the scores when ``write_out``; w float32 (nh, Tq, Tk) receives the weights."""
    for t in prange(q.shape[0] * tile_state.shape[1]):
        _display_item(q, k, lse, mask, tile_state, s_in, have_in, s_out, write_out, scale, BLOCK_M, BLOCK_N, w, t)


@njit(nogil=True, cache=True, fastmath=FASTMATH)
def _display_serial(q, k, lse, mask, tile_state, s_in, have_in, s_out, write_out, scale, BLOCK_M, BLOCK_N, w):
    """:func:`_display_kernel` on the calling thread, for jobs smaller than a parallel launch costs."""
    for t in range(q.shape[0] * tile_state.shape[1]):
        _display_item(q, k, lse, mask, tile_state, s_in, have_in, s_out, write_out, scale, BLOCK_M, BLOCK_N, w, t)


def _check_out(name: str, a, shape: tuple[int, ...]) -> np.ndarray:
    if not isinstance(a, np.ndarray) or a.dtype != np.float32 or a.shape != shape:
        got = f"{a.dtype} {a.shape}" if isinstance(a, np.ndarray) else type(a).__name__
        raise ValueError(f"{name} must be a float32 array of shape {shape}, got {got}")
    if not a.flags.c_contiguous:
        raise ValueError(f"{name} must be C-contiguous")
    return a


def display_matrices(q, k, lse, mask=None, *, weights, scores=None, given_scores=None, scale=None,
                     block_m=None, block_n=None, serial=None) -> None:
    """Write float32 weights (and scores) of every (query, key) cell into caller-provided arrays.

    q (nh, Tq, hs), k (nh, Tk, hs) float64 or float32, lse (nh, Tq) from :func:`attention` with the same
    mask and scale (2-D q/k, 1-D lse: one head); ``mask`` None, bool or a BlockMask (its tiles reused).
    ``weights`` / ``scores``: writable C-contiguous float32 (nh, Tq, Tk); weights rows sum to 1, or 0
    for fully masked rows. ``given_scores``: float32 scores computed earlier, used instead of the
    products (not with ``scores``). Tiles default to the BlockMask's, else 64 x 256; ``serial`` None
    decides by size (SERIAL_WORK cells x hs).
    """
    if scores is not None and given_scores is not None:
        raise ValueError("pass scores (to fill) or given_scores (to read), not both")
    q3, k3, lse3, s, squeeze = prepare_qk_lse(q, k, lse, scale)  # s >= 0, q negated for a negative scale
    nh, Tq, _ = q3.shape
    Tk = k3.shape[1]
    shape = (Tq, Tk) if squeeze else (nh, Tq, Tk)
    w = _check_out("weights", weights, shape)
    if not w.flags.writeable:
        raise ValueError("weights must be writable")
    s_out = _NO_SCORES_OUT
    if scores is not None:
        s_out = _check_out("scores", scores, shape)
        if not s_out.flags.writeable:
            raise ValueError("scores must be writable")
    s_in = _NO_SCORES_IN
    if given_scores is not None:
        s_in = _read_only(_check_out("given_scores", given_scores, shape))
    dense, block = prepare_mask(mask, nh, Tq, Tk)
    bm = prepare_block("block_m", block_m)
    bn = prepare_block("block_n", block_n)
    if bm is None and bn is None and block is not None:
        bm, bn = block.block_m, block.block_n
    bm, bn = bm or DEFAULT_BLOCK_M, bn or DEFAULT_BLOCK_N
    if dense is None:
        m, state = _NO_MASK, full_tile_state(Tq, Tk, bm, bn)  # (1, nQ, nK)
    elif isinstance(block, BlockMask) and (block.block_m, block.block_n) == (bm, bn):
        m, state = dense, block.kernel_arrays()[1]
    else:
        m, state = dense, classify(dense, bm, bn)  # (nh|1, nQ, nK)
    if w.size == 0:
        return
    w3, so3, si3 = (a[None] if squeeze and a.ndim == 2 else a for a in (w, s_out, s_in))
    args = (q3, k3, lse3, m, state, si3, given_scores is not None, so3, scores is not None, s, bm, bn, w3)
    if serial or (serial is None and w.size * q3.shape[2] <= SERIAL_WORK):
        _display_serial(*args)
    else:
        with parallel_section():
            _display_kernel(*args)


_NO_MASK = np.ones((1, 1, 1), dtype=np.bool_)  # (1, 1, 1) passed when every key is allowed
