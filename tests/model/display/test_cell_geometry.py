"""The pixel/cell/patch/tile arithmetic behind the widgets."""

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from attnviz.model.display import cell_geometry as g
from attnviz.model.display.pooling import pool_edges


def cell_to_pixel(row: int, col: int, image_shape, extent) -> tuple[float, float]:
    """Image pixel coordinate (px, py) of the centre of cell (row, col): the inverse the tests check
    pixel_to_cell against."""
    H, W, r0, r1, c0, c1 = g._check_extent(image_shape, extent)
    if not (r0 <= row < r1 and c0 <= col < c1):
        raise ValueError(f"cell ({row}, {col}) is outside extent {extent}")
    return (col - c0 + 0.5) * W / (c1 - c0), (row - r0 + 0.5) * H / (r1 - r0)


def test_pixel_to_cell_identity_extent():
    ext = (0, 4, 0, 6)
    assert g.pixel_to_cell(0.0, 0.0, (4, 6), ext) == (0, 0)
    assert g.pixel_to_cell(5.999, 3.999, (4, 6), ext) == (3, 5)
    assert g.pixel_to_cell(2.5, 1.0, (4, 6), ext) == (1, 2)  # x is the column, y the row
    assert g.pixel_to_cell(6.0, 1.0, (4, 6), ext) is None
    assert g.pixel_to_cell(-0.01, 1.0, (4, 6), ext) is None
    assert g.pixel_to_cell(float("nan"), 1.0, (4, 6), ext) is None


def test_pixel_to_cell_pooled_and_offset_extent():
    # a 2x2 image showing rows 10..20 and columns 100..140: each pixel covers 5 rows x 20 columns
    assert g.pixel_to_cell(0.0, 0.0, (2, 2), (10, 20, 100, 140)) == (10, 100)
    assert g.pixel_to_cell(1.5, 0.99, (2, 2), (10, 20, 100, 140)) == (14, 130)
    assert g.pixel_to_cell(1.999, 1.999, (2, 2), (10, 20, 100, 140)) == (19, 139)
    # a single pixel stretched over a whole 65536 x 65536 matrix (the picker item)
    assert g.pixel_to_cell(0.5, 0.25, (1, 1), (0, 65536, 0, 65536)) == (16384, 32768)


@given(st.integers(1, 300), st.integers(1, 300), st.integers(1, 50), st.integers(1, 50), st.data())
def test_cell_pixel_round_trip(n_rows, n_cols, H, W, data):
    H, W = min(H, n_rows), min(W, n_cols)
    row = data.draw(st.integers(0, n_rows - 1))
    col = data.draw(st.integers(0, n_cols - 1))
    ext = (0, n_rows, 0, n_cols)
    if H == n_rows and W == n_cols:
        px, py = cell_to_pixel(row, col, (H, W), ext)
        assert g.pixel_to_cell(px, py, (H, W), ext) == (row, col)
    y, x = g.cell_to_image_index(row, col, (H, W), ext)
    assert 0 <= y < H and 0 <= x < W
    # the cell under a pixel's centre is pooled into that pixel (drawn = pooled = picked)
    back = g.pixel_to_cell(x + 0.5, y + 0.5, (H, W), ext)
    assert g.cell_to_image_index(*back, (H, W), ext) == (y, x)
    edges_r = pool_edges(n_rows, H)
    assert edges_r[y] <= row < edges_r[y + 1]


def test_clamped_cell_snaps_to_edges():
    ext = (0, 5, 0, 7)
    assert g.clamped_pixel_to_cell(-3.0, 2.2, (5, 7), ext) == (2, 0)
    assert g.clamped_pixel_to_cell(100.0, 100.0, (5, 7), ext) == (4, 6)


def test_bad_extent_raises():
    with pytest.raises(ValueError, match="extent"):
        g.pixel_to_cell(0, 0, (2, 2), (3, 3, 0, 1))
    with pytest.raises(ValueError, match="outside"):
        cell_to_pixel(9, 0, (2, 2), (0, 2, 0, 2))


@given(st.integers(-40, 40), st.integers(-40, 40), st.integers(-40, 40), st.integers(-40, 40))
def test_line_cells_connected_and_exact(r0, c0, r1, c1):
    cells = g.line_cells((r0, c0), (r1, c1))
    assert cells[0] == (r0, c0) and cells[-1] == (r1, c1)
    assert len(cells) == max(abs(r1 - r0), abs(c1 - c0)) + 1
    assert len(set(cells)) == len(cells)
    for (a, b), (c, d) in zip(cells, cells[1:]):
        assert max(abs(a - c), abs(b - d)) == 1  # 8-neighbours: no gap


def test_line_cells_known_line():
    assert g.line_cells((0, 0), (2, 4)) == [(0, 0), (0, 1), (1, 2), (1, 3), (2, 4)]


def test_rect_between_and_visible_region():
    assert g.rect_between((5, 1), (2, 3)) == (2, 6, 1, 4)
    assert g.visible_region((2.5, 10.2), (-3.0, 4.0), 8, 9) == (0, 4, 2, 9)
    assert g.visible_region((100, 200), (100, 200), 8, 9) == (7, 8, 8, 9)  # never empty


def test_label_step_and_cells():
    # 512 cells over 560 px with labels needing 16 px: 1.09 px per cell -> at least 14.6 cells apart
    assert g.label_step(512, 560, 16) == 20
    assert g.label_step(12, 600, 16) == 1
    assert g.labelled_cells(0, 512, 20, 512)[:3] == [0, 20, 40]
    assert g.labelled_cells(3.2, 9.9, 2, 100) == [4, 6, 8]
    for n, length, sp in ((65536, 800, 14), (100, 100, 30), (7, 500, 5)):
        step = g.label_step(n, length, sp)
        assert step * length / n >= sp
        assert str(step)[0] in "125" and set(str(step)[1:]) <= {"0"}


def test_mosaic_tile_and_origin():
    # 2 x 3 tiles of 10 x 8 pixels, 2 px gaps
    assert g.mosaic_tile(0, 0, (10, 8), 2, 2, 3) == (0, 0)
    assert g.mosaic_tile(8.5, 3, (10, 8), 2, 2, 3) is None  # in the gap
    assert g.mosaic_tile(25, 15, (10, 8), 2, 2, 3) == (1, 2)
    assert g.mosaic_tile(25, 25, (10, 8), 2, 2, 3) is None  # below the last row
    assert g.mosaic_origin(1, 2, (10, 8), 2) == (20, 12)


def test_patch_index_with_offset():
    grid, P, off = (3, 4), 16, (8, 5)
    assert g.patch_index(8, 5, grid, P, off) == 0
    assert g.patch_index(7.9, 5, grid, P, off) is None
    assert g.patch_index(8 + 16 * 3 + 15.9, 5 + 16 * 2 + 1, grid, P, off) == 11
    assert g.patch_index(8 + 16 * 4, 5, grid, P, off) is None
    assert g.patch_rect(6, grid, P, off) == (8 + 32, 5 + 16, 16, 16)
    assert math.isclose(g.patch_index(8 + 16 * 1.5, 5 + 16 * 1.5, grid, P, off), 5)
    with pytest.raises(ValueError):
        g.patch_rect(12, grid, P, off)
