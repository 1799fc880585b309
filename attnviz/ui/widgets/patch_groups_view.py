"""PatchGroupsView: an original picture with groups of image tokens drawn over it — each group (the image,
or one tile) its own (gh, gw) grid of patches over its box of the picture — one per-patch map per group
in a colormap on one shared colour scale, the patch under the mouse read out, a click reported as
(group, patch) and one patch outlined (the selected query when it is an image token). The geometry is
:mod:`attnviz.model.display.patch_groups`.
"""

from __future__ import annotations

from typing import Optional, Sequence

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QRectF, Qt, Signal
from PySide6.QtGui import QColor, QPainterPath, QPen
from PySide6.QtWidgets import QGraphicsPathItem, QGraphicsRectItem, QHBoxLayout, QLabel, QSlider, QVBoxLayout, QWidget

from attnviz.model.display.patch_groups import Placed, patch_at, patch_rect
from attnviz.ui import colormaps
from attnviz.ui.theme import Theme, current_theme


class _Picture(pg.ImageItem):
    """The picture; item coordinates are the original image's pixels."""

    def __init__(self, view: "PatchGroupsView"):
        super().__init__(axisOrder="row-major")
        self._view = view
        self._last = None
        self.setAcceptHoverEvents(True)

    def hoverEvent(self, ev):
        hit = None if ev.isExit() else self._view.patch_at(ev.pos().x(), ev.pos().y())
        if hit != self._last:
            self._last = hit
            self._view._hover(hit)

    def mouseClickEvent(self, ev):
        hit = self._view.patch_at(ev.pos().x(), ev.pos().y())
        if hit is None or ev.button() != Qt.MouseButton.LeftButton:
            ev.ignore()
            return
        ev.accept()
        self._view.patch_clicked.emit(*hit)


