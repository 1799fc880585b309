"""MaskCanvas painting with real mouse events: strokes, interpolation, tools, tiles."""

import numpy as np
import pytest
from PySide6.QtCore import QRectF, Qt
from PySide6.QtWidgets import QGraphicsItem

from attnviz.model.display.cell_geometry import line_cells
from attnviz.model.display.overlays import hex_rgba
from attnviz.ui.theme import current_theme
from attnviz.ui.widgets.mask_canvas import (ALLOW, DENY, EMPTY, FULL, OUTLINE, PAINT_ALLOW, PAINT_DENY, PARTIAL, RULE_ALLOW,
                                           RULE_DENY, MaskCanvas, mask_codes, mask_colours, mask_rgba, state_codes,
                                           tile_rects)

T = 16


@pytest.fixture
def canvas(qtbot):
    c = MaskCanvas()
    qtbot.addWidget(c)
    c.resize(640, 640)
    c.show()
    qtbot.waitExposed(c)
    c.set_mask(np.tri(T, dtype=bool))
    return c


class Recorder:
    def __init__(self, c):
        self.events = []
        c.stroke_started.connect(lambda: self.events.append(("start",)))
        c.stroke_cells.connect(lambda cells, mode: self.events.append(("cells", list(cells), mode)))
        c.stroke_rect.connect(lambda *a: self.events.append(("rect",) + a))
        c.stroke_finished.connect(lambda: self.events.append(("finish",)))

    def cells(self):
        return [cell for e in self.events if e[0] == "cells" for cell in e[1]]

    def modes(self):
        return {e[2] for e in self.events if e[0] == "cells"}


def _at(c, row, col):
    return c.frame.cell_to_widget(row, col)


def test_fast_brush_drag_is_interpolated(canvas, mouse):
    rec = Recorder(canvas)
    vp = canvas.frame.viewport()
    # one mouse sample far from the press: the cells in between must still be painted
    mouse.drag(vp, [_at(canvas, 1, 1), _at(canvas, 9, 13)])
    assert rec.events[0] == ("start",) and rec.events[-1] == ("finish",)
    assert rec.cells() == line_cells((1, 1), (9, 13))
    assert rec.modes() == {"allow"}


def test_right_drag_denies_and_cells_are_not_repeated(canvas, mouse):
    rec = Recorder(canvas)
    vp = canvas.frame.viewport()
    pts = [_at(canvas, 2, 2), _at(canvas, 2, 8), _at(canvas, 2, 4), _at(canvas, 6, 4)]
    mouse.drag(vp, pts, button=Qt.MouseButton.RightButton)
    cells = rec.cells()
    assert len(cells) == len(set(cells))  # going back over painted cells emits nothing new
    expected = set(line_cells((2, 2), (2, 8))) | set(line_cells((2, 4), (6, 4)))
    assert set(cells) == expected
    assert rec.modes() == {"deny"}
    assert sum(1 for e in rec.events if e[0] == "start") == 1  # one stroke = one undo step


def test_click_paints_one_cell_and_eraser_erases(canvas, mouse):
    rec = Recorder(canvas)
    vp = canvas.frame.viewport()
    mouse.click(vp, _at(canvas, 5, 11))
    assert rec.events == [("start",), ("cells", [(5, 11)], "allow"), ("finish",)]
    canvas.set_tool("eraser")
    rec.events.clear()
    mouse.drag(vp, [_at(canvas, 0, 0), _at(canvas, 0, 3)])
    assert rec.cells() == [(0, 0), (0, 1), (0, 2), (0, 3)] and rec.modes() == {"erase"}


def test_rect_row_and_column_tools(canvas, mouse):
    rec = Recorder(canvas)
    vp = canvas.frame.viewport()
    canvas.set_tool("rect")
    mouse.drag(vp, [_at(canvas, 5, 3), _at(canvas, 4, 7), _at(canvas, 2, 1)])
    assert rec.events == [("start",), ("rect", 2, 6, 1, 4, "allow"), ("finish",)]
    assert not canvas.rubber.isVisible()

    canvas.set_tool("row")
    rec.events.clear()
    mouse.click(vp, _at(canvas, 4, 9), button=Qt.MouseButton.RightButton)
    assert rec.cells() == [(4, j) for j in range(T)] and rec.modes() == {"deny"}

    canvas.set_tool("column")
    rec.events.clear()
    mouse.drag(vp, [_at(canvas, 0, 2), _at(canvas, 10, 5)])
    assert sorted(rec.cells()) == sorted((i, j) for j in (2, 3, 4, 5) for i in range(T))

    with pytest.raises(ValueError, match="unknown tool"):
        canvas.set_tool("lasso")


