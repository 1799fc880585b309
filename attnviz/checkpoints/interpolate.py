"""Position tables of vision transformers resized to another patch grid, as transformers does it.

transformers' ``interpolate_pos_encoding`` (ViT, DeiT, CLIP vision, DINOv2) keeps the rows of the
extra tokens ([CLS], DeiT's distillation token) and resizes the square grid of patch rows with
``torch.nn.functional.interpolate(..., size=(gh, gw), mode="bicubic", align_corners=False)``.
:func:`bicubic_resize` is that resize in numpy: for output index i the source coordinate is
``(i + 0.5) * in / out - 0.5``, the four neighbours around it (indices clamped to the border) are
weighted by Keys' cubic convolution with a = -0.75, first along rows then along columns.

DINOv2 with registers resizes with ``antialias=True`` (:func:`bicubic_resize_aa`, torch's port of PIL's
resampling): output i is centred on source coordinate ``(i + 0.5) * s`` (s = in / out), the cubic
kernel (a = -0.5) is stretched by s when shrinking (support 2 s instead of 2), taps outside the input
are left out and the weights renormalised to sum to 1. BEiT resizes its relative position tables with
:func:`bilinear_resize` (``mode="bilinear"``, ``align_corners=False``).
"""

from __future__ import annotations

import math

import numpy as np

from attnviz.checkpoints.errors import CheckpointError

A = -0.75  # torch's bicubic coefficient


def _cubic_weights(t: np.ndarray) -> np.ndarray:
    """(n,) fractional offsets -> (n, 4) weights of the neighbours at -1, 0, +1, +2."""
    def near(x):  # |x| <= 1
        return ((A + 2) * x - (A + 3)) * x * x + 1

    def far(x):  # 1 < |x| < 2
        return ((A * x - 5 * A) * x + 8 * A) * x - 4 * A

    return np.stack([far(t + 1), near(t), near(1 - t), far(2 - t)], axis=1)  # (n, 4)


def _resize_matrix(n_in: int, n_out: int) -> np.ndarray:
    """(n_out, n_in) matrix of one axis of the bicubic resize."""
    src = (np.arange(n_out, dtype=np.float64) + 0.5) * (n_in / n_out) - 0.5  # (n_out,)
    base = np.floor(src)
    w = _cubic_weights(src - base)  # (n_out, 4)
    m = np.zeros((n_out, n_in))
    for k in range(4):
        idx = np.clip(base.astype(np.int64) - 1 + k, 0, n_in - 1)  # (n_out,)
        np.add.at(m, (np.arange(n_out), idx), w[:, k])
    return m


def bicubic_resize(grid: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """(h, w, d) values on a grid -> (H, W, d), as torch's bicubic interpolate with align_corners=False."""
    h, w, _ = grid.shape
    H, W = size
    rows, cols = _resize_matrix(h, H), _resize_matrix(w, W)  # (H, h), (W, w)
    x = np.einsum("Hh,hwd->Hwd", rows, grid.astype(np.float64))  # (H, w, d)
    return np.einsum("Ww,Hwd->HWd", cols, x).astype(grid.dtype)  # (H, W, d)


def _aa_matrix(n_in: int, n_out: int) -> np.ndarray:
    """(n_out, n_in) matrix of one axis of torch's antialiased bicubic resize (align_corners=False)."""
    a = -0.5

    def cubic(x):
        x = np.abs(x)
        near = ((a + 2) * x - (a + 3)) * x * x + 1
        far = (((x - 5) * x + 8) * x - 4) * a
        return np.where(x < 1, near, np.where(x < 2, far, 0.0))

    scale = n_in / n_out
    support = 2.0 * scale if scale >= 1.0 else 2.0
    inv = 1.0 / scale if scale >= 1.0 else 1.0
    m = np.zeros((n_out, n_in))
    for i in range(n_out):
        centre = scale * (i + 0.5)
        lo = max(int(centre - support + 0.5), 0)  # int() truncates toward zero, as the C++ cast does
        hi = min(int(centre + support + 0.5), n_in)
        j = np.arange(lo, hi)
        w = cubic((j - centre + 0.5) * inv)
        total = w.sum()
        m[i, lo:hi] = w / total if total != 0 else w
    return m


def bicubic_resize_aa(grid: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """(h, w, d) -> (H, W, d), as torch's bicubic interpolate with align_corners=False and antialias=True."""
    rows, cols = _aa_matrix(grid.shape[0], size[0]), _aa_matrix(grid.shape[1], size[1])  # (H, h), (W, w)
    x = np.einsum("Hh,hwd->Hwd", rows, grid.astype(np.float64))  # (H, w, d)
    return np.einsum("Ww,Hwd->HWd", cols, x).astype(grid.dtype)  # (H, W, d)


def _linear_matrix(n_in: int, n_out: int) -> np.ndarray:
    """(n_out, n_in) matrix of one axis of torch's linear resize with align_corners=False: source coordinate
    (i + 0.5) * in / out - 0.5, clamped at 0, between its two neighbours (the upper one clamped to the edge)."""
    src = np.maximum((np.arange(n_out, dtype=np.float64) + 0.5) * (n_in / n_out) - 0.5, 0.0)  # (n_out,)
    i0 = np.minimum(np.floor(src).astype(np.int64), n_in - 1)
    i1 = np.minimum(i0 + 1, n_in - 1)
    lam = src - i0
    m = np.zeros((n_out, n_in))
    np.add.at(m, (np.arange(n_out), i0), 1.0 - lam)
    np.add.at(m, (np.arange(n_out), i1), lam)
    return m


def bilinear_resize(grid: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """(h, w, d) -> (H, W, d), as torch's bilinear interpolate with align_corners=False (no antialias)."""
    rows, cols = _linear_matrix(grid.shape[0], size[0]), _linear_matrix(grid.shape[1], size[1])  # (H, h), (W, w)
    x = np.einsum("Hh,hwd->Hwd", rows, grid.astype(np.float64))  # (H, w, d)
    return np.einsum("Ww,Hwd->HWd", cols, x).astype(grid.dtype)  # (H, W, d)


def interpolate_positions(table: np.ndarray, n_extra: int, grid: tuple[int, int], antialias: bool = False) -> np.ndarray:
    """(n_extra + n*n, d) position rows -> (n_extra + gh*gw, d): extra rows kept, the n x n grid resized.

    The trained grid must be square (transformers reshapes it to sqrt(N) x sqrt(N)); a table whose
    grid already is ``grid`` is returned unchanged, as transformers skips the resize then. ``antialias``:
    :func:`bicubic_resize_aa` (DINOv2 with registers) instead of :func:`bicubic_resize`.
    """
    n_patch = table.shape[0] - n_extra
    side = math.isqrt(n_patch)
    if side * side != n_patch:
        raise CheckpointError(
            f"the position table has {n_patch} patch rows, not a square grid: it cannot be interpolated to {grid[0]}x{grid[1]}"
        )
    if (side, side) == tuple(grid):
        return table
    d = table.shape[1]
    resize = bicubic_resize_aa if antialias else bicubic_resize
    patch = resize(table[n_extra:].reshape(side, side, d), grid)  # (gh, gw, d)
    return np.concatenate([table[:n_extra], patch.reshape(-1, d)], axis=0)
