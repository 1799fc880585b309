"""The all-heads grid beside the heatmap: how many maps per row, and (nh, ...) maps laid out in rows."""

from __future__ import annotations

import numpy as np

GRID_TILE = 64  # pixels per map of the all-heads grid (the widget's own tile size)


def grid_columns(nh: int) -> int:
    """Maps per row of the all-heads grid: the largest divisor of nh not above sqrt(nh), so the grid
    is a full, tall rectangle that fits beside the heatmap (4 -> 2x2, 8 -> 4x2, 12 -> 4x3)."""
    limit = max(1, int(np.sqrt(nh) + 1e-9))
    return max(d for d in range(1, limit + 1) if nh % d == 0)


def grid_layout(maps: np.ndarray, allowed) -> tuple[np.ndarray, np.ndarray | None, list[str]]:
    """(nh, A, B) maps -> (rows, cols, A, B) for the grid, the mask alike, and the row titles."""
    nh = maps.shape[0]
    cols = grid_columns(nh)
    rows = nh // cols
    out = maps.reshape((rows, cols) + maps.shape[1:])  # (rows, cols, A, B)
    m = None
    if allowed is not None:
        a = np.asarray(allowed)
        m = a.reshape((rows, cols) + a.shape[1:]) if a.ndim == 3 else a  # (rows, cols, A, B) or (A, B)
    titles = [f"h{r * cols}" if cols == 1 else f"h{r * cols}–{r * cols + cols - 1}" for r in range(rows)]
    return out, m, titles