def test_drag_leaving_the_matrix_paints_its_edge(canvas, mouse):
    rec = Recorder(canvas)
    vp = canvas.frame.viewport()
    mouse.drag(vp, [_at(canvas, 3, 13), _at(canvas, 3, 40)])
    assert rec.cells() == [(3, j) for j in range(13, T)]


def test_effective_mask_rows_and_overrides_are_distinct(canvas):
    rule = np.tri(T, dtype=bool)
    over = np.zeros((T, T), dtype=np.int8)
    over[0, 0] = DENY  # row 0 loses its only key
    over[1, 5] = ALLOW
    canvas.set_mask(rule, over)
    eff = canvas.effective_mask()
    assert not eff[0].any() and eff[1, 5] and eff[1, 0]
    assert canvas.fully_masked_rows().tolist() == [0]
    assert canvas.frame.row_flags[0] and not canvas.frame.row_flags[1:].any()
    assert "1 fully masked row" in canvas.status.text()
    colours = mask_colours(current_theme())
    rgba = mask_rgba(rule, over, colours, 1)
    assert tuple(rgba[1, 5]) == hex_rgba(colours.override_allow) != tuple(rgba[1, 0])
    assert tuple(rgba[0, 0]) == hex_rgba(colours.override_deny) != tuple(rgba[0, 1])
    big = mask_rgba(rule, over, colours, 4)  # with room, painted regions get an outline
    assert tuple(big[4 * 1, 4 * 5 + 2]) == hex_rgba(colours.outline)
    assert tuple(big[4 * 1 + 2, 4 * 5 + 2]) == hex_rgba(colours.override_allow)
    with pytest.raises(ValueError, match="overrides"):
        canvas.set_mask(rule, np.full((T, T), 3, dtype=np.int8))


def test_tile_overlay_summary_and_validation(canvas):
    states = np.array([[FULL, EMPTY], [PARTIAL, FULL]], dtype=np.int8)
    canvas.set_tiles(states, 8, 8)
    s = canvas.tile_summary()
    assert (s["empty"], s["partial"], s["full"]) == (1, 1, 2) and s["skipped"] == pytest.approx(0.25)
    assert canvas.tile_image.isVisible() and "25.0 % skipped" in canvas.status.text()
    canvas.set_tiles(np.array([[PARTIAL]], dtype=np.int8), 64, 64)  # a mask smaller than one tile
    assert canvas.tile_summary()["skipped"] == 0.0
    with pytest.raises(ValueError, match="do not fit"):
        canvas.set_tiles(np.zeros((3, 3), dtype=np.int8), 8, 8)
    canvas.set_tiles(None)
    assert not canvas.tile_image.isVisible() and canvas.tile_summary() is None


def test_large_mask_is_pooled_keeping_painted_cells(qtbot):
    c = MaskCanvas(max_display=256)
    qtbot.addWidget(c)
    over = np.zeros((1024, 1024), dtype=np.int8)
    over[500, 7] = ALLOW
    c.set_mask(np.zeros((1024, 1024), dtype=bool), over)
    img = c.mask_image.image  # picture codes drawn through the item's colour table
    assert img.shape[:2] == (256, 256)
    assert img[125, 1] == PAINT_ALLOW and (img == PAINT_ALLOW).sum() == 1
    assert tuple(c.mask_image.lut[img[125, 1]]) == hex_rgba(mask_colours(current_theme()).override_allow)


