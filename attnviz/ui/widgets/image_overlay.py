"""PatchImageView: the prepared (resized / cropped) RGB image with its ViT patch grid drawn over
it, the patch under the mouse reported, one patch highlighted, and a per-patch weights map overlaid
in a colormap with an adjustable opacity, read against a colour scale beside the image."""

from __future__ import annotations

from typing import Optional

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QPointF, QRectF, Qt, Signal
from PySide6.QtGui import QColor, QPainterPath, QPen
from PySide6.QtWidgets import QGraphicsPathItem, QGraphicsRectItem, QHBoxLayout, QLabel, QSlider, QVBoxLayout, QWidget

from attnviz.model.display.cell_geometry import patch_index, patch_rect
from attnviz.ui import colormaps
from attnviz.ui.theme import Theme, current_theme


class _ImageItem(pg.ImageItem):
    """The photo; its item coordinates are image pixels, mapped to patches by patch_index."""

    def __init__(self, view: "PatchImageView"):
        super().__init__(axisOrder="row-major")
        self._view = view
        self._last: Optional[int] = None
        self.setAcceptHoverEvents(True)

    def hoverEvent(self, ev):
        index = None if ev.isExit() else self._view.patch_at(ev.pos().x(), ev.pos().y())
        if index != self._last:
            self._last = index
            self._view._hover(index)

    def mouseClickEvent(self, ev):
        index = self._view.patch_at(ev.pos().x(), ev.pos().y())
        if index is None or ev.button() != Qt.MouseButton.LeftButton:
            ev.ignore()
            return
        ev.accept()
        self._view.patch_clicked.emit(index)


