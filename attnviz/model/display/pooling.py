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


def fitting_mask(mask, shape: tuple[int, ...], what: str = "values") -> np.ndarray:
    """``mask`` as a bool array that broadcasts to ``shape`` (True = allowed), or ValueError."""
    m = np.asarray(mask)
    if m.dtype != bool:
        raise ValueError(f"mask must be boolean (True = allowed), got dtype {m.dtype}")
    try:
        fits = np.broadcast_shapes(m.shape, shape) == tuple(shape)
    except ValueError:
        fits = False
    if not fits:
        raise ValueError(f"mask shape {m.shape} does not fit {what} shape {tuple(shape)}")
    return m


def _prepare(values, mask, out_shape):
    """Checked (values, mask or None, H, W): ``mask`` keeps its own shape (at most broadcast over
    the matrix axes) so that a (Tq, Tk) mask of batched maps is never materialised per map; a mask
    that allows everything becomes None."""
    v = np.asarray(values)
    if v.ndim < 2:
        raise ValueError(f"values must be at least 2-D (..., rows, cols), got shape {v.shape}")
    if v.dtype == bool:
        v = v.view(np.uint8)  # a mask pools as 0/1 (a view: no copy of a large mask)
    if not np.issubdtype(v.dtype, np.number) or np.issubdtype(v.dtype, np.complexfloating):
        raise ValueError(f"values must be real numbers, got dtype {v.dtype}")
    rows, cols = v.shape[-2:]
    if rows == 0 or cols == 0:
        raise ValueError(f"values must not be empty, got shape {v.shape}")
    m = None
    if mask is not None:
        m = fitting_mask(mask, v.shape)
        m = np.broadcast_to(m, np.broadcast_shapes(m.shape, v.shape[-2:]))  # (..., rows, cols) a view
        if m.all():
            m = None
    if np.issubdtype(v.dtype, np.floating) and not np.isfinite(v).all():
        bad = ~np.isfinite(v) if m is None else (m & ~np.isfinite(v))
        if bad.any():
            raise ValueError("values contain NaN or infinity at allowed (unmasked) cells")
    H, W = (int(s) for s in out_shape)
    if H <= 0 or W <= 0:
        raise ValueError(f"output shape must be positive, got {out_shape}")
    return v, m, min(H, rows), min(W, cols)


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


def _take(a: np.ndarray, j: int, starts: np.ndarray, sizes: np.ndarray, axis: int, uniform: bool) -> np.ndarray:
    """Element ``j`` of every bin along ``axis`` (-1 or -2); a bin shorter than ``j + 1`` gives its
    last element again (harmless for a maximum). Uniform bins are strided views, not copies."""
    if uniform:
        k = int(sizes[0])
        sel = slice(j, j + k * (len(starts) - 1) + 1, k)
        return a[..., sel, :] if axis == -2 else a[..., sel]
    return np.take(a, starts + np.minimum(j, sizes - 1), axis=axis)


def _max_bins(a: np.ndarray, m: int, axis: int, allowed=None) -> np.ndarray:
    """Max over the ``pool_edges(n, m)`` bins of ``axis`` (-1 or -2) of ``a``; cells where
    ``allowed`` (broadcastable to ``a``) is False are skipped, and a bin with none allowed gets -inf.

    Bins differ in size by at most one cell, so this is at most ``ceil(n / m)`` vectorised passes
    of one element per bin (strided views when the bins are uniform) — much faster than
    ``np.maximum.reduceat``, whose per-segment loop dominated the heatmap's redraw."""
    n = a.shape[axis]
    if m >= n and allowed is None:
        return a
    edges = pool_edges(n, min(m, n))
    starts, sizes = edges[:-1], np.diff(edges)  # (m,), (m,)
    kmax = int(sizes.max())
    uniform = int(sizes.min()) == kmax
    if uniform and axis == -2 and kmax > 1:
        # equal row bins: one reduction over a (..., m, k, cols) view, no Python-level passes
        try:
            a5 = a.reshape(a.shape[:-2] + (len(starts), kmax, a.shape[-1]), copy=False)  # (..., m, k, cols)
            w5 = None if allowed is None else allowed.reshape(
                allowed.shape[:-2] + (len(starts), kmax, allowed.shape[-1]), copy=False)
        except ValueError:
            pass  # not expressible as a view: fall through to the passes below
        else:
            if w5 is None:
                return np.maximum.reduce(a5, axis=-2)
            return np.maximum.reduce(a5, axis=-2, where=w5, initial=-np.inf)
    shape = list(a.shape)
    shape[axis] = len(starts)
    if allowed is None:
        acc = np.array(_take(a, 0, starts, sizes, axis, uniform))  # (..., m, ...) a copy
        for j in range(1, kmax):
            np.maximum(acc, _take(a, j, starts, sizes, axis, uniform), out=acc)
        return acc
    acc = np.full(shape, -np.inf, dtype=a.dtype)  # (..., m, ...)
    for j in range(kmax):
        np.maximum(acc, _take(a, j, starts, sizes, axis, uniform), out=acc,
                   where=_take(allowed, j, starts, sizes, axis, uniform))
    return acc


