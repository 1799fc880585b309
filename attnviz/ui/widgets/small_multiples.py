"""HeadGrid: small multiples of attention matrices, one per head (or per layer x head), drawn as a
single colour-mapped mosaic image (each map max-pooled to a small tile) so 6 x 12 maps of 128 x 128
redraw in milliseconds; a click reports the (row, col) of the map."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QRectF, Qt, Signal
from PySide6.QtGui import QColor, QPen
from PySide6.QtWidgets import QGraphicsRectItem, QLabel, QVBoxLayout, QWidget

from attnviz.model.display.cell_geometry import mosaic_origin, mosaic_tile
from attnviz.model.display.overlays import hex_rgba
from attnviz.model.display.pooling import fitting_mask, pool_max
from attnviz.ui import colormaps
from attnviz.ui.theme import Theme, current_theme
from attnviz.ui.widgets.matrix_frame import masked_colours


@dataclass(frozen=True)
class HeadGridConfig:
    """Layout of the mosaic."""

    tile_px: int = 64  # image pixels along a map's longer side at most: small maps are drawn at full resolution
    gap_px: int = 4  # background pixels between maps, so neighbouring maps do not merge
    shared_levels: bool = False  # one colour scale for all maps (compare heads) or one per map (see each pattern)


def tile_shape(Tq: int, Tk: int, tile_px: int) -> tuple[int, int]:
    """(th, tw) of one map's tile: the map's own aspect ratio with its longer side at most
    ``tile_px`` pixels (a 20 x 300 cross-attention map stays wide and flat, not squashed square)."""
    if Tq <= 0 or Tk <= 0 or tile_px <= 0:
        raise ValueError(f"tile of a {Tq} x {Tk} map at {tile_px} px: sizes must be positive")
    scale = min(1.0, tile_px / max(Tq, Tk))
    return max(1, round(Tq * scale)), max(1, round(Tk * scale))


def build_mosaic(maps: np.ndarray, allowed: Optional[np.ndarray], tile_px: int, gap: int, lut: np.ndarray,
                 masked: str, background: str, shared_levels: bool,
                 levels: Optional[tuple[float, float]] = None) -> tuple[np.ndarray, tuple[int, int]]:
    """RGBA mosaic (rows*(th+gap)-gap, cols*(tw+gap)-gap, 4) of (rows, cols, Tq, Tk) maps, each
    max-pooled to at most tile_px on its longer side, keeping its aspect ratio; ``allowed`` is broadcastable to the maps (or None for
    all allowed); ``levels`` (low, high) fixes the colour scale of every map (a mask: 0, 1), else it
    follows the data. Returns the mosaic and the tile shape (th, tw)."""
    rows, cols = maps.shape[:2]
    pooled, ok = pool_max(maps, allowed, tile_shape(*maps.shape[2:], tile_px))  # (rows, cols, th, tw) float32, NaN masked
    th, tw = pooled.shape[-2:]
    n = len(lut)
    axes = None if shared_levels else (2, 3)
    lo = np.min(pooled, axis=axes, where=ok, initial=np.inf, keepdims=True)  # (rows, cols, 1, 1) or (1, 1, 1, 1)
    hi = np.max(pooled, axis=axes, where=ok, initial=-np.inf, keepdims=True)
    if levels is not None:
        lo = np.full_like(lo, levels[0])
        hi = np.full_like(hi, levels[1])
    empty = ~np.isfinite(lo)  # no allowed pixel at all
    lo = np.where(empty, 0.0, lo).astype(np.float32)
    hi = np.where(empty, 1.0, hi).astype(np.float32)
    span = np.where(hi > lo, hi - lo, np.float32(1.0)).astype(np.float32)
    scaled = np.subtract(pooled, lo, dtype=np.float32)  # (rows, cols, th, tw)
    scaled *= np.float32(n - 1) / span
    np.copyto(scaled, np.float32(0.0), where=~ok)  # masked (NaN) pixels get their own colour below
    np.clip(scaled, 0, n - 1, out=scaled)
    idx = np.rint(scaled).astype(np.uint16)  # (rows, cols, th, tw) colour index
    idx[~ok] = n  # the masked colour
    # one colour table for everything, 4 RGBA bytes packed in a uint32: values, masked, background
    table = np.concatenate([np.asarray(lut, dtype=np.uint8)[:, :4], np.array([hex_rgba(masked), hex_rgba(background)],
                                                                          dtype=np.uint8)])  # (n+2, 4)
    table32 = np.ascontiguousarray(table).view(np.uint32).ravel()  # (n+2,)
    H = rows * (th + gap) - gap
    W = cols * (tw + gap) - gap
    grid = np.full((rows, th + gap, cols, tw + gap), n + 1, dtype=np.uint16)  # (rows, th+gap, cols, tw+gap)
    grid[:, :th, :, :tw] = idx.transpose(0, 2, 1, 3)
    codes = grid.reshape(rows * (th + gap), cols * (tw + gap))[:H, :W]  # (H, W)
    rgba = np.take(table32, codes).view(np.uint8).reshape(H, W, 4)  # (H, W, 4)
    return np.ascontiguousarray(rgba), (th, tw)


class HeadGrid(QWidget):
    """Grid of small heatmaps; ``head_clicked(row, col)`` reports the map clicked."""

    head_clicked = Signal(int, int)
    head_hovered = Signal(int, int)  # (-1, -1) between maps

    def __init__(self, parent=None, *, config: HeadGridConfig = HeadGridConfig()):
        super().__init__(parent)
        self.config = config
        self.plot = pg.PlotWidget(self)
        self.plot.setMenuEnabled(False)
        self.plot.hideButtons()
        pi = self.plot.getPlotItem()
        pi.hideAxis("bottom")
        pi.showAxis("top")
        for name in ("left", "top"):
            pi.getAxis(name).setStyle(tickLength=0)
        self.view = pi.getViewBox()
        self.view.invertY(True)
        self.view.setAspectLocked(True)
        self.view.setMouseEnabled(False, False)
        self.image = _MosaicImage(self)
        self.view.addItem(self.image)
        self.selection = QGraphicsRectItem()
        self.selection.setZValue(10)
        self.selection.setVisible(False)
        self.view.addItem(self.selection)
        self.readout = QLabel(" ", self)
        self.readout.setContentsMargins(6, 0, 6, 2)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(2)
        layout.addWidget(self.plot, 1)
        layout.addWidget(self.readout)
        layout.addStretch(0)  # what the maps do not need (see _fit_height) stays under them
        self._cmap = colormaps.DEFAULT
        self._maps: Optional[np.ndarray] = None
        self._allowed: Optional[np.ndarray] = None
        self._levels: Optional[tuple[float, float]] = None
        self._tile = (1, 1)
        self._titles: tuple[list, list] = ([], [])
        self.selected: Optional[tuple[int, int]] = None
        self.on_theme_changed(current_theme())

    def set_matrices(self, maps, row_titles: Optional[Sequence[str]] = None,
                     col_titles: Optional[Sequence[str]] = None, *, mask=None, levels=None) -> None:
        """Show ``maps`` (rows, cols, Tq, Tk) — or (n_heads, Tq, Tk) as one row — with an optional
        mask broadcastable to it (False = masked); ``levels`` (low, high) fixes the colour scale
        (else each map, or all maps with ``shared_levels``, spans its own range)."""
        if levels is not None:
            lo, hi = (float(x) for x in levels)
            if not (np.isfinite(lo) and np.isfinite(hi) and hi > lo):
                raise ValueError(f"levels must be finite with low < high, got {levels}")
            levels = (lo, hi)
        a = np.asarray(maps, dtype=np.float32)
        if a.ndim == 3:
            a = a[None]  # (1, nh, Tq, Tk)
        if a.ndim != 4 or a.size == 0:
            raise ValueError(f"maps must be (rows, cols, Tq, Tk) or (heads, Tq, Tk), got shape {np.shape(maps)}")
        allowed = None  # (.., Tq, Tk) broadcastable to the maps; None = all allowed
        if not np.isfinite(a).all():  # one pass in the common all-finite case
            if np.isnan(a).any() or (a == np.inf).any():
                raise ValueError("maps contain NaN or +inf")
            allowed = np.isfinite(a)  # -inf cells are masked
        rows, cols = a.shape[:2]
        if mask is not None:
            m = fitting_mask(mask, a.shape, "maps").copy()  # a (Tq, Tk) mask stays (Tq, Tk): never one copy per map
            allowed = m if allowed is None else allowed & m
        row_titles = list(row_titles) if row_titles is not None else ([""] if rows == 1 else [f"L{i}" for i in range(rows)])
        col_titles = list(col_titles) if col_titles is not None else [f"h{j}" for j in range(cols)]
        if len(row_titles) != rows or len(col_titles) != cols:
            raise ValueError(f"{len(row_titles)} row titles / {len(col_titles)} column titles for a {rows}x{cols} grid")
        self._maps, self._allowed = a, allowed
        self._levels = levels
        self._titles = (row_titles, col_titles)
        if self.selected is not None and not (self.selected[0] < rows and self.selected[1] < cols):
            self.selected = None
        self._render()

    def set_colormap(self, name: str) -> None:
        self._cmap = colormaps.check_name(name)
        self._render()

    def set_selected(self, row: Optional[int], col: Optional[int] = None) -> None:
        """Outline map (row, col); None clears."""
        if row is None:
            self.selected = None
        else:
            if self._maps is None or not (0 <= row < self._maps.shape[0] and 0 <= col < self._maps.shape[1]):
                raise ValueError(f"no map at ({row}, {col})")
            self.selected = (int(row), int(col))
        self._draw_selection()

    @property
    def maps(self) -> Optional[np.ndarray]:
        """The maps shown, (rows, cols, Tq, Tk) float32 (the grid's own: read, do not write); None before any."""
        return self._maps

    @property
    def allowed(self) -> Optional[np.ndarray]:
        """Their mask, broadcastable to :attr:`maps` (False = masked); None when every cell is allowed."""
        return self._allowed

    @property
    def levels(self) -> Optional[tuple[float, float]]:
        """The colour scale the maps were given, (low, high); None: each map (or all, shared) spans its range."""
        return self._levels

    def grid_shape(self) -> tuple[int, int]:
        return (0, 0) if self._maps is None else self._maps.shape[:2]

    def tile_center(self, row: int, col: int):
        """Viewport position of the centre of map (row, col) (for callers placing tooltips, tests)."""
        from PySide6.QtCore import QPointF

        th, tw = self._tile
        x, y = mosaic_origin(row, col, self._tile, self.config.gap_px)
        scene = self.view.mapViewToScene(QPointF(x + tw / 2, y + th / 2))
        return QPointF(self.plot.mapFromScene(scene))

    def tile_at(self, x: float, y: float) -> Optional[tuple[int, int]]:
        if self._maps is None:
            return None
        rows, cols = self._maps.shape[:2]
        return mosaic_tile(x, y, self._tile, self.config.gap_px, rows, cols)

    def _render(self) -> None:
        if self._maps is None:
            return
        theme = current_theme()
        rgba, self._tile = build_mosaic(self._maps, self._allowed, self.config.tile_px, self.config.gap_px,
                                        colormaps.lut(self._cmap), masked_colours(theme, self._cmap)[0],
                                        theme.plot_background, self.config.shared_levels, self._levels)
        self.image.setImage(rgba, autoLevels=False, levels=None)
        rows, cols = self._maps.shape[:2]
        th, tw = self._tile
        g = self.config.gap_px
        pi = self.plot.getPlotItem()
        pi.getAxis("left").setTicks([[(r * (th + g) + th / 2, t) for r, t in enumerate(self._titles[0])]])
        pi.getAxis("top").setTicks([[(c * (tw + g) + tw / 2, t) for c, t in enumerate(self._titles[1])]])
        self.view.enableAutoRange()  # refit on every resize: the grid is always seen whole
        self._fit_height()
        self._draw_selection()

    def _fit_height(self) -> None:
        """As tall as the maps need at this width: in a tall narrow column they sit at the top, not
        small in the middle of an empty frame."""
        if self._maps is None:
            return
        rows, cols = self._maps.shape[:2]
        th, tw = self._tile
        g = self.config.gap_px
        mh, mw = rows * (th + g) - g, cols * (tw + g) - g
        pi = self.plot.getPlotItem()
        left = pi.getAxis("left").width() if pi.getAxis("left").isVisible() else 0
        top = pi.getAxis("top").height() if pi.getAxis("top").isVisible() else 0
        width = max(1, self.width() - left - 12)
        need = int(np.ceil(width * mh / max(mw, 1))) + top + 16
        self.plot.setMaximumHeight(max(80, need))

    def resizeEvent(self, ev):  # noqa: N802 - Qt's name
        super().resizeEvent(ev)
        self._fit_height()

    def _draw_selection(self) -> None:
        if self.selected is None or self._maps is None:
            self.selection.setVisible(False)
            return
        th, tw = self._tile
        x, y = mosaic_origin(*self.selected, self._tile, self.config.gap_px)
        self.selection.setRect(QRectF(x - 1, y - 1, tw + 2, th + 2))
        self.selection.setVisible(True)

    def _hover(self, tile: Optional[tuple[int, int]]) -> None:
        if tile is None:
            self.head_hovered.emit(-1, -1)
            return
        r, c = tile
        rt, ct = self._titles
        self.readout.setText(" · ".join(t for t in (rt[r], ct[c]) if t))
        self.head_hovered.emit(r, c)

    def on_theme_changed(self, theme: Theme) -> None:
        pen = QPen(QColor(theme.highlight))
        pen.setCosmetic(True)
        pen.setWidthF(2.5)
        self.selection.setPen(pen)
        self.plot.setBackground(theme.plot_background)
        for name in ("left", "top"):
            axis = self.plot.getPlotItem().getAxis(name)
            axis.setPen(pg.mkPen(None))  # titles only: axis lines ran on past the maps like a frame cut off
            axis.setTextPen(theme.plot_foreground)
        self._render()


class _MosaicImage(pg.ImageItem):
    """The mosaic: its pixel coordinates are mosaic pixels, mapped to maps by mosaic_tile."""

    def __init__(self, grid: HeadGrid):
        super().__init__(axisOrder="row-major")
        self._grid = grid
        self._last = None
        self.setAcceptHoverEvents(True)

    def hoverEvent(self, ev):
        tile = None if ev.isExit() else self._grid.tile_at(ev.pos().x(), ev.pos().y())
        if tile != self._last:
            self._last = tile
            self._grid._hover(tile)

    def mouseClickEvent(self, ev):
        tile = self._grid.tile_at(ev.pos().x(), ev.pos().y())
        if tile is None or ev.button() != Qt.MouseButton.LeftButton:
            ev.ignore()
            return
        ev.accept()
        self._grid.head_clicked.emit(*tile)
