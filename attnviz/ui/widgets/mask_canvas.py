"""MaskCanvas: the cell level of the mask designer. It shows the rule-derived mask and the painted
cells apart, the flash tiles, fully masked rows and segment bands, and turns mouse strokes into
signals. Every cell is a uint8 state code drawn through a colour table, max-pooled to the view's
pixels with codes ordered so that a single painted cell always stays visible.
"""

from __future__ import annotations

from typing import Optional, Sequence

import numpy as np
from PySide6.QtCore import QRectF, Qt, QTimer, Signal
from PySide6.QtGui import QBrush, QColor, QPainterPath, QPen
from PySide6.QtWidgets import QGraphicsPathItem, QGraphicsRectItem, QLabel, QVBoxLayout, QWidget

from attnviz.model.display.cell_geometry import clamped_pixel_to_cell, line_cells, rect_between
from attnviz.model.display.mask_codes import (ALLOW, DENY, EMPTY, FULL, NONE, OUTLINE, PAINT_ALLOW, PAINT_DENY, PARTIAL,
                                              RULE_ALLOW, RULE_DENY, THEME_COLOURS, TILE_COLOURS, MaskColours,
                                              mask_codes, mask_lut, mask_rgba, rows_without, state_codes, tile_lut,
                                              tile_rects)  # noqa: F401 - the codes are re-exported
from attnviz.model.display.overlays import overlay_factor
from attnviz.model.display.pooling import max_pool
from attnviz.model.segments import Segment
from attnviz.ui.theme import Theme, current_theme
from attnviz.ui.widgets.matrix_frame import CellPicker, MatrixFrame
from attnviz.ui.widgets.lut_image import LutImageItem

TOOLS = ("brush", "rect", "row", "column", "eraser")


def mask_colours(theme: Theme) -> MaskColours:
    """The mask's colours in ``theme``."""
    return THEME_COLOURS["dark" if theme.name == "dark" else "light"]


def tile_outlines(states: np.ndarray, code: int, block_m: int, block_n: int, inset: float,
                  shape: Optional[tuple[int, int]] = None) -> QPainterPath:
    """Path of the outlines (inset by ``inset`` cells) of the tiles in state ``code``, cut at the
    mask's edge when its ``shape`` (Tq, Tk) is given."""
    path = QPainterPath()
    for x, y, w, h in tile_rects(states, code, block_m, block_n, inset, shape):
        path.addRect(QRectF(x, y, w, h))
    return path


def tile_grid(n_tile_rows: int, n_tile_cols: int, block_m: int, block_n: int,
              shape: Optional[tuple[int, int]] = None) -> QPainterPath:
    """Path of the tile boundaries, cut at the mask's edge when its ``shape`` (Tq, Tk) is given."""
    height, width = n_tile_rows * block_m, n_tile_cols * block_n
    if shape is not None:
        height, width = min(height, shape[0]), min(width, shape[1])
    path = QPainterPath()
    for i in range(n_tile_rows + 1):
        y = min(i * block_m, height)
        path.moveTo(0, y)
        path.lineTo(width, y)
    for j in range(n_tile_cols + 1):
        x = min(j * block_n, width)
        path.moveTo(x, 0)
        path.lineTo(x, height)
    return path


