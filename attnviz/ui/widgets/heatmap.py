"""AttentionHeatmap: one attention matrix (rows = queries top to bottom, columns = keys left to
right) with token axes, segment bands, a colorbar, hatched masked cells, fully-masked-row markers,
hover readout, row/cell clicks, a selected-row outline, max-pooled display of large matrices and an
overview mode for matrices too large to hold (the caller supplies screen-resolution images)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional, Sequence

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtWidgets import QLabel, QVBoxLayout, QWidget

from attnviz.model.display.overlays import segment_at
from attnviz.model.display.pooling import pool_max
from attnviz.model.segments import Segment
from attnviz.ui import colormaps
from attnviz.ui.theme import Theme, current_theme
from attnviz.ui.widgets.matrix_frame import CellImageLayer, MatrixFrame, masked_colours


@dataclass(frozen=True)
class HeatmapConfig:
    """Display limits of an AttentionHeatmap."""

    max_display: int = 2048  # image pixels per axis at most (also never more than the view's screen pixels)
    region_debounce_ms: int = 150  # wait this long after zoom/pan before reporting the visible block
    log_floor: float = 1e-6  # values below this are drawn as this in log scale (weights can be exactly 0)


def _finite_levels(values: np.ndarray, allowed: np.ndarray, pooled=None) -> tuple[float, float]:
    """(low, high) of the allowed values; ``pooled`` = (max-pooled image, its allowed pixels), when
    given, supplies the high end (the maximum survives max pooling) from far fewer pixels."""
    if not allowed.any():
        return 0.0, 1.0
    if allowed.all():
        lo = float(values.min())
        hi = float(values.max()) if pooled is None else None
    else:  # reductions over the allowed cells in place: no gathered copy of a large matrix
        lo = float(np.min(values, where=allowed, initial=np.inf))
        hi = None if pooled is not None else float(np.max(values, where=allowed, initial=-np.inf))
    if hi is None:
        img, ok = pooled
        hi = float(np.max(img, where=ok, initial=-np.inf))
    if not hi > lo:
        lo, hi = lo - 0.5, hi + 0.5
    return lo, hi


class AttentionHeatmap(QWidget):
    """Heatmap of one (Tq, Tk) matrix. Signals carry cell indices of the full matrix."""

    hovered = Signal(int, int)  # (row, col) under the mouse; (-1, -1) when it leaves the matrix
    row_clicked = Signal(int)  # query row clicked (left button)
    cell_clicked = Signal(int, int)  # (row, col) clicked (left button)
    view_region_changed = Signal(int, int, int, int)  # visible (r0, r1, c0, c1) after zoom/pan, debounced

    def __init__(self, parent=None, *, config: HeatmapConfig = HeatmapConfig()):
        super().__init__(parent)
        self.config = config
        self.frame = MatrixFrame(self, debounce_ms=config.region_debounce_ms)
        self.readout = QLabel(" ", self)
        self.readout.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.readout.setContentsMargins(6, 0, 6, 2)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(2)
        layout.addWidget(self.frame, 1)
        layout.addWidget(self.readout)

        self._cmap = colormaps.DEFAULT
        self.colorbar = pg.ColorBarItem(values=(0, 1), colorMap=colormaps.colormap(self._cmap), width=12,
                                        interactive=False, colorMapMenu=False)
        self.colorbar.getAxis("right").enableAutoSIPrefix(False)
        # the colour axis sizes itself to its tick labels and its title (a fixed width lets "-6.25" or
        # "0.009" run into the title, or the title off the widget's edge)
        self.colorbar.getAxis("right").setWidth(None)
        self.frame.ci.addItem(self.colorbar, row=3, col=3)
        self.base = CellImageLayer(self.frame.view, z=0)
        self.detail = CellImageLayer(self.frame.view, z=10)

        self._values: Optional[np.ndarray] = None  # (Tq, Tk) raw values of set_matrix
        self._allowed: Optional[np.ndarray] = None  # (Tq, Tk) bool
        self._pooled = False
        self._overview = False
        self._levels = (0.0, 1.0)  # in display units (log10 when log scale)
        self._log = False
        self._value_label = "value"
        self._row_labels: Optional[list[str]] = None
        self._col_labels: Optional[list[str]] = None
        self._provider: Optional[Callable[[int, int], str]] = None
        self._colorbar_state: Optional[tuple] = None  # (colormap, levels, label) the colorbar shows
        self._hover_cell: Optional[tuple[int, int]] = None  # cell under the mouse, for the readout
        self._empty = True  # nothing drawn (or cleared): the readout stays blank

        self.frame.picker.hovered.connect(self._on_hover)
        self.frame.picker.clicked.connect(self._on_click)
        self.frame.region_changed.connect(self._on_region)
        self._resize_timer = QTimer(self)
        self._resize_timer.setSingleShot(True)
        self._resize_timer.setInterval(config.region_debounce_ms)
        self._resize_timer.timeout.connect(self._repool_base)
        self.frame.view.sigResized.connect(lambda *_: self._resize_timer.start())

    # -- public API ----------------------------------------------------------------------------
    def set_matrix(self, values, *, mask=None, row_labels: Optional[Sequence[str]] = None,
                   col_labels: Optional[Sequence[str]] = None, row_segments: Sequence[Segment] = (),
                   col_segments: Sequence[Segment] = (), levels=None, log_scale: bool = False,
                   title: str = "", value_label: str = "value") -> None:
        """Show ``values`` (Tq, Tk); ``mask`` (Tq, Tk) bool with False = masked (drawn hatched,
        rows with no allowed key marked). -inf values are masked too; NaN at an allowed cell is an
        error. ``levels`` = (low, high) in value units, else the allowed values' range."""
        v = np.asarray(values)
        if v.ndim != 2 or v.size == 0:
            raise ValueError(f"values must be a non-empty (Tq, Tk) matrix, got shape {v.shape}")
        if not (np.issubdtype(v.dtype, np.floating) or np.issubdtype(v.dtype, np.integer)):
            raise ValueError(f"values must be real numbers, got dtype {v.dtype}")
        v = v.astype(np.float32, copy=False)
        allowed = None
        if not np.isfinite(v).all():  # one pass in the common all-finite case
            if np.isnan(v).any():
                raise ValueError("values contain NaN")
            if np.isposinf(v).any():
                raise ValueError("values contain +inf")
            allowed = np.isfinite(v)  # (Tq, Tk) -inf cells are masked
        if mask is not None:
            m = np.asarray(mask)
            if m.dtype != bool or m.shape != v.shape:
                raise ValueError(f"mask must be a bool array of shape {v.shape}, got {m.dtype} {m.shape}")
            allowed = m.copy() if allowed is None else allowed & m  # a copy: the caller may edit its mask
        if allowed is None:
            allowed = np.ones(v.shape, dtype=bool)  # (Tq, Tk)
        Tq, Tk = v.shape
        self._overview = False
        self._values, self._allowed = v, allowed
        self._setup_axes(Tq, Tk, row_labels, col_labels, row_segments, col_segments, title)
        self.frame.set_row_flags(None if allowed.all() else ~allowed.any(axis=1))
        self._log = bool(log_scale)
        self._value_label = value_label
        disp = self._to_display(v)
        if levels is not None:
            self._levels = self._resolve_levels(levels, disp, allowed)
        H, W = self._display_shape(Tq, Tk)
        self._pooled = (H, W) != (Tq, Tk)
        if self._pooled:
            img, ok = pool_max(disp, allowed, (H, W))  # (H, W)
        else:
            img, ok = np.where(allowed, disp, np.nan).astype(np.float32), allowed
        if levels is None:
            self._levels = _finite_levels(disp, allowed, (img, ok))
        self.base.show(img, ok, (0, Tq, 0, Tk), self._levels, self._lut(), self._masked())
        self.detail.clear()
        self._update_colorbar()
        self._empty = False
        self._refresh_readout()
        if self._pooled:
            self._on_region(*self.frame.visible_region())

    def _repool_base(self) -> None:
        """After a resize, pool a held matrix again to the view's new pixel size."""
        if self._values is None or not self._pooled:
            return
        Tq, Tk = self._values.shape
        shape = self._display_shape(Tq, Tk)
        if self.base.values is not None and self.base.values.shape == shape:
            return
        img, ok = pool_max(self._to_display(self._values), self._allowed, shape)  # (H, W)
        self.base.show(img, ok, (0, Tq, 0, Tk), self._levels, self._lut(), self._masked())
        if self.detail.extent is not None:
            self._on_region(*self.frame.visible_region())

    def set_overview(self, image, extent, Tq: int, Tk: int, *, levels=None, log_scale: bool = False,
                     row_labels: Optional[Sequence[str]] = None, col_labels: Optional[Sequence[str]] = None,
                     row_segments: Sequence[Segment] = (), col_segments: Sequence[Segment] = (),
                     row_flags=None, title: str = "", value_label: str = "max weight") -> None:
        """Show a precomputed image (H, W) of the cell block ``extent`` = (r0, r1, c0, c1) of a
        (Tq, Tk) matrix that is never held whole; NaN pixels are masked. An image of the whole
        matrix becomes the base layer; one of a smaller block is drawn over it at its place (the
        answer to ``view_region_changed``). Levels default to the base image's range."""
        img = np.asarray(image, dtype=np.float32)
        if img.ndim != 2 or img.size == 0:
            raise ValueError(f"overview image must be a non-empty (H, W) array, got shape {img.shape}")
        if np.isinf(img).any():
            raise ValueError("overview image contains infinity (use NaN for masked pixels)")
        r0, r1, c0, c1 = (int(e) for e in extent)
        if not (0 <= r0 < r1 <= Tq and 0 <= c0 < c1 <= Tk):
            raise ValueError(f"extent {extent} is not a non-empty block of a {Tq}x{Tk} matrix")
        full = (r0, r1, c0, c1) == (0, Tq, 0, Tk)
        same_matrix = self._overview and (self.frame.n_rows, self.frame.n_cols) == (Tq, Tk)
        self._log = bool(log_scale)
        self._value_label = value_label
        allowed = ~np.isnan(img)
        disp = np.where(allowed, self._to_display(np.nan_to_num(img, nan=0.0)), np.nan).astype(np.float32)
        if full or not same_matrix:
            self._overview = True
            self._values = self._allowed = None
            self._pooled = False
            self._setup_axes(Tq, Tk, row_labels, col_labels, row_segments, col_segments, title)
            if row_flags is not None:
                row_flags = np.asarray(row_flags, dtype=bool)
                if row_flags.shape != (Tq,):
                    raise ValueError(f"row_flags must have shape ({Tq},), got {row_flags.shape}")
            self.frame.set_row_flags(row_flags)
            self._levels = self._resolve_levels(levels, disp, allowed)
            self.base.clear()
            self.detail.clear()
            layer = self.base if full else self.detail  # a first image of a block stays at its place
            layer.show(disp, allowed, (r0, r1, c0, c1), self._levels, self._lut(), self._masked())
            self._update_colorbar()
            self._empty = False
            self._refresh_readout()
        else:
            if levels is not None:
                self._levels = self._resolve_levels(levels, disp, allowed)
                self.base.set_levels_lut(self._levels, self._lut())
                self._update_colorbar()
            self.detail.show(disp, allowed, (r0, r1, c0, c1), self._levels, self._lut(), self._masked())

    def set_readout_provider(self, provider: Optional[Callable[[int, int], str]]) -> None:
        """Extra readout text for a hovered cell, e.g. ``lambda i, j: f"score {s[i, j]:.3f}"``."""
        self._provider = provider

    def set_selected_row(self, row: Optional[int]) -> None:
        self.frame.set_selected_row(row)

    def set_colormap(self, name: str) -> None:
        self._cmap = colormaps.check_name(name)
        for layer in (self.base, self.detail):
            layer.set_levels_lut(self._levels, self._lut())
            layer.restyle(self._masked())
        self._update_colorbar()

    def colormap_name(self) -> str:
        return self._cmap

    def levels(self) -> tuple[float, float]:
        """Current levels in display units (log10 of values in log scale)."""
        return self._levels

    def clear(self, title: str = "") -> None:
        """Show no matrix: no cells, no token labels, bands or row marks of the last one, a blank
        readout, and ``title`` (e.g. why there is nothing to show)."""
        self.base.clear()
        self.detail.clear()
        self._values = self._allowed = None
        self._row_labels = self._col_labels = None
        self._empty = True
        self.frame.set_labels(None, None)
        self.frame.set_segments((), ())
        self.frame.set_row_flags(None)
        self.frame.set_selected_row(None)
        self.frame.set_title(title)
        self.readout.setText(" ")

    def is_empty(self) -> bool:
        """True when no matrix is drawn (before the first one, or after :meth:`clear`)."""
        return self._empty

    # -- internals ------------------------------------------------------------------------------
    def _setup_axes(self, Tq, Tk, row_labels, col_labels, row_segments, col_segments, title):
        for labels, n, what in ((row_labels, Tq, "row"), (col_labels, Tk, "column")):
            if labels is not None and len(labels) != n:
                raise ValueError(f"{len(labels)} {what} labels for {n} {what}s")
        self.frame.set_shape(Tq, Tk)
        self.frame.set_labels(row_labels, col_labels)
        self.frame.set_segments(row_segments, col_segments)
        self.frame.set_title(title)
        self._row_labels = None if row_labels is None else [str(s) for s in row_labels]
        self._col_labels = None if col_labels is None else [str(s) for s in col_labels]

    def _display_shape(self, n_rows: int, n_cols: int) -> tuple[int, int]:
        """Image pixels per axis: no more than the view has screen pixels (so the painter never
        scales a peak away) nor than config.max_display."""
        rect = self.frame.view.sceneBoundingRect()
        ratio = self.devicePixelRatioF()
        h = max(int(np.ceil(rect.height() * ratio)), 64)
        w = max(int(np.ceil(rect.width() * ratio)), 64)
        return min(n_rows, self.config.max_display, h), min(n_cols, self.config.max_display, w)

    def _to_display(self, v: np.ndarray) -> np.ndarray:
        if not self._log:
            return v
        return np.log10(np.maximum(v, self.config.log_floor)).astype(np.float32)

    def _resolve_levels(self, levels, disp, allowed) -> tuple[float, float]:
        if levels is None:
            return _finite_levels(disp, allowed)
        lo, hi = (float(x) for x in levels)
        if not (np.isfinite(lo) and np.isfinite(hi) and hi > lo):
            raise ValueError(f"levels must be finite with low < high, got {levels}")
        if self._log:
            if lo <= 0 and hi <= 0:
                raise ValueError(f"log scale needs positive levels, got {levels}")
            lo, hi = np.log10(max(lo, self.config.log_floor)), np.log10(hi)
        return float(lo), float(hi)

    def _lut(self) -> np.ndarray:
        return colormaps.lut(self._cmap)

    def _masked(self) -> tuple[str, str]:
        return masked_colours(current_theme(), self._cmap)

    def _update_colorbar(self) -> None:
        label = f"log10 {self._value_label}" if self._log else self._value_label
        state = (self._cmap, tuple(self._levels), label)
        if state == self._colorbar_state:
            return  # redrawing the same colorbar would relayout the frame on every live update
        self._colorbar_state = state
        self.colorbar.setColorMap(colormaps.colormap(self._cmap))
        self.colorbar.setLevels(self._levels)
        self.colorbar.getAxis("right").setLabel(label)

    def _on_region(self, r0: int, r1: int, c0: int, c1: int) -> None:
        if self._pooled and self._values is not None:
            if (r0, r1, c0, c1) == (0, self.frame.n_rows, 0, self.frame.n_cols):
                self.detail.clear()
            else:
                disp = self._to_display(self._values[r0:r1, c0:c1])  # (r1-r0, c1-c0)
                allowed = self._allowed[r0:r1, c0:c1]
                img, ok = pool_max(disp, allowed, self._display_shape(r1 - r0, c1 - c0))
                self.detail.show(img, ok, (r0, r1, c0, c1), self._levels, self._lut(), self._masked())
        self.view_region_changed.emit(r0, r1, c0, c1)

    def _cell_value(self, row: int, col: int) -> tuple[Optional[float], bool, bool]:
        """(value, allowed, exact) under a cell: exact values when the matrix is held."""
        if self._values is not None:
            return float(self._values[row, col]), bool(self._allowed[row, col]), True
        for layer in (self.detail, self.base):
            got = layer.value_at(row, col)
            if got is not None:
                value, ok = got
                if ok and self._log:
                    value = float(10.0 ** value)
                return value, ok, False
        return None, False, False

    def readout_text(self, row: int, col: int) -> str:
        """The text shown when cell (row, col) is hovered."""
        q = self._row_labels[row] if self._row_labels is not None else ""
        k = self._col_labels[col] if self._col_labels is not None else ""
        qs = segment_at(self.frame.row_segments, row)
        ks = segment_at(self.frame.col_segments, col)
        parts = [f"q {row} {q!r}" + (f" [{qs.name}]" if qs else ""),
                 f"k {col} {k!r}" + (f" [{ks.name}]" if ks else "")]
        value, ok, exact = self._cell_value(row, col)
        if not ok:
            parts.append("masked")
        elif value is not None:
            parts.append(f"{self._value_label} {'' if exact else '≈'}{value:.4g}")
        if self._provider is not None:
            extra = self._provider(row, col)
            if extra:
                parts.append(str(extra))
        return "  ·  ".join(parts)

    def _on_hover(self, row: int, col: int) -> None:
        self._hover_cell = (row, col) if row >= 0 else None
        if row >= 0:
            self.readout.setText(" " if self._empty else self.readout_text(row, col))
        self.hovered.emit(row, col)

    def _refresh_readout(self) -> None:
        """After new content: the readout describes the hovered cell of the new matrix (or nothing),
        never a token of the matrix drawn before."""
        cell = self._hover_cell
        if cell is None or self._empty or not (cell[0] < self.frame.n_rows and cell[1] < self.frame.n_cols):
            self.readout.setText(" ")
        else:
            self.readout.setText(self.readout_text(*cell))

    def _on_click(self, row: int, col: int, button) -> None:
        if button != Qt.MouseButton.LeftButton:
            return
        self.cell_clicked.emit(row, col)
        self.row_clicked.emit(row)

    def on_theme_changed(self, theme: Theme) -> None:
        for layer in (self.base, self.detail):
            layer.restyle(self._masked())
        self.colorbar.getAxis("right").setPen(theme.plot_foreground)
        self.colorbar.getAxis("right").setTextPen(theme.plot_foreground)