def test_shown_mask_pools_to_the_view_and_zoom_shows_cells(qtbot):
    c = MaskCanvas()
    qtbot.addWidget(c)
    c.resize(600, 560)
    c.show()
    qtbot.waitExposed(c)
    T = 3000
    rule = np.tri(T, dtype=bool)
    over = np.zeros((T, T), dtype=np.int8)
    over[2000, 2700] = ALLOW  # one painted cell above the diagonal
    over[10, 0] = DENY
    c.set_mask(rule, over)
    img = c.mask_image.image
    vb = c.frame.view.sceneBoundingRect()
    assert img.shape[0] <= vb.height() * c.devicePixelRatioF() + 1 and img.shape[1] <= vb.width() * c.devicePixelRatioF() + 1
    assert (img == PAINT_ALLOW).sum() == 1 and (img == PAINT_DENY).sum() == 1  # single cells survive pooling
    assert not c.mask_detail.isVisible()
    np.testing.assert_array_equal(c.effective_mask(), np.where(over == 0, rule, over > 0))
    with qtbot.waitSignal(c.frame.region_changed, timeout=2000):
        c.frame.view.setRange(xRange=(2690, 2710), yRange=(1990, 2010), padding=0)
    r0, r1, c0, c1 = c.frame.visible_region()
    detail = c.mask_detail.image
    assert c.mask_detail.isVisible() and (r1 - r0, c1 - c0) == (20, 20)
    assert detail.shape[0] % 20 == 0 and detail.shape[0] >= 20  # whole cells, each f x f sub-pixels
    f = detail.shape[0] // 20
    assert detail[(2000 - r0) * f + f // 2, (2700 - c0) * f + f // 2] == PAINT_ALLOW
    assert detail[(2001 - r0) * f + f // 2, (2700 - c0) * f + f // 2] == RULE_DENY


def test_a_mask_set_before_the_layout_is_pooled_no_larger_than_its_window_then_to_the_view(qtbot):
    from PySide6.QtWidgets import QVBoxLayout, QWidget

    window = QWidget()  # a shown window the canvas arrives in (a workspace's first visit)
    qtbot.addWidget(window)
    window.resize(420, 320)
    window.show()
    qtbot.waitExposed(window)
    c = MaskCanvas()
    QVBoxLayout(window).addWidget(c)
    T = 3000
    over = np.zeros((T, T), dtype=np.int8)
    over[2000, 2700] = ALLOW
    c.set_mask(np.tri(T, dtype=bool), over)  # before any layout: the view has no size yet
    ratio = c.devicePixelRatioF()
    img = c.mask_image.image
    assert img.shape[0] <= 320 * ratio and img.shape[1] <= 420 * ratio  # not max_display (2048) squared
    assert (img == PAINT_ALLOW).sum() == 1  # the painted cell survives
    c.show()
    qtbot.waitUntil(lambda: c.frame.view.sceneBoundingRect().width() >= 2, timeout=2000)

    def fits_view():
        vb, shown = c.frame.view.sceneBoundingRect(), c.mask_image.image.shape
        return abs(shown[0] - min(T, max(int(np.ceil(vb.height() * ratio)), 64))) <= 1 and \
            abs(shown[1] - min(T, max(int(np.ceil(vb.width() * ratio)), 64))) <= 1

    qtbot.waitUntil(fits_view, timeout=3000)  # the layout's resize pools it to the view
    assert (c.mask_image.image == PAINT_ALLOW).sum() == 1


def test_mask_picture_codes_and_outline():
    rule = np.tri(5, dtype=bool)
    over = np.zeros((5, 5), dtype=np.int8)
    over[1:3, 3] = ALLOW
    over[4, 0] = DENY
    codes = state_codes(rule, over)
    assert codes.dtype == np.uint8
    np.testing.assert_array_equal(codes & 1, np.where(over == 0, rule, over > 0))
    assert codes[1, 3] == PAINT_ALLOW and codes[4, 0] == PAINT_DENY and codes[0, 0] == RULE_ALLOW and codes[0, 4] == RULE_DENY
    pic = mask_codes(rule, over, 4)  # (20, 20)
    assert pic[4, 12 + 1] == OUTLINE and pic[4 + 1, 12 + 1] == PAINT_ALLOW  # top edge of the painted run
    assert pic[8, 12 + 1] == PAINT_ALLOW  # no outline between the two painted cells of one run
    assert pic[8, 12] == OUTLINE and pic[8, 15] == OUTLINE  # its left and right sides
    assert (mask_codes(rule, over, 2) != OUTLINE).all()  # no room for an outline below 3 sub-pixels


def test_tile_overlay_is_clipped_to_the_mask(qtbot):
    c = MaskCanvas()
    qtbot.addWidget(c)
    c.resize(500, 500)
    c.show()
    qtbot.waitExposed(c)
    c.set_mask(np.tri(44, dtype=bool))
    c.set_tiles(np.array([[PARTIAL]], dtype=np.int8), 64, 64)  # one 64 x 64 tile over a 44 x 44 mask
    inside = QRectF(0, 0, 44, 44)
    outline = c.tile_partial.path().boundingRect()
    assert inside.contains(outline) and outline.width() > 43 and outline.height() > 43
    assert c.tile_grid.path().boundingRect() == inside  # grid lines stop at the mask's edge
    assert c.tile_layer.rect() == inside and c.tile_image.parentItem() is c.tile_layer
    assert c.tile_layer.flags() & QGraphicsItem.GraphicsItemFlag.ItemClipsChildrenToShape

    c.set_mask(np.ones((100, 70), dtype=bool))  # ragged: 2 x 2 tiles of 64, the last ones cut
    c.set_tiles(np.array([[FULL, FULL], [FULL, FULL]], dtype=np.int8), 64, 64)
    rects = tile_rects(np.full((2, 2), FULL), FULL, 64, 64, 0.0, (100, 70))
    assert sorted(rects) == [(0.0, 0.0, 64.0, 64.0), (0.0, 64.0, 64.0, 36.0), (64.0, 0.0, 6.0, 64.0), (64.0, 64.0, 6.0, 36.0)]
    assert QRectF(0, 0, 70, 100).contains(c.tile_full.path().boundingRect())
    assert c.tile_grid.path().boundingRect() == QRectF(0, 0, 70, 100)
    assert c.tile_layer.rect() == QRectF(0, 0, 70, 100)
