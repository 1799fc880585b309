"""Large result arrays recycled once nothing refers to them any more.

A run at T = 1024 and 8 heads writes two float32 (8, 1024, 1024) display matrices, 32 MiB each. A
fresh allocation of that size is a new memory mapping: the first write to each page faults, and with
transparent huge pages the kernel may compact memory first. Measured here: filling a fresh 32 MiB
array took 14-67 ms, filling one already mapped 1.3 ms — most of the time of the display pass.

:func:`take` hands out an array of the asked shape and dtype, reusing one it handed out before when
only the pool still refers to it (no response, cache, widget or view holds it: Python's reference
count says so, and a numpy view keeps its base alive, so it counts too). Arrays are found by exact
shape and dtype; the pool keeps at most ``MAX_ARRAYS`` arrays and ``MAX_BYTES`` bytes, dropping its
oldest first (a dropped array is freed as usual once its last user lets it go).
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
