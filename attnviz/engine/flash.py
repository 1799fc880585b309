"""The tiled flash kernel: online softmax over BLOCK_M x BLOCK_N tiles, BLAS tile products, tile skipping.

Work is parallel over (head, query tile). For each query tile the kernel walks the key tiles, keeps a
running maximum ``m_i``, a running denominator ``l_i`` and an unnormalised output ``acc_o`` per row, and
never holds more than one BLOCK_M x BLOCK_N score tile per worker. Scores are kept in base 2
(``s * scale * log2 e``) so the exponential is the vectorised ``exp2`` of :mod:`fastexp`. Empty tiles are
skipped, full tiles run without a mask test, partial tiles read the dense mask. Tile products of float32
inputs on AVX-512 and AVX2 CPUs go through the register-blocked micro-kernel of :mod:`microkernel` (keys in
panels of 64, hv a multiple of 64); the others through ``np.dot(a, b, out=c)`` on contiguous slices (scipy's
BLAS; keep it single-threaded while this runs, see :mod:`attnviz.engine.runtime`).
"""

from __future__ import annotations

import numpy as np
import numba
from numba import njit, prange

from attnviz.engine.blockmask import EMPTY, FULL, PARTIAL
from attnviz.engine.fastexp import (FASTMATH, LN2, LOG2E, M_INIT, MASKED_SCORE, exp2, from_order_key, like,
                                    order_key, word_at)
from attnviz.engine.microkernel import (COLS, LANES, aligned, enabled as microkernel_enabled, key_panels,
                                       pv_accumulate, pv_accumulate_rows, score_exp_product, score_exp_product_rows,
                                       score_product, score_product_rows)
from attnviz.engine.runtime import get_num_threads, parallel_section

# A full tile takes its exponentials in the micro-kernel's registers against the running maxima m_i of
# the tiles before it (no row-max pass, no rescaling of acc_o), as long as no exponent exceeds this: its
# weights stay below 2**8 and the sums far from overflow. A tile that goes higher is redone the
# two-pass way, which raises m_i.
LAZY_EXPONENT = 8.0


@njit(nogil=True, cache=True, fastmath=FASTMATH)
def rowmax(srow):
    """The largest value of srow (no NaN), as a max over integer order keys: that vectorises, a float max
    reduction (which must honour NaN) does not."""
    key = order_key(like(srow, M_INIT))
    for j in range(srow.shape[0]):
        kj = order_key(srow[j])
        key = kj if kj > key else key
    return from_order_key(key)


@njit(nogil=True, cache=True)
def _row_extents(mask_tile, lo, hi):
    """lo[r], hi[r]: the first allowed column of row r of mask_tile (bm, bn) and one past the last (0, 0
    when none). Each row is scanned from both ends until an allowed cell, 8 cells at a time where its
    cells are adjacent, so a causal diagonal tile reads about half its cells, as words."""
    bm, bn = mask_tile.shape
    words = mask_tile.strides[1] == 1
    for r in range(bm):
        mrow = mask_tile[r]
        a = 0
        while words and a + 8 <= bn and word_at(mrow, a) == 0:
            a += 8
        while a < bn and not mrow[a]:
            a += 1
        b = bn
        while words and b - 8 >= a and word_at(mrow, b - 8) == 0:
            b -= 8
        while b > a and not mrow[b - 1]:
            b -= 1
        lo[r] = a if b > a else 0
        hi[r] = b if b > a else 0


@njit(nogil=True, cache=True)
def _solid_spans(mask_tile, lo, hi):
    """True when every row of mask_tile allows every key of its span [lo[r], hi[r]) (causal, windows,
    prefixes and blocks do), counted 8 cells at a time where the row's cells are adjacent."""
    words = mask_tile.strides[1] == 1
    ones = np.uint64(0x0101010101010101)  # a word of 8 cells (bytes 0 or 1) times this: their count on top
    for r in range(mask_tile.shape[0]):
        mrow = mask_tile[r]
        n = 0
        j = lo[r]
        while words and j + 8 <= hi[r]:
            n += np.int64((word_at(mrow, j) * ones) >> np.uint64(56))
            j += 8
        while j < hi[r]:
            n += 1 if mrow[j] else 0
            j += 1
        if n != hi[r] - lo[r]:
            return False
    return True


