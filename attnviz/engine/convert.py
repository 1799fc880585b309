"""bfloat16 weights -> float32: a whole tensor in one parallel pass, or a matrix product that widens a
block at a time.

A bf16 value is the top half of a float32, so the conversion is exact: each 16-bit word shifted into the
high half of a 32-bit one. numpy does it in two passes over two fresh arrays (``astype(uint32)`` then the
shift); :func:`bf16_to_f32` reads each word once and writes each float once, on every core.

:func:`bf16_matmul_t` never widens a whole matrix: it widens BLOCK values at a time into one scratch
buffer per thread (on one core, between BLAS calls: a parallel launch there fights BLAS's spinning
threads and ran 2-3x slower) and multiplies each block at once. A 3-billion-weight model then runs from
its memory-mapped bf16 file without a float32 copy, and without the fresh memory a copy needs.

Until a warm-up has compiled the kernels (:func:`attnviz.engine.jitcache.is_warm`) both widen with numpy
instead (the same bits; compiling these kernels costs 10-30 s, more than numpy's extra pass over a whole
model), so a fresh installation's first pass of a bf16 checkpoint does not wait for the compiler.
"""

from __future__ import annotations

import threading

import numba
import numpy as np
from numba import njit, prange

from attnviz.engine import jitcache
from attnviz.engine.runtime import PARALLEL_LOCK, get_num_threads, parallel_section

CHUNKS = 256  # contiguous pieces handed to the threads
SMALL = 1 << 16  # below this many values numpy's two passes are cheaper than a parallel launch
BLOCK = 1 << 22  # float32 values widened at once by bf16_matmul_t: 16 MiB (1 << 20 and 1 << 21 measured slower)
_scratch = threading.local()
FEW_ROWS = 8  # x with at most this many rows (a generation step) goes through _rows_dot: no BLAS at all
ROW_CHUNK = 64  # matrix rows per parallel work item of _rows_dot


@njit(parallel=True, nogil=True, cache=True)
def _widen(src, dst):
    n = src.size
    step = (n + CHUNKS - 1) // CHUNKS
    for c in prange(CHUNKS):
        for i in range(c * step, min(n, (c + 1) * step)):
            dst[i] = np.uint32(src[i]) << np.uint32(16)


def bf16_to_f32(raw: np.ndarray, compiled: bool | None = None) -> np.ndarray:
    """The float32 values of bfloat16 bits ``raw`` (uint16, any shape, any memory layout). ``compiled``:
    use the compiled kernel (True), numpy (False) or the kernel once the cache is warm (None)."""
    if compiled is None:
        compiled = jitcache.is_warm()
    if raw.size < SMALL or not compiled:
        return (raw.astype(np.uint32) << 16).view(np.float32)
    src = np.ascontiguousarray(raw).reshape(-1)  # (n,) a mapped file's rows are contiguous already
    out = np.empty(src.size, dtype=np.uint32)  # (n,)
    with parallel_section():
        _widen(src, out)
    return out.view(np.float32).reshape(raw.shape)


@njit(nogil=True, cache=True)
def _widen_block(src, dst):
    """dst (r, c) uint32 <- src (r, c) uint16 << 16, any strides of src; one thread."""
    r, c = src.shape
    for i in range(r):
        for j in range(c):
            dst[i, j] = np.uint32(src[i, j]) << np.uint32(16)


def _buffer(n: int) -> np.ndarray:
    buf = getattr(_scratch, "buf", None)
    if buf is None or buf.size < n:
        buf = _scratch.buf = np.empty(max(n, BLOCK), dtype=np.uint32)
    return buf[:n]


@njit(parallel=True, nogil=True, cache=True, fastmath={"reassoc", "contract"})
def _rows_dot(bits, x, out):
    """out (T, n) <- x (T, k) . widened bits (n, k) rows: each row widened once into a thread's buffer,
    then dotted with every row of x (float32 sums, as a BLAS sgemv)."""
    n, k = bits.shape
    T = x.shape[0]
    for c in prange((n + ROW_CHUNK - 1) // ROW_CHUNK):
        buf = np.empty(k, dtype=np.uint32)
        row = buf.view(np.float32)
        for r in range(c * ROW_CHUNK, min(n, (c + 1) * ROW_CHUNK)):
            for j in range(k):
                buf[j] = np.uint32(bits[r, j]) << np.uint32(16)
            for t in range(T):
                s = np.float32(0.0)
                for j in range(k):
                    s += row[j] * x[t, j]
                out[t, r] = s


def _widen_into(src: np.ndarray, dst: np.ndarray, compiled: bool) -> None:
    """dst (r, c) uint32 <- src (r, c) uint16 << 16: the compiled single pass, or numpy's two."""
    if compiled:
        _widen_block(src, dst)
    else:
        dst[...] = src
        dst <<= np.uint32(16)


def bf16_matmul_t(x: np.ndarray, bits: np.ndarray, compiled: bool | None = None) -> np.ndarray:
    """``x @ W.T`` in float32 for W (out, k) the float32 values of bfloat16 ``bits`` (uint16), x (T, k)
    float32. A few rows of x (FEW_ROWS: one generated token) are dotted with each widened row of W on every
    core, reading the 16-bit matrix once (half the bytes of a float32 product, which a step is bound by).
    Otherwise wide matrices (out >= k) go by blocks of rows of W, each giving a block of output columns;
    deep ones (k > out) by blocks of columns of W, each adding its share of every output. Returns (T, out).
    ``compiled`` as in :func:`bf16_to_f32` (numpy widens the blocks, and a few rows go by blocks too)."""
    out_n, k = bits.shape
    T = x.shape[0]
    if x.shape[1] != k:
        raise ValueError(f"x has {x.shape[1]} columns, the matrix {k}")
    if compiled is None:
        compiled = jitcache.is_warm()
    if T <= FEW_ROWS and compiled:
        y = np.empty((T, out_n), dtype=np.float32)
        xc = np.ascontiguousarray(x, dtype=np.float32)
        if T and out_n:
            with PARALLEL_LOCK:
                numba.set_num_threads(get_num_threads())
                _rows_dot(bits if bits.strides[1] == 2 else np.ascontiguousarray(bits), xc, y)
        return y
    if out_n >= k:
        rows = max(1, BLOCK // max(k, 1))
        yt = np.empty((out_n, T), dtype=np.float32)  # (out, T): each block of rows fills contiguous rows
        xt = x.T  # (k, T)
        for r0 in range(0, out_n, rows):
            r1 = min(out_n, r0 + rows)
            buf = _buffer((r1 - r0) * k).reshape(r1 - r0, k)
            _widen_into(bits[r0:r1], buf, compiled)
            np.matmul(buf.view(np.float32), xt, out=yt[r0:r1])
        return yt.T  # (T, out), column-major
    cols = max(1, BLOCK // out_n)
    y = None
    for c0 in range(0, k, cols):
        c1 = min(k, c0 + cols)
        buf = _buffer(out_n * (c1 - c0)).reshape(out_n, c1 - c0)
        _widen_into(bits[:, c0:c1], buf, compiled)
        part = x[:, c0:c1] @ buf.view(np.float32).T  # (T, out)
        if y is None:
            y = part
        else:
            y += part
    return y