class PatchImageView(QWidget):
    """Image with patch grid, hover/click patch indices (row-major), highlight and weights overlay."""

    patch_hovered = Signal(int)  # row-major patch index, -1 off the grid
    patch_clicked = Signal(int)

    def __init__(self, parent=None):
        super().__init__(parent)
        self.graphics = pg.GraphicsLayoutWidget(self)
        self.view = self.graphics.addViewBox(lockAspect=True, invertY=True, enableMenu=False)
        self.image = _ImageItem(self)
        self.overlay = pg.ImageItem(axisOrder="row-major")
        self.grid_item = QGraphicsPathItem()
        self.highlight = QGraphicsRectItem()
        for item, z in ((self.image, 0), (self.overlay, 1), (self.grid_item, 2), (self.highlight, 3)):
            item.setZValue(z)
            self.view.addItem(item)
        self.overlay.setAcceptHoverEvents(False)
        self.overlay.setAcceptedMouseButtons(Qt.MouseButton.NoButton)
        self.overlay.setVisible(False)
        self.highlight.setVisible(False)
        # the overlay's colour scale: which colour is which weight (shown with the overlay only)
        self.colorbar = pg.ColorBarItem(values=(0, 1), colorMap=colormaps.colormap("inferno"), width=12,
                                        interactive=False, colorMapMenu=False)
        axis = self.colorbar.getAxis("right")
        axis.enableAutoSIPrefix(False)
        axis.setWidth(None)  # sized to its tick labels and title
        axis.setLabel("weight")
        self.graphics.addItem(self.colorbar, row=0, col=1)
        self.colorbar.setVisible(False)

        self.slider = QSlider(Qt.Orientation.Horizontal, self)
        self.slider.setRange(0, 100)
        self.slider.setValue(60)
        self.slider.setToolTip("opacity of the attention overlay")
        self.slider.valueChanged.connect(lambda v: self.set_opacity(v / 100.0))
        self.readout = QLabel(" ", self)
        controls = QHBoxLayout()
        controls.setContentsMargins(6, 0, 6, 2)
        controls.addWidget(QLabel("overlay", self))
        controls.addWidget(self.slider, 1)
        controls.addWidget(self.readout, 2)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(2)
        layout.addWidget(self.graphics, 1)
        layout.addLayout(controls)

        self._grid = (0, 0)
        self._patch = 1
        self._offset = (0, 0)
        self._shape = (0, 0)
        self._cmap = "inferno"
        self._weights: Optional[np.ndarray] = None
        self._levels: Optional[tuple[float, float]] = None
        self.highlighted: Optional[int] = None
        self.opacity = 0.6
        self.on_theme_changed(current_theme())

    # -- public API ----------------------------------------------------------------------------
    def set_image(self, image, grid, patch: int, offset=(0, 0)) -> None:
        """Show the prepared ``image`` (H, W, 3|4) uint8 or (H, W) grey, with a ``grid`` = (gh, gw)
        of ``patch`` x ``patch`` pixel patches whose top-left corner is at ``offset`` = (x, y)."""
        img = np.asarray(image)
        if img.dtype != np.uint8 or not (img.ndim == 2 or (img.ndim == 3 and img.shape[2] in (3, 4))):
            raise ValueError(f"image must be uint8 (H, W), (H, W, 3) or (H, W, 4), got {img.dtype} {img.shape}")
        gh, gw = (int(g) for g in grid)
        ox, oy = (int(o) for o in offset)
        H, W = img.shape[:2]
        if gh <= 0 or gw <= 0 or patch <= 0:
            raise ValueError(f"grid and patch size must be positive, got grid {grid}, patch {patch}")
        if ox < 0 or oy < 0 or ox + gw * patch > W or oy + gh * patch > H:
            raise ValueError(f"a {gh}x{gw} grid of {patch}px patches at offset {offset} does not fit a {W}x{H} image")
        if (gh, gw) != self._grid:
            self.readout.setText(" ")  # it named a patch of the image shown before
        self._grid, self._patch, self._offset, self._shape = (gh, gw), int(patch), (ox, oy), (H, W)
        self.image.setImage(np.ascontiguousarray(img), autoLevels=False, levels=(0, 255) if img.ndim == 2 else None)
        self.view.setRange(xRange=(0, W), yRange=(0, H), padding=0.01)
        self._draw_grid()
        if self._weights is not None and self._weights.shape != (gh, gw):
            self._weights = None
        self._draw_overlay()
        if self.highlighted is not None and self.highlighted >= gh * gw:
            self.set_highlight(None)
        else:
            self.set_highlight(self.highlighted)

    def colour_scale(self) -> Optional[tuple[float, float]]:
        """(low, high) of the colour scale shown beside the image, None while there is no overlay."""
        return tuple(float(v) for v in self.colorbar.levels()) if self.colorbar.isVisible() else None

    @property
    def grid(self) -> tuple[int, int]:
        """The patch grid the image is cut into, (rows, columns); (0, 0) before an image."""
        return self._grid

    def set_overlay(self, weights, levels=None) -> None:
        """Overlay per-patch ``weights`` (gh, gw) (NaN = no value, drawn clear), or remove with None."""
        if weights is None:
            self._weights = None
        else:
            w = np.asarray(weights, dtype=np.float32)
            if w.shape != self._grid:
                raise ValueError(f"weights of shape {w.shape} do not match the {self._grid} patch grid")
            if np.isinf(w).any():
                raise ValueError("weights contain infinity")
            self._weights = w
            self._levels = None if levels is None else (float(levels[0]), float(levels[1]))
        self._draw_overlay()

    def set_opacity(self, opacity: float) -> None:
        if not 0.0 <= opacity <= 1.0:
            raise ValueError(f"opacity must be within 0..1, got {opacity}")
        self.opacity = float(opacity)
        self.overlay.setOpacity(self.opacity)
        if self.slider.value() != round(opacity * 100):
            self.slider.blockSignals(True)
            self.slider.setValue(round(opacity * 100))
            self.slider.blockSignals(False)

    def set_colormap(self, name: str) -> None:
        self._cmap = colormaps.check_name(name)
        self._draw_overlay()

    def set_highlight(self, index: Optional[int]) -> None:
        if index is None:
            self.highlighted = None
            self.highlight.setVisible(False)
            return
        x, y, w, h = patch_rect(index, self._grid, self._patch, self._offset)
        self.highlighted = int(index)
        self.highlight.setRect(QRectF(x, y, w, h))
        self.highlight.setVisible(True)

    def patch_at(self, x: float, y: float) -> Optional[int]:
        """Patch index under image pixel (x, y)."""
        if self._grid == (0, 0):
            return None
        return patch_index(x, y, self._grid, self._patch, self._offset)

    def patch_center(self, index: int) -> QPointF:
        """Viewport position of the centre of patch ``index``."""
        x, y, w, h = patch_rect(index, self._grid, self._patch, self._offset)
        scene = self.view.mapViewToScene(QPointF(x + w / 2, y + h / 2))
        return QPointF(self.graphics.mapFromScene(scene))

    # -- drawing -------------------------------------------------------------------------------
    def _draw_grid(self) -> None:
        gh, gw = self._grid
        ox, oy = self._offset
        P = self._patch
        path = QPainterPath()
        for r in range(gh + 1):
            path.moveTo(ox, oy + r * P)
            path.lineTo(ox + gw * P, oy + r * P)
        for c in range(gw + 1):
            path.moveTo(ox + c * P, oy)
            path.lineTo(ox + c * P, oy + gh * P)
        self.grid_item.setPath(path)

    def _draw_overlay(self) -> None:
        if self._weights is None:
            self.overlay.setVisible(False)
            self.colorbar.setVisible(False)
            return
        w = self._weights
        ok = ~np.isnan(w)
        if self._levels is not None:
            lo, hi = self._levels
        else:
            lo, hi = (float(w[ok].min()), float(w[ok].max())) if ok.any() else (0.0, 1.0)
        if not hi > lo:
            hi = lo + 1.0
        rgba = colormaps.apply_lut(w, (lo, hi), colormaps.lut(self._cmap)).copy()  # (gh, gw, 4)
        rgba[~ok, 3] = 0
        self.overlay.setImage(np.ascontiguousarray(rgba), autoLevels=False, levels=None)
        gh, gw = self._grid
        self.overlay.setRect(QRectF(self._offset[0], self._offset[1], gw * self._patch, gh * self._patch))
        self.overlay.setOpacity(self.opacity)
        self.overlay.setVisible(True)
        self.colorbar.setColorMap(colormaps.colormap(self._cmap))
        self.colorbar.setLevels((lo, hi))
        self.colorbar.setVisible(True)

    def _hover(self, index: Optional[int]) -> None:
        if index is None:
            self.readout.setText(" ")
            self.patch_hovered.emit(-1)
            return
        r, c = divmod(index, self._grid[1])
        text = f"patch {index} (row {r}, col {c})"
        if self._weights is not None and not np.isnan(self._weights[r, c]):
            text += f" · {self._weights[r, c]:.4g}"
        self.readout.setText(text)
        self.patch_hovered.emit(index)

    def on_theme_changed(self, theme: Theme) -> None:
        self.graphics.setBackground(theme.plot_background)
        axis = self.colorbar.getAxis("right")
        axis.setPen(theme.plot_foreground)
        axis.setTextPen(theme.plot_foreground)
        grid_pen = QPen(QColor(255, 255, 255, 120))
        grid_pen.setCosmetic(True)
        self.grid_item.setPen(grid_pen)
        pen = QPen(QColor(theme.hover))
        pen.setCosmetic(True)
        pen.setWidthF(2.5)
        self.highlight.setPen(pen)
