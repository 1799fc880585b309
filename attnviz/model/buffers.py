"""Large result arrays recycled once nothing refers to them any more: filling a fresh 32 MiB display
matrix costs page faults that were most of the display pass, one already mapped almost nothing (see
benchmarks/README.md). :func:`take` reuses an array of the exact shape and dtype when only the pool
still refers to it (by reference count; a numpy view keeps its base alive, so it counts too); the pool
is bounded by ``MAX_ARRAYS`` and ``MAX_BYTES`` and drops its oldest first.
"""

from __future__ import annotations

import sys
import threading

import numpy as np

MAX_ARRAYS = 16
MAX_BYTES = 384 << 20
#: arrays smaller than this are allocated as usual (their page faults cost little)
MIN_BYTES = 1 << 20

_arrays: list[np.ndarray] = []  # oldest first
_lock = threading.Lock()
#: references to a pooled array nobody else holds: the list's and getrefcount's argument
_FREE_REFS = 2


def take(shape: tuple[int, ...], dtype) -> np.ndarray:
    """A writable C-contiguous array of ``shape`` and ``dtype`` with undefined contents."""
    dtype = np.dtype(dtype)
    shape = tuple(int(n) for n in shape)
    nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    if nbytes < MIN_BYTES:
        return np.empty(shape, dtype=dtype)
    with _lock:
        for i in range(len(_arrays)):
            a = _arrays[i]
            if a.shape == shape and a.dtype == dtype:
                del a
                if sys.getrefcount(_arrays[i]) == _FREE_REFS:
                    a = _arrays.pop(i)
                    a.setflags(write=True)
                    _arrays.append(a)  # newest again
                    return a
        a = np.empty(shape, dtype=dtype)
        _arrays.append(a)
        while len(_arrays) > MAX_ARRAYS or (len(_arrays) > 1 and sum(x.nbytes for x in _arrays) > MAX_BYTES):
            _arrays.pop(0)
        return a


def clear() -> None:
    """Forget every pooled array."""
    with _lock:
        _arrays.clear()