class PaintPicker(CellPicker):
    """The picker of the canvas: it accepts left and right drags and turns them into strokes."""

    def __init__(self, canvas: "MaskCanvas"):
        super().__init__()
        self._canvas = canvas
        self._last_cell: Optional[tuple[int, int]] = None
        self._start_cell: Optional[tuple[int, int]] = None
        self._mode = "allow"

    def _clamped(self, pos) -> tuple[int, int]:
        return clamped_pixel_to_cell(pos.x(), pos.y(), (1, 1), self.extent)

    def _mode_for(self, button) -> Optional[str]:
        if self._canvas.tool() == "eraser":
            return "erase" if button in (Qt.MouseButton.LeftButton, Qt.MouseButton.RightButton) else None
        return {Qt.MouseButton.LeftButton: "allow", Qt.MouseButton.RightButton: "deny"}.get(button)

    def mouseDragEvent(self, ev):
        mode = self._mode_for(ev.button())
        if mode is None:
            ev.ignore()  # middle drags pan the view
            return
        if ev.isStart():
            start = self.cell_at(ev.buttonDownPos())
            if start is None:
                ev.ignore()
                return
            ev.accept()
            self._mode = mode
            self._start_cell = self._last_cell = start
            self._canvas._begin_stroke(start, mode)
        if self._start_cell is None:
            ev.ignore()
            return
        ev.accept()
        cell = self._clamped(ev.pos())
        self._canvas._continue_stroke(self._start_cell, self._last_cell, cell, self._mode)
        self._last_cell = cell
        if ev.isFinish():
            self._canvas._end_stroke(self._start_cell, cell, self._mode)
            self._start_cell = self._last_cell = None

    def mouseClickEvent(self, ev):
        mode = self._mode_for(ev.button())
        cell = self.cell_at(ev.pos())
        if mode is None or cell is None:
            ev.ignore()
            return
        ev.accept()
        self._canvas._begin_stroke(cell, mode)
        self._canvas._continue_stroke(cell, cell, cell, mode)
        self._canvas._end_stroke(cell, cell, mode)