@njit(nogil=True, cache=True, fastmath=FASTMATH)
def _tile_scores(q, k, kp, fast, h, i0, bm, j0, bn, partial, S, s_buf, rowmax_out, lo, hi):
    """S = Q_i K_j^T for the tile (bm rows from i0, bn keys from j0). Returns True when rowmax_out[:bm]
    now holds each row's largest score (the micro-kernel takes it from its registers on full tiles).
    A partial tile's products cover only the keys [lo[r], hi[r]) its rows allow."""
    if fast and j0 % COLS == 0 and bn % COLS == 0:
        if partial:
            score_product_rows(q, h, i0, bm, kp, j0, bn, s_buf, lo, hi)
            return False
        score_product(q, h, i0, bm, kp, j0, bn, s_buf, rowmax_out)
        return True
    np.dot(q[h, i0:i0 + bm], k[h, j0:j0 + bn].T, out=S)
    return False


@njit(nogil=True, cache=True, fastmath=FASTMATH)
def _add_lane_sums(lane_sums, bm, l_i):
    """l_i[r] += row r's sum of a tile whose exponentials the micro-kernel took: its lanes at
    lane_sums[(1 + r) * LANES:] (:func:`microkernel.score_exp_product`)."""
    for r in range(bm):
        l_i[r] += lane_sums[(1 + r) * LANES:(2 + r) * LANES].sum()


@njit(nogil=True, cache=True, fastmath=FASTMATH)
def _online_softmax(S, mask_tile, partial, c, m_i, l_i, acc_o, tile_max, have_max):
    """The online-softmax step of one tile, in place: S becomes P = exp2(S * c - m_new) (0 where the mask
    denies), l_i and the rows of acc_o are rescaled by exp2(m_old - m_new) and l_i gains P's row sums.

    c is scale * log2(e) >= 0. mask_tile is read only when ``partial``; with ``have_max`` tile_max[r] is
    row r's largest unscaled score."""
    bm, bn = S.shape
    masked = like(S, MASKED_SCORE)
    for r in range(bm):
        s = S[r]  # (bn,)
        mult = c
        if partial:  # denied cells: a score exp2 turns into exactly 0
            allowed = mask_tile[r]
            for j in range(bn):
                s[j] = s[j] * c if allowed[j] else masked
            mult = like(S, 1.0)
        mx = (tile_max[r] if have_max else rowmax(s)) * mult
        m_old = m_i[r]
        m_new = max(m_old, mx)
        rowsum = like(S, 0.0)
        for j in range(bn):
            p = exp2(s[j] * mult - m_new)
            s[j] = p
            rowsum += p
        alpha = exp2(m_old - m_new)
        l_i[r] = l_i[r] * alpha + rowsum
        m_i[r] = m_new
        acc = acc_o[r]  # (hv,)
        for d in range(acc.shape[0]):
            acc[d] *= alpha


@njit(nogil=True, cache=True, fastmath=FASTMATH)
def _add_pv(S, s_buf, o_buf, v, fast, h, j0, partial, acc_o, lo, hi):
    """acc_o += P V_j for the tile's weights P = S (bm, bn) and values v[h, j0:j0+bn]."""
    bm, bn = S.shape
    hv = v.shape[2]
    if fast and hv % COLS == 0:
        if partial:
            pv_accumulate_rows(s_buf, bm, bn, v, h, j0, acc_o, lo, hi)
        else:
            pv_accumulate(s_buf, bm, bn, v, h, j0, acc_o)
        return
    O = o_buf[: bm * hv].reshape((bm, hv))  # (bm, hv) this tile's contribution
    np.dot(S, v[h, j0:j0 + bn], out=O)
    for r in range(bm):
        for d in range(hv):
            acc_o[r, d] += O[r, d]


