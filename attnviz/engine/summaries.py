"""Per-head summaries of attention weights computed tile by tile from q, k and lse, never as bands.

For a long input only q, k and the log-sum-exp of every row are kept (see :mod:`attnviz.engine.weights`).
The summaries the Pretrained workspace ranks heads by — row entropy, the weight given to special tokens,
to the token itself, to the previous token and to the first one, and the mean distance i - j — and a
max-pooled thumbnail of every head need every weight once. :func:`lse_summaries` visits each allowed tile
of a :class:`~attnviz.engine.tiled_mask.TiledMask` once (empty tiles skipped, partial tiles read cell by
cell), recomputes w_ij = 2^(x_ij) with x_ij = q_i . k_j * scale * log2(e) - lse_i * log2(e), and keeps per
row only running sums: Z = sum w, A = sum w x, and the five weighted sums, plus the row's maximum per
thumbnail column. Each row is then normalised by its own Z (the rounding of lse cancels, as in
:func:`~attnviz.engine.weights.recompute_weights`), so its entropy is -(ln 2 * A / Z - ln Z).

One work item is one head (the thumbnail rows of a head are written by one thread); the statistics are
accumulated in float64.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit, prange

from attnviz.engine.blockmask import EMPTY, PARTIAL
from attnviz.engine.fastexp import FASTMATH, LOG2E, exp2, like
from attnviz.engine.runtime import parallel_section
from attnviz.engine.tiled_mask import TiledMask
from attnviz.engine.validate import prepare_qk_lse, prepare_softcap

#: the statistics, in the order of the kernel's output columns
STATS = ("entropy", "to_special", "to_self", "to_previous", "to_first", "distance")


@njit(nogil=True, cache=True, fastmath=FASTMATH)
def _summary_head(q, k, lse, state, index, blocks, scale, softcap, special, row_px, col_px, n_px, out, thumbs, h):
    """Head h of :func:`_summary_kernel`: out[h] (6,) float64 sums over rows, thumbs[h] (n_px, n_px)."""
    _, Tq, hs = q.shape
    Tk = k.shape[1]
    bm, bn = blocks.shape[1], blocks.shape[2]
    hm = h if state.shape[0] > 1 else 0
    c = like(q, scale * LOG2E)
    capped = softcap > 0
    sc = like(q, scale / softcap if capped else 0.0)
    capl2 = like(q, softcap * LOG2E)
    zero = like(q, 0.0)
    s_buf = np.empty(bm * bn, dtype=q.dtype)
    wrow = np.empty(bn, dtype=q.dtype)  # one row's weights in the tile
    lse2 = np.empty(bm, dtype=q.dtype)
    acc = np.zeros((bm, 7), dtype=np.float64)  # per row: Z, A, special, self, previous, first, sum w (i - j)
    rowmax = np.zeros((bm, max(n_px, 1)), dtype=np.float64)
    for qi in range(state.shape[1]):
        r0 = qi * bm
        r1 = min(r0 + bm, Tq)
        br = r1 - r0
        acc[:br] = 0.0
        if n_px > 0:
            rowmax[:br] = 0.0
        for r in range(br):
            lse2[r] = lse[h, r0 + r] * like(q, LOG2E)
        q_tile = q[h, r0:r1]  # (br, hs)
        for kj in range(state.shape[2]):
            st = state[hm, qi, kj]
            if st == EMPTY:
                continue
            j0 = kj * bn
            j1 = min(j0 + bn, Tk)
            w_n = j1 - j0
            S = s_buf[: br * w_n].reshape((br, w_n))
            np.dot(q_tile, k[h, j0:j1].T, out=S)
            bi = index[hm, qi, kj]
            partial = st == PARTIAL
            for r in range(br):
                if lse2[r] == -np.inf:
                    continue  # a fully masked row: no weights
                i = r0 + r
                l2 = like(q, lse2[r])
                z = zero
                a = zero
                spec = zero
                pos = zero
                for j in range(w_n):  # branch-free: vectorised
                    if capped:
                        x = capl2 * np.tanh(S[r, j] * sc) - l2
                    else:
                        x = S[r, j] * c - l2
                    w = exp2(x)
                    if partial:
                        w = w if blocks[bi, r, j] else zero
                    wrow[j] = w
                    z += w
                    a += w * x
                    spec += w * special[j0 + j]
                    pos += w * like(q, j)
                acc[r, 0] += z
                acc[r, 1] += a
                acc[r, 2] += spec
                acc[r, 6] += np.float64(z) * (i - j0) - np.float64(pos)  # sum w (i - j) over the tile
                if j0 <= i < j1:
                    acc[r, 3] += wrow[i - j0]
                if j0 <= i - 1 < j1:
                    acc[r, 4] += wrow[i - 1 - j0]
                if j0 == 0:
                    acc[r, 5] += wrow[0]
                if n_px > 0:
                    for j in range(w_n):
                        p = col_px[j0 + j]
                        if wrow[j] > rowmax[r, p]:
                            rowmax[r, p] = wrow[j]
        for r in range(br):
            z = acc[r, 0]
            if z <= 0.0:
                continue
            inv = 1.0 / z
            out[h, 0] -= math.log(2.0) * acc[r, 1] * inv - math.log(z)
            out[h, 1] += acc[r, 2] * inv
            out[h, 2] += acc[r, 3] * inv
            out[h, 3] += acc[r, 4] * inv
            out[h, 4] += acc[r, 5] * inv
            out[h, 5] += acc[r, 6] * inv
            if n_px > 0:
                pr = row_px[r0 + r]
                for p in range(n_px):
                    v = rowmax[r, p] * inv
                    if v > thumbs[h, pr, p]:
                        thumbs[h, pr, p] = v


@njit(parallel=True, nogil=True, cache=True, fastmath=FASTMATH)
def _summary_kernel(q, k, lse, state, index, blocks, scale, softcap, special, row_px, col_px, n_px, out, thumbs):
    """q (nh, Tq, hs), k (nh, Tk, hs), lse (nh, Tq); the TiledMask's tile_state / block_index / blocks;
    special (Tk,) in q's dtype; row_px (Tq,), col_px (Tk,) int64 thumbnail pixel of every row and column;
    writes out (nh, 6) float64 sums over rows and thumbs (nh, n_px, n_px) float32 max per pixel."""
    for h in prange(q.shape[0]):
        _summary_head(q, k, lse, state, index, blocks, scale, softcap, special, row_px, col_px, n_px, out, thumbs,
                      np.int64(h))


def _pixels(T: int, n_px: int) -> np.ndarray:
    """(T,) int64 thumbnail pixel of each of T positions: pixel p covers [p T // n, (p + 1) T // n)."""
    if not n_px:
        return np.zeros(T, dtype=np.int64)
    edges = (np.arange(n_px + 1, dtype=np.int64) * T) // n_px
    return (np.searchsorted(edges, np.arange(T), side="right") - 1).astype(np.int64)


def lse_summaries(q, k, lse, mask: TiledMask, *, scale=None, softcap=None, special=None,
                  side: int = 0) -> tuple[dict[str, np.ndarray], np.ndarray | None]:
    """Sums over query rows of each head's row statistics, and (``side`` > 0) a max-pooled thumbnail.

    q (nh, Tq, hs), k (nh, Tk, hs), lse (nh, Tq) as :func:`attnviz.engine.attention` returns them with
    ``mask`` (a TiledMask of Tq x Tk for 1 or nh heads); ``special`` (Tk,) weights of the keys counted as
    special tokens (default none). Returns ({name: (nh,) float64 sum over rows} for :data:`STATS` — the
    row entropy in nats, the weight to special keys, to the row's own position, to the previous one, to
    key 0 and sum_j w_ij (i - j) — and thumbs (nh, s, s) float32 with s = min(side, Tq, Tk), or None).
    A fully masked row adds nothing."""
    q3, k3, lse3, s, _ = prepare_qk_lse(q, k, lse, scale)
    cap = prepare_softcap(softcap)
    nh, Tq, _ = q3.shape
    Tk = k3.shape[1]
    if not isinstance(mask, TiledMask):
        raise ValueError("lse_summaries takes the TiledMask the attention was computed with")
    if (mask.Tq, mask.Tk) != (Tq, Tk) or mask.n_heads not in (1, nh):
        raise ValueError(f"the TiledMask is for {mask.n_heads} head(s) x {mask.Tq} x {mask.Tk}, the inputs are "
                         f"{nh} x {Tq} x {Tk}")
    spec = np.zeros(Tk, dtype=q3.dtype) if special is None else np.ascontiguousarray(special, dtype=q3.dtype)
    if spec.shape != (Tk,):
        raise ValueError(f"special must have one value per key ({Tk}), got shape {spec.shape}")
    n_px = min(int(side), Tq, Tk) if side and side > 0 else 0
    row_px, col_px = _pixels(Tq, n_px), _pixels(Tk, n_px)
    out = np.zeros((nh, len(STATS)), dtype=np.float64)
    thumbs = np.zeros((nh, max(n_px, 1), max(n_px, 1)), dtype=np.float32)
    if nh and Tq and Tk:
        with parallel_section():
            _summary_kernel(q3, k3, lse3, mask.tile_state, mask.block_index, mask.blocks, s, cap, spec, row_px,
                            col_px, n_px, out, thumbs)
    return {name: out[:, i] for i, name in enumerate(STATS)}, (thumbs if n_px else None)
