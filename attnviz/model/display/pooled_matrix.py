"""One attention matrix made ready for a heatmap, without Qt: checked, turned into display units
(log10 when asked), max-pooled to the pixels a view has and given its colour levels.

This is the part of drawing a heatmap that grows with the matrix (a 2,900 x 2,900 matrix is 8.4
million cells: several passes of a few tens of milliseconds each, seconds on a loaded machine), so it
is kept free of Qt: the heatmap widget runs it on a worker thread for large matrices, and a caller
that already has a worker can run it there and hand the result (a :class:`PooledMatrix`) to the
widget, which then only uploads a screen-sized image.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np

from attnviz.model.display.pooling import pool_max


@dataclass(frozen=True, eq=False)
class PooledMatrix:
    """A (Tq, Tk) matrix as a heatmap draws it."""

    image: np.ndarray  # (H, W) float32 in display units, NaN where every covered cell is masked
    image_allowed: np.ndarray  # (H, W) bool: the pixel covers at least one allowed cell
    shape: tuple[int, int]  # (Tq, Tk) of the full matrix
    levels: tuple[float, float]  # colour levels in display units (log10 of values in log scale)
    log_scale: bool
    row_flags: Optional[np.ndarray]  # (Tq,) bool, True = a row with no allowed key; None = no such row
    values: Optional[np.ndarray] = None  # (Tq, Tk) float32 raw values, kept for exact readouts and zoom
    allowed: Optional[np.ndarray] = None  # (Tq, Tk) bool, with ``values``

    @property
    def pooled(self) -> bool:
        """True when the image has fewer pixels than the matrix has cells."""
        return self.image.shape != tuple(self.shape)


def check_matrix(values, mask=None) -> tuple[np.ndarray, np.ndarray]:
    """(values as float32 (Tq, Tk), allowed (Tq, Tk) bool) or ValueError. -inf cells are masked; NaN
    or +inf at any cell is an error; ``mask`` (Tq, Tk) bool with False = masked. The mask is copied
    (the caller may edit its own)."""
    v = np.asarray(values)
    check_shape(v, mask)
    v = v.astype(np.float32, copy=False)
    allowed = None
    if not np.isfinite(v).all():  # one pass in the common all-finite case
        if np.isnan(v).any():
            raise ValueError("values contain NaN")
        if np.isposinf(v).any():
            raise ValueError("values contain +inf")
        allowed = np.isfinite(v)  # (Tq, Tk) -inf cells are masked
    if mask is not None:
        m = np.asarray(mask)
        allowed = m.copy() if allowed is None else allowed & m
    if allowed is None:
        allowed = np.ones(v.shape, dtype=bool)  # (Tq, Tk)
    return v, allowed


def check_shape(v: np.ndarray, mask=None) -> None:
    """The checks of :func:`check_matrix` that cost nothing (shape and dtype only): ValueError."""
    if v.ndim != 2 or v.size == 0:
        raise ValueError(f"values must be a non-empty (Tq, Tk) matrix, got shape {v.shape}")
    if not (np.issubdtype(v.dtype, np.floating) or np.issubdtype(v.dtype, np.integer)):
        raise ValueError(f"values must be real numbers, got dtype {v.dtype}")
    if mask is not None:
        m = np.asarray(mask)
        if m.dtype != bool or m.shape != v.shape:
            raise ValueError(f"mask must be a bool array of shape {v.shape}, got {m.dtype} {m.shape}")


def to_display(v: np.ndarray, log_scale: bool, log_floor: float) -> np.ndarray:
    """Values in display units: themselves, or log10 of them floored at ``log_floor``."""
    if not log_scale:
        return v
    return np.log10(np.maximum(v, log_floor)).astype(np.float32)


def pool_block(disp: np.ndarray, allowed: np.ndarray, shape: tuple[int, int]) -> tuple[np.ndarray, np.ndarray]:
    """(image (H, W) float32 with NaN at masked pixels, its allowed (H, W)) of a block in display
    units: max-pooled when ``shape`` is smaller than the block, else the block itself."""
    if tuple(shape) != disp.shape:
        return pool_max(disp, allowed, shape)  # (H, W)
    return np.where(allowed, disp, np.nan).astype(np.float32), allowed


def finite_levels(values: np.ndarray, allowed: np.ndarray, pooled=None) -> tuple[float, float]:
    """(low, high) of the allowed values; ``pooled`` = (max-pooled image, its allowed pixels), when
    given, supplies the high end (the maximum survives max pooling) from far fewer pixels."""
    if not allowed.any():
        return 0.0, 1.0
    if allowed.all():
        lo = float(values.min())
        hi = float(values.max()) if pooled is None else None
    else:  # reductions over the allowed cells in place: no gathered copy of a large matrix
        lo = float(np.min(values, where=allowed, initial=np.inf))
        hi = None if pooled is not None else float(np.max(values, where=allowed, initial=-np.inf))
    if hi is None:
        img, ok = pooled
        hi = float(np.max(img, where=ok, initial=-np.inf))
    if not hi > lo:
        lo, hi = lo - 0.5, hi + 0.5
    return lo, hi


def given_levels(levels, log_scale: bool, log_floor: float) -> tuple[float, float]:
    """Levels (low, high) given in value units, in display units; ValueError when unusable."""
    lo, hi = (float(x) for x in levels)
    if not (np.isfinite(lo) and np.isfinite(hi) and hi > lo):
        raise ValueError(f"levels must be finite with low < high, got {levels}")
    if log_scale:
        if lo <= 0 and hi <= 0:
            raise ValueError(f"log scale needs positive levels, got {levels}")
        lo, hi = np.log10(max(lo, log_floor)), np.log10(hi)
    return float(lo), float(hi)


def pool_matrix(values, mask=None, shape: tuple[int, int] = (2048, 2048), *, log_scale: bool = False,
                log_floor: float = 1e-6, levels=None, keep_values: bool = True) -> PooledMatrix:
    """Check ``values`` (Tq, Tk) (and ``mask``), pool it to at most ``shape`` pixels and find its
    levels (``levels`` in value units, else the allowed values' range); ValueError for bad input.
    ``keep_values`` keeps the checked full matrix in the result (exact readouts, zoomed detail)."""
    v, allowed = check_matrix(values, mask)
    Tq, Tk = v.shape
    H, W = min(int(shape[0]), Tq), min(int(shape[1]), Tk)
    disp = to_display(v, log_scale, log_floor)  # (Tq, Tk)
    img, ok = pool_block(disp, allowed, (H, W))  # (H, W)
    if levels is not None:
        lv = given_levels(levels, log_scale, log_floor)
    else:
        lv = finite_levels(disp, allowed, (img, ok))
    flags = None if allowed.all() else ~allowed.any(axis=1)  # (Tq,)
    return PooledMatrix(img, ok, (Tq, Tk), lv, bool(log_scale), flags,
                        v if keep_values else None, allowed if keep_values else None)