class PatchGroupsView(QWidget):
    """Picture + grids of patch groups + their maps, the hovered patch read out, one patch outlined."""

    patch_clicked = Signal(int, int)  # (group, row-major patch index)
    patch_hovered = Signal(int, int)  # (-1, -1) off every grid

    def __init__(self, parent=None):
        super().__init__(parent)
        self.graphics = pg.GraphicsLayoutWidget(self)
        self.view = self.graphics.addViewBox(lockAspect=True, invertY=True, enableMenu=False)
        self.picture = _Picture(self)
        self.picture.setZValue(0)
        self.view.addItem(self.picture)
        self.grid_item = QGraphicsPathItem()
        self.grid_item.setZValue(2)
        self.view.addItem(self.grid_item)
        self.box_item = QGraphicsPathItem()  # each group's outline, so tiles stand apart from their patches
        self.box_item.setZValue(2.5)
        self.view.addItem(self.box_item)
        self.highlight = QGraphicsRectItem()
        self.highlight.setZValue(3)
        self.highlight.setVisible(False)
        self.view.addItem(self.highlight)
        self.colorbar = pg.ColorBarItem(values=(0, 1), colorMap=colormaps.colormap("inferno"), width=12,
                                        interactive=False, colorMapMenu=False)
        axis = self.colorbar.getAxis("right")
        axis.enableAutoSIPrefix(False)
        axis.setWidth(None)
        axis.setLabel("weight")
        self.graphics.addItem(self.colorbar, row=0, col=1)
        self.colorbar.setVisible(False)
        self.slider = QSlider(Qt.Orientation.Horizontal, self)
        self.slider.setRange(0, 100)
        self.slider.setValue(65)
        self.slider.setToolTip("opacity of the attention drawn over the picture")
        self.slider.valueChanged.connect(lambda v: self.set_opacity(v / 100.0))
        self.readout = QLabel(" ", self)
        self.readout.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        bar = QHBoxLayout()
        bar.setContentsMargins(6, 0, 6, 2)
        bar.addWidget(self.readout, 1)
        bar.addWidget(QLabel("opacity", self))
        bar.addWidget(self.slider)
        self.slider.setMaximumWidth(110)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(2)
        layout.addWidget(self.graphics, 1)
        layout.addLayout(bar)

        self.placed: list[Placed] = []
        self.members: tuple[int, ...] = ()  # the groups drawn (one page)
        self.maps: Optional[list[np.ndarray]] = None  # one (gh, gw) map per placed group
        self.levels: tuple[float, float] = (0.0, 1.0)
        self.highlighted: Optional[tuple[int, int]] = None
        self.opacity = 0.65
        self._overlays: list[pg.ImageItem] = []
        self._cmap = "inferno"
        self._value_label = "weight"
        self.on_theme_changed(current_theme())

    # -- public API ----------------------------------------------------------------------------
    def set_picture(self, rgb, placed: Sequence[Placed], members: Sequence[int]) -> None:
        """Show ``rgb`` (H, W, 3) uint8 with the grids of ``placed[i]`` for i in ``members``."""
        img = np.asarray(rgb)
        if img.dtype != np.uint8 or img.ndim != 3 or img.shape[2] not in (3, 4):
            raise ValueError(f"the picture must be (H, W, 3) uint8, got {img.dtype} {img.shape}")
        members = tuple(int(i) for i in members)
        if any(not 0 <= i < len(placed) for i in members):
            raise ValueError(f"groups {members} are not among the {len(placed)} placed")
        self.placed, self.members = list(placed), members
        H, W = img.shape[:2]
        self.picture.setImage(np.ascontiguousarray(img), autoLevels=False)
        self.view.setRange(xRange=(0, W), yRange=(0, H), padding=0.01)
        path, boxes = QPainterPath(), QPainterPath()
        for i in members:
            g = self.placed[i]
            top, left, bottom, right = g.box
            if len(members) > 1:
                boxes.addRect(QRectF(left, top, right - left, bottom - top))
            gh, gw = g.grid
            for r in range(gh + 1):
                y = top + r * (bottom - top) / gh
                path.moveTo(left, y)
                path.lineTo(right, y)
            for c in range(gw + 1):
                x = left + c * (right - left) / gw
                path.moveTo(x, top)
                path.lineTo(x, bottom)
        self.grid_item.setPath(path)
        self.box_item.setPath(boxes)
        if self.highlighted is not None and self.highlighted[0] not in members:
            self.highlight.setVisible(False)
        if self.maps is not None and len(self.maps) != len(self.placed):
            self.maps = None
        self._draw_maps()
        self.readout.setText(" ")

    def set_maps(self, maps: Optional[Sequence[np.ndarray]], levels: tuple[float, float] | None = None,
                 value_label: str = "weight") -> None:
        """One (gh, gw) map per placed group (None: no overlay) on the colour scale ``levels``."""
        if maps is None:
            self.maps = None
        else:
            maps = [np.asarray(m, dtype=np.float32) for m in maps]
            if len(maps) != len(self.placed) or any(m.shape != g.grid for m, g in zip(maps, self.placed)):
                raise ValueError("one map of its grid's shape per placed group is needed")
            self.maps = maps
            lo, hi = (0.0, 1.0) if levels is None else (float(levels[0]), float(levels[1]))
            self.levels = (lo, hi if hi > lo else lo + 1.0)
        self._value_label = value_label
        self._draw_maps()

    def set_highlight(self, hit: Optional[tuple[int, int]]) -> None:
        """Outline patch ``hit`` = (group, index), or nothing."""
        self.highlighted = None if hit is None else (int(hit[0]), int(hit[1]))
        if hit is None or self.highlighted[0] not in self.members:
            self.highlight.setVisible(False)
            return
        x, y, w, h = patch_rect(self.placed[self.highlighted[0]], self.highlighted[1])
        self.highlight.setRect(QRectF(x, y, w, h))
        self.highlight.setVisible(True)

    def set_opacity(self, opacity: float) -> None:
        if not 0.0 <= opacity <= 1.0:
            raise ValueError(f"opacity must be within 0..1, got {opacity}")
        self.opacity = float(opacity)
        for item in self._overlays:
            item.setOpacity(self.opacity)
        if self.slider.value() != round(opacity * 100):
            self.slider.blockSignals(True)
            self.slider.setValue(round(opacity * 100))
            self.slider.blockSignals(False)

    def set_colormap(self, name: str) -> None:
        self._cmap = colormaps.check_name(name)
        self._draw_maps()

    def patch_at(self, x: float, y: float) -> Optional[tuple[int, int]]:
        """(group, patch) under picture pixel (x, y) on the page shown."""
        if not self.members:
            return None
        return patch_at(x, y, self.placed, self.members)

    def patch_center(self, group: int, index: int):
        """Viewport position (QPointF) of the centre of a patch (tests click there)."""
        from PySide6.QtCore import QPointF

        x, y, w, h = patch_rect(self.placed[group], index)
        scene = self.view.mapViewToScene(QPointF(x + w / 2, y + h / 2))
        return QPointF(self.graphics.mapFromScene(scene))

    # -- drawing -------------------------------------------------------------------------------
    def _draw_maps(self) -> None:
        while len(self._overlays) < len(self.placed):
            item = pg.ImageItem(axisOrder="row-major")
            item.setZValue(1)
            item.setAcceptHoverEvents(False)
            item.setAcceptedMouseButtons(Qt.MouseButton.NoButton)
            self.view.addItem(item)
            self._overlays.append(item)
        for item in self._overlays:
            item.setVisible(False)
        if self.maps is None:
            self.colorbar.setVisible(False)
            return
        lut = colormaps.lut(self._cmap)
        for i in self.members:
            g, m, item = self.placed[i], self.maps[i], self._overlays[i]
            ok = ~np.isnan(m)
            rgba = colormaps.apply_lut(np.where(ok, m, self.levels[0]), self.levels, lut).copy()  # (gh, gw, 4)
            rgba[~ok, 3] = 0
            item.setImage(np.ascontiguousarray(rgba), autoLevels=False, levels=None)
            top, left, bottom, right = g.box
            item.setRect(QRectF(left, top, right - left, bottom - top))
            item.setOpacity(self.opacity)
            item.setVisible(True)
        self.colorbar.setColorMap(colormaps.colormap(self._cmap))
        self.colorbar.setLevels(self.levels)
        self.colorbar.getAxis("right").setLabel(self._value_label)
        self.colorbar.setVisible(True)

    def _hover(self, hit) -> None:
        if hit is None:
            self.readout.setText(" ")
            self.patch_hovered.emit(-1, -1)
            return
        g_i, index = hit
        g = self.placed[g_i]
        r, c = divmod(index, g.grid[1])
        text = f"{g.name} · patch {index} (row {r}, col {c})"
        if self.maps is not None and not np.isnan(self.maps[g_i][r, c]):
            text += f" · {self._value_label} {self.maps[g_i][r, c]:.4g}"
        self.readout.setText(text)
        self.patch_hovered.emit(g_i, index)

    def on_theme_changed(self, theme: Theme) -> None:
        self.graphics.setBackground(theme.plot_background)
        axis = self.colorbar.getAxis("right")
        axis.setPen(theme.plot_foreground)
        axis.setTextPen(theme.plot_foreground)
        grid_pen = QPen(QColor(255, 255, 255, 110))
        grid_pen.setCosmetic(True)
        self.grid_item.setPen(grid_pen)
        box_pen = QPen(QColor(255, 255, 255, 230))
        box_pen.setCosmetic(True)
        box_pen.setWidthF(2.0)
        self.box_item.setPen(box_pen)
        pen = QPen(QColor(theme.hover))
        pen.setCosmetic(True)
        pen.setWidthF(2.5)
        self.highlight.setPen(pen)
