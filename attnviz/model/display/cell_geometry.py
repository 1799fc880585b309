"""Pure arithmetic between screen/image pixels and matrix cells, patches and mosaic tiles, and the
length of the labels an axis shows.

Conventions: a matrix is drawn with column ``c`` (key) spanning x in [c, c+1) and row ``r`` (query)
spanning y in [r, r+1) of its view; an image of shape (H, W) that shows the cell block
``extent = (r0, r1, c0, c1)`` (half-open) stretches its pixels uniformly over that block. No Qt here,
so every function is unit-tested on its own.
"""

from __future__ import annotations

import math
from typing import Optional

Cell = tuple[int, int]

# label spacings are multiples of these (times powers of ten): readable index steps
_NICE_STEPS = (1, 2, 5)


def _check_extent(image_shape, extent) -> tuple[int, int, int, int, int, int]:
    H, W = (int(s) for s in image_shape)
    r0, r1, c0, c1 = (int(e) for e in extent)
    if H <= 0 or W <= 0:
        raise ValueError(f"image shape must be positive, got {image_shape}")
    if r1 <= r0 or c1 <= c0:
        raise ValueError(f"extent must be non-empty (r0 < r1, c0 < c1), got {extent}")
    return H, W, r0, r1, c0, c1


def pixel_to_cell(px: float, py: float, image_shape, extent) -> Optional[Cell]:
    """Cell (row, col) under image pixel coordinate (px, py), or None outside the image.

    ``px`` runs along the image width (columns/keys), ``py`` along its height (rows/queries).
    """
    H, W, r0, r1, c0, c1 = _check_extent(image_shape, extent)
    if not (0.0 <= px < W and 0.0 <= py < H) or math.isnan(px) or math.isnan(py):
        return None
    row = r0 + int(math.floor(py * (r1 - r0) / H))
    col = c0 + int(math.floor(px * (c1 - c0) / W))
    return min(row, r1 - 1), min(col, c1 - 1)


def clamped_pixel_to_cell(px: float, py: float, image_shape, extent) -> Cell:
    """Like :func:`pixel_to_cell` but outside points snap to the nearest edge cell (drags leaving
    the matrix keep painting its border)."""
    H, W, r0, r1, c0, c1 = _check_extent(image_shape, extent)
    px = min(max(float(px), 0.0), math.nextafter(W, 0.0))
    py = min(max(float(py), 0.0), math.nextafter(H, 0.0))
    cell = pixel_to_cell(px, py, image_shape, extent)
    assert cell is not None
    return cell




def cell_to_image_index(row: int, col: int, image_shape, extent) -> tuple[int, int]:
    """Index (y, x) of the image pixel under the centre of cell (row, col) — the pixel whose
    pooling bin holds the cell (see attnviz.model.display.pooling)."""
    H, W, r0, r1, c0, c1 = _check_extent(image_shape, extent)
    if not (r0 <= row < r1 and c0 <= col < c1):
        raise ValueError(f"cell ({row}, {col}) is outside extent {extent}")
    return (2 * (row - r0) + 1) * H // (2 * (r1 - r0)), (2 * (col - c0) + 1) * W // (2 * (c1 - c0))


def line_cells(a: Cell, b: Cell) -> list[Cell]:
    """Cells on the straight line from ``a`` to ``b`` inclusive (Bresenham): consecutive cells are
    8-neighbours, so a fast drag sampled at a and b leaves no gap."""
    r0, c0 = int(a[0]), int(a[1])
    r1, c1 = int(b[0]), int(b[1])
    dr, dc = abs(r1 - r0), abs(c1 - c0)
    sr = 1 if r1 >= r0 else -1
    sc = 1 if c1 >= c0 else -1
    cells = []
    err = dc - dr
    r, c = r0, c0
    while True:
        cells.append((r, c))
        if r == r1 and c == c1:
            return cells
        e2 = 2 * err
        if e2 > -dr:
            err -= dr
            c += sc
        if e2 < dc:
            err += dc
            r += sr


def rect_between(a: Cell, b: Cell) -> tuple[int, int, int, int]:
    """Half-open block (r0, r1, c0, c1) spanned by two corner cells, in any order."""
    return min(a[0], b[0]), max(a[0], b[0]) + 1, min(a[1], b[1]), max(a[1], b[1]) + 1


