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
from attnviz.model.display import pooled_matrix
from attnviz.model.display.pooled_matrix import PooledMatrix
from attnviz.model.segments import Segment
from attnviz.ui import colormaps
from attnviz.ui.latest_job import LatestJob
from attnviz.ui.theme import Theme, current_theme
from attnviz.ui.widgets.matrix_frame import CellImageLayer, MatrixFrame, masked_colours


SYNC_POOL_CELLS = 2048 * 2048  # a larger matrix is checked and pooled on the widget's worker thread


@dataclass(frozen=True)
class HeatmapConfig:
    """Display limits of an AttentionHeatmap."""

    max_display: int = 2048  # image pixels per axis at most (also never more than the view's screen pixels)
    region_debounce_ms: int = 150  # wait this long after zoom/pan before reporting the visible block
    log_floor: float = 1e-6  # values below this are drawn as this in log scale (weights can be exactly 0)


class AttentionHeatmap(QWidget):
    """Heatmap of one (Tq, Tk) matrix. Signals carry cell indices of the full matrix."""

    hovered = Signal(int, int)  # (row, col) under the mouse; (-1, -1) when it leaves the matrix
    row_clicked = Signal(int)  # query row clicked (left button)
    cell_clicked = Signal(int, int)  # (row, col) clicked (left button)
    view_region_changed = Signal(int, int, int, int)  # visible (r0, r1, c0, c1) after zoom/pan, debounced
    matrix_shown = Signal()  # a matrix of set_matrix is drawn (at once, or when its worker has pooled it)

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
        self._colorbar: Optional[pg.ColorBarItem] = None  # made with the first content (see colorbar)
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
        self._pool_job: Optional[LatestJob] = None  # pools large matrices; made at the first one
        self._pending_id: Optional[int] = None  # the job pooling the newest set_matrix, while it runs
        self._pending_axes: Optional[dict] = None  # its labels, segments and title, drawn with it
        self._detail_job: Optional[LatestJob] = None  # pools a large zoomed block of a large matrix

        self.frame.picker.hovered.connect(self._on_hover)
        self.frame.picker.clicked.connect(self._on_click)
        self.frame.region_changed.connect(self._on_region)
        self._resize_timer = QTimer(self)
        self._resize_timer.setSingleShot(True)
        self._resize_timer.setInterval(config.region_debounce_ms)
        self._resize_timer.timeout.connect(self._repool_base)
        self.frame.view.sigResized.connect(lambda *_: self._resize_timer.start())

    # -- public API ----------------------------------------------------------------------------
    @property
    def has_colorbar(self) -> bool:
        """True once the colour bar has been made (reading ``colorbar`` makes it)."""
        return self._colorbar is not None

    @property
    def colorbar(self) -> pg.ColorBarItem:
        """The colour bar beside the matrix, made the first time it is wanted: a pyqtgraph
        ColorBarItem is a whole plot (half of this widget's construction time), and a panel builds
        many heatmaps in tabs that are never opened."""
        if self._colorbar is None:
            cb = pg.ColorBarItem(values=(0, 1), colorMap=colormaps.colormap(self._cmap), width=12,
                                 interactive=False, colorMapMenu=False)
            axis = cb.getAxis("right")
            axis.enableAutoSIPrefix(False)
            # the colour axis sizes itself to its tick labels and its title (a fixed width lets "-6.25" or
            # "0.009" run into the title, or the title off the widget's edge)
            axis.setWidth(None)
            fg = current_theme().plot_foreground
            axis.setPen(fg)
            axis.setTextPen(fg)
            self.frame.ci.addItem(cb, row=3, col=3)
            self._colorbar = cb
        return self._colorbar

    def set_matrix(self, values, *, mask=None, row_labels: Optional[Sequence[str]] = None,
                   col_labels: Optional[Sequence[str]] = None, row_segments: Sequence[Segment] = (),
                   col_segments: Sequence[Segment] = (), levels=None, log_scale: bool = False,
                   title: str = "", value_label: str = "value") -> None:
        """Show ``values`` (Tq, Tk); ``mask`` (Tq, Tk) bool with False = masked (drawn hatched,
        rows with no allowed key marked). -inf values are masked too; NaN at an allowed cell is an
        error. ``levels`` = (low, high) in value units, else the allowed values' range.

        ``values`` may also be a :class:`PooledMatrix` already pooled to :attr:`display_shape`
        (``pool_matrix`` run on the caller's worker): it is drawn as it is (``mask``, ``levels``
        and ``log_scale`` are then the ones it was pooled with). A matrix of more than
        :data:`SYNC_POOL_CELLS` cells is checked and pooled on this widget's worker thread: the call
        returns at once, the picture before stays until the new one is ready (``pooling()``), and
        a matrix found bad there is reported in the title instead of raising."""
        axes = dict(row_labels=row_labels, col_labels=col_labels, row_segments=row_segments,
                    col_segments=col_segments, title=title, value_label=value_label)
        if isinstance(values, PooledMatrix):
            self._check_axes(values.shape, row_labels, col_labels)
            self._drop_pending()
            self._show_pooled(values, axes)
            return
        v = np.asarray(values)
        pooled_matrix.check_shape(v, mask)  # cheap: shape and dtype
        self._check_axes(v.shape, row_labels, col_labels)
        if levels is not None:
            pooled_matrix.given_levels(levels, log_scale, self.config.log_floor)  # bad levels raise now
        shape = self.display_shape(*v.shape)
        if v.size <= SYNC_POOL_CELLS:
            self._drop_pending()
            pm = pooled_matrix.pool_matrix(v, mask, shape, log_scale=log_scale, log_floor=self.config.log_floor,
                                           levels=levels)
            self._show_pooled(pm, axes)
            return
        m = None if mask is None else np.array(mask, dtype=bool)  # a copy: the caller may edit its mask
        job = self._job()
        self._pending_axes = axes
        self._pending_id = job.submit(pooled_matrix.pool_matrix, v, m, shape, log_scale=log_scale,
                                      log_floor=self.config.log_floor, levels=levels)

    def display_shape(self, n_rows: int, n_cols: int) -> tuple[int, int]:
        """Image pixels per axis to pool an (n_rows, n_cols) matrix to: no more than the view has
        screen pixels (so the painter never scales a peak away) nor than config.max_display. Ask
        it on the GUI thread, pool with it anywhere (``pool_matrix``)."""
        rect = self.frame.view.sceneBoundingRect()
        ratio = self.devicePixelRatioF()
        h = max(int(np.ceil(rect.height() * ratio)), 64)
        w = max(int(np.ceil(rect.width() * ratio)), 64)
        return min(n_rows, self.config.max_display, h), min(n_cols, self.config.max_display, w)

    def pooling(self) -> bool:
        """True while a matrix given to :meth:`set_matrix` is being pooled on the worker."""
        return self._pending_id is not None

    def _job(self) -> LatestJob:
        if self._pool_job is None:
            self._pool_job = LatestJob("attnviz-heatmap-pool", self)
            self._pool_job.setObjectName("attnviz-heatmap-pool")
            self._pool_job.done.connect(self._on_pool_done)
            self._pool_job.failed.connect(self._on_pool_failed)
        return self._pool_job

    def _drop_pending(self) -> None:
        """Whatever the worker is pooling is no longer wanted (newer content, or none)."""
        if self._pending_id is not None and self._pool_job is not None:
            self._pool_job.cancel()
        self._pending_id = None
        self._pending_axes = None

    def _on_pool_done(self, jid: int, result) -> None:
        if jid != self._pending_id:
            if isinstance(result, tuple) and result[0] == "base":
                self._on_repooled(result)
            return
        axes, self._pending_id, self._pending_axes = self._pending_axes, None, None
        self._show_pooled(result, axes)

    def _on_pool_failed(self, jid: int, message: str) -> None:
        if jid == self._pending_id:
            self._pending_id = self._pending_axes = None
            self.clear(f"cannot draw this matrix: {message}")

    def _check_axes(self, shape, row_labels, col_labels) -> None:
        for labels, n, what in ((row_labels, shape[0], "row"), (col_labels, shape[1], "column")):
            if labels is not None and len(labels) != n:
                raise ValueError(f"{len(labels)} {what} labels for {n} {what}s")

    def _show_pooled(self, pm: PooledMatrix, axes: dict) -> None:
        """Draw a pooled matrix: only screen-sized work on the GUI thread."""
        Tq, Tk = pm.shape
        self._overview = False
        self._values, self._allowed = pm.values, pm.allowed
        self._setup_axes(Tq, Tk, axes["row_labels"], axes["col_labels"], axes["row_segments"],
                         axes["col_segments"], axes["title"])
        self.frame.set_row_flags(pm.row_flags)
        self._log = pm.log_scale
        self._value_label = axes["value_label"]
        self._levels = pm.levels
        self._pooled = pm.pooled
        self.base.show(pm.image, pm.image_allowed, (0, Tq, 0, Tk), self._levels, self._lut(), self._masked())
        self.detail.clear()
        self._update_colorbar()
        self._empty = False
        self._refresh_readout()
        if self._pooled:
            self._on_region(*self.frame.visible_region())
        self.matrix_shown.emit()

    def _repool_base(self) -> None:
        """After a resize, pool a held matrix again to the view's new pixel size (on the worker
        for a large one; later, when a new matrix is still being pooled)."""
        if self._values is None or not self._pooled:
            return
        if self._pending_id is not None:
            self._resize_timer.start()
            return
        Tq, Tk = self._values.shape
        shape = self.display_shape(Tq, Tk)
        if self.base.values is not None and self.base.values.shape == shape:
            return
        if self._values.size <= SYNC_POOL_CELLS:
            self._on_repooled(("base", self._values, *self._pool_base(self._values, self._allowed, shape)))
        else:
            self._job().submit(lambda v=self._values, a=self._allowed: ("base", v, *self._pool_base(v, a, shape)))

    def _pool_base(self, values, allowed, shape):
        return pooled_matrix.pool_block(pooled_matrix.to_display(values, self._log, self.config.log_floor),
                                        allowed, shape)  # (H, W)

    def _on_repooled(self, result) -> None:
        _, values, img, ok = result
        if values is not self._values:
            return  # pooled for a matrix no longer shown
        Tq, Tk = values.shape
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
        self._drop_pending()  # a matrix still being pooled must not cover this image later
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
        self._drop_pending()
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

    # what is shown, read-only (the arrays are the widget's own: read them, do not write)
    @property
    def values(self) -> Optional[np.ndarray]:
        """The matrix shown, (Tq, Tk) as given to :meth:`set_matrix` (float32); None while empty."""
        return self._values

    @property
    def allowed(self) -> Optional[np.ndarray]:
        """Which of its cells the mask allows, (Tq, Tk) bool; None while empty."""
        return self._allowed

    @property
    def row_labels(self) -> Optional[list[str]]:
        """The query axis' token labels of the matrix shown (None: no labels, or empty)."""
        return self._row_labels

    @property
    def col_labels(self) -> Optional[list[str]]:
        """The key axis' token labels of the matrix shown (None: no labels, or empty)."""
        return self._col_labels

    @property
    def pooled(self) -> bool:
        """True when the matrix shown is drawn pooled to the view's pixels (an overview of a long one)."""
        return self._pooled

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

    def _to_display(self, v: np.ndarray) -> np.ndarray:
        return pooled_matrix.to_display(v, self._log, self.config.log_floor)

    def _resolve_levels(self, levels, disp, allowed) -> tuple[float, float]:
        if levels is None:
            return pooled_matrix.finite_levels(disp, allowed)
        return pooled_matrix.given_levels(levels, self._log, self.config.log_floor)

    def _lut(self) -> np.ndarray:
        return colormaps.lut(self._cmap)

    def _masked(self) -> tuple[str, str]:
        return masked_colours(current_theme(), self._cmap)

    def _update_colorbar(self) -> None:
        label = f"log10 {self._value_label}" if self._log else self._value_label
        state = (self._cmap, tuple(self._levels), label)
        if self._colorbar is None and self.base.values is None and self.detail.values is None:
            return  # nothing drawn yet (a colormap chosen early): the bar is made with the first picture
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
                values, extent = self._values, (r0, r1, c0, c1)
                block = values[r0:r1, c0:c1]  # (r1-r0, c1-c0) a view
                allowed = self._allowed[r0:r1, c0:c1]
                shape, log, floor = self.display_shape(r1 - r0, c1 - c0), self._log, self.config.log_floor

                def pool():
                    return values, extent, *pooled_matrix.pool_block(pooled_matrix.to_display(block, log, floor),
                                                                    allowed, shape)

                if block.size <= SYNC_POOL_CELLS:
                    self._on_detail(0, pool())
                else:  # a large block of a large matrix: on its own worker, so a base repool is not dropped
                    if self._detail_job is None:
                        self._detail_job = LatestJob("attnviz-heatmap-detail", self)
                        self._detail_job.setObjectName("attnviz-heatmap-detail")
                        self._detail_job.done.connect(self._on_detail)
                    self._detail_job.submit(pool)
        self.view_region_changed.emit(r0, r1, c0, c1)

    def _on_detail(self, _jid: int, result) -> None:
        values, extent, img, ok = result
        if values is self._values and extent == self.frame.visible_region():
            self.detail.show(img, ok, extent, self._levels, self._lut(), self._masked())

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
        if self._colorbar is not None:  # one made later takes the theme then
            self._colorbar.getAxis("right").setPen(theme.plot_foreground)
            self._colorbar.getAxis("right").setTextPen(theme.plot_foreground)
