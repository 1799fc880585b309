"""The frame every cell-matrix widget is drawn in: a view with rows (queries) top to bottom and
columns (keys) left to right, token axes on the left and top, a segment band along each axis, a
strip marking fully masked rows, a selected-row outline, a transparent picker item that turns mouse
events into cells, and a debounced signal for the visible cell block."""

from __future__ import annotations

from typing import Optional, Sequence

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QEvent, QPointF, QRectF, QSize, Qt, QTimer, Signal
from PySide6.QtGui import QColor, QPen, QTextDocument, QTextOption
from PySide6.QtWidgets import QGraphicsRectItem

from attnviz.model.display.cell_geometry import cell_to_image_index, pixel_to_cell, visible_region
from attnviz.model.display.overlays import band_rgba, hatch_codes, hatch_lut, overlay_factor, strip_rgba
from attnviz.model.segments import Segment
from attnviz.ui.theme import Theme, current_theme
from attnviz.ui.widgets.lut_image import LutImageItem
from attnviz.ui.widgets.token_axis import TokenAxis


class CellPicker(pg.ImageItem):
    """Transparent item stretched over the whole matrix: hover and clicks become cells.

    Its image is a single transparent pixel scaled onto (0, 0, n_cols, n_rows), so an event's
    item position is a pixel coordinate of a (1, 1) image showing the full cell extent."""

    hovered = Signal(int, int)  # (row, col), (-1, -1) when the mouse leaves the matrix
    clicked = Signal(int, int, object)  # (row, col, Qt.MouseButton)

    def __init__(self):
        super().__init__(axisOrder="row-major")
        self.setImage(np.zeros((1, 1, 4), dtype=np.uint8), autoLevels=False)  # (1, 1, 4)
        self.n_rows, self.n_cols = 1, 1
        self._last: Optional[tuple[int, int]] = None
        self.setAcceptHoverEvents(True)

    def set_shape(self, n_rows: int, n_cols: int) -> None:
        self.n_rows, self.n_cols = int(n_rows), int(n_cols)
        self.setRect(QRectF(0, 0, self.n_cols, self.n_rows))

    @property
    def extent(self) -> tuple[int, int, int, int]:
        return 0, self.n_rows, 0, self.n_cols

    def cell_at(self, pos: QPointF) -> Optional[tuple[int, int]]:
        """Cell under an item-local position, or None outside the matrix."""
        return pixel_to_cell(pos.x(), pos.y(), (1, 1), self.extent)

    def hoverEvent(self, ev):
        cell = None if ev.isExit() else self.cell_at(ev.pos())
        if cell != self._last:
            self._last = cell
            self.hovered.emit(*(cell if cell is not None else (-1, -1)))

    def mouseClickEvent(self, ev):
        cell = self.cell_at(ev.pos())
        if cell is None or ev.button() not in (Qt.MouseButton.LeftButton, Qt.MouseButton.RightButton):
            ev.ignore()
            return
        ev.accept()
        self.clicked.emit(cell[0], cell[1], ev.button())


