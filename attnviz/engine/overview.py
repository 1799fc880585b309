"""Attention overviews: a (H, W) picture of the weights of a region, computed tile by tile.

For long sequences the weight matrix cannot be held, but a heatmap needs one value per pixel: the
max (or mean) of the weights a pixel covers, recomputed from q, k and lse per tile and reduced on the
fly (memory O(T * hs + pixels)). The max costs one exponential per (row, pixel), as exp is monotonic
(so is a soft cap c tanh(s / c), applied to the scores as the kernel that computed lse did).
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from attnviz.engine.fastexp import FASTMATH, LOG2E, M_INIT, MASKED_SCORE, exp2, from_order_key, like, order_key
from attnviz.engine.blockmask import EMPTY, FULL, PARTIAL
from attnviz.engine.runtime import parallel_section
from attnviz.engine.tiled_mask import TiledMask
from attnviz.engine.validate import prepare_block, prepare_mask, prepare_qk_lse, prepare_softcap

REDUCTIONS = ("max", "mean")
_NO_STATE = np.zeros((1, 1, 1), dtype=np.int8)  # passed when the mask is not a TiledMask
_NO_INDEX = np.zeros((1, 1, 1), dtype=np.int32)
_NO_BLOCKS = np.zeros((1, 1, 1), dtype=np.bool_)
ROW_BLOCK = 64  # query rows per score tile
DEFAULT_BLOCK_N = 512  # keys per score tile


def _edges(n: int, parts: int) -> np.ndarray:
    """Start of each of ``parts`` near-equal contiguous bands of n items, plus n: (parts + 1,) int64."""
    return (np.arange(parts + 1, dtype=np.int64) * n) // parts


def _row_groups(row_edges: np.ndarray, min_rows: int) -> np.ndarray:
    """Group consecutive pixel rows into work items of at least min_rows query rows: pixel-row starts."""
    starts = [0]
    for p in range(1, len(row_edges) - 1):
        if row_edges[p] - row_edges[starts[-1]] >= min_rows:
            starts.append(p)
    starts.append(len(row_edges) - 1)
    return np.asarray(starts, dtype=np.int64)


@njit(nogil=True, cache=True)
def _tiled_row(tstate, tindex, tblocks, TBM, TBN, ht, i, a, b, out):
    """Cells a:b of row i of a TiledMask (tile states, block index, blocks of TBM x TBN) into out[:b-a]."""
    qi = i // TBM
    r = i - qi * TBM
    j = a
    while j < b:
        kj = j // TBN
        e = min((kj + 1) * TBN, b)
        st = tstate[ht, qi, kj]
        if st == PARTIAL:
            blk = tblocks[tindex[ht, qi, kj], r]  # (TBN,)
            for jj in range(j, e):
                out[jj - a] = blk[jj - kj * TBN]
        else:
            val = st == FULL
            for jj in range(j, e):
                out[jj - a] = val
        j = e


@njit(nogil=True, cache=True)
def _tiled_empty(tstate, TBM, TBN, ht, i0, i1, j0, j1) -> bool:
    """True when every tile of a TiledMask under rows [i0, i1) x cols [j0, j1) is EMPTY."""
    for qi in range(i0 // TBM, (i1 - 1) // TBM + 1):
        for kj in range(j0 // TBN, (j1 - 1) // TBN + 1):
            if tstate[ht, qi, kj] != EMPTY:
                return False
    return True


@njit(parallel=True, nogil=True, cache=True, fastmath=FASTMATH)
def _overview_kernel(q, k, lse, mask, use_mask, tstate, tindex, tblocks, tiled, TBM, TBN, r0, c0, row_edges,
                     col_edges, groups, scale, softcap, use_max, BLOCK_N, acc):
    """q (nh, Tq, hs), k (nh, Tk, hs), lse (nh, Tq); region rows r0 + [0, R), cols c0 + [0, C).

    row_edges (H'+1,) and col_edges (W'+1,) are band starts relative to the region; groups (G+1,) are
    pixel-row starts of the work items. acc (nh, H', W') receives the max, or the sum, per pixel.
    The mask is ``mask`` (nh or 1, Tq, Tk) when ``use_mask``, or with ``tiled`` a TiledMask's tile
    states, block index and blocks of TBM x TBN (tiles it leaves empty are not computed at all).
    softcap > 0: scores are c tanh(s * scale / c) (0: s * scale).
    """
    nh = q.shape[0]
    Hp = row_edges.shape[0] - 1
    Wp = col_edges.shape[0] - 1
    C = col_edges[Wp]
    G = groups.shape[0] - 1
    c = like(q, scale * LOG2E)
    masked = like(q, MASKED_SCORE)
    capped = softcap > 0
    sc = like(q, scale / softcap if capped else 0.0)  # q . k -> s / c
    capl2 = like(q, softcap * LOG2E)  # tanh(s / c) -> c tanh(s / c) in base 2
    for t in prange(nh * G):
        h = t // G
        g = t - h * G
        hm = h if mask.shape[0] > 1 else 0
        ht = h if tstate.shape[0] > 1 else 0
        s_buf = np.empty(ROW_BLOCK * BLOCK_N, dtype=q.dtype)  # scratch score tile
        m_buf = np.empty(BLOCK_N, dtype=np.bool_)  # one row of a TiledMask
        pa = groups[g]
        pb = groups[g + 1]
        for py in range(pa, pb):
            for px in range(Wp):
                acc[h, py, px] = 0
        ra = row_edges[pa]
        rb = row_edges[pb]
        py = pa
        for i0 in range(ra, rb, ROW_BLOCK):
            i1 = min(i0 + ROW_BLOCK, rb)
            br = i1 - i0
            q_tile = q[h, r0 + i0:r0 + i1]  # (br, hs)
            for j0 in range(0, C, BLOCK_N):
                j1 = min(j0 + BLOCK_N, C)
                bn = j1 - j0
                if tiled and _tiled_empty(tstate, TBM, TBN, ht, r0 + i0, r0 + i1, c0 + j0, c0 + j1):
                    continue  # every cell masked: adds nothing to a max or a sum
                S = s_buf[: br * bn].reshape((br, bn))  # (br, bn)
                np.dot(q_tile, k[h, c0 + j0:c0 + j1].T, out=S)
                py = pa
                for r in range(br):
                    i = i0 + r
                    while row_edges[py + 1] <= i:
                        py += 1
                    lse2 = lse[h, r0 + i] * like(q, LOG2E)
                    if lse2 == -np.inf:
                        continue  # fully masked row: weights 0
                    srow = S[r]  # (bn,)
                    if capped:  # capped and in base 2 already: the scaling below is 1
                        for j in range(bn):
                            srow[j] = capl2 * np.tanh(srow[j] * sc)
                        cj = like(q, 1.0)
                    else:
                        cj = c
                    if tiled:
                        _tiled_row(tstate, tindex, tblocks, TBM, TBN, ht, r0 + i, c0 + j0, c0 + j1, m_buf)
                        for j in range(bn):
                            srow[j] = srow[j] * cj if m_buf[j] else masked
                    elif use_mask:
                        mrow = mask[hm, r0 + i, c0 + j0:c0 + j1]  # (bn,)
                        for j in range(bn):
                            srow[j] = srow[j] * cj if mrow[j] else masked
                    else:
                        for j in range(bn):
                            srow[j] = srow[j] * cj
                    # first pixel column touching this tile
                    lo, hi = 0, Wp - 1
                    while lo < hi:
                        mid = (lo + hi + 1) // 2
                        if col_edges[mid] <= j0:
                            lo = mid
                        else:
                            hi = mid - 1
                    px = lo
                    while px < Wp and col_edges[px] < j1:
                        a = max(col_edges[px], j0) - j0
                        b = min(col_edges[px + 1], j1) - j0
                        if use_max:
                            key = order_key(like(q, MASKED_SCORE))
                            for j in range(a, b):
                                kj = order_key(srow[j])
                                key = kj if kj > key else key
                            mx = from_order_key(key)
                            if mx > like(q, M_INIT):
                                val = exp2(mx - lse2)
                                if val > acc[h, py, px]:
                                    acc[h, py, px] = val
                        else:
                            tot = like(q, 0.0)
                            for j in range(a, b):
                                tot += exp2(srow[j] - lse2)
                            acc[h, py, px] += tot
                        px += 1


def _expand(small: np.ndarray, out_shape: tuple[int, int]) -> np.ndarray:
    """Repeat rows/columns of (nh, H', W') to (nh, H, W) when the region had fewer cells than pixels."""
    H, W = out_shape
    Hp, Wp = small.shape[1:]
    ri = (np.arange(H) * Hp) // H  # (H,) source row of each pixel row
    ci = (np.arange(W) * Wp) // W  # (W,) source column of each pixel column
    return small[:, ri][:, :, ci]  # (nh, H, W)


def _check_range(name: str, value, n: int) -> tuple[int, int]:
    if value is None:
        return 0, n
    try:
        a, b = (int(x) for x in value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a pair (start, stop), got {value!r}") from None
    if not 0 <= a < b <= n:
        raise ValueError(f"{name} must satisfy 0 <= start < stop <= {n}, got {value!r}")
    return a, b


def attention_overview(q, k, lse, mask=None, *, scale=None, out_shape, rows=None, cols=None, reduce="max",
                       block_n=None, softcap=None) -> np.ndarray:
    """A (H, W) overview of the weights of rows [r0, r1) x cols [c0, c1), never holding a Tq x Tk matrix.

    q (Tq, hs) / k (Tk, hs) / lse (Tq,) for one head, or (nh, ...) for every head (then (nh, H, W));
    ``lse`` and ``mask`` as for :func:`attention` (a TiledMask's empty tiles are not computed).
    ``rows``/``cols`` default to everything; a region smaller than the picture spans several pixels
    per row / column. Masked cells count as 0. ``softcap``: the cap c the scores had when lse was
    computed (None: none), as for :func:`attention`. Float32 for float32 inputs, else float64.
    """
    if reduce not in REDUCTIONS:
        raise ValueError(f"reduce must be one of {', '.join(REDUCTIONS)}, got {reduce!r}")
    q3, k3, lse3, s, squeeze = prepare_qk_lse(q, k, lse, scale)  # s >= 0 keeps scores monotonic for the max
    cap = prepare_softcap(softcap)
    nh, Tq, _ = q3.shape
    Tk = k3.shape[1]
    try:
        H, W = (int(x) for x in out_shape)
    except (TypeError, ValueError):
        raise ValueError(f"out_shape must be a pair (H, W) of positive integers, got {out_shape!r}") from None
    if H < 1 or W < 1:
        raise ValueError(f"out_shape must be a pair (H, W) of positive integers, got {out_shape!r}")
    r0, r1 = _check_range("rows", rows, Tq)
    c0, c1 = _check_range("cols", cols, Tk)
    tm = mask if isinstance(mask, TiledMask) else None
    if tm is not None and ((tm.Tq, tm.Tk) != (Tq, Tk) or tm.n_heads not in (1, nh)):
        raise ValueError(f"the TiledMask is for {tm.n_heads} head(s) x {tm.Tq} x {tm.Tk}, the inputs are "
                         f"{nh} x {Tq} x {Tk}")
    dense, _ = prepare_mask(None if tm is not None else mask, nh, Tq, Tk)
    bn = prepare_block("block_n", block_n) or DEFAULT_BLOCK_N
    R, C = r1 - r0, c1 - c0
    Hp, Wp = min(H, R), min(W, C)
    row_edges = _edges(R, Hp)  # (H'+1,)
    col_edges = _edges(C, Wp)  # (W'+1,)
    groups = _row_groups(row_edges, ROW_BLOCK)  # (G+1,)
    acc = np.empty((nh, Hp, Wp), dtype=q3.dtype)  # (nh, H', W')
    m = np.ones((1, 1, 1), dtype=np.bool_) if dense is None else dense
    if tm is not None:
        tstate, tindex, tblocks = tm.kernel_arrays()
        tbm, tbn = tm.block_m, tm.block_n
    else:
        tstate, tindex, tblocks, tbm, tbn = _NO_STATE, _NO_INDEX, _NO_BLOCKS, 1, 1
    with parallel_section():
        _overview_kernel(q3, k3, lse3, m, dense is not None, tstate, tindex, tblocks, tm is not None, tbm, tbn,
                         r0, c0, row_edges, col_edges, groups, s, cap, reduce == "max", bn, acc)
    if reduce == "mean":
        cells = np.diff(row_edges)[:, None] * np.diff(col_edges)[None, :]  # (H', W')
        acc /= cells
    img = _expand(acc, (H, W)) if (Hp, Wp) != (H, W) else acc  # (nh, H, W)
    return img[0] if squeeze else img
