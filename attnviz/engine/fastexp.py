"""Vectorisable base-2 exponentials, dtype-preserving constants and the fastmath flags of the numba kernels.

numba has no vector ``exp`` on this stack (no SVML): ``np.exp`` in a loop is one scalar libm call per
element, so :func:`exp2` is plain arithmetic LLVM turns into SIMD code. numba's cache checks only each
kernel's own source file; the kernels that inline this module's code are kept apart per content of the
engine's sources instead (:mod:`attnviz.engine.jitcache`), so an edit here recompiles them.
"""

from __future__ import annotations

import math

import numpy as np
from llvmlite import ir
from numba import types
from numba.extending import intrinsic, overload

# Safe fastmath: reassociation (vector reductions), contraction (FMA), reciprocal, no signed zeros,
# approximate functions. Never "nnan"/"ninf": they delete the guards of fully masked rows.
FASTMATH = {"reassoc", "contract", "arcp", "nsz", "afn"}

# Masked cells get this (already scaled, base-2) score: far below any real score, still finite.
MASKED_SCORE = -3.0e38
# Running maxima start here: far below any real score, far above MASKED_SCORE, so a row that has seen
# only masked cells keeps m_i = M_INIT and exp2(MASKED_SCORE - M_INIT) is still exactly 0.
M_INIT = -1.0e30
# Largest |scaled score| accepted (base e); checked before a kernel runs so that nothing overflows.
MAX_ABS_SCORE = 1.0e29

LOG2E = 1.0 / math.log(2.0)
LN2 = math.log(2.0)

# float32: minimax (relative error) polynomial of degree 6 for 2**f on [-0.5, 0.5], fitted in float64 by
# iteratively reweighted least squares, about 1e-9 relative error before float32 rounding.
# float64: the Taylor series of exp(f ln 2) to degree 13, about 4e-18 relative truncation error.
EXP2_POLY_F32 = (1.0000000005541705, 0.6931472057373104, 0.24022646890614605, 0.055503287768702926,
                 0.009618488958852998, 0.0013399931258483637, 0.00015345811634040617)
_C64 = tuple(math.log(2.0) ** n / math.factorial(n) for n in range(14))


def _int_to(builder, value, width):
    """Truncate or sign-extend an LLVM integer to ``width`` bits."""
    if value.type.width > width:
        return builder.trunc(value, ir.IntType(width))
    if value.type.width < width:
        return builder.sext(value, ir.IntType(width))
    return value


@intrinsic
def _pow2_f32(typingctx, n):
    """2.0**n as float32 for an integer n in [-127, 127] (n = -127 gives 0): exponent bits, vectorisable."""
    if not isinstance(n, types.Integer):
        return None

    def codegen(context, builder, signature, args):
        i32 = ir.IntType(32)
        e = builder.add(_int_to(builder, args[0], 32), ir.Constant(i32, 127))
        return builder.bitcast(builder.shl(e, ir.Constant(i32, 23)), ir.FloatType())

    return types.float32(n), codegen


@intrinsic
def _pow2_f64(typingctx, n):
    """2.0**n as float64 for an integer n in [-1023, 1023] (n = -1023 gives 0)."""
    if not isinstance(n, types.Integer):
        return None

    def codegen(context, builder, signature, args):
        i64 = ir.IntType(64)
        e = builder.add(_int_to(builder, args[0], 64), ir.Constant(i64, 1023))
        return builder.bitcast(builder.shl(e, ir.Constant(i64, 52)), ir.DoubleType())

    return types.float64(n), codegen


def exp2(x):
    """2**x for a float32 or float64 scalar inside njit code: range reduction, a polynomial, an exponent
    built from integer bits. Inputs below -126 give exactly 0 (denormals flushed: what a masked score
    needs); inputs must not be NaN.
    """
    raise NotImplementedError("exp2 is only callable from numba-compiled code")


