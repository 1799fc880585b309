"""Register-blocked float32 tile products for the flash kernel on 512-bit vectors, without BLAS.

Both tile products of a flash tile have the form C[rows, 64 columns] (+)= A[rows, K] B[K, 64 columns]
with B's rows contiguous, so nothing needs packing per call:

- the score product ``q_tile @ k_tile.T`` with K laid out once per call in panels of 64 keys,
  ``(nh, Tk // 64, hs, 64)`` (:func:`key_panels`): B is one panel, 16 KB at hs = 64, held in L1;
- ``P @ v_tile`` with B = the rows of v (hv = 64), accumulated straight into the running output.

The micro-kernel keeps 6 rows x 64 columns of C in 24 registers of 16 floats for the whole K loop:
per step four vector loads of B's row, six broadcasts of A's column and 24 fused multiply-adds. The
intrinsic writes that LLVM vector code itself; numba's own loops keep such accumulators in memory.
OpenBLAS, called per tile, packs a q panel and a k panel on every call and reached about 80 % of its
large-sgemm rate at K = hs = 64 (benchmarks/README.md).

Only for float32 on CPUs with AVX-512 (32 vector registers; :func:`enabled`). The intrinsic compiles to
nothing for float64 arrays: the flash kernel calls it only when the inputs are float32.
"""

from __future__ import annotations

import os

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

COLS = 64  # columns of C per micro-kernel call (four vectors of 16 float32)
_NV = COLS // 16


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


def _codegen(rows: int, with_max: bool):
    """LLVM code for C[rows, 64] (+)= A[rows, K] B[K, 64]; ``with_max`` also raises M[m_off + r] to the
    largest value written to row r of C."""

    def codegen(context, builder, sig, args):
        if not all(sig.args[i].dtype == types.float32 for i in (0, 3, 6)):  # float64: never called
            return context.get_dummy_value()
        aA, aB, aC, acc = args[0], args[3], args[6], args[10]
        f32 = ir.FloatType()
        v16 = ir.VectorType(f32, 16)
        vptr = v16.as_pointer()
        i64 = ir.IntType(64)
        i32 = ir.IntType(32)
        pa = context.make_array(sig.args[0])(context, builder, aA).data
        pb = context.make_array(sig.args[3])(context, builder, aB).data
        pc = context.make_array(sig.args[6])(context, builder, aC).data
        ao, la, bo, lb, co, lc, kd = (context.cast(builder, args[i], sig.args[i], types.int64)
                                      for i in (1, 2, 4, 5, 7, 8, 9))
        acc = context.cast(builder, acc, sig.args[10], types.boolean)
        fma = cgutils.get_or_insert_function(builder.module, ir.FunctionType(v16, [v16, v16, v16]),
                                             "llvm.fma.v16f32")
        zero = ir.Constant(v16, None)
        splat = ir.Constant(ir.VectorType(i32, 16), None)

        def c_ptr(r, v):
            off = builder.add(co, builder.add(builder.mul(lc, ir.Constant(i64, r)), ir.Constant(i64, 16 * v)))
            return builder.bitcast(builder.gep(pc, [off]), vptr)

        init = [builder.select(acc, builder.load(c_ptr(r, v), align=4), zero)
                for r in range(rows) for v in range(_NV)]
        pre = builder.block
        loop = builder.append_basic_block("mk.loop")
        done = builder.append_basic_block("mk.done")
        builder.cbranch(builder.icmp_signed(">", kd, ir.Constant(i64, 0)), loop, done)
        builder.position_at_end(loop)
        d = builder.phi(i64)
        d.add_incoming(ir.Constant(i64, 0), pre)
        accs = []
        for x in init:
            p = builder.phi(v16)
            p.add_incoming(x, pre)
            accs.append(p)
        brow = builder.add(bo, builder.mul(d, lb))
        bv = [builder.load(builder.bitcast(builder.gep(pb, [builder.add(brow, ir.Constant(i64, 16 * v))]), vptr),
                           align=4) for v in range(_NV)]
        new = []
        for r in range(rows):
            a = builder.load(builder.gep(pa, [builder.add(ao, builder.add(builder.mul(la, ir.Constant(i64, r)), d))]))
            b = builder.shuffle_vector(builder.insert_element(ir.Constant(v16, ir.Undefined), a, ir.Constant(i32, 0)),
                                       ir.Constant(v16, ir.Undefined), splat)
            for v in range(_NV):
                new.append(builder.call(fma, [b, bv[v], accs[r * _NV + v]]))
        d1 = builder.add(d, ir.Constant(i64, 1))
        end = builder.block
        d.add_incoming(d1, end)
        for p, x in zip(accs, new):
            p.add_incoming(x, end)
        builder.cbranch(builder.icmp_signed("<", d1, kd), loop, done)
        builder.position_at_end(done)
        outs = []
        for i in range(rows * _NV):
            out = builder.phi(v16)
            out.add_incoming(init[i], pre)
            out.add_incoming(new[i], end)
            outs.append(out)
        for i, out in enumerate(outs):
            builder.store(out, c_ptr(*divmod(i, _NV)), align=4)
        if with_max:
            pm = context.make_array(sig.args[11])(context, builder, args[11]).data
            mo = context.cast(builder, args[12], sig.args[12], types.int64)
            for r in range(rows):
                x = outs[r * _NV]
                for v in range(1, _NV):
                    x = _vmax(builder, x, outs[r * _NV + v])
                m = _hmax(builder, x, 16)
                mp = builder.gep(pm, [builder.add(mo, ir.Constant(i64, r))])
                old = builder.load(mp)
                builder.store(builder.select(builder.fcmp_ordered(">", m, old), m, old), mp)
        return context.get_dummy_value()

    return codegen