@njit(nogil=True, cache=True, fastmath=FASTMATH)
def _write_rows(acc_o, l_i, m_i, h, i0, out, lse):
    """O_i = acc_o / l_i and lse = m_i + log2(l_i) (in nats); rows with no allowed key get 0 and -inf."""
    bm, hv = acc_o.shape
    for r in range(bm):
        if l_i[r] > 0:
            inv = like(acc_o, 1.0) / l_i[r]
            for d in range(hv):
                out[h, i0 + r, d] = acc_o[r, d] * inv
            lse[h, i0 + r] = (m_i[r] + np.log2(l_i[r])) * like(acc_o, LN2)
        else:
            for d in range(hv):
                out[h, i0 + r, d] = 0
            lse[h, i0 + r] = -np.inf


@njit(nogil=True, cache=True, fastmath=FASTMATH)
def _flash_query_tile(q, k, v, kp, fast, mask, tile_state, blocks, block_index, tiled, h, qi, c, BLOCK_M, BLOCK_N,
                      s_buf, o_buf, lane_sums, out, lse):
    """One (head, query tile) work item, Algorithm 1 of FlashAttention with scores in base 2.

    s_buf (BLOCK_M*BLOCK_N,), o_buf (BLOCK_M*hv,) and lane_sums ((BLOCK_M+1)*LANES,) are scratch. Empty
    tiles are skipped, full tiles never read the mask; a partial tile's cells come from ``mask`` or, when
    ``tiled``, from ``blocks[block_index[...]]``. ``fast``: the float32 micro-kernel products
    (:mod:`microkernel`); a full tile after the first takes its exponentials there (LAZY_EXPONENT)."""
    Tq = q.shape[1]
    Tk = k.shape[1]
    hv = v.shape[2]
    hm = h if mask.shape[0] > 1 else 0
    ht = h if tile_state.shape[0] > 1 else 0
    i0 = qi * BLOCK_M
    bm = min(i0 + BLOCK_M, Tq) - i0
    m_i = np.full(bm, like(q, M_INIT))  # (bm,) running max, base 2
    l_i = np.zeros(bm, dtype=q.dtype)  # (bm,) running denominator
    acc_o = np.zeros((bm, hv), dtype=q.dtype)  # (bm, hv) unnormalised output
    tile_max = np.empty(bm, dtype=q.dtype)  # (bm,) row maxima of a full tile from the micro-kernel
    lo = np.zeros(bm, dtype=np.int64)  # (bm,) a partial tile's first allowed column per row
    hi = np.zeros(bm, dtype=np.int64)  # (bm,) one past its last
    lazy = False  # every row has a running maximum from a tile before (m_i > M_INIT)
    for kj in range(tile_state.shape[2]):
        state = tile_state[ht, qi, kj]
        if state == EMPTY:
            continue
        partial = state == PARTIAL
        j0 = kj * BLOCK_N
        bn = min(j0 + BLOCK_N, Tk) - j0
        lazy_tile = lazy and fast and j0 % COLS == 0 and bn % COLS == 0 and hv % COLS == 0
        if lazy_tile and not partial:
            if score_exp_product(q, h, i0, bm, kp, j0, bn, s_buf, m_i, c, lane_sums) <= LAZY_EXPONENT:
                _add_lane_sums(lane_sums, bm, l_i)
                pv_accumulate(s_buf, bm, bn, v, h, j0, acc_o)
                continue
        S = s_buf[: bm * bn].reshape((bm, bn))  # (bm, bn) score tile
        if partial and tiled:
            mask_tile = blocks[block_index[ht, qi, kj], 0:bm, 0:bn]
        elif partial:
            mask_tile = mask[hm, i0:i0 + bm, j0:j0 + bn]
        else:
            mask_tile = mask[0, 0:1, 0:1]  # not read
        if partial and fast:
            _row_extents(mask_tile, lo, hi)
            # rows that allow exactly one run of keys (a causal diagonal): the exponentials in the
            # registers too, with each row's span, and no pass over the tile for its mask
            if lazy_tile and _solid_spans(mask_tile, lo, hi) and score_exp_product_rows(
                    q, h, i0, bm, kp, j0, bn, s_buf, m_i, c, lane_sums, lo, hi) <= LAZY_EXPONENT:
                _add_lane_sums(lane_sums, bm, l_i)
                pv_accumulate_rows(s_buf, bm, bn, v, h, j0, acc_o, lo, hi)
                continue
        have_max = _tile_scores(q, k, kp, fast, h, i0, bm, j0, bn, partial, S, s_buf, tile_max, lo, hi)
        _online_softmax(S, mask_tile, partial, c, m_i, l_i, acc_o, tile_max, have_max)
        _add_pv(S, s_buf, o_buf, v, fast, h, j0, partial, acc_o, lo, hi)
        lazy = lazy or m_i.min() > M_INIT
    _write_rows(acc_o, l_i, m_i, h, i0, out, lse)