class CellImageLayer:
    """A float value image plus its hatched masked-cell overlay, placed over a cell block."""

    def __init__(self, view: pg.ViewBox, z: float):
        self.image = LutImageItem()
        self.overlay = LutImageItem()
        for item, dz in ((self.image, 0.0), (self.overlay, 0.5)):
            item.setZValue(z + dz)
            item.setAcceptHoverEvents(False)
            item.setAcceptedMouseButtons(Qt.MouseButton.NoButton)
            view.addItem(item)
        self.extent: Optional[tuple[int, int, int, int]] = None
        self.values: Optional[np.ndarray] = None  # (H, W) float32 as shown, NaN where masked
        self.allowed: Optional[np.ndarray] = None  # (H, W) bool
        self.clear()

    def show(self, values: np.ndarray, allowed: np.ndarray, extent, levels, lut, masked_colours) -> None:
        """Draw ``values`` (H, W) over cell block ``extent``; cells not ``allowed`` are hatched."""
        r0, r1, c0, c1 = extent
        extent = (int(r0), int(r1), int(c0), int(c1))
        # live edits rarely change the mask: keep the overlay when it would come out the same
        same_mask = (self.allowed is not None and self.extent == extent and self.allowed.shape == allowed.shape
                     and self._overlay_colours == tuple(masked_colours) and np.array_equal(self.allowed, allowed))
        self.extent = extent
        self.values, self.allowed = values, allowed
        shown = np.ascontiguousarray(np.where(allowed, values, levels[0]), dtype=np.float32)  # (H, W)
        self.image.setImage(shown, levels=levels, lut=lut, autoLevels=False, autoDownsample=False)
        rect = QRectF(c0, r0, c1 - c0, r1 - r0)
        self.image.setRect(rect)
        self.image.setVisible(True)
        if not same_mask:
            self.restyle(masked_colours)

    def restyle(self, masked_colours) -> None:
        """Redraw the masked overlay with (base, stripe) colours."""
        self._overlay_colours = tuple(masked_colours)
        if self.allowed is None or self.allowed.all():
            self.overlay.setVisible(False)
            return
        masked = ~self.allowed
        factor = overlay_factor(masked.shape)
        if factor < 3:  # without room for stripes, sub-pixels would only repeat the base colour
            factor = 1
        codes = hatch_codes(masked, factor)  # (H*f, W*f) uint8 drawn through a colour table
        self.overlay.setImage(codes, lut=hatch_lut(*masked_colours), levels=None, autoLevels=False,
                              autoDownsample=False)
        r0, r1, c0, c1 = self.extent
        self.overlay.setRect(QRectF(c0, r0, c1 - c0, r1 - r0))
        self.overlay.setVisible(True)

    def set_levels_lut(self, levels, lut) -> None:
        if self.values is not None:
            shown = np.ascontiguousarray(np.where(self.allowed, self.values, levels[0]), dtype=np.float32)
            self.image.setImage(shown, levels=levels, lut=lut, autoLevels=False, autoDownsample=False)

    def value_at(self, row: int, col: int) -> Optional[tuple[float, bool]]:
        """(value, allowed) of the pixel covering cell (row, col), or None outside this layer."""
        if self.extent is None or self.values is None:
            return None
        r0, r1, c0, c1 = self.extent
        if not (r0 <= row < r1 and c0 <= col < c1):
            return None
        y, x = cell_to_image_index(row, col, self.values.shape, self.extent)
        return float(self.values[y, x]), bool(self.allowed[y, x])

    def clear(self) -> None:
        if self.extent is None and self.values is None and not self.image.isVisible():
            return  # already clear: clearing again would still repaint the view
        self.extent = self.values = self.allowed = None
        self._overlay_colours = None
        self.image.clear()
        self.image.setVisible(False)
        self.overlay.clear()
        self.overlay.setVisible(False)


class TitleLabel(pg.LabelItem):
    """A title that never widens its frame and is always read whole: where the frame is narrower than the
    title it wraps onto more lines (between words; inside a word only when one word is wider than the
    frame) and its height follows, so the map or plot below gets less room instead of the title losing
    words. ``text`` is the whole title."""

    def __init__(self, text=" ", parent=None, angle=0, **args):
        self._wrap_width = -1.0  # the text width the title is wrapped at; -1: one line
        self._plot: Optional[pg.PlotItem] = None  # the plot whose title row this is (see wrap_plot_title)
        super().__init__(text, parent, angle, **args)
        doc = self.item.document()
        option = doc.defaultTextOption()
        option.setWrapMode(QTextOption.WrapMode.WrapAtWordBoundaryOrAnywhere)
        option.setAlignment(Qt.AlignmentFlag.AlignHCenter)  # every line centred over the map
        doc.setDefaultTextOption(option)

    def setText(self, text, **args):  # noqa: N802 - pyqtgraph's name
        if self._wrap_width >= 0:
            self._wrap_width = -1.0  # measured again on one line, then wrapped at the width it has
            self.item.setTextWidth(-1)
        super().setText(text, **args)

    def updateMin(self):  # noqa: N802 - pyqtgraph's name
        h = float(self.itemRect().height())
        hint = {Qt.SizeHint.MinimumSize: (0, h), Qt.SizeHint.PreferredSize: (0, h),
                Qt.SizeHint.MaximumSize: (-1, h), Qt.SizeHint.MinimumDescent: (0, 0)}
        if hint == self._sizeHint and self.minimumHeight() == h:
            return  # unchanged: asking the layout again would only lay the frame out again
        self._sizeHint = hint
        self.setMinimumWidth(0)
        self.setMinimumHeight(h)
        self.setMaximumHeight(h)  # room to spare goes to the map, not to blank lines of title
        plot = self._plot
        if plot is not None and self.isVisibleTo(plot):  # pyqtgraph fixes a plot's title row at 30 px
            plot.layout.setRowFixedHeight(0, h)
        self.updateGeometry()

    def resizeEvent(self, ev):  # noqa: N802 - Qt's name
        self._wrap()
        super().resizeEvent(ev)

    def _wrap(self) -> None:
        """The title on one line when it fits the label's width, else wrapped at that width."""
        width = float(self.rect().width())
        if width <= 0:
            return  # not laid out yet
        want = -1.0 if self.natural_width() <= width else width
        if want != self._wrap_width:
            self._wrap_width = want
            self.item.setTextWidth(want)

    def natural_width(self) -> float:
        """The width the title takes on one line (with the text item's margins)."""
        doc = self.item.document()
        if self._wrap_width < 0:
            return float(doc.size().width())
        doc.setTextWidth(-1)
        width = float(doc.size().width())
        doc.setTextWidth(self._wrap_width)
        return width

    def shown_text(self) -> str:
        """The title as drawn, every character of it (lines joined by spaces)."""
        return self.item.toPlainText()

    def lines(self) -> int:
        """How many lines the title is drawn on."""
        doc = self.item.document()
        return sum(doc.findBlockByNumber(i).layout().lineCount() for i in range(doc.blockCount()))

    def is_whole(self) -> bool:
        """True when the whole title is drawn inside the label: every character, no line wider than the
        label and no line below its bottom."""
        if str(self.text).strip() == "":
            return True
        shown = self.itemRect()
        rect = self.rect()
        return (self.shown_text() == _plain_text(str(self.text)) and shown.width() <= rect.width() + 1
                and shown.height() <= rect.height() + 1)


