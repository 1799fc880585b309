"""Register-blocked float32 tile products for the flash kernel, C[rows, 64] (+)= A[rows, K] B[K, 64].

B's rows are contiguous in both products (K laid out once per call in 64-key panels, :func:`key_panels`;
v as it is), so nothing is packed per call, which OpenBLAS does on every tile. Each call keeps 6 rows of
C in registers over the whole K loop: 6 x 64 in 24 zmm (AVX-512) or 6 x 16 in 12 ymm (AVX2). numba's
own loops keep such accumulators in memory, so the intrinsic writes the LLVM vector code itself.
"""

from __future__ import annotations

import os

import numpy as np
from llvmlite import ir
from numba import literally, njit, prange, types
from numba.core import cgutils
from numba.extending import intrinsic

from attnviz.engine.fastexp import EXP2_POLY_F32
from attnviz.engine.jitcache import host_cpu_features

COLS = 64  # keys per panel, and columns of C per rows_product call


def _vmax(builder, a, b):
    """Lane-wise max of two float vectors (no NaN in scores)."""
    return builder.select(builder.fcmp_ordered(">", a, b), a, b)


def _hmax(builder, x, n):
    """The largest of the n lanes of the float vector x, by halving."""
    i32 = ir.IntType(32)
    while n > 1:
        n //= 2
        hi = builder.shuffle_vector(x, x, ir.Constant(ir.VectorType(i32, n), list(range(n, 2 * n))))
        lo = builder.shuffle_vector(x, x, ir.Constant(ir.VectorType(i32, n), list(range(n))))
        x = _vmax(builder, lo, hi)
    return builder.extract_element(x, ir.Constant(i32, 0))


def block_columns(lanes: int) -> int:
    """Columns of C one micro-kernel call keeps in registers: 4 zmm (64) or 2 ymm (16) per row."""
    return 64 if lanes == 16 else 16


STORE, MAX, EXP, EXP_SPAN = 0, 1, 2, 3  # what a block does with C after its K loop (``mode`` of rows_product)


def _exp2_vec(builder, module, x, lanes):
    """2**x lane-wise, x >= -127 (-127 gives 0): the float32 algorithm of :func:`fastexp.exp2` (round to
    nearest, the same degree-6 polynomial on [-0.5, 0.5], the exponent built from integer bits)."""
    f32 = ir.FloatType()
    vec = ir.VectorType(f32, lanes)
    ivec = ir.VectorType(ir.IntType(32), lanes)
    fma = cgutils.get_or_insert_function(module, ir.FunctionType(vec, [vec, vec, vec]), f"llvm.fma.v{lanes}f32")
    rint = cgutils.get_or_insert_function(module, ir.FunctionType(vec, [vec]), f"llvm.rint.v{lanes}f32")
    n = builder.call(rint, [x])
    f = builder.fsub(x, n)
    coeffs = [ir.Constant(vec, [ir.Constant(f32, float(np.float32(c)))] * lanes) for c in EXP2_POLY_F32]
    p = coeffs[-1]
    for c in reversed(coeffs[:-1]):
        p = builder.call(fma, [p, f, c])
    e = builder.add(builder.fptosi(n, ivec), ir.Constant(ivec, [ir.Constant(ir.IntType(32), 127)] * lanes))
    scale = builder.bitcast(builder.shl(e, ir.Constant(ivec, [ir.Constant(ir.IntType(32), 23)] * lanes)), vec)
    return builder.fmul(p, scale)


