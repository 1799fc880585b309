"""Displayed weights from a flash result without the full matrix: exp(s * scale - lse), tile by tile.

The flash kernel keeps only lse per query row. The weights of any rows can be recomputed from q, k
and lse: w_ij = exp(q_i . k_j * scale - lse_i) on allowed cells, 0 on masked cells, and 0 on a fully
masked row (lse = -inf). Only the requested rows are materialised, always over every key, so each row
is then divided by its sum: the rounding of lse (stored in the input precision, about |lse| * 6e-8 in
float32) is a factor common to the whole row and cancels; with large float32 scores it would
otherwise dominate the error. With a soft cap c the recomputed score is c tanh(s * scale / c), as the
kernels that computed lse used it.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from attnviz.engine.fastexp import FASTMATH, LOG2E, exp2, like
from attnviz.engine.runtime import parallel_section
from attnviz.engine.tiled_mask import TiledMask
from attnviz.engine.validate import prepare_block, prepare_mask, prepare_qk_lse, prepare_rows, prepare_softcap

ROW_BLOCK = 64  # query rows per work item
DEFAULT_BLOCK_N = 256  # keys per tile
SERIAL_WORK = 1 << 22  # cells x hs at most this run on the calling thread (see attnviz.engine.display)


@njit(nogil=True, cache=True, fastmath=FASTMATH)
def _weights_item(qr, k, lse_r, mask_r, use_mask, scale, softcap, BLOCK_N, w, t):
    """Work item t = h * nR + row block of :func:`_weights_kernel` (same arguments)."""
    nh, R, hs = qr.shape
    Tk = k.shape[1]
    nR = (R + ROW_BLOCK - 1) // ROW_BLOCK
    c = like(qr, scale * LOG2E)
    capped = softcap > 0
    sc = like(qr, scale / softcap if capped else 0.0)  # q . k -> s / c
    capl2 = like(qr, softcap * LOG2E)  # tanh(s / c) -> c tanh(s / c) in base 2
    h = t // nR
    r0 = (t - h * nR) * ROW_BLOCK
    r1 = min(r0 + ROW_BLOCK, R)
    br = r1 - r0
    hm = h if mask_r.shape[0] > 1 else 0
    q_tile = qr[h, r0:r1]  # (br, hs)
    s_buf = np.empty(ROW_BLOCK * BLOCK_N, dtype=qr.dtype)  # scratch score tile
    lse2 = np.empty(br, dtype=qr.dtype)  # (br,) lse in base 2
    rsum = np.zeros(br, dtype=qr.dtype)  # (br,) row sums of the recomputed weights
    zero = like(qr, 0.0)
    for r in range(br):
        lse2[r] = lse_r[h, r0 + r] * like(qr, LOG2E)
    for j0 in range(0, Tk, BLOCK_N):
        j1 = min(j0 + BLOCK_N, Tk)
        bn = j1 - j0
        S = s_buf[: br * bn].reshape((br, bn))  # (br, bn)
        np.dot(q_tile, k[h, j0:j1].T, out=S)
        for r in range(br):
            wrow = w[h, r0 + r, j0:j1]  # (bn,)
            srow = S[r]  # (bn,)
            tot = zero
            if lse2[r] == -np.inf:
                wrow[:] = 0
            elif capped and use_mask:
                mrow = mask_r[hm, r0 + r, j0:j1]  # (bn,)
                for j in range(bn):
                    p = exp2(capl2 * np.tanh(srow[j] * sc) - lse2[r]) if mrow[j] else zero
                    wrow[j] = p
                    tot += p
            elif capped:
                for j in range(bn):
                    p = exp2(capl2 * np.tanh(srow[j] * sc) - lse2[r])
                    wrow[j] = p
                    tot += p
            elif use_mask:
                mrow = mask_r[hm, r0 + r, j0:j1]  # (bn,)
                for j in range(bn):
                    p = exp2(srow[j] * c - lse2[r]) if mrow[j] else zero
                    wrow[j] = p
                    tot += p
            else:
                for j in range(bn):
                    p = exp2(srow[j] * c - lse2[r])
                    wrow[j] = p
                    tot += p
            rsum[r] += tot
    for r in range(br):  # divide out the rounding of lse (a common factor of the row)
        if rsum[r] > 0:
            inv = like(qr, 1.0) / rsum[r]
            wrow = w[h, r0 + r]  # (Tk,)
            for j in range(Tk):
                wrow[j] *= inv


@njit(parallel=True, nogil=True, cache=True, fastmath=FASTMATH)
def _weights_kernel(qr, k, lse_r, mask_r, use_mask, scale, softcap, BLOCK_N, w):
    """qr (nh, R, hs) rows, k (nh, Tk, hs), lse_r (nh, R), mask_r (nh or 1, R, Tk); writes w (nh, R, Tk).
    softcap > 0: scores are c tanh(s * scale / c) (0: s * scale)."""
    for t in prange(qr.shape[0] * ((qr.shape[1] + ROW_BLOCK - 1) // ROW_BLOCK)):
        _weights_item(qr, k, lse_r, mask_r, use_mask, scale, softcap, BLOCK_N, w, t)


@njit(nogil=True, cache=True, fastmath=FASTMATH)
def _weights_serial(qr, k, lse_r, mask_r, use_mask, scale, softcap, BLOCK_N, w):
    """:func:`_weights_kernel` on the calling thread, for jobs smaller than a parallel launch costs."""
    for t in range(qr.shape[0] * ((qr.shape[1] + ROW_BLOCK - 1) // ROW_BLOCK)):
        _weights_item(qr, k, lse_r, mask_r, use_mask, scale, softcap, BLOCK_N, w, t)


def recompute_weights(q, k, lse, mask=None, *, scale=None, rows=None, block_n=None, serial=None,
                      softcap=None) -> np.ndarray:
    """Weights of the requested query rows, recomputed tile by tile from q, k and lse.

    q (nh, Tq, hs), k (nh, Tk, hs), lse (nh, Tq) as returned by :func:`attention` (2-D q/k and 1-D lse
    mean one head); ``mask`` as for :func:`attention` (of a TiledMask only the requested rows are made
    dense); ``rows`` None (all), a slice or query indices;
    ``serial`` True / False / None (by size) as for :func:`attnviz.engine.display_matrices`;
    ``softcap`` the cap c the scores had when lse was computed (None: none), as for :func:`attention`.
    Returns (nh, R, Tk) — (R, Tk) for one head — in the dtype of q and k. Masked cells and fully
    masked rows are 0.
    """
    q3, k3, lse3, s, squeeze = prepare_qk_lse(q, k, lse, scale)  # s >= 0
    cap = prepare_softcap(softcap)
    nh, Tq, _ = q3.shape
    Tk = k3.shape[1]
    idx = prepare_rows(rows, Tq)  # (R,)
    if isinstance(mask, TiledMask):  # only the requested rows, made dense
        if (mask.Tq, mask.Tk) != (Tq, Tk) or mask.n_heads not in (1, nh):
            raise ValueError(f"the TiledMask is for {mask.n_heads} head(s) x {mask.Tq} x {mask.Tk}, the inputs "
                             f"are {nh} x {Tq} x {Tk}")
        q3, lse3 = q3[:, idx], lse3[:, idx]  # (nh, R, hs), (nh, R)
        mask, idx, Tq = mask.rows(idx), np.arange(idx.size, dtype=np.int64), idx.size
    dense, _ = prepare_mask(mask, nh, Tq, Tk)
    bn = prepare_block("block_n", block_n) or DEFAULT_BLOCK_N
    qr = np.ascontiguousarray(q3[:, idx])  # (nh, R, hs)
    lse_r = np.ascontiguousarray(lse3[:, idx])  # (nh, R)
    if dense is None:
        mask_r = np.ones((1, 1, 1), dtype=np.bool_)  # unused
    else:
        mask_r = np.ascontiguousarray(dense[:, idx])  # (nh or 1, R, Tk)
    w = np.empty((nh, idx.size, Tk), dtype=q3.dtype)  # (nh, R, Tk)
    args = (qr, k3, lse_r, mask_r, dense is not None, s, cap, bn, w)
    if w.size and (serial or (serial is None and w.size * qr.shape[2] <= SERIAL_WORK)):
        _weights_serial(*args)
    elif w.size:
        with parallel_section():
            _weights_kernel(*args)
    return w[0] if squeeze else w