def _plain_text(text: str) -> str:
    doc = QTextDocument()
    doc.setHtml(text)
    return doc.toPlainText()


def wrap_plot_title(item: pg.PlotItem) -> None:
    """Give a PlotItem a :class:`TitleLabel`: a title longer than the plot is wide wraps onto a second
    line (the title row grows, the plot below shrinks) instead of widening the plot past its widget's
    edge, as pyqtgraph's own title does, or being cut."""
    old = item.titleLabel
    if isinstance(old, TitleLabel):
        return
    title = TitleLabel("", size="11pt", parent=item)
    title._plot = item
    title.setVisible(old.isVisibleTo(item))
    item.layout.removeItem(old)
    if old.scene() is not None:
        old.scene().removeItem(old)
    item.layout.addItem(title, 0, 1)
    item.titleLabel = title


class MatrixFrame(pg.GraphicsLayoutWidget):
    """Layout: title / top axis / top band above the main view; left axis and strip beside it;
    column 3 of row 3 is free for a colorbar."""

    region_changed = Signal(int, int, int, int)  # visible (r0, r1, c0, c1), debounced

    def __init__(self, parent=None, *, debounce_ms: int = 150, strip_width: int = 14, band_height: int = 8):
        super().__init__(parent)
        self.n_rows, self.n_cols = 0, 0
        ci = self.ci
        ci.setContentsMargins(4, 4, 4, 4)
        ci.setSpacing(1)
        self.title = TitleLabel("", size="9pt")
        ci.addItem(self.title, row=0, col=2)
        self.top_axis = TokenAxis("top")
        ci.addItem(self.top_axis, row=1, col=2)
        self.top_band = pg.ViewBox(enableMouse=False, enableMenu=False, defaultPadding=0)
        ci.addItem(self.top_band, row=2, col=2)
        self.left_axis = TokenAxis("left")
        ci.addItem(self.left_axis, row=3, col=0)
        self.left_strip = pg.ViewBox(enableMouse=False, enableMenu=False, defaultPadding=0, invertY=True)
        ci.addItem(self.left_strip, row=3, col=1)
        self.view = pg.ViewBox(enableMenu=False, defaultPadding=0, invertY=True)
        ci.addItem(self.view, row=3, col=2)
        for vb, fixed in ((self.top_band, ("h", band_height)), (self.left_strip, ("w", strip_width))):
            if fixed[0] == "h":
                vb.setMinimumHeight(fixed[1])
                vb.setMaximumHeight(fixed[1])
            else:
                vb.setMinimumWidth(fixed[1])
                vb.setMaximumWidth(fixed[1])
        self.top_axis.linkToView(self.view)
        self.left_axis.linkToView(self.view)
        self.top_band.setXLink(self.view)
        self.left_strip.setYLink(self.view)
        self.top_band.setYRange(0, 1, padding=0)
        self.left_strip.setXRange(0, 2, padding=0)

        self.band_image = pg.ImageItem(axisOrder="row-major")
        self.top_band.addItem(self.band_image)
        self.strip_image = pg.ImageItem(axisOrder="row-major")
        self.left_strip.addItem(self.strip_image)

        self.picker = CellPicker()
        self.picker.setZValue(100)
        self.view.addItem(self.picker)

        self.selection = QGraphicsRectItem()
        self.selection.setZValue(90)
        self.selection.setVisible(False)
        self.view.addItem(self.selection)
        self.selected_row: Optional[int] = None

        self._row_segments: Sequence[Segment] = ()
        self._col_segments: Sequence[Segment] = ()
        self._flagged: Optional[np.ndarray] = None
        self._bands_drawn = False  # band and strip show the current segments and flags
        self._title = ("", "")  # (text, colour) shown
        self._last_region: Optional[tuple[int, int, int, int]] = None
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(debounce_ms)
        self._timer.timeout.connect(self._emit_region)
        self.view.sigRangeChanged.connect(lambda *_: self._timer.start())
        self._content_min = QSize(0, 0)  # the smallest size the axes, title and colour bar fit in
        self.ci.installEventFilter(self)  # its minimum grows with its labels: tell the enclosing layout
        self.on_theme_changed(current_theme())

    # -- size: never narrower than what it draws ---------------------------------------------------
    def _content_minimum(self) -> QSize:
        hint = self.ci.effectiveSizeHint(Qt.SizeHint.MinimumSize)
        frame = 2 * self.frameWidth()
        return QSize(int(np.ceil(hint.width())) + frame, int(np.ceil(hint.height())) + frame)

    def minimumSizeHint(self) -> QSize:  # noqa: N802 - Qt's name
        """The axes, title, band, strip and colour bar at their own minimum (long token labels make
        it wider): a layout that gives less would cut the colour bar off the right edge."""
        return self._content_minimum().expandedTo(super().minimumSizeHint())

    def eventFilter(self, obj, ev):  # noqa: N802 - Qt's name
        if obj is self.ci and ev.type() == QEvent.Type.LayoutRequest:
            need = self._content_minimum()
            if need != self._content_min:
                self._content_min = need
                self.updateGeometry()
        return super().eventFilter(obj, ev)

    # -- shape, labels, bands --------------------------------------------------------------------
    def set_shape(self, n_rows: int, n_cols: int) -> bool:
        """Show an ``n_rows`` x ``n_cols`` matrix; the view is reset only when the shape changes
        (live updates keep the person's zoom). Returns whether it changed."""
        if n_rows <= 0 or n_cols <= 0:
            raise ValueError(f"matrix shape must be positive, got ({n_rows}, {n_cols})")
        changed = (n_rows, n_cols) != (self.n_rows, self.n_cols)
        self.n_rows, self.n_cols = int(n_rows), int(n_cols)
        self.picker.set_shape(n_rows, n_cols)
        if changed:
            self.view.setLimits(xMin=0, xMax=n_cols, yMin=0, yMax=n_rows,
                                minXRange=min(2, n_cols), minYRange=min(2, n_rows))
            self._last_region = None
            self._flagged = None
            self._row_segments = self._col_segments = ()
            self._bands_drawn = False
            self.reset_view()
            if self.selected_row is not None and self.selected_row >= n_rows:
                self.set_selected_row(None)
        return changed

    def reset_view(self) -> None:
        self.view.setRange(xRange=(0, self.n_cols), yRange=(0, self.n_rows), padding=0)

    def set_labels(self, row_labels: Optional[Sequence[str]], col_labels: Optional[Sequence[str]]) -> None:
        self.left_axis.set_labels(row_labels, self.n_rows)
        self.top_axis.set_labels(col_labels, self.n_cols)

    def set_segments(self, row_segments: Sequence[Segment], col_segments: Sequence[Segment]) -> None:
        for segs, n, what in ((row_segments, self.n_rows, "row"), (col_segments, self.n_cols, "column")):
            for s in segs:
                if not isinstance(s, Segment):
                    raise ValueError(f"{what} segments must be Segment objects, got {type(s).__name__}")
                if s.stop > n:
                    raise ValueError(f"{what} segment {s.name!r} ends at {s.stop}, beyond {n} {what}s")
        segments = (tuple(row_segments), tuple(col_segments))
        if segments == (self._row_segments, self._col_segments) and self._bands_drawn:
            return  # live updates pass the same segments again
        self._row_segments, self._col_segments = segments
        self._draw_bands()

    def set_row_flags(self, flagged: Optional[np.ndarray]) -> None:
        """Mark rows (e.g. fully masked queries) with a marker in the left strip."""
        flagged = None if flagged is None else np.array(flagged, dtype=bool)
        old = self._flagged
        if self._bands_drawn and (flagged is None and old is None or (
                flagged is not None and old is not None and np.array_equal(flagged, old))):
            return
        self._flagged = flagged
        self._draw_bands(band=not self._bands_drawn)  # flags live in the strip only

    @property
    def row_segments(self) -> Sequence[Segment]:
        return self._row_segments

    @property
    def col_segments(self) -> Sequence[Segment]:
        return self._col_segments

    @property
    def row_flags(self) -> Optional[np.ndarray]:
        return self._flagged

    def _draw_bands(self, band: bool = True) -> None:
        """Redraw the left strip (segments and row flags) and, unless ``band`` is False, the top band."""
        if self.n_rows == 0:
            return
        self._bands_drawn = True
        if band:
            self.band_image.setImage(band_rgba(self.n_cols, self._col_segments), autoLevels=False, levels=None)
            self.band_image.setRect(QRectF(0, 0, self.n_cols, 1))
        strip = strip_rgba(self.n_rows, self._row_segments, self._flagged, current_theme().marker)
        self.strip_image.setImage(strip, autoLevels=False, levels=None)
        self.strip_image.setRect(QRectF(0, 0, 2, self.n_rows))

    def set_title(self, text: str) -> None:
        title = (str(text), current_theme().plot_foreground)
        if title != self._title:  # setting the same text again would still relayout the frame
            self._title = title
            self.title.setText(*title[:1], color=title[1])

    # -- selection ---------------------------------------------------------------------------
    @property
    def title_text(self) -> str:
        """The whole title shown above the map (its label may wrap it onto several lines)."""
        return self._title[0]

    def set_selected_row(self, row: Optional[int]) -> None:
        if row is not None and not 0 <= row < self.n_rows:
            raise ValueError(f"row {row} outside 0..{self.n_rows - 1}")
        self.selected_row = row
        if row is None:
            self.selection.setVisible(False)
            return
        self.selection.setRect(QRectF(0, row, self.n_cols, 1))
        self.selection.setVisible(True)

    # -- geometry for callers and tests -----------------------------------------------------------
    def cell_to_widget(self, row: float, col: float) -> QPointF:
        """Viewport position of the centre of cell (row, col) (fractional cells allowed)."""
        scene = self.view.mapViewToScene(QPointF(col + 0.5, row + 0.5))
        return QPointF(self.mapFromScene(scene))

    def visible_region(self) -> tuple[int, int, int, int]:
        (x0, x1), (y0, y1) = self.view.viewRange()
        return visible_region((x0, x1), (y0, y1), self.n_rows, self.n_cols)

    def _emit_region(self) -> None:
        if self.n_rows == 0:
            return
        region = self.visible_region()
        if region != self._last_region:
            self._last_region = region
            self.region_changed.emit(*region)

    # -- theme -------------------------------------------------------------------------------
    def on_theme_changed(self, theme: Theme) -> None:
        self.setBackground(theme.plot_background)
        for axis in (self.left_axis, self.top_axis):
            axis.setPen(theme.plot_foreground)
            axis.setTextPen(theme.plot_foreground)
        pen = QPen(QColor(theme.highlight))
        pen.setWidthF(2.0)
        pen.setCosmetic(True)
        self.selection.setPen(pen)
        self._title = (self._title[0], theme.plot_foreground)
        self.title.setText(self._title[0], color=theme.plot_foreground)
        self._draw_bands()


def masked_colours(theme: Theme, colormap_name: str) -> tuple[str, str]:
    """(base, stripe) for masked cells: the alternative pair when the colormap contains greys."""
    if colormap_name in ("gray", "cividis"):
        return theme.masked_alt, theme.masked_alt_stripe
    return theme.masked, theme.masked_stripe