def _codegen(rows: int, lanes: int, mode: int):
    """LLVM code for C[rows, W] (+)= A[rows, K] B[K, W], W = block_columns(lanes), then by ``mode``:
    STORE; MAX also raises M[m_off + r] to the largest value written to row r of C; EXP stores
    P = exp2(C * c - M[m_off + r]) instead, adds row r's lane sums of P to R[(1 + m_off + r) * lanes:]
    and raises R[:lanes] to the largest exponent C * c - M seen (before the clamp at -127); EXP_SPAN
    does the same for the columns col + j inside [LO[m_off + r], HI[m_off + r]) of each row and stores
    0 for the others (which count in neither the sums nor the largest exponent)."""
    nv = block_columns(lanes) // lanes

    def codegen(context, builder, sig, args):
        args, types_ = args[3:], sig.args[3:]  # rows, lanes, mode: literals, already in the code
        if not all(types_[i].dtype == types.float32 for i in (0, 3, 6, 11, 14)):  # float64: never called
            return context.get_dummy_value()
        aA, aB, aC, acc = args[0], args[3], args[6], args[10]
        f32 = ir.FloatType()
        vec = ir.VectorType(f32, lanes)
        vptr = vec.as_pointer()
        i64 = ir.IntType(64)
        i32 = ir.IntType(32)
        pa = context.make_array(types_[0])(context, builder, aA).data
        pb = context.make_array(types_[3])(context, builder, aB).data
        pc = context.make_array(types_[6])(context, builder, aC).data
        ao, la, bo, lb, co, lc, kd = (context.cast(builder, args[i], types_[i], types.int64)
                                      for i in (1, 2, 4, 5, 7, 8, 9))
        acc = context.cast(builder, acc, types_[10], types.boolean)
        fma = cgutils.get_or_insert_function(builder.module, ir.FunctionType(vec, [vec, vec, vec]),
                                             f"llvm.fma.v{lanes}f32")
        zero = ir.Constant(vec, None)
        splat = ir.Constant(ir.VectorType(i32, lanes), None)

        def broadcast(x, vtype=vec):
            """x in every lane of a vector of type vtype (float lanes unless told)."""
            return builder.shuffle_vector(builder.insert_element(ir.Constant(vtype, ir.Undefined), x,
                                                                 ir.Constant(i32, 0)),
                                          ir.Constant(vtype, ir.Undefined), splat)

        def c_ptr(r, v):
            off = builder.add(co, builder.add(builder.mul(lc, ir.Constant(i64, r)), ir.Constant(i64, lanes * v)))
            return builder.bitcast(builder.gep(pc, [off]), vptr)

        init = [builder.select(acc, builder.load(c_ptr(r, v), align=4), zero)
                for r in range(rows) for v in range(nv)]
        # one pointer per row of A, made before the loop, so each step addresses a_row[d] with the one
        # counter d. Left to itself LLVM rebuilds rows 1.. from row 0 and a stride known only at run time
        # inside the loop, six more integer instructions per step that took issue slots from the FMAs
        # (6 % of P @ V on AVX2); passing each pointer through an empty asm statement hides how they relate.
        opaque = ir.FunctionType(pa.type, [pa.type])
        row_starts = [builder.gep(pa, [builder.add(ao, builder.mul(la, ir.Constant(i64, r)))]) for r in range(rows)]
        a_rows = [builder.asm(opaque, "", "=r,0", [p], side_effect=False) for p in row_starts]
        pre = builder.block
        loop = builder.append_basic_block("mk.loop")
        done = builder.append_basic_block("mk.done")
        builder.cbranch(builder.icmp_signed(">", kd, ir.Constant(i64, 0)), loop, done)
        builder.position_at_end(loop)
        d = builder.phi(i64)
        d.add_incoming(ir.Constant(i64, 0), pre)
        accs = []
        for x in init:
            p = builder.phi(vec)
            p.add_incoming(x, pre)
            accs.append(p)
        brow = builder.add(bo, builder.mul(d, lb))
        bv = [builder.load(builder.bitcast(builder.gep(pb, [builder.add(brow, ir.Constant(i64, lanes * v))]), vptr),
                           align=4) for v in range(nv)]
        new = []
        for r in range(rows):
            b = broadcast(builder.load(builder.gep(a_rows[r], [d])))
            for v in range(nv):
                new.append(builder.call(fma, [b, bv[v], accs[r * nv + v]]))
        d1 = builder.add(d, ir.Constant(i64, 1))
        end = builder.block
        d.add_incoming(d1, end)
        for p, x in zip(accs, new):
            p.add_incoming(x, end)
        builder.cbranch(builder.icmp_signed("<", d1, kd), loop, done)
        builder.position_at_end(done)
        outs = []
        for i in range(rows * nv):
            out = builder.phi(vec)
            out.add_incoming(init[i], pre)
            out.add_incoming(new[i], end)
            outs.append(out)
        pm = context.make_array(types_[11])(context, builder, args[11]).data
        mo = context.cast(builder, args[12], types_[12], types.int64)
        if mode in (EXP, EXP_SPAN):
            pr = context.make_array(types_[14])(context, builder, args[14]).data
            cs = broadcast(context.cast(builder, args[13], types_[13], types.float32))
            floor = ir.Constant(vec, [ir.Constant(f32, -127.0)] * lanes)
            top = None
            if mode == EXP_SPAN:  # tile columns fit in 32 bits: one vector register per 16 (or 8) of them
                ivec = ir.VectorType(i32, lanes)
                plo = context.make_array(types_[15])(context, builder, args[15]).data
                phi = context.make_array(types_[16])(context, builder, args[16]).data
                col = builder.trunc(context.cast(builder, args[17], types_[17], types.int64), i32)
                cols = [builder.add(broadcast(col, ivec), ir.Constant(ivec, [ir.Constant(i32, lanes * v + x)
                                                                             for x in range(lanes)]))
                        for v in range(nv)]
            for r in range(rows):
                row = builder.add(mo, ir.Constant(i64, r))
                m = broadcast(builder.fneg(builder.load(builder.gep(pm, [row]))))
                if mode == EXP_SPAN:
                    lo_r = broadcast(builder.trunc(builder.load(builder.gep(plo, [row])), i32), ivec)
                    hi_r = broadcast(builder.trunc(builder.load(builder.gep(phi, [row])), i32), ivec)
                rsum = None
                for v in range(nv):
                    x = builder.call(fma, [outs[r * nv + v], cs, m])  # C * c - M[row]
                    if mode == EXP_SPAN:  # columns outside the row's span: the exponent -127, weight 0
                        inside = builder.and_(builder.icmp_signed(">=", cols[v], lo_r),
                                              builder.icmp_signed("<", cols[v], hi_r))
                        x = builder.select(inside, x, floor)
                    top = x if top is None else _vmax(builder, top, x)
                    x = builder.select(builder.fcmp_ordered(">", x, floor), x, floor)
                    p = _exp2_vec(builder, builder.module, x, lanes)
                    builder.store(p, c_ptr(r, v), align=4)
                    rsum = p if rsum is None else builder.fadd(rsum, p)
                sp = builder.bitcast(builder.gep(pr, [builder.mul(builder.add(mo, ir.Constant(i64, 1 + r)),
                                                                  ir.Constant(i64, lanes))]), vptr)
                builder.store(builder.fadd(builder.load(sp, align=4), rsum), sp, align=4)
            xp = builder.bitcast(pr, vptr)
            builder.store(_vmax(builder, builder.load(xp, align=4), top), xp, align=4)
            return context.get_dummy_value()
        for i, out in enumerate(outs):
            builder.store(out, c_ptr(*divmod(i, nv)), align=4)
        if mode == MAX:
            for r in range(rows):
                x = outs[r * nv]
                for v in range(1, nv):
                    x = _vmax(builder, x, outs[r * nv + v])
                m = _hmax(builder, x, lanes)
                mp = builder.gep(pm, [builder.add(mo, ir.Constant(i64, r))])
                old = builder.load(mp)
                builder.store(builder.select(builder.fcmp_ordered(">", m, old), m, old), mp)
        return context.get_dummy_value()

    return codegen