@njit(parallel=True, nogil=True, cache=True, fastmath=FASTMATH)
def flash_kernel(q, k, v, kp, fast, mask, tile_state, blocks, block_index, tiled, order, scale, BLOCK_M, BLOCK_N,
                 out, lse):
    """Flash attention over all work items.

    q (nh, Tq, hs), k (nh, Tk, hs), v (nh, Tk, hv) C-contiguous, one dtype; kp: k's
    :func:`microkernel.key_panels` (any (1, 1, 1, 64) array of that dtype unless ``fast``); ``fast``: the
    micro-kernel products (float32 only); mask (nh or 1, Tq, Tk) bool
    (any small dummy when no tile is PARTIAL, or when ``tiled``); tile_state (nh or 1, nQ, nK) int8;
    with ``tiled`` the partial tiles' cells are blocks (P, BLOCK_M, BLOCK_N) bool at block_index
    (nh or 1, nQ, nK) int32 (a TiledMask); order (nh * nQ,) int64 work items h * nQ + qi, most expensive
    first; out (nh, Tq, hv) and lse (nh, Tq) are written.
    """
    hv = v.shape[2]
    nQ = tile_state.shape[1]
    c = like(q, scale * LOG2E)
    bm_max = min(BLOCK_M, q.shape[1])  # no tile is larger than the problem
    bn_max = min(BLOCK_N, k.shape[1])
    for t in prange(order.shape[0]):
        w = order[t]
        h = w // nQ
        qi = w - h * nQ
        s_buf = np.empty(bm_max * bn_max, dtype=q.dtype)  # scratch score tile
        o_buf = np.empty(bm_max * hv, dtype=q.dtype)  # scratch output tile
        lane_sums = np.empty((BLOCK_M + 1) * max(LANES, 1), dtype=q.dtype)  # scratch row sums of the lazy tiles
        _flash_query_tile(q, k, v, kp, fast, mask, tile_state, blocks, block_index, tiled, h, qi, c, BLOCK_M,
                          BLOCK_N, s_buf, o_buf, lane_sums, out, lse)