def _float_arrays(*arrs):
    return all(isinstance(a, types.Array) and a.dtype in (types.float32, types.float64) for a in arrs)


def _make(rows: int):
    """The intrinsic for C[rows, 64] (+)= A[rows, K] B[K, 64]."""

    @intrinsic
    def mk(typingctx, A, a_off, lda, B, b_off, ldb, C, c_off, ldc, kdim, accumulate):
        if not _float_arrays(A, B, C):
            return None
        return types.none(A, a_off, lda, B, b_off, ldb, C, c_off, ldc, kdim, accumulate), _codegen(rows, False)

    return mk


def _make_max(rows: int):
    """:func:`_make` that also raises M[m_off + r] to the largest value of row r of C."""

    @intrinsic
    def mk(typingctx, A, a_off, lda, B, b_off, ldb, C, c_off, ldc, kdim, accumulate, M, m_off):
        if not _float_arrays(A, B, C, M):
            return None
        return (types.none(A, a_off, lda, B, b_off, ldb, C, c_off, ldc, kdim, accumulate, M, m_off),
                _codegen(rows, True))

    return mk


_mk6 = _make(6)
_mk4 = _make(4)
_mk2 = _make(2)
_mk1 = _make(1)
_mkm6 = _make_max(6)
_mkm4 = _make_max(4)
_mkm2 = _make_max(2)
_mkm1 = _make_max(1)


@njit(nogil=True, cache=True)
def rows_product(A, a_off, lda, B, b_off, ldb, C, c_off, ldc, nrows, kdim, accumulate):
    """C[c_off + r*ldc + j] (+)= sum_d A[a_off + r*lda + d] B[b_off + d*ldb + j] for r < nrows, j < 64:
    flat element offsets into C-contiguous float32 arrays, rows in blocks of 6 and the rest in 4, 2, 1."""
    r = 0
    while r + 6 <= nrows:
        _mk6(A, a_off + r * lda, lda, B, b_off, ldb, C, c_off + r * ldc, ldc, kdim, accumulate)
        r += 6
    if r + 4 <= nrows:
        _mk4(A, a_off + r * lda, lda, B, b_off, ldb, C, c_off + r * ldc, ldc, kdim, accumulate)
        r += 4
    if r + 2 <= nrows:
        _mk2(A, a_off + r * lda, lda, B, b_off, ldb, C, c_off + r * ldc, ldc, kdim, accumulate)
        r += 2
    if r < nrows:
        _mk1(A, a_off + r * lda, lda, B, b_off, ldb, C, c_off + r * ldc, ldc, kdim, accumulate)


@njit(nogil=True, cache=True)
def rows_product_max(A, a_off, lda, B, b_off, ldb, C, c_off, ldc, nrows, kdim, M):
    """:func:`rows_product` (overwriting C) that also raises M[r] to the largest value of C's row r."""
    r = 0
    while r + 6 <= nrows:
        _mkm6(A, a_off + r * lda, lda, B, b_off, ldb, C, c_off + r * ldc, ldc, kdim, False, M, r)
        r += 6
    if r + 4 <= nrows:
        _mkm4(A, a_off + r * lda, lda, B, b_off, ldb, C, c_off + r * ldc, ldc, kdim, False, M, r)
        r += 4
    if r + 2 <= nrows:
        _mkm2(A, a_off + r * lda, lda, B, b_off, ldb, C, c_off + r * ldc, ldc, kdim, False, M, r)
        r += 2
    if r < nrows:
        _mkm1(A, a_off + r * lda, lda, B, b_off, ldb, C, c_off + r * ldc, ldc, kdim, False, M, r)


