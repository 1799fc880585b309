"""FrozenArray: an immutable, hashable numpy array for the frozen dataclasses of the session state.

Plain ``np.ndarray`` fields break dataclass equality (``==`` is element-wise) and hashing. A
``FrozenArray`` holds a private read-only C-contiguous copy, compares equal when dtype, shape and
every byte match, and hashes on a digest of its bytes, so a ``SessionState`` holding weights or
embeddings can be compared, hashed and used as a cache key.
"""

from __future__ import annotations

import hashlib

import numpy as np


class FrozenArray:
    """A read-only array value. ``.array`` gives the (read-only) numpy array."""

    __slots__ = ("_a", "_hash")

    def __init__(self, values, dtype=np.float64):
        arr = np.array(values, dtype=dtype, copy=True, order="C")  # private copy, C order
        arr.setflags(write=False)
        self._a = arr
        self._hash = None

    @property
    def array(self) -> np.ndarray:
        return self._a

    @property
    def shape(self) -> tuple[int, ...]:
        return self._a.shape

    @property
    def dtype(self) -> np.dtype:
        return self._a.dtype

    def __array__(self, dtype=None, copy=None):
        if dtype is None:
            return self._a if copy is not True else self._a.copy()
        return self._a.astype(dtype)

    def __eq__(self, other) -> bool:
        if not isinstance(other, FrozenArray):
            return NotImplemented
        return (self._a.dtype == other._a.dtype and self._a.shape == other._a.shape
                and self._a.tobytes() == other._a.tobytes())

    def __hash__(self) -> int:
        if self._hash is None:
            digest = hashlib.blake2b(self._a.tobytes(), digest_size=16).digest()
            self._hash = hash((self._a.shape, self._a.dtype.str, digest))
        return self._hash

    def __repr__(self) -> str:
        return f"FrozenArray(shape={self._a.shape}, dtype={self._a.dtype})"


def frozen_float(values, name: str, ndim: int | None = None, shape: tuple | None = None) -> FrozenArray:
    """Check ``values`` as a finite float64 array (optionally of a given ndim / shape) and freeze it.

    Raises ValueError naming ``name`` for non-numeric, non-finite or misshapen input.
    """
    if isinstance(values, FrozenArray):
        arr = values.array
    else:
        try:
            arr = np.asarray(values, dtype=np.float64)
        except (TypeError, ValueError):
            raise ValueError(f"{name} must be an array of numbers") from None
    if ndim is not None and arr.ndim != ndim:
        raise ValueError(f"{name} must be {ndim}-dimensional, got shape {arr.shape}")
    if shape is not None and tuple(arr.shape) != tuple(shape):
        raise ValueError(f"{name} must have shape {tuple(shape)}, got {tuple(arr.shape)}")
    if arr.dtype != np.float64:
        arr = arr.astype(np.float64)
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contains NaN or infinite values")
    if isinstance(values, FrozenArray) and values.dtype == np.float64:
        return values
    return FrozenArray(arr)
