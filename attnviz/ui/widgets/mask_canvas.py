"""MaskCanvas: the cell level of the mask designer. Shows the rule-derived mask (allow / deny) and
the painted override layer distinctly (overrides brighter, with an outline around painted regions),
an optional flash-tile overlay (empty / partial / full tiles), fully masked rows, segment bands and
token labels; the person paints with brush, rectangle, row, column and eraser tools.

Painting protocol: ``stroke_started()``, then any number of ``stroke_cells(cells, mode)`` (new cells
of the stroke only, interpolated between mouse samples) or one ``stroke_rect(r0, r1, c0, c1, mode)``
for the rectangle tool, then ``stroke_finished()``. ``mode`` is "allow" (left button), "deny" (right
button) or "erase" (eraser tool: cells return to their rule). The canvas does not change its own
mask: the owner applies the stroke and calls ``set_mask`` again.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QRectF, Qt, Signal
from PySide6.QtGui import QBrush, QColor, QPainterPath, QPen
from PySide6.QtWidgets import QGraphicsPathItem, QGraphicsRectItem, QLabel, QVBoxLayout, QWidget

from attnviz.model.segments import Segment
from attnviz.ui.theme import Theme, current_theme
from attnviz.ui.widgets.cell_geometry import clamped_pixel_to_cell, line_cells, rect_between
from attnviz.ui.widgets.matrix_frame import CellPicker, MatrixFrame
from attnviz.ui.widgets.pooling import pool_max
from attnviz.ui.widgets.rendering import hex_rgba, overlay_factor

EMPTY, PARTIAL, FULL = 0, 1, 2
TOOLS = ("brush", "rect", "row", "column", "eraser")
# override codes of the painted layer
DENY, NONE, ALLOW = -1, 0, 1


@dataclass(frozen=True)
class MaskColours:
    """Colours of the four cell states and the override outline for one theme."""

    rule_deny: str  # a cell its rule masks: quiet, close to the background
    rule_allow: str  # a cell its rule allows
    override_deny: str  # painted deny: darker and warmer than a rule deny
    override_allow: str  # painted allow: brighter than a rule allow
    outline: str  # border of painted regions


def mask_colours(theme: Theme) -> MaskColours:
    if theme.name == "dark":
        return MaskColours("#303030", "#3f6f9f", "#7a2333", "#62d0ff", "#ffb000")
    return MaskColours("#e6e6e6", "#5b8fc7", "#c0475a", "#8fe0ff", "#e08000")


def mask_rgba(rule: np.ndarray, overrides: np.ndarray, colours: MaskColours, factor: int) -> np.ndarray:
    """RGBA (H*f, W*f, 4) picture of a mask: rule cells in their colours, overrides in theirs, and
    (when factor >= 3) an outline along the border of every painted region."""
    state = np.where(overrides == ALLOW, 3, np.where(overrides == DENY, 2, rule.astype(np.int8)))  # (H, W)
    table = np.array([hex_rgba(colours.rule_deny), hex_rgba(colours.rule_allow),
                      hex_rgba(colours.override_deny), hex_rgba(colours.override_allow)], dtype=np.uint8)
    f = int(factor)
    up = np.repeat(np.repeat(state, f, axis=0), f, axis=1)  # (H*f, W*f)
    out = table[up]  # (H*f, W*f, 4)
    if f >= 3:
        painted = overrides != NONE
        pad = np.pad(overrides, 1, constant_values=NONE)  # (H+2, W+2)
        differs = {  # neighbour across each edge is not the same kind of override
            "top": pad[:-2, 1:-1] != overrides, "bottom": pad[2:, 1:-1] != overrides,
            "left": pad[1:-1, :-2] != overrides, "right": pad[1:-1, 2:] != overrides,
        }
        yy, xx = np.indices(up.shape, sparse=True)
        sub_y, sub_x = yy % f, xx % f
        edge = np.zeros(up.shape, dtype=bool)
        for side, sel in (("top", sub_y == 0), ("bottom", sub_y == f - 1), ("left", sub_x == 0), ("right", sub_x == f - 1)):
            cells = np.repeat(np.repeat(differs[side] & painted, f, axis=0), f, axis=1)  # (H*f, W*f)
            edge |= cells & sel
        out[edge] = hex_rgba(colours.outline)
    return np.ascontiguousarray(out)


def tile_rgba(states: np.ndarray, wash: str) -> np.ndarray:
    """RGBA (nQt, nKt, 4): empty tiles (skipped by the flash kernel) washed out with ``wash``,
    partial and full tiles clear (they are told apart by their outlines)."""
    out = np.zeros(states.shape + (4,), dtype=np.uint8)  # (nQt, nKt, 4)
    out[states == EMPTY] = hex_rgba(wash, 150)
    return out


def tile_outlines(states: np.ndarray, code: int, block_m: int, block_n: int, inset: float) -> QPainterPath:
    """Path of the outlines (inset by ``inset`` cells) of the tiles in state ``code``."""
    path = QPainterPath()
    for a, b in zip(*np.nonzero(states == code)):
        path.addRect(QRectF(b * block_n + inset, a * block_m + inset, block_n - 2 * inset, block_m - 2 * inset))
    return path


TILE_COLOURS = {PARTIAL: "#f0a020", FULL: "#30b060"}  # outline colours: amber partial, green full


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
    """Paintable view of a (Tq, Tk) attention mask."""

    stroke_started = Signal()
    stroke_cells = Signal(list, str)  # new (row, col) cells of the stroke, mode
    stroke_rect = Signal(int, int, int, int, str)  # rectangle tool: half-open r0, r1, c0, c1, mode
    stroke_finished = Signal()
    hovered = Signal(int, int)  # (row, col), (-1, -1) off the matrix

    def __init__(self, parent=None, *, max_display: int = 2048):
        super().__init__(parent)
        self.max_display = max_display  # cells per axis drawn one pixel each; larger masks are max-pooled
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

        self.mask_image = pg.ImageItem(axisOrder="row-major")
        self.tile_image = pg.ImageItem(axisOrder="row-major")
        self.tile_grid = QGraphicsPathItem()
        self.tile_partial = QGraphicsPathItem()
        self.tile_full = QGraphicsPathItem()
        self.rubber = QGraphicsRectItem()
        for item, z in ((self.mask_image, 0), (self.tile_image, 5), (self.tile_grid, 6), (self.tile_partial, 7),
                        (self.tile_full, 7), (self.rubber, 80)):
            item.setZValue(z)
            if isinstance(item, pg.ImageItem):
                item.setAcceptHoverEvents(False)
                item.setAcceptedMouseButtons(Qt.MouseButton.NoButton)
            view.addItem(item)
        for item in (self.tile_image, self.tile_grid, self.tile_partial, self.tile_full, self.rubber):
            item.setVisible(False)

        self._tool = "brush"
        self._rule: Optional[np.ndarray] = None  # (Tq, Tk) bool
        self._overrides: Optional[np.ndarray] = None  # (Tq, Tk) int8
        self._tiles: Optional[tuple[np.ndarray, int, int]] = None
        self._stroke_seen: set = set()
        self._stroke_rows: set = set()
        self._hover_text = ""
        self.picker.hovered.connect(self._on_hover)
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
            if not np.isin(o, (DENY, NONE, ALLOW)).all():
                raise ValueError("overrides may only hold -1 (deny), 0 (rule) and +1 (allow)")
            o = o.astype(np.int8)
        Tq, Tk = r.shape
        for labels, n, what in ((row_labels, Tq, "row"), (col_labels, Tk, "column")):
            if labels is not None and len(labels) != n:
                raise ValueError(f"{len(labels)} {what} labels for {n} {what}s")
        if self._tiles is not None and self._tiles[0].shape != self._tile_shape(Tq, Tk, *self._tiles[1:]):
            self._tiles = None
        self._rule, self._overrides = r, o
        self.frame.set_shape(Tq, Tk)
        self.frame.set_labels(row_labels, col_labels)
        self.frame.set_segments(row_segments, col_segments)
        self.frame.set_title(title)
        self.frame.set_row_flags(~self.effective_mask().any(axis=1))
        self._draw_mask()
        self._draw_tiles()
        self._update_status()

    def effective_mask(self) -> np.ndarray:
        """(Tq, Tk) bool: the rule where nothing is painted, the painted state elsewhere."""
        if self._rule is None:
            raise ValueError("no mask has been set")
        return np.where(self._overrides == NONE, self._rule, self._overrides == ALLOW)

    def fully_masked_rows(self) -> np.ndarray:
        return np.flatnonzero(~self.effective_mask().any(axis=1))

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

    def _draw_mask(self) -> None:
        if self._rule is None:
            return
        Tq, Tk = self._rule.shape
        colours = mask_colours(current_theme())
        if max(Tq, Tk) > self.max_display:
            # state codes ordered so that max pooling keeps painted cells and allowed cells visible
            codes = np.where(self._overrides == ALLOW, 3, np.where(self._overrides == DENY, 2,
                             self._rule.astype(np.int8))).astype(np.float32)  # (Tq, Tk)
            pooled, _ = pool_max(codes, None, (self.max_display, self.max_display))
            p = pooled.astype(np.int8)
            rule = p == 1
            over = np.where(p == 3, ALLOW, np.where(p == 2, DENY, NONE)).astype(np.int8)
            rgba = mask_rgba(rule, over, colours, 1)
        else:
            rgba = mask_rgba(self._rule, self._overrides, colours, overlay_factor((Tq, Tk)))
        self.mask_image.setImage(rgba, autoLevels=False, levels=None)
        self.mask_image.setRect(QRectF(0, 0, Tk, Tq))

    def _draw_tiles(self) -> None:
        items = (self.tile_image, self.tile_grid, self.tile_partial, self.tile_full)
        if self._tiles is None or self._rule is None:
            for item in items:
                item.setVisible(False)
            return
        theme = current_theme()
        states, bm, bn = self._tiles
        nQt, nKt = states.shape
        self.tile_image.setImage(tile_rgba(states, theme.plot_background), autoLevels=False, levels=None)
        self.tile_image.setRect(QRectF(0, 0, nKt * bn, nQt * bm))
        path = QPainterPath()
        for i in range(nQt + 1):
            path.moveTo(0, i * bm)
            path.lineTo(nKt * bn, i * bm)
        for j in range(nKt + 1):
            path.moveTo(j * bn, 0)
            path.lineTo(j * bn, nQt * bm)
        pen = QPen(QColor(theme.plot_foreground))
        pen.setCosmetic(True)
        pen.setWidthF(1.0)
        pen.setStyle(Qt.PenStyle.DashLine)
        self.tile_grid.setPen(pen)
        self.tile_grid.setPath(path)
        inset = min(0.12 * min(bm, bn), 0.35)
        for item, code in ((self.tile_partial, PARTIAL), (self.tile_full, FULL)):
            p = QPen(QColor(TILE_COLOURS[code]))
            p.setCosmetic(True)
            p.setWidthF(2.0)
            item.setPen(p)
            item.setPath(tile_outlines(states, code, bm, bn, inset))
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
        parts = [f"{Tq} x {Tk}", f"{int((self._overrides != NONE).sum())} painted"]
        n_dead = len(self.fully_masked_rows())
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
        self._draw_mask()
        self._draw_tiles()


def _main() -> None:  # pragma: no cover - manual demo
    import sys

    from PySide6.QtWidgets import QApplication

    from attnviz.ui.theme import apply_theme
    from attnviz.ui.widgets import samples

    app = QApplication.instance() or QApplication(sys.argv)
    apply_theme(app, "dark" if "--dark" in sys.argv else "light")
    ex = samples.river_bank()
    overrides = np.zeros(ex.mask.shape, dtype=np.int8)
    canvas = MaskCanvas()

    def apply(cells, mode):
        for i, j in cells:
            overrides[i, j] = {"allow": ALLOW, "deny": DENY, "erase": NONE}[mode]

    def apply_rect(r0, r1, c0, c1, mode):
        overrides[r0:r1, c0:c1] = {"allow": ALLOW, "deny": DENY, "erase": NONE}[mode]

    def refresh():
        canvas.set_mask(ex.mask, overrides, row_labels=ex.tokens, col_labels=ex.tokens,
                        row_segments=ex.segments, col_segments=ex.segments, title="mask")

    canvas.stroke_cells.connect(lambda c, m: (apply(c, m), refresh()))
    canvas.stroke_rect.connect(lambda *a: (apply_rect(*a), refresh()))
    refresh()
    canvas.resize(700, 640)
    canvas.show()
    app.exec()


if __name__ == "__main__":
    _main()
