"""One parallel pass over q, k or v before a kernel runs: are all values finite, and the largest squared
row norm (what bounds the scores). numpy answers the same with an isfinite array and a float64 einsum,
about 5 ms of a 70 ms flash call at T = 4096 and 8 heads (benchmarks/README.md)."""

from __future__ import annotations

import math

import numba
import numpy as np
from numba import njit, prange

from attnviz.engine.runtime import PARALLEL_LOCK, get_num_threads

CHUNKS = 64  # row chunks handed to the threads: enough for balance, few enough to cost nothing


def _scan_rows(a):
    """(count of non-finite values, largest sum of squares of a row in float64) of a (n, d) array."""
    n, d = a.shape
    step = (n + CHUNKS - 1) // CHUNKS
    bad = 0
    top = 0.0
    for c in prange(CHUNKS):
        r1 = min(n, (c + 1) * step)
        nb = 0
        t = 0.0
        for i in range(c * step, r1):
            s = 0.0
            for j in range(d):
                x = np.float64(a[i, j])
                s += x * x
                nb += 0 if math.isfinite(x) else 1
            t = max(t, s)
        bad += nb
        top = max(top, t)
    return bad, top


_FLAGS = {"nogil": True, "cache": True, "fastmath": {"reassoc", "contract"}}  # never nnan / ninf
scan_rows = njit(parallel=True, **_FLAGS)(_scan_rows)
scan_rows_serial = njit(**_FLAGS)(_scan_rows)  # the same pass on the calling thread (prange runs as range)
PARALLEL_CELLS = 1 << 22  # below this a parallel launch costs more than it saves: between a model's BLAS
# calls (their threads still spinning) a parallel scan of a 0.5 M-value q took 4 ms, the serial one 0.3 ms


def scan(a: np.ndarray) -> tuple[int, float]:
    """:func:`scan_rows` of ``a`` (rows along its last axis) on the engine's threads, within its cap;
    arrays below PARALLEL_CELLS on the calling thread."""
    if a.size < PARALLEL_CELLS:
        return scan_rows_serial(a.reshape(-1, a.shape[-1]))
    with PARALLEL_LOCK:
        numba.set_num_threads(get_num_threads())
        return scan_rows(a.reshape(-1, a.shape[-1]))