def _float_arrays(*arrs):
    return all(isinstance(a, types.Array) and a.dtype in (types.float32, types.float64) for a in arrs)


@intrinsic
def _block(typingctx, rows, lanes, mode, A, a_off, lda, B, b_off, ldb, C, c_off, ldc, kdim, accumulate, M, m_off, c,
           R, LO, HI, col):
    """C[rows, W] (+)= A[rows, K] B[K, W] at flat offsets (W = block_columns(lanes)), then what ``mode``
    says (:func:`_codegen`; M, m_off, c and R serve MAX and EXP, LO, HI and col EXP_SPAN). rows, lanes,
    mode: literals."""
    if not all(isinstance(x, types.IntegerLiteral) for x in (rows, lanes, mode)) or not _float_arrays(A, B, C, M, R):
        return None
    if not all(isinstance(x, types.Array) and x.dtype == types.int64 for x in (LO, HI)):
        return None
    sig = types.none(rows, lanes, mode, A, a_off, lda, B, b_off, ldb, C, c_off, ldc, kdim, accumulate, M, m_off, c, R,
                     LO, HI, col)
    return sig, _codegen(rows.literal_value, lanes.literal_value, mode.literal_value)


_NO_SPAN = np.zeros(1, dtype=np.int64)  # LO and HI of the modes that have no column span


