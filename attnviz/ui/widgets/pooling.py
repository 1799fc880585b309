"""Downsampling of (batched) matrices for display: max pooling keeps isolated peaks visible, mean
pooling shows mass. Masked cells never contribute; a display pixel whose cells are all masked is
reported as masked (NaN value, False in the returned ``allowed``), never as a zero.

An image of H pixels drawn stretched over T rows puts pixel ``y`` over the view interval
[y*T/H, (y+1)*T/H); it pools exactly the rows whose centres fall in that interval,
``edges[y] = ceil(y*T/H - 1/2)``, so what a pixel shows is what lies under it (and under the mouse).
Every pixel covers at least one cell when H <= T.
"""

from __future__ import annotations

import numpy as np


def pool_edges(n: int, m: int) -> np.ndarray:
    """Bin edges (m + 1,) splitting ``n`` cells into ``m <= n`` contiguous non-empty bins."""
    if not 0 < m <= n:
        raise ValueError(f"cannot split {n} cells into {m} bins")
    y = np.arange(m + 1, dtype=np.int64)
    return (2 * y * n + m - 1) // (2 * m)  # (m+1,) ceil(y*n/m - 1/2)


def _prepare(values, mask, out_shape):
    v = np.asarray(values)
    if v.ndim < 2:
        raise ValueError(f"values must be at least 2-D (..., rows, cols), got shape {v.shape}")
    if not np.issubdtype(v.dtype, np.number) or np.issubdtype(v.dtype, np.complexfloating):
        raise ValueError(f"values must be real numbers, got dtype {v.dtype}")
    rows, cols = v.shape[-2:]
    if rows == 0 or cols == 0:
        raise ValueError(f"values must not be empty, got shape {v.shape}")
    if mask is None:
        allowed = np.ones(v.shape, dtype=bool)
    else:
        m = np.asarray(mask)
        if m.dtype != bool:
            raise ValueError(f"mask must be boolean (True = allowed), got dtype {m.dtype}")
        try:
            allowed = np.broadcast_to(m, v.shape)
        except ValueError:
            raise ValueError(f"mask shape {m.shape} does not fit values shape {v.shape}") from None
    bad = allowed & ~np.isfinite(v) if np.issubdtype(v.dtype, np.floating) else None
    if bad is not None and bad.any():
        raise ValueError("values contain NaN or infinity at allowed (unmasked) cells")
    H, W = (int(s) for s in out_shape)
    if H <= 0 or W <= 0:
        raise ValueError(f"output shape must be positive, got {out_shape}")
    return v, allowed, min(H, rows), min(W, cols)


def _reduce(op, a, H, W):
    # reduceat over a leading axis combines whole rows at once; over the last axis it loops per
    # tiny segment (10x slower), so the columns are reduced on a transposed copy
    rows, cols = a.shape[-2:]
    if H < rows:
        a = op.reduceat(a, pool_edges(rows, H)[:-1], axis=-2)  # (..., H, cols)
    if W < cols:
        t = np.ascontiguousarray(np.swapaxes(a, -1, -2))  # (..., cols, H)
        a = np.swapaxes(op.reduceat(t, pool_edges(cols, W)[:-1], axis=-2), -1, -2)  # (..., H, W)
    return a


def pool_max(values, mask, out_shape) -> tuple[np.ndarray, np.ndarray]:
    """Max over the allowed cells each display pixel covers.

    values (..., rows, cols), mask broadcastable to it (bool, True = allowed) or None, out_shape
    (H, W); an axis already shorter than asked is left as it is. Returns (pooled float32
    (..., H, W) with NaN where no cell is allowed, allowed (..., H, W) bool)."""
    v, allowed, H, W = _prepare(values, mask, out_shape)
    work = np.where(allowed, v.astype(np.float32, copy=False), np.float32(-np.inf))  # (..., rows, cols)
    pooled = _reduce(np.maximum, work, H, W)  # (..., H, W)
    any_allowed = pooled > -np.inf  # allowed values are finite, so only all-masked pixels stay -inf
    out = np.where(any_allowed, pooled, np.float32(np.nan)).astype(np.float32, copy=False)
    return np.ascontiguousarray(out), any_allowed


def pool_mean(values, mask, out_shape) -> tuple[np.ndarray, np.ndarray]:
    """Mean over the allowed cells each display pixel covers; same arguments and result as
    :func:`pool_max`."""
    v, allowed, H, W = _prepare(values, mask, out_shape)
    work = np.where(allowed, v.astype(np.float64, copy=False), 0.0)  # (..., rows, cols)
    sums = _reduce(np.add, work, H, W)  # (..., H, W)
    counts = _reduce(np.add, allowed.astype(np.int64), H, W)  # (..., H, W)
    any_allowed = counts > 0
    with np.errstate(invalid="ignore", divide="ignore"):
        out = np.where(any_allowed, sums / np.maximum(counts, 1), np.nan).astype(np.float32)
    return np.ascontiguousarray(out), any_allowed


POOLS = {"max": pool_max, "mean": pool_mean}