def max_pool(a, out_shape) -> np.ndarray:
    """Max of each display pixel's cells for an unmasked (..., rows, cols) array of any real
    dtype (e.g. small integer state codes), dtype kept; axes already short enough stay."""
    arr = np.asarray(a)
    if arr.ndim < 2 or arr.shape[-1] == 0 or arr.shape[-2] == 0:
        raise ValueError(f"array must be a non-empty (..., rows, cols) array, got shape {arr.shape}")
    H, W = (int(s) for s in out_shape)
    if H <= 0 or W <= 0:
        raise ValueError(f"output shape must be positive, got {out_shape}")
    out = _max_bins(_max_bins(arr, H, -2), W, -1)  # (..., H, W)
    return np.ascontiguousarray(out)


def pool_max(values, mask, out_shape) -> tuple[np.ndarray, np.ndarray]:
    """Max over the allowed cells each display pixel covers.

    values (..., rows, cols), mask broadcastable to it (bool, True = allowed) or None, out_shape
    (H, W); an axis already shorter than asked is left as it is. Returns (pooled float32
    (..., H, W) with NaN where no cell is allowed, allowed (..., H, W) bool)."""
    v, m, H, W = _prepare(values, mask, out_shape)
    rows, cols = v.shape[-2:]
    v = v.astype(np.float32, copy=False)
    if m is None:
        pooled = _max_bins(_max_bins(v, H, -2), W, -1)  # (..., H, W)
        if pooled is v:
            pooled = v.copy()
        return np.ascontiguousarray(pooled), np.ones(pooled.shape, dtype=bool)
    if H < rows:  # the mask is applied in the first reduction, never as a full-size copy
        pooled = _max_bins(_max_bins(v, H, -2, m), W, -1)  # (..., H, W)
    elif W < cols:
        pooled = _max_bins(v, W, -1, m)  # (..., rows, W)
    else:
        pooled = np.where(m, v, np.float32(-np.inf))  # (..., rows, cols)
    any_allowed = pooled > -np.inf  # allowed values are finite, so only all-masked pixels stay -inf
    np.copyto(pooled, np.float32(np.nan), where=~any_allowed)  # pooled is a fresh array of our own
    return np.ascontiguousarray(pooled), any_allowed


def pool_mean(values, mask, out_shape) -> tuple[np.ndarray, np.ndarray]:
    """Mean over the allowed cells each display pixel covers; same arguments and result as
    :func:`pool_max`."""
    v, m, H, W = _prepare(values, mask, out_shape)
    allowed = np.ones(v.shape, dtype=bool) if m is None else np.broadcast_to(m, v.shape)  # (..., rows, cols)
    work = np.where(allowed, v.astype(np.float64, copy=False), 0.0)  # (..., rows, cols)
    sums = _reduce(np.add, work, H, W)  # (..., H, W)
    counts = _reduce(np.add, allowed.astype(np.int64), H, W)  # (..., H, W)
    any_allowed = counts > 0
    with np.errstate(invalid="ignore", divide="ignore"):
        out = np.where(any_allowed, sums / np.maximum(counts, 1), np.nan).astype(np.float32)
    return np.ascontiguousarray(out), any_allowed


POOLS = {"max": pool_max, "mean": pool_mean}