@njit(nogil=True, cache=True)
def rows_product(A, a_off, lda, B, b_off, ldb, C, c_off, ldc, nrows, kdim, accumulate, mode, lanes, M, c, R):
    """C[c_off + r*ldc + j] (+)= sum_d A[a_off + r*lda + d] B[b_off + d*ldb + j] for r < nrows, j < 64:
    flat element offsets into C-contiguous float32 arrays, rows in blocks of 6 and the rest in 4, 2, 1,
    columns in blocks of block_columns(lanes). ``mode`` (STORE, MAX or EXP, see :func:`_codegen`; M, c
    and R serve the last two, with row r at M[r]) and ``lanes`` (16: zmm, 8: ymm) are compile-time
    constants."""
    rows_product_span(A, a_off, lda, B, b_off, ldb, C, c_off, ldc, nrows, kdim, accumulate, mode, lanes, M, 0, c, R,
                      _NO_SPAN, _NO_SPAN, 0)


@njit(nogil=True, cache=True)
def rows_product_span(A, a_off, lda, B, b_off, ldb, C, c_off, ldc, nrows, kdim, accumulate, mode, lanes, M, m0, c, R,
                      LO, HI, col):
    """:func:`rows_product` whose row r is row m0 + r of M, R, LO and HI; with EXP_SPAN the 64 columns are
    the tile's columns col.. and row r keeps only those in [LO[m0 + r], HI[m0 + r])."""
    mode = literally(mode)
    lanes = literally(lanes)
    W = 64 if lanes == 16 else 16
    for j in range(0, COLS, W):
        r = 0
        while r + 6 <= nrows:
            _block(6, lanes, mode, A, a_off + r * lda, lda, B, b_off + j, ldb, C, c_off + r * ldc + j, ldc, kdim,
                   accumulate, M, m0 + r, c, R, LO, HI, col + j)
            r += 6
        if r + 4 <= nrows:
            _block(4, lanes, mode, A, a_off + r * lda, lda, B, b_off + j, ldb, C, c_off + r * ldc + j, ldc, kdim,
                   accumulate, M, m0 + r, c, R, LO, HI, col + j)
            r += 4
        if r + 2 <= nrows:
            _block(2, lanes, mode, A, a_off + r * lda, lda, B, b_off + j, ldb, C, c_off + r * ldc + j, ldc, kdim,
                   accumulate, M, m0 + r, c, R, LO, HI, col + j)
            r += 2
        if r < nrows:
            _block(1, lanes, mode, A, a_off + r * lda, lda, B, b_off + j, ldb, C, c_off + r * ldc + j, ldc, kdim,
                   accumulate, M, m0 + r, c, R, LO, HI, col + j)