class MaskCanvas(QWidget):
    """Paintable view of a (Tq, Tk) attention mask. A stroke is ``stroke_started``, then new cells
    (``stroke_cells``, interpolated between mouse samples) or one ``stroke_rect``, then
    ``stroke_finished``; mode is "allow" (left button), "deny" (right) or "erase" (back to the rule).
    The canvas never changes its own mask: the owner applies the stroke and calls ``set_mask``."""

    stroke_started = Signal()
    stroke_cells = Signal(list, str)  # new (row, col) cells of the stroke, mode
    stroke_rect = Signal(int, int, int, int, str)  # rectangle tool: half-open r0, r1, c0, c1, mode
    stroke_finished = Signal()
    hovered = Signal(int, int)  # (row, col), (-1, -1) off the matrix

    def __init__(self, parent=None, *, max_display: int = 2048):
        super().__init__(parent)
        self.max_display = max_display  # image pixels per axis at most (and at most the view's screen pixels)
        self.frame = MatrixFrame(self)
        self.status = QLabel(" ", self)
        self.status.setContentsMargins(6, 0, 6, 2)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(2)
        layout.addWidget(self.frame, 1)
        layout.addWidget(self.status)

        view = self.frame.view
        view.removeItem(self.frame.picker)
        self.frame.picker = self.picker = PaintPicker(self)
        self.picker.setZValue(100)
        view.addItem(self.picker)
        view.setMouseEnabled(True, True)

        self.mask_image = LutImageItem()
        self.mask_detail = LutImageItem()  # the zoomed-in block at the view's resolution, over the base
        self.tile_layer = QGraphicsRectItem()  # clips the tile overlay to the mask (tiles may reach past it)
        self.tile_layer.setPen(QPen(Qt.PenStyle.NoPen))
        self.tile_layer.setFlag(QGraphicsRectItem.GraphicsItemFlag.ItemClipsChildrenToShape)
        self.tile_layer.setAcceptedMouseButtons(Qt.MouseButton.NoButton)
        self.tile_image = LutImageItem()
        self.tile_grid = QGraphicsPathItem()
        self.tile_partial = QGraphicsPathItem()
        self.tile_full = QGraphicsPathItem()
        self.rubber = QGraphicsRectItem()
        for item, z in ((self.mask_image, 0), (self.mask_detail, 1), (self.tile_layer, 5), (self.rubber, 80)):
            item.setZValue(z)
            view.addItem(item)
        for item, z in ((self.tile_image, 0), (self.tile_grid, 1), (self.tile_partial, 2), (self.tile_full, 2)):
            item.setZValue(z)
            item.setParentItem(self.tile_layer)
        for item in (self.tile_grid, self.tile_partial, self.tile_full):  # thousands of outlines: stroke
            item.setCacheMode(QGraphicsPathItem.CacheMode.DeviceCoordinateCache)  # once, not every repaint
        for item in (self.mask_image, self.mask_detail, self.tile_image):
            item.setAcceptHoverEvents(False)
            item.setAcceptedMouseButtons(Qt.MouseButton.NoButton)
        for item in (self.mask_detail, self.tile_image, self.tile_grid, self.tile_partial, self.tile_full, self.rubber):
            item.setVisible(False)

        self._tool = "brush"
        self._rule: Optional[np.ndarray] = None  # (Tq, Tk) bool
        self._overrides: Optional[np.ndarray] = None  # (Tq, Tk) int8
        self._codes: Optional[np.ndarray] = None  # (Tq, Tk) uint8 state codes (see state_codes)
        self._dead_rows: Optional[np.ndarray] = None  # (Tq,) bool fully masked rows
        self._n_painted = 0
        self._tiles: Optional[tuple[np.ndarray, int, int]] = None
        self._tiles_drawn: Optional[tuple] = None  # (states, bm, bn, shape, theme) the overlay shows
        self._lut: Optional[np.ndarray] = None  # (256, 4) colours of the picture codes in the current theme
        self._pooled = False  # the base picture shows several cells a pixel
        self._stroke_seen: set = set()
        self._stroke_rows: set = set()
        self._hover_text = ""
        self.picker.hovered.connect(self._on_hover)
        self.frame.region_changed.connect(self._on_region)
        self._resize_timer = QTimer(self)
        self._resize_timer.setSingleShot(True)
        self._resize_timer.setInterval(150)
        self._resize_timer.timeout.connect(self._on_resized)
        view.sigResized.connect(lambda *_: self._resize_timer.start())
        self.on_theme_changed(current_theme())

    # -- public API ----------------------------------------------------------------------------
    def set_mask(self, rule, overrides=None, *, row_labels: Optional[Sequence[str]] = None,
                 col_labels: Optional[Sequence[str]] = None, row_segments: Sequence[Segment] = (),
                 col_segments: Sequence[Segment] = (), title: str = "") -> None:
        """Show the rule-derived mask ``rule`` (Tq, Tk) bool and the painted ``overrides`` (Tq, Tk)
        int8 (-1 deny, 0 none, +1 allow)."""
        r = np.asarray(rule)
        if r.ndim != 2 or r.size == 0 or r.dtype != bool:
            raise ValueError(f"rule mask must be a non-empty (Tq, Tk) bool array, got {r.dtype} {r.shape}")
        if overrides is None:
            o = np.zeros(r.shape, dtype=np.int8)  # (Tq, Tk)
        else:
            o = np.asarray(overrides)
            if o.shape != r.shape or not np.issubdtype(o.dtype, np.integer):
                raise ValueError(f"overrides must be an integer array of shape {r.shape}, got {o.dtype} {o.shape}")
            if int(o.min()) < DENY or int(o.max()) > ALLOW:
                raise ValueError("overrides may only hold -1 (deny), 0 (rule) and +1 (allow)")
            held = self._overrides
            if held is not None and held.shape == o.shape and held is not o:
                np.copyto(held, o, casting="unsafe")  # a copy (the owner may edit its array) in the held buffer
                o = held
            else:
                o = o.astype(np.int8)
        Tq, Tk = r.shape
        for labels, n, what in ((row_labels, Tq, "row"), (col_labels, Tk, "column")):
            if labels is not None and len(labels) != n:
                raise ValueError(f"{len(labels)} {what} labels for {n} {what}s")
        if self._tiles is not None and self._tiles[0].shape != self._tile_shape(Tq, Tk, *self._tiles[1:]):
            self._tiles = None
        self._rule, self._overrides = r, o
        self._codes = state_codes(r, o, out=self._codes)  # (Tq, Tk) the buffer is reused between strokes
        self._dead_rows = rows_without(self._codes, 1)  # (Tq,) no allowed (odd) code in the row
        self._n_painted = int(np.count_nonzero(o))
        self.frame.set_shape(Tq, Tk)
        self.frame.set_labels(row_labels, col_labels)
        self.frame.set_segments(row_segments, col_segments)
        self.frame.set_title(title)
        self.frame.set_row_flags(self._dead_rows)
        self._draw_mask()
        self._draw_tiles()
        self._update_status()

    def effective_mask(self) -> np.ndarray:
        """(Tq, Tk) bool: the rule where nothing is painted, the painted state elsewhere."""
        if self._rule is None:
            raise ValueError("no mask has been set")
        return (self._codes & 1).view(bool)

    def fully_masked_rows(self) -> np.ndarray:
        if self._rule is None:
            raise ValueError("no mask has been set")
        return np.flatnonzero(self._dead_rows)

    @property
    def tiles(self) -> Optional[tuple[np.ndarray, int, int]]:
        """(states, block_m, block_n) of the tile overlay set with set_tiles, or None when it is hidden."""
        return self._tiles

    def set_tiles(self, states, block_m: int = 64, block_n: int = 64) -> None:
        """Overlay the flash-tile classification (nQt, nKt) int8 EMPTY/PARTIAL/FULL for
        BLOCK_M x BLOCK_N tiles, or hide it with None."""
        if states is None:
            self._tiles = None
        else:
            s = np.asarray(states)
            if block_m <= 0 or block_n <= 0:
                raise ValueError(f"tile sizes must be positive, got {block_m} x {block_n}")
            if self._rule is not None and s.shape != self._tile_shape(*self._rule.shape, block_m, block_n):
                raise ValueError(f"tile states of shape {s.shape} do not fit a {self._rule.shape} mask "
                                 f"in {block_m}x{block_n} tiles")
            if s.ndim != 2 or not np.isin(s, (EMPTY, PARTIAL, FULL)).all():
                raise ValueError("tile states must be a 2-D array of 0 (empty), 1 (partial), 2 (full)")
            self._tiles = (s.astype(np.int8), int(block_m), int(block_n))
        self._draw_tiles()
        self._update_status()

    def set_tool(self, name: str) -> None:
        if name not in TOOLS:
            raise ValueError(f"unknown tool {name!r}; choose one of {', '.join(TOOLS)}")
        self._tool = name

    def tool(self) -> str:
        return self._tool

    def set_selected_row(self, row: Optional[int]) -> None:
        self.frame.set_selected_row(row)

    # -- stroke handling (called by the picker) ------------------------------------------------------
    def _begin_stroke(self, cell, mode) -> None:
        self._stroke_seen = set()
        self._stroke_rows = set()
        self.stroke_started.emit()
        if self._tool == "rect":
            self._show_rubber(cell, cell, mode)

    def _continue_stroke(self, start, last, cell, mode) -> None:
        tool = self._tool
        if tool == "rect":
            self._show_rubber(start, cell, mode)
            return
        path = line_cells(last, cell)
        Tq, Tk = self._rule.shape
        new: list[tuple[int, int]] = []
        if tool in ("brush", "eraser"):
            for c in path:
                if c not in self._stroke_seen:
                    self._stroke_seen.add(c)
                    new.append(c)
        elif tool == "row":
            for r, _ in path:
                if r not in self._stroke_rows:
                    self._stroke_rows.add(r)
                    new.extend((r, j) for j in range(Tk))
        elif tool == "column":
            for _, c in path:
                if c not in self._stroke_rows:
                    self._stroke_rows.add(c)
                    new.extend((i, c) for i in range(Tq))
        if new:
            self.stroke_cells.emit(new, mode)

    def _end_stroke(self, start, cell, mode) -> None:
        if self._tool == "rect":
            self.rubber.setVisible(False)
            self.stroke_rect.emit(*rect_between(start, cell), mode)
        self.stroke_finished.emit()

    def _show_rubber(self, a, b, mode) -> None:
        r0, r1, c0, c1 = rect_between(a, b)
        colours = mask_colours(current_theme())
        colour = {"allow": colours.override_allow, "deny": colours.override_deny}.get(mode, colours.rule_deny)
        pen = QPen(QColor(colours.outline))
        pen.setCosmetic(True)
        pen.setWidthF(2.0)
        fill = QColor(colour)
        fill.setAlpha(110)
        self.rubber.setPen(pen)
        self.rubber.setBrush(QBrush(fill))
        self.rubber.setRect(QRectF(c0, r0, c1 - c0, r1 - r0))
        self.rubber.setVisible(True)

    # -- drawing -------------------------------------------------------------------------------
    @staticmethod
    def _tile_shape(Tq, Tk, block_m, block_n) -> tuple[int, int]:
        return -(-Tq // block_m), -(-Tk // block_n)

    def _display_shape(self, n_rows: int, n_cols: int) -> tuple[int, int]:
        """Image pixels per axis: at most ``max_display`` and, once the view is laid out, at most its
        screen pixels (max pooling keeps every painted cell visible; a larger image would be thinned
        out by the painter, and a single painted cell could vanish). Before that, at most the shown
        window's (or else the screen's) pixels: a picture of ``max_display`` squared cells took longer
        to pool and to paint than any view shows, and the layout's resize pools it to the view anyway."""
        rect = self.frame.view.sceneBoundingRect()
        ratio = self.devicePixelRatioF()
        cap_h = cap_w = self.max_display
        if rect.width() >= 2 and rect.height() >= 2:
            height, width = rect.height(), rect.width()
        else:
            win = self.window()
            screen = self.screen()
            size = win.size() if win is not self and win.isVisible() else (screen.size() if screen else None)
            height, width = (size.height(), size.width()) if size is not None else (cap_h, cap_w)
        cap_h = min(cap_h, max(int(np.ceil(height * ratio)), 64))
        cap_w = min(cap_w, max(int(np.ceil(width * ratio)), 64))
        return min(n_rows, cap_h), min(n_cols, cap_w)

    def _picture(self, r0: int, r1: int, c0: int, c1: int) -> tuple[np.ndarray, bool]:
        """Picture codes of the cell block and whether they are pooled (several cells a pixel)."""
        shape = self._display_shape(r1 - r0, c1 - c0)
        if shape != (r1 - r0, c1 - c0):
            return max_pool(self._codes[r0:r1, c0:c1], shape), True  # (H, W) painted cells survive
        factor = overlay_factor((r1 - r0, c1 - c0))
        block = (slice(r0, r1), slice(c0, c1))
        return mask_codes(self._rule[block], self._overrides[block], factor, self._codes[block]), False

    def _draw_mask(self) -> None:
        if self._rule is None:
            return
        Tq, Tk = self._rule.shape
        codes, self._pooled = self._picture(0, Tq, 0, Tk)
        self.mask_image.setImage(codes, lut=self._lut, levels=None, autoLevels=False, autoDownsample=False)
        self.mask_image.setRect(QRectF(0, 0, Tk, Tq))
        self._draw_detail(self.frame.visible_region())

    def _draw_detail(self, region) -> None:
        """Over a pooled picture, the visible block again at the view's resolution."""
        if self._rule is None:
            return
        r0, r1, c0, c1 = region
        Tq, Tk = self._rule.shape
        if not self._pooled or (r0, r1, c0, c1) == (0, Tq, 0, Tk):
            self.mask_detail.setVisible(False)
            return
        codes, _ = self._picture(r0, r1, c0, c1)
        self.mask_detail.setImage(codes, lut=self._lut, levels=None, autoLevels=False, autoDownsample=False)
        self.mask_detail.setRect(QRectF(c0, r0, c1 - c0, r1 - r0))
        self.mask_detail.setVisible(True)

    def _on_region(self, r0: int, r1: int, c0: int, c1: int) -> None:
        self._draw_detail((r0, r1, c0, c1))

    def _on_resized(self) -> None:
        if self._rule is not None and self.mask_image.image is not None:
            Tq, Tk = self._rule.shape
            if self._display_shape(Tq, Tk) != self.mask_image.image.shape[:2] or self.mask_detail.isVisible():
                self._draw_mask()

    def _draw_tiles(self) -> None:
        items = (self.tile_image, self.tile_grid, self.tile_partial, self.tile_full)
        if self._tiles is None or self._rule is None:
            self._tiles_drawn = None
            for item in items:
                item.setVisible(False)
            return
        theme = current_theme()
        states, bm, bn = self._tiles
        shape = self._rule.shape
        drawn = self._tiles_drawn
        if (drawn is not None and drawn[1:] == (bm, bn, shape, theme.name)
                and np.array_equal(drawn[0], states)):
            return  # a stroke rarely changes a tile: keep the overlay as it is
        self._tiles_drawn = (states, bm, bn, shape, theme.name)
        nQt, nKt = states.shape
        self.tile_layer.setRect(QRectF(0, 0, shape[1], shape[0]))
        self.tile_image.setImage(states.astype(np.uint8), lut=tile_lut(theme.plot_background), levels=None,
                                 autoLevels=False, autoDownsample=False)
        self.tile_image.setRect(QRectF(0, 0, nKt * bn, nQt * bm))  # the layer cuts the last tiles at the edge
        pen = QPen(QColor(theme.plot_foreground))
        pen.setCosmetic(True)
        pen.setWidthF(1.0)
        pen.setStyle(Qt.PenStyle.DashLine)
        self.tile_grid.setPen(pen)
        self.tile_grid.setPath(tile_grid(nQt, nKt, bm, bn, shape))
        inset = min(0.12 * min(bm, bn), 0.35)
        for item, code in ((self.tile_partial, PARTIAL), (self.tile_full, FULL)):
            p = QPen(QColor(TILE_COLOURS[code]))
            p.setCosmetic(True)
            p.setWidthF(2.0)
            item.setPen(p)
            item.setPath(tile_outlines(states, code, bm, bn, inset, shape))
        for item in items:
            item.setVisible(True)

    def tile_summary(self) -> Optional[dict]:
        """Counts of empty, partial and full tiles and the skipped fraction, or None."""
        if self._tiles is None:
            return None
        s = self._tiles[0]
        counts = {name: int((s == code).sum()) for name, code in (("empty", EMPTY), ("partial", PARTIAL), ("full", FULL))}
        counts["skipped"] = counts["empty"] / s.size
        return counts

    def _update_status(self) -> None:
        if self._rule is None:
            return
        Tq, Tk = self._rule.shape
        parts = [f"{Tq} x {Tk}", f"{self._n_painted} painted"]
        n_dead = int(np.count_nonzero(self._dead_rows))
        if n_dead:
            parts.append(f"{n_dead} fully masked row{'s' if n_dead != 1 else ''}")
        summary = self.tile_summary()
        if summary is not None:
            parts.append(f"tiles {self._tiles[1]}x{self._tiles[2]}: {summary['empty']} empty / "
                         f"{summary['partial']} partial / {summary['full']} full "
                         f"({100 * summary['skipped']:.1f} % skipped)")
        if self._hover_text:
            parts.append(self._hover_text)
        self.status.setText("  ·  ".join(parts))

    def _on_hover(self, row: int, col: int) -> None:
        if row >= 0 and self._rule is not None:
            o = int(self._overrides[row, col])
            state = {ALLOW: "painted allow", DENY: "painted deny"}.get(o, "rule allow" if self._rule[row, col] else "rule deny")
            self._hover_text = f"q {row} · k {col}: {state}"
        else:
            self._hover_text = ""
        self._update_status()
        self.hovered.emit(row, col)

    def on_theme_changed(self, theme: Theme) -> None:
        self._lut = mask_lut(mask_colours(theme))
        self._draw_mask()
        self._draw_tiles()