def visible_region(x_range, y_range, n_rows: int, n_cols: int) -> tuple[int, int, int, int]:
    """Half-open cell block (r0, r1, c0, c1) touched by a view showing x_range x y_range,
    clipped to the matrix and never empty."""
    if n_rows <= 0 or n_cols <= 0:
        raise ValueError(f"matrix shape must be positive, got ({n_rows}, {n_cols})")
    x0, x1 = sorted(float(v) for v in x_range)
    y0, y1 = sorted(float(v) for v in y_range)
    c0 = min(max(int(math.floor(x0)), 0), n_cols - 1)
    c1 = max(min(int(math.ceil(x1)), n_cols), c0 + 1)
    r0 = min(max(int(math.floor(y0)), 0), n_rows - 1)
    r1 = max(min(int(math.ceil(y1)), n_rows), r0 + 1)
    return r0, r1, c0, c1


def label_step(n_cells: float, length_px: float, min_spacing_px: float) -> int:
    """Smallest "nice" step (1, 2, 5, 10, 20, 50 ...) so that labels every ``step`` cells are at
    least ``min_spacing_px`` apart when ``n_cells`` cells span ``length_px`` pixels."""
    if n_cells <= 0 or length_px <= 0:
        return 1
    px_per_cell = length_px / n_cells
    need = max(min_spacing_px, 1e-9) / px_per_cell
    scale = 1
    while True:
        for s in _NICE_STEPS:
            if s * scale >= need:
                return s * scale
        scale *= 10


def labelled_cells(lo: float, hi: float, step: int, n: int) -> list[int]:
    """Cells that are multiples of ``step`` and whose centre lies in the view interval [lo, hi]."""
    first = max(0, int(math.ceil(lo - 0.5)))
    last = min(n - 1, int(math.floor(hi - 0.5)))
    first = ((first + step - 1) // step) * step
    return list(range(first, last + 1, step)) if first <= last else []


AXIS_LABEL_CHARS = 12  # characters a token axis shows before it cuts a label


def compact_label(label: str, max_chars: int = AXIS_LABEL_CHARS) -> str:
    """``label`` cut to ``max_chars`` in the middle so its end stays readable: "fast actions3" ->
    "fast actio…3", not "fast action…" (the token index of a block is what tells rows apart)."""
    s = str(label)
    if len(s) <= max_chars or max_chars < 3:
        return s
    digits = len(s) - len(s.rstrip("0123456789"))
    tail = digits if 0 < digits <= max_chars // 2 else min(3, (max_chars - 1) // 2)
    head = max_chars - 1 - tail
    return s[:head] + "…" + s[len(s) - tail:]


def mosaic_tile(px: float, py: float, tile_shape, gap: int, rows: int, cols: int) -> Optional[Cell]:
    """(row, col) of the mosaic tile under pixel (px, py), or None in a gap or outside.

    Tiles of shape (th, tw) are laid out left to right, top to bottom, ``gap`` pixels apart."""
    th, tw = tile_shape
    if px < 0 or py < 0:
        return None
    r, ry = divmod(py, th + gap)
    c, cx = divmod(px, tw + gap)
    r, c = int(r), int(c)
    if r >= rows or c >= cols or ry >= th or cx >= tw:
        return None
    return r, c


def mosaic_origin(row: int, col: int, tile_shape, gap: int) -> tuple[int, int]:
    """Top-left pixel (x, y) of mosaic tile (row, col)."""
    th, tw = tile_shape
    return col * (tw + gap), row * (th + gap)


def patch_index(x: float, y: float, grid, patch: int, offset=(0, 0)) -> Optional[int]:
    """Row-major index of the image patch under image pixel (x, y), or None off the grid.

    ``grid`` is (gh, gw) patches of ``patch`` x ``patch`` pixels whose top-left corner sits at
    ``offset`` = (ox, oy) in the prepared image."""
    gh, gw = grid
    ox, oy = offset
    if patch <= 0:
        raise ValueError(f"patch size must be positive, got {patch}")
    if math.isnan(x) or math.isnan(y):
        return None
    c = math.floor((x - ox) / patch)
    r = math.floor((y - oy) / patch)
    if not (0 <= r < gh and 0 <= c < gw):
        return None
    return int(r * gw + c)


def patch_rect(index: int, grid, patch: int, offset=(0, 0)) -> tuple[int, int, int, int]:
    """Pixel rectangle (x, y, w, h) of patch ``index`` in the prepared image."""
    gh, gw = grid
    if not 0 <= index < gh * gw:
        raise ValueError(f"patch index {index} outside a {gh}x{gw} grid")
    r, c = divmod(int(index), gw)
    return offset[0] + c * patch, offset[1] + r * patch, patch, patch