def work_order(tile_state: np.ndarray, nh: int, n_threads: int | None = None) -> np.ndarray:
    """Work items h * nQ + qi in the order prange hands them out: (nh * nQ,) int64.

    numba's parallel loop gives each thread one contiguous share of the iteration range (also when a
    chunk size is set: measured with numba's thread ids). Items sorted by cost (non-empty tiles,
    partial ones weighing 1.5) are therefore dealt round-robin into those shares, so every thread gets
    about the same work: sorted heaviest-first without dealing, a causal mask gave the first thread
    three quarters of it and ran at 0.9x the dense time instead of ~0.5x.
    Within its share a thread takes one head after the other (heaviest item first within a head), so
    it works on one head's keys and values at a time: taking the dealt order as it is, a causal mask
    jumped to another head at every item, and its full tiles cost 5 % more each than a dense mask's
    (8 heads, T = 8192).
    """
    _, nQ, _ = tile_state.shape
    cost = (np.count_nonzero(tile_state == PARTIAL, axis=2) * 1.5
            + np.count_nonzero(tile_state == FULL, axis=2))  # (nh or 1, nQ)
    cost = np.broadcast_to(cost, (nh, nQ)).reshape(-1)  # (nh * nQ,)
    ranked = np.argsort(-cost, kind="stable").astype(np.int64)  # heaviest first
    n = max(1, int(n_threads if n_threads is not None else numba.get_num_threads()))
    shares = []
    for i in range(n):  # thread i's share: items i, i+n, ... of the ranking, then by head
        share = ranked[i::n]
        shares.append(share[np.lexsort((-cost[share], share // nQ))])
    return np.concatenate(shares)


def full_tile_state(Tq: int, Tk: int, block_m: int, block_n: int) -> np.ndarray:
    """Tile states when every key is allowed: (1, nQ, nK) int8 of FULL."""
    return np.full((1, -(-Tq // block_m), -(-Tk // block_n)), FULL, dtype=np.int8)


_NO_MASK = np.ones((1, 1, 1), dtype=np.bool_)  # passed when no tile is partial
_NO_BLOCKS = np.zeros((1, 1, 1), dtype=np.bool_)  # passed when the mask is not tiled
_NO_INDEX = np.zeros((1, 1, 1), dtype=np.int32)


def flash_attention(q, k, v, dense, tile_state, scale, block_m, block_n, tiled=None, fast=None):
    """Run the flash kernel on validated inputs; returns out (nh, Tq, hv) and lse (nh, Tq).

    q, k, v 3-D C-contiguous of one dtype, scale >= 0; dense (nh or 1, Tq, Tk) bool or None;
    tile_state (nh or 1, nQ, nK) int8 classified for (block_m, block_n); ``tiled``: a
    :class:`attnviz.engine.tiled_mask.TiledMask` of that tile size instead of ``dense`` (its own
    tile states are used). ``fast``: the micro-kernel tile products (None: for float32 when
    :func:`microkernel.enabled`; only float32 can take them).
    """
    nh, Tq, _ = q.shape
    hv = v.shape[2]
    out = np.empty((nh, Tq, hv), dtype=q.dtype)  # (nh, Tq, hv)
    lse = np.empty((nh, Tq), dtype=q.dtype)  # (nh, Tq)
    if Tq == 0:
        return out, lse
    blocks, index = _NO_BLOCKS, _NO_INDEX
    if tiled is not None:
        tile_state, index, blocks = tiled.kernel_arrays()
        dense = None
    mask = _NO_MASK if dense is None or not (tile_state == PARTIAL).any() else dense
    order = work_order(tile_state, nh, get_num_threads())  # (nh * nQ,) for the threads parallel_section sets
    if fast is None:
        fast = microkernel_enabled()
    fast = bool(fast) and q.dtype == np.float32
    with parallel_section():
        kp = key_panels(k) if fast else np.zeros((1, 1, 1, COLS), dtype=q.dtype)  # (nh, Tk // 64, hs, 64)
        if fast and LANES == 16:
            # every 64-byte zmm load of a row of v crossed a cache line in numpy's arrays (16 bytes past
            # one): 4 % of the call on AVX-512; with AVX2's 32-byte loads the copy did not pay
            v = aligned(v)
        flash_kernel(q, k, v, kp, fast, mask, tile_state, blocks, index, tiled is not None, order, scale, block_m,
                     block_n, out, lse)
    return out, lse
