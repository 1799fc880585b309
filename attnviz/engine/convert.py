"""bfloat16 weights -> float32 in one parallel pass.

A bf16 value is the top half of a float32, so the conversion is exact: each 16-bit word shifted into the
high half of a 32-bit one. numpy does it in two passes over two fresh arrays (``astype(uint32)`` then the
shift), which on a 3-billion-weight checkpoint read once per forward pass cost more than every matrix
product together; this kernel reads each word once and writes each float once, on every core.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from attnviz.engine.runtime import parallel_section

CHUNKS = 256  # contiguous pieces handed to the threads
SMALL = 1 << 16  # below this many values numpy's two passes are cheaper than a parallel launch


@njit(parallel=True, nogil=True, cache=True)
def _widen(src, dst):
    n = src.size
    step = (n + CHUNKS - 1) // CHUNKS
    for c in prange(CHUNKS):
        for i in range(c * step, min(n, (c + 1) * step)):
            dst[i] = np.uint32(src[i]) << np.uint32(16)


def bf16_to_f32(raw: np.ndarray) -> np.ndarray:
    """The float32 values of bfloat16 bits ``raw`` (uint16, any shape, any memory layout)."""
    if raw.size < SMALL:
        return (raw.astype(np.uint32) << 16).view(np.float32)
    src = np.ascontiguousarray(raw).reshape(-1)  # (n,) a mapped file's rows are contiguous already
    out = np.empty(src.size, dtype=np.uint32)  # (n,)
    with parallel_section():
        _widen(src, out)
    return out.view(np.float32).reshape(raw.shape)