@njit(nogil=True, cache=True)
def score_product(q, h, i0, bm, kp, j0, bn, S, rowmax, want_max):
    """S[:bm*bn] as (bm, bn) = q[h, i0:i0+bm] @ k[h, j0:j0+bn].T, k given as its :func:`key_panels` kp;
    j0 and bn multiples of 64. With ``want_max``, rowmax[:bm] becomes each row's largest score, taken
    from the registers before they are stored (the softmax then skips its pass for the row max)."""
    Tq, hs = q.shape[1], q.shape[2]
    nP = kp.shape[1]
    if want_max:
        for r in range(bm):
            rowmax[r] = -np.inf
    for c in range(bn // COLS):
        a_off = (h * Tq + i0) * hs
        b_off = ((h * nP + j0 // COLS + c) * hs) * COLS
        if want_max:
            rows_product_max(q, a_off, hs, kp, b_off, COLS, S, c * COLS, bn, bm, hs, rowmax)
        else:
            rows_product(q, a_off, hs, kp, b_off, COLS, S, c * COLS, bn, bm, hs, False)


@njit(nogil=True, cache=True)
def pv_accumulate(P, bm, bn, v, h, j0, acc_o):
    """acc_o (bm, hv) += P[:bm*bn] as (bm, bn) @ v[h, j0:j0+bn]; hv a multiple of 64."""
    Tk, hv = v.shape[1], v.shape[2]
    for c in range(hv // COLS):
        rows_product(P, 0, bn, v, (h * Tk + j0) * hv + c * COLS, hv, acc_o, c * COLS, hv, bm, bn, True)


@njit(nogil=True, cache=True)
def score_product_rows(q, h, i0, bm, kp, j0, bn, S, lo, hi):
    """:func:`score_product` of a tile that reads the mask, given each row's allowed keys within
    [lo[r], hi[r]) (tile columns; hi[r] = 0 for none): each 64-key panel only for the span of rows that
    allow a key in it. Cells left out are masked ones, which the softmax replaces without reading."""
    Tq, hs = q.shape[1], q.shape[2]
    nP = kp.shape[1]
    for c in range(bn // COLS):
        c0 = c * COLS
        first = bm
        last = -1
        for r in range(bm):
            if lo[r] < c0 + COLS and hi[r] > c0:
                first = min(first, r)
                last = r
        if last >= first:
            rows_product(q, (h * Tq + i0 + first) * hs, hs, kp, ((h * nP + j0 // COLS + c) * hs) * COLS, COLS,
                         S, first * bn + c0, bn, last + 1 - first, hs, False)


@njit(nogil=True, cache=True)
def pv_accumulate_rows(P, bm, bn, v, h, j0, acc_o, lo, hi):
    """:func:`pv_accumulate` of a tile that reads the mask: each block of up to 6 rows over the keys its
    rows allow, [min lo, max hi) (P is 0 elsewhere)."""
    Tk, hv = v.shape[1], v.shape[2]
    r = 0
    while r < bm:
        n = min(6, bm - r)
        k0 = bn
        k1 = 0
        for x in range(r, r + n):
            if hi[x] > lo[x]:
                k0 = min(k0, lo[x])
                k1 = max(k1, hi[x])
        if k1 > k0:
            for c in range(hv // COLS):
                rows_product(P, r * bn + k0, bn, v, (h * Tk + j0 + k0) * hv + c * COLS, hv, acc_o, r * hv + c * COLS,
                             hv, n, k1 - k0, True)
        r += n


def key_panels(k):
    """k (nh, Tk, hs) as panels of 64 keys, (nh, Tk // 64, hs, 64) C-contiguous (the whole panels only)."""
    nh, Tk, hs = k.shape
    n = Tk // COLS
    return np.ascontiguousarray(k[:, :n * COLS].reshape(nh, n, COLS, hs).transpose(0, 1, 3, 2))


def enabled() -> bool:
    """True when numba compiles for a CPU with AVX-512F (its own target features, else the host's), and
    ATTNVIZ_FLASH_BLAS is not set (which keeps BLAS for every tile product)."""
    if os.environ.get("ATTNVIZ_FLASH_BLAS"):
        return False
    import numba

    feats = numba.config.CPU_FEATURES
    if feats:
        return "+avx512f" in feats.split(",")
    try:
        import llvmlite.binding as llvm

        return bool(dict(llvm.get_host_cpu_features()).get("avx512f"))
    except (RuntimeError, ImportError):
        return False