@njit(nogil=True, cache=True)
def score_product(q, h, i0, bm, kp, j0, bn, S, rowmax):
    """S[:bm*bn] as (bm, bn) = q[h, i0:i0+bm] @ k[h, j0:j0+bn].T, k given as its :func:`key_panels` kp;
    j0 and bn multiples of 64. rowmax[:bm] becomes each row's largest score, taken from the registers
    before they are stored (the softmax then skips its pass for the row max)."""
    Tq, hs = q.shape[1], q.shape[2]
    nP = kp.shape[1]
    for r in range(bm):
        rowmax[r] = -np.inf
    for p in range(bn // COLS):
        a_off = (h * Tq + i0) * hs
        b_off = ((h * nP + j0 // COLS + p) * hs) * COLS
        rows_product(q, a_off, hs, kp, b_off, COLS, S, p * COLS, bn, bm, hs, False, MAX, LANES, rowmax, 0.0, rowmax)


@njit(nogil=True, cache=True)
def score_exp_product(q, h, i0, bm, kp, j0, bn, P, m, c, R):
    """P[:bm*bn] as (bm, bn) = exp2(c * q[h, i0:i0+bm] @ k[h, j0:j0+bn].T - m[:bm, None]) straight from the
    registers (k as in :func:`score_product`). R ((bm + 1) * LANES,) becomes the row sums of P in lanes,
    row r at R[(1 + r) * LANES:], and at R[:LANES] lane maxima of the exponent before the clamp at -127;
    returns the largest exponent (a value above 127 means P overflowed and must not be used)."""
    Tq, hs = q.shape[1], q.shape[2]
    nP = kp.shape[1]
    for x in range(LANES):
        R[x] = -np.inf
    for x in range(LANES, (bm + 1) * LANES):
        R[x] = 0.0
    for p in range(bn // COLS):
        a_off = (h * Tq + i0) * hs
        b_off = ((h * nP + j0 // COLS + p) * hs) * COLS
        rows_product(q, a_off, hs, kp, b_off, COLS, P, p * COLS, bn, bm, hs, False, EXP, LANES, m, c, R)
    top = R[0]
    for x in range(1, LANES):
        top = max(top, R[x])
    return top


@njit(nogil=True, cache=True)
def pv_accumulate(P, bm, bn, v, h, j0, acc_o):
    """acc_o (bm, hv) += P[:bm*bn] as (bm, bn) @ v[h, j0:j0+bn]; hv a multiple of 64."""
    Tk, hv = v.shape[1], v.shape[2]
    for j in range(hv // COLS):
        rows_product(P, 0, bn, v, (h * Tk + j0) * hv + j * COLS, hv, acc_o, j * COLS, hv, bm, bn, True, STORE, LANES,
                     P, 0.0, P)


@njit(nogil=True, cache=True)
def score_product_rows(q, h, i0, bm, kp, j0, bn, S, lo, hi):
    """:func:`score_product` of a tile that reads the mask, given each row's allowed keys within
    [lo[r], hi[r]) (tile columns; hi[r] = 0 for none): each 64-key panel only for the span of rows that
    allow a key in it. Cells left out are masked ones, which the softmax replaces without reading."""
    Tq, hs = q.shape[1], q.shape[2]
    nP = kp.shape[1]
    for p in range(bn // COLS):
        c0 = p * COLS
        first = bm
        last = -1
        for r in range(bm):
            if lo[r] < c0 + COLS and hi[r] > c0:
                first = min(first, r)
                last = r
        if last >= first:
            rows_product(q, (h * Tq + i0 + first) * hs, hs, kp, ((h * nP + j0 // COLS + p) * hs) * COLS, COLS,
                         S, first * bn + c0, bn, last + 1 - first, hs, False, STORE, LANES, S, 0.0, S)


@njit(nogil=True, cache=True)
def block_span(lo, hi, r, n, bn):
    """The columns [k0, k1) that rows r..r+n-1 allow between them ([min lo, max hi) over the rows that
    allow any; k1 <= k0 when none does): what :func:`pv_accumulate_rows` reads for that row block."""
    k0 = bn
    k1 = 0
    for x in range(r, r + n):
        if hi[x] > lo[x]:
            k0 = min(k0, lo[x])
            k1 = max(k1, hi[x])
    return k0, k1


@njit(nogil=True, cache=True)
def score_exp_product_rows(q, h, i0, bm, kp, j0, bn, P, m, c, R, lo, hi):
    """:func:`score_exp_product` of a tile that reads the mask, for rows whose allowed keys are exactly
    [lo[r], hi[r]) (no denied key inside): P holds the weights of those keys and 0 in every other cell
    :func:`pv_accumulate_rows` reads. Each 64-key panel is computed for the 6-row blocks of the rows
    that allow a key in it; a panel inside a block's columns that none of its rows allows is zeroed.
    R as in score_exp_product (rows no panel reaches sum to 0); returns the largest exponent over the
    allowed keys (-127 when there is none)."""
    Tq, hs = q.shape[1], q.shape[2]
    nP = kp.shape[1]
    for x in range(LANES):
        R[x] = -127.0
    for x in range(LANES, (bm + 1) * LANES):
        R[x] = 0.0
    n_pan = bn // COLS
    first = np.full(n_pan, bm, dtype=np.int64)  # (n_pan,) first row of each panel's 6-row blocks
    end = np.zeros(n_pan, dtype=np.int64)  # (n_pan,) one past their last row
    for p in range(n_pan):
        c0 = p * COLS
        for r in range(bm):
            if lo[r] < c0 + COLS and hi[r] > c0:
                first[p] = min(first[p], r - r % 6)
                end[p] = min(bm, r - r % 6 + 6)
        if end[p] > first[p]:
            a = first[p]
            rows_product_span(q, (h * Tq + i0 + a) * hs, hs, kp, ((h * nP + j0 // COLS + p) * hs) * COLS, COLS,
                              P, a * bn + c0, bn, end[p] - a, hs, False, EXP_SPAN, LANES, m, a, c, R, lo, hi, c0)
    r = 0
    while r < bm:  # zero the panels a block's column range crosses that none of its rows allows
        n = min(6, bm - r)
        k0, k1 = block_span(lo, hi, r, n, bn)
        for p in range(k0 // COLS, (k1 + COLS - 1) // COLS if k1 > k0 else 0):
            if not (first[p] <= r < end[p]):
                for x in range(r, r + n):
                    for j in range(max(k0, p * COLS), min(k1, (p + 1) * COLS)):
                        P[x * bn + j] = 0.0
        r += n
    top = R[0]
    for x in range(1, LANES):
        top = max(top, R[x])
    return top


@njit(nogil=True, cache=True)
def pv_accumulate_rows(P, bm, bn, v, h, j0, acc_o, lo, hi):
    """:func:`pv_accumulate` of a tile that reads the mask: each block of up to 6 rows over the keys its
    rows allow, [min lo, max hi) (P is 0 elsewhere)."""
    Tk, hv = v.shape[1], v.shape[2]
    r = 0
    while r < bm:
        n = min(6, bm - r)
        k0, k1 = block_span(lo, hi, r, n, bn)
        if k1 > k0:
            for j in range(hv // COLS):
                rows_product(P, r * bn + k0, bn, v, (h * Tk + j0 + k0) * hv + j * COLS, hv, acc_o,
                             r * hv + j * COLS, hv, n, k1 - k0, True, STORE, LANES, P, 0.0, P)
        r += n


@njit(parallel=True, nogil=True, cache=True)
def _fill_panels(k, kp):
    """kp[h, p, d, j] = k[h, 64 p + j, d], one panel (64 keys x hs, in L1) per work item."""
    nh, n, hs, _ = kp.shape
    for w in prange(nh * n):
        h = w // n
        p = w - h * n
        src = k[h, p * COLS:(p + 1) * COLS]  # (64, hs)
        dst = kp[h, p]  # (hs, 64)
        for d in range(hs):
            for j in range(COLS):
                dst[d, j] = src[j, d]


ALIGN = 64  # bytes: a cache line, so no 64-byte row of 16 float32 columns a block loads spans two


def aligned_empty(shape, dtype):
    """np.empty whose data starts on an ALIGN-byte boundary. numpy's large arrays start 16 bytes past
    one (malloc's header), so every second vector load of a row crossed a cache line."""
    dtype = np.dtype(dtype)
    n = int(np.prod(shape))
    buf = np.empty(n * dtype.itemsize + ALIGN, dtype=np.uint8)
    start = -buf.ctypes.data % ALIGN
    return buf[start:start + n * dtype.itemsize].view(dtype).reshape(shape)


def aligned(a):
    """a itself when C-contiguous and ALIGN-aligned, else an aligned C-contiguous copy."""
    if a.flags.c_contiguous and a.ctypes.data % ALIGN == 0:
        return a
    out = aligned_empty(a.shape, a.dtype)
    np.copyto(out, a)
    return out


def key_panels(k):
    """k (nh, Tk, hs) as panels of 64 keys, (nh, Tk // 64, hs, 64) C-contiguous and cache-line aligned
    (the whole panels only), filled in parallel (call it inside
    :func:`attnviz.engine.runtime.parallel_section`): numpy's strided copy took 3 ms of a 90 ms causal
    call at T = 4096, 8 heads."""
    nh, Tk, hs = k.shape
    kp = aligned_empty((nh, Tk // COLS, hs, COLS), k.dtype)
    _fill_panels(np.ascontiguousarray(k), kp)  # also when empty: the warm-up compiles it on tiny inputs
    return kp


def _target_features() -> set[str] | None:
    """The CPU features numba compiles for (NUMBA_CPU_FEATURES, else the host's), or None when a CPU is
    named without its features."""
    import numba

    if numba.config.CPU_FEATURES:
        return {f[1:] for f in numba.config.CPU_FEATURES.split(",") if f.startswith("+")}
    if numba.config.CPU_NAME and numba.config.CPU_NAME != "host":
        return None
    return {name for name, on in host_cpu_features().items() if on} or None


def target_lanes(features: set[str] | None) -> int:
    """float32 lanes of the micro-kernel's vectors for these CPU features: 16 with AVX-512 (32 zmm
    registers hold 6 x 64 of C), 8 with AVX2 and FMA (16 ymm registers hold 6 x 16), else 0 (BLAS)."""
    if not features:
        return 0
    if "avx512f" in features:
        return 16
    return 8 if {"avx2", "fma"} <= features else 0


LANES = target_lanes(_target_features())  # a compile-time constant of the kernels (numba caches per CPU target)


def enabled() -> bool:
    """True when the compile target has a micro-kernel (:data:`LANES`) and ATTNVIZ_FLASH_BLAS is not set
    (which keeps BLAS for every tile product)."""
    return LANES > 0 and not os.environ.get("ATTNVIZ_FLASH_BLAS")