@overload(exp2, inline="always", fastmath=FASTMATH)
def _exp2_overload(x):
    if x == types.float32:
        c0, c1, c2, c3, c4, c5, c6 = (np.float32(c) for c in EXP2_POLY_F32)
        lo, hi, half = np.float32(-127.0), np.float32(127.0), np.float32(0.5)

        def impl32(x):
            x = min(max(x, lo), hi)
            n = np.floor(x + half)  # nearest integer, f in [-0.5, 0.5]
            f = x - n
            p = c6 * f + c5
            p = p * f + c4
            p = p * f + c3
            p = p * f + c2
            p = p * f + c1
            p = p * f + c0
            return p * _pow2_f32(np.int32(n))

        return impl32
    if x == types.float64:
        c = tuple(np.float64(v) for v in _C64)
        lo, hi = -1023.0, 1023.0

        def impl64(x):
            x = min(max(x, lo), hi)
            n = np.floor(x + 0.5)
            f = x - n
            p = c[13]
            p = p * f + c[12]
            p = p * f + c[11]
            p = p * f + c[10]
            p = p * f + c[9]
            p = p * f + c[8]
            p = p * f + c[7]
            p = p * f + c[6]
            p = p * f + c[5]
            p = p * f + c[4]
            p = p * f + c[3]
            p = p * f + c[2]
            p = p * f + c[1]
            p = p * f + c[0]
            return p * _pow2_f64(np.int64(n))

        return impl64
    return None


def like(arr, value):
    """``value`` as a scalar of ``arr``'s dtype inside njit code, so float32 kernels stay float32."""
    raise NotImplementedError("like is only callable from numba-compiled code")


@overload(like, inline="always")
def _like_overload(arr, value):
    if getattr(arr, "dtype", None) == types.float32:
        return lambda arr, value: np.float32(value)
    if getattr(arr, "dtype", None) == types.float64:
        return lambda arr, value: np.float64(value)
    return None


@intrinsic
def _float_bits(typingctx, x):
    """The bits of a float32 / float64 as int32 / int64 (a register bitcast)."""
    if x == types.float32:
        return types.int32(x), lambda context, builder, sig, args: builder.bitcast(args[0], ir.IntType(32))
    if x == types.float64:
        return types.int64(x), lambda context, builder, sig, args: builder.bitcast(args[0], ir.IntType(64))
    return None


@intrinsic
def _bits_float(typingctx, bits):
    """Inverse of _float_bits."""
    if bits == types.int32:
        return types.float32(bits), lambda context, builder, sig, args: builder.bitcast(args[0], ir.FloatType())
    if bits == types.int64:
        return types.float64(bits), lambda context, builder, sig, args: builder.bitcast(args[0], ir.DoubleType())
    return None


def order_key(x):
    """A signed integer with the same order as the float x (not NaN), inside njit code.

    An integer max over keys vectorises where a float max (which must honour NaN) stays scalar; the
    transform flips the magnitude bits of negative numbers and is its own inverse (:func:`from_order_key`).
    """
    raise NotImplementedError("order_key is only callable from numba-compiled code")


def from_order_key(key):
    """The float whose :func:`order_key` is ``key``."""
    raise NotImplementedError("from_order_key is only callable from numba-compiled code")


@overload(order_key, inline="always")
def _order_key_overload(x):
    if x == types.float32:
        def impl32(x):
            b = _float_bits(x)
            return np.int32(b ^ ((b >> np.int32(31)) & np.int32(0x7FFFFFFF)))  # numba widens int32 ops
        return impl32
    if x == types.float64:
        def impl64(x):
            b = _float_bits(x)
            return b ^ ((b >> np.int64(63)) & np.int64(0x7FFFFFFFFFFFFFFF))
        return impl64
    return None


@overload(from_order_key, inline="always")
def _from_order_key_overload(key):
    if key == types.int32:
        def impl32(key):
            return _bits_float(np.int32(key ^ ((key >> np.int32(31)) & np.int32(0x7FFFFFFF))))
        return impl32
    if key == types.int64:
        def impl64(key):
            return _bits_float(np.int64(key ^ ((key >> np.int64(63)) & np.int64(0x7FFFFFFFFFFFFFFF))))
        return impl64
    return None


@intrinsic
def word_at(typingctx, row, i):
    """The 8 bytes row[i:i+8] of a 1-D bool or uint8 array whose cells are adjacent (unit stride), as
    one uint64 (unaligned load; nonzero when any of the 8 cells is): a mask row read 8 cells at a time."""
    if not (isinstance(row, types.Array) and row.ndim == 1 and row.dtype in (types.boolean, types.uint8)):
        return None
    if not isinstance(i, types.Integer):
        return None

    def codegen(context, builder, sig, args):
        data = context.make_array(sig.args[0])(context, builder, args[0]).data
        byte = builder.bitcast(data, ir.IntType(8).as_pointer())
        at = builder.gep(byte, [context.cast(builder, args[1], sig.args[1], types.int64)])
        return builder.load(builder.bitcast(at, ir.IntType(64).as_pointer()), align=1)

    return types.uint64(row, i), codegen
