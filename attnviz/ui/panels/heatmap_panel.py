"""The attention heatmap panel: one head's (or the mean's) weights, scores, output or mask, with an
all-heads grid beside it; clicking a row selects that query everywhere. Beyond the response's dense
limit the weights are never held: the panel asks :func:`attnviz.engine.overview.attention_overview`
for a screen-sized picture on a worker thread, again for the visible block after every zoom or pan.
A long one is drawn coarse first (:func:`attnviz.model.display.coarse_overview.coarse_overview`, a
few sampled query rows, drawn at once), then at full resolution; a newer request stops the old job
between its steps.

Read-only maps: while the window shows a maps file (``ctx.maps``, :mod:`attnviz.ui.session_maps`), a "maps
from FILE" box (ticked when they arrive) draws the file's maps instead of the session's computation: a layer
and a head (or their mean) in the heatmap, the layer's heads in the grid, a banner saying that the inputs,
model and mask designer do not recompute them. Unticking it, or maps that go away, returns to the session's
own attention, which kept computing meanwhile.
"""

from __future__ import annotations

import numpy as np
from PySide6.QtCore import QObject, Qt, QTimer, Signal
from PySide6.QtWidgets import QCheckBox, QComboBox, QHBoxLayout, QLabel, QSplitter, QVBoxLayout, QWidget

from attnviz.cancel import Cancelled
from attnviz.model.display.coarse_overview import coarse_overview
from attnviz.model.display.head_grid import GRID_TILE, grid_columns, grid_layout
from attnviz.model.display.overview import overview_grid, overview_image
from attnviz.model.display.pooling import pool_max
from attnviz.model.display.response_views import (MATRICES, check_head, cell_values, compact_labels, engine_scale,
                                                  fully_masked_rows, matrix_view, n_heads)
from attnviz.ui import colormaps
from attnviz.ui.latest_job import LatestJob
from attnviz.ui.widgets.busy_overlay import LIVE_DELAY_MS, STALE_TEXT, BusyOverlay
from attnviz.ui.widgets.flow_layout import FlowLayout
from attnviz.ui.widgets.heatmap import AttentionHeatmap
from attnviz.ui.widgets.small_multiples import HeadGrid
from attnviz.ui.messages import Level

NARROW_WIDTH = 520  # a panel narrower than this puts the small maps under the heatmap, not beside it
SHORT_HEIGHT = 480  # ... and when it is also shorter than this, leaves them out (no room for both)
#: weight cells (Tq x Tk, times the heads for the mean) beyond which the overview is drawn coarse first
COARSE_CELLS = 1 << 22


class _Relay(QObject):
    """Carries the coarse picture from the overview's worker to the GUI thread (a queued signal)."""

    coarse = Signal(object)


class HeatmapPanel(QWidget):
    """Heatmap of the selected head and matrix, plus the all-heads grid."""

    rendered = Signal()  # the main heatmap was redrawn (for a response or a preview; tests, benchmarks)
    coarse_rendered = Signal()  # a long sequence's coarse overview was drawn, the full one is on the way

    def __init__(self, ctx, parent=None):
        super().__init__(parent)
        self.ctx = ctx
        self._resp = None
        self._preview = None  # the HeadPreview on screen, newer than _resp, or None
        self.drawn_request_id = 0  # request id of the response or preview the heatmap shows
        self._mode = "empty"  # "dense", "overview", "message" or "empty"
        self._drawn_view = None  # view fields the current picture was drawn for
        self._scale = None
        self._row_labels: tuple[str, ...] = ()
        self._key_labels: tuple[str, ...] = ()
        self._grid_cmap = colormaps.DEFAULT

        self.head_combo = QComboBox(self)
        self.head_combo.setToolTip("head shown in the heatmap (mean: average over heads)")
        self.matrix_combo = QComboBox(self)
        self.matrix_combo.addItems(list(MATRICES))
        self.matrix_combo.setToolTip("weights: softmax over keys · scores: scaled q·k before the mask · "
                                     "output: per-head output rows · mask: allowed cells")
        self.cmap_combo = QComboBox(self)
        self.cmap_combo.addItems(list(colormaps.NAMES))
        self.log_check = QCheckBox("log", self)
        self.log_check.setToolTip("colour weights by log10 (small weights become visible)")
        self.pool_combo = QComboBox(self)
        self.pool_combo.addItems(["max", "mean"])
        self.pool_combo.setToolTip("long sequences: each pixel shows the max (peaks stay visible) or the mean "
                                   "of the weights it covers")
        self.pool_label = QLabel("pool", self)
        self.grid_check = QCheckBox("all heads", self)
        self.grid_check.setChecked(True)
        self.grid_check.setToolTip("show every head as a small map; click one to select it")
        self.maps_check = QCheckBox("maps from file", self)
        self.maps_check.setToolTip("show the read-only attention maps of the file the window opened instead of "
                                   "this session's computation")
        self.maps_check.setVisible(False)
        self.layer_combo = QComboBox(self)
        self.layer_combo.setToolTip("layer of the file's maps shown")
        self.layer_label = QLabel("layer", self)
        self._maps_head = 0  # head of the file's maps shown ("mean" or an index)

        bar = FlowLayout(spacing=6)  # wraps when the panel is narrow (the mask workspace's column)
        bar.setContentsMargins(6, 4, 6, 0)
        for label, w in (("head", self.head_combo), ("show", self.matrix_combo), ("colours", self.cmap_combo),
                         (self.pool_label, self.pool_combo)):
            pair = QWidget(self)
            pl = QHBoxLayout(pair)
            pl.setContentsMargins(0, 0, 0, 0)
            pl.addWidget(label if isinstance(label, QLabel) else QLabel(label, self))
            pl.addWidget(w)
            bar.addWidget(pair)
        bar.addWidget(self.log_check)
        bar.addWidget(self.grid_check)
        layer_pair = QWidget(self)
        ll = QHBoxLayout(layer_pair)
        ll.setContentsMargins(0, 0, 0, 0)
        ll.addWidget(self.layer_label)
        ll.addWidget(self.layer_combo)
        self._layer_pair = layer_pair
        layer_pair.setVisible(False)
        bar.addWidget(self.maps_check)
        bar.addWidget(layer_pair)

        self.heatmap = AttentionHeatmap(self)
        self.heatmap.set_readout_provider(self._readout_extra)
        # the colorbar axis sizes itself to its tick labels (a fixed width lets "0.009" run into the label)
        self.heatmap.colorbar.getAxis("right").setWidth(None)
        self.grid = HeadGrid(self)
        self.grid.setMinimumWidth(140)
        self.note = QLabel("", self)
        self.note.setWordWrap(True)
        self.note.setContentsMargins(8, 2, 8, 2)
        self.note.setVisible(False)
        self.splitter = QSplitter(Qt.Orientation.Horizontal, self)
        self.splitter.addWidget(self.heatmap)
        self.splitter.addWidget(self.grid)
        self.splitter.setStretchFactor(0, 4)
        self.splitter.setStretchFactor(1, 1)
        self.splitter.setSizes([640, 200])
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(2)
        layout.addLayout(bar)
        layout.addWidget(self.note)
        layout.addWidget(self.splitter, 1)

        # the heatmap and the grid say when their picture is on the way (never blank axes in silence)
        self.busy = BusyOverlay(self.splitter, self)
        self.busy.cancelled.connect(self.ctx.compute.cancel)
        self._overview_text = ""
        self._hidden_change = False  # a response arrived while another workspace was shown: draw it on show
        self.job = LatestJob("attnviz-overview", self)
        self.job.done.connect(self._on_overview)
        self.job.failed.connect(lambda _id, msg: self.ctx.report(Level.ERROR, msg))
        self.job.busy_changed.connect(self._update_busy)
        self._overview_token = None  # the newest overview request; an older job stops at its next step
        self._base_coarse = False  # the heatmap's base picture is the coarse one
        self._relay = _Relay(self)
        self._relay.coarse.connect(self._on_coarse)
        # a bound method, not a lambda: the connection goes with the panel (a lambda outlived a closed
        # window and drew on its deleted overlay when the next window computed)
        ctx.compute.busy_changed.connect(self._update_busy)
        ctx.compute.cancelled.connect(self._on_cancelled)
        self.grid_job = LatestJob("attnviz-head-grid", self)
        self.grid_job.done.connect(self._on_grid_pooled)
        self.grid_job.failed.connect(lambda _id, msg: self.ctx.report(Level.ERROR, msg))
        self._grid_timer = QTimer(self)
        self._grid_timer.setSingleShot(True)
        self._grid_timer.setInterval(0)
        self._grid_timer.timeout.connect(self._draw_grid)

        self.head_combo.activated.connect(self._on_head_picked)
        self.matrix_combo.activated.connect(lambda i: self.ctx.set_view(matrix=MATRICES[i]))
        self.cmap_combo.activated.connect(lambda i: self.ctx.set_view(colormap=colormaps.NAMES[i]))
        self.log_check.toggled.connect(lambda on: self.ctx.set_view(log_scale=on))
        self.pool_combo.activated.connect(lambda _i: self._redraw())
        self.grid_check.toggled.connect(self._on_grid_toggled)
        self.heatmap.row_clicked.connect(self._on_row_clicked)
        self.heatmap.view_region_changed.connect(self._on_region)
        self.grid.head_clicked.connect(self._on_grid_clicked)
        self.grid.head_hovered.connect(self._on_grid_hovered)
        ctx.response_changed.connect(self._on_response)
        ctx.preview_changed.connect(self._on_preview)
        ctx.session.events.view.connect(self._on_view_changed)
        self.maps_check.toggled.connect(self._on_maps_toggled)
        self.layer_combo.activated.connect(lambda _i: self._redraw())
        ctx.maps_changed.connect(self._on_maps_changed)
        self._sync_controls(ctx.session.state.view)
        if getattr(ctx, "maps", None) is not None:
            self._on_maps_changed(ctx.maps)
        if ctx.response is not None:
            self._on_response(ctx.response)

    def resizeEvent(self, ev):  # noqa: N802 - Qt's name
        super().resizeEvent(ev)
        # narrow (the mask workspace's column): the small maps go under the heatmap, not beside it
        want = Qt.Orientation.Horizontal if self.width() >= NARROW_WIDTH else Qt.Orientation.Vertical
        if getattr(self, "_resp", None) is not None and self.grid.isHidden() == self._grid_wanted():
            self._draw_grid_later()  # room for the small maps came or went
        if self.splitter.orientation() != want:
            if want == Qt.Orientation.Vertical:
                self._wide_sizes = self.splitter.sizes()  # back to these when the panel is wide again
            self.splitter.setOrientation(want)
            total = sum(self.splitter.sizes())
            wide = getattr(self, "_wide_sizes", None)
            if want == Qt.Orientation.Horizontal and wide and wide[0] > 2 * wide[1]:
                self.splitter.setSizes(wide)
            else:  # the heatmap first (sizes kept while the panel was not laid out yet, 48 | 48, do not count)
                self.splitter.setSizes([total * 4 // 5, total - total * 4 // 5])

    # ------------------------------------------------------------------ public
    def shutdown(self) -> None:
        """Stop the worker threads (the window calls this when it closes)."""
        self.job.shutdown()
        self.grid_job.shutdown()

    @property
    def mode(self) -> str:
        return self._mode

    @property
    def response(self):
        """The computed response the panel draws from (None before the first one or after a failure)."""
        return self._resp

    @property
    def preview(self):
        """The HeadPreview on screen, newer than the response, or None."""
        return self._preview

    def export_widget(self) -> QWidget:
        """The widget File > Export draws (the heatmap with its axes and colorbar)."""
        return self.heatmap

    def current_matrix(self):
        """(values (Tq, Tk|hv), row labels, column labels, name) of the heatmap as shown; ValueError
        when the response does not hold it (long sequences: only the overview exists)."""
        if self.maps_shown():
            values, head = self._maps_matrix()
            shown = self.ctx.maps
            layer = self.layer_combo.currentIndex()
            name = f"maps_layer{layer}_{'mean' if head == 'mean' else f'head{head}'}"
            return values, shown.row_tokens, list(shown.maps.tokens), name
        resp = self._resp
        if resp is None or not resp.ok:
            raise ValueError("there is no computed attention to export yet")
        view = self.ctx.session.state.view
        head = check_head(resp, view.head)
        mv = matrix_view(resp, view.matrix, head)
        if mv is None:
            raise ValueError(f"T = {resp.Tq:,} exceeds the dense limit: the full {view.matrix} matrix is not held; "
                             "export the picture (PNG or SVG) instead")
        name = f"{view.matrix}_{'mean' if head == 'mean' else f'head{head}'}"
        values = np.where(mv.allowed, mv.values, 0.0) if view.matrix == "weights" else mv.values
        return np.asarray(values), list(resp.query_labels), list(mv.col_labels), name

    def current_stack(self):
        """(array, name): the shown matrix for every head, (nh, Tq, Tk|hv) (the mask as bool)."""
        if self.maps_shown():
            layer = self.layer_combo.currentIndex()
            return self.ctx.maps.maps.attentions[layer], f"maps_layer{layer}"
        resp = self._resp
        if resp is None or not resp.ok:
            raise ValueError("there is no computed attention to export yet")
        matrix = self.ctx.session.state.view.matrix
        if matrix == "output":
            return resp.output, "output"
        if matrix == "mask":
            if resp.mask is None:
                raise ValueError(f"the mask of {resp.Tq:,} x {resp.Tk:,} tokens is held per flash tile, not cell "
                                 "by cell: export the picture instead")
            m = resp.mask if resp.mask.ndim == 3 else np.broadcast_to(resp.mask, (n_heads(resp),) + resp.mask.shape)
            return np.ascontiguousarray(m), "mask"
        stack = resp.weights if matrix == "weights" else resp.scores
        if stack is None:
            raise ValueError(f"T = {resp.Tq:,} exceeds the dense limit: the {matrix} matrices are not held")
        return stack, matrix

    # ------------------------------------------------------------------ events
    def _update_busy(self, *_args) -> None:
        """Show what the views wait for: the attention itself (cancellable), or the overview of a
        long sequence being drawn; nothing when neither runs."""
        # over a picture, live edits (paint strokes) do not flash the veil; the file's maps wait for nothing
        if self.ctx.compute.busy and not self.maps_shown():
            self.busy.start("computing the attention…", cancellable=True,
                            delay_ms=None if self._mode in ("empty", "message") else LIVE_DELAY_MS)
        elif self.job.busy and self._overview_text:
            self.busy.start(self._overview_text)
        elif not self.busy.is_stale():  # a cancelled run's veil stays until the next result
            self.busy.stop()

    def _on_cancelled(self, _rid: int) -> None:
        """The person cancelled: the picture is the previous result, not what the controls show."""
        if self._mode in ("dense", "overview"):
            self.busy.show_stale(STALE_TEXT)

    def _on_preview(self, p) -> None:
        """Draw the first computed head of a long run (attnviz.model.preview) when it is the head and
        matrix on show; the full response redraws everything when it arrives."""
        view = self.ctx.session.state.view
        drawable = ((self._mode in ("dense", "empty") and not self.maps_shown())
                    or (self._mode == "message" and self._resp is None))
        if p.head != view.head or view.matrix not in ("weights", "scores") or not drawable:
            return
        if self._resp is not None and self._resp.request_id >= p.request_id:
            return
        self._preview = p
        self._sync_colormap(view)
        values = p.weights if view.matrix == "weights" else p.scores
        self._show_dense(values, p.mask, compact_labels(p.query_labels), compact_labels(p.key_labels),
                         p.query_segments, p.key_segments, view.matrix, p.head, True,
                         "weight" if view.matrix == "weights" else "score", source=p)
        self.drawn_request_id = p.request_id
        self.rendered.emit()

    def _on_response(self, resp) -> None:
        if resp is None or resp.cancelled:
            return  # a cancelled run: the last picture stays, veiled (the status bar says so)
        if self.busy.is_stale():
            self.busy.stop()  # the result the controls ask for
        if not resp.ok:
            if self.maps_shown():  # the file's maps stay on screen; the session's problem is reported
                self._resp = None
                return
            self._show_nothing(resp.error or "the attention could not be computed")
            return
        self._resp = resp
        # axis labels cut in the middle, so "fast actions3" keeps its index (the readout names the segment)
        self._row_labels = compact_labels(resp.query_labels)
        self._key_labels = compact_labels(resp.key_labels)
        self._scale = engine_scale(self.ctx.session.state)
        if self.maps_shown():
            return  # drawn when the person leaves the file's maps
        nh = n_heads(resp)
        items = ["mean"] + [f"head {h}" for h in range(nh)]
        if [self.head_combo.itemText(i) for i in range(self.head_combo.count())] != items:
            self.head_combo.blockSignals(True)
            self.head_combo.clear()
            self.head_combo.addItems(items)
            self.head_combo.blockSignals(False)
        self._sync_controls(self.ctx.session.state.view)
        self._redraw()

    def _show_nothing(self, why: str) -> None:
        """The state cannot be drawn (no tokens, a bad setting): clear the old picture, which no
        longer belongs to it, and say why (the window's notice says it too)."""
        self._resp = None
        self._preview = None
        self._mode = "message"
        self.heatmap.clear("nothing to show")
        self.grid.setVisible(False)
        self._show_note(f"Nothing to show: {why}")
        self.rendered.emit()

    def _on_view_changed(self, view) -> None:
        self._sync_controls(view)
        if self.maps_shown():
            if self._drawn_view != ("maps", view.log_scale, self._cmap_name(view)):
                self._redraw()
            return
        if self._resp is None:
            return
        drawn = self._drawn_view
        key = (view.head, view.matrix, view.log_scale)
        if drawn is None or drawn[:3] != key:
            self._redraw()
            return
        if drawn[3] != view.colormap:
            self._apply_colormap(view.colormap)
        self._select_row(view.query)

    def _on_head_picked(self, index: int) -> None:
        if self.maps_shown():
            self._maps_head = "mean" if index == 0 else index - 1
            self._redraw()
            return
        self.ctx.set_view(head="mean" if index == 0 else index - 1)

    def _on_row_clicked(self, row: int) -> None:
        if self.maps_shown():
            return  # the file's rows are not the session's queries
        if self._resp is not None and 0 <= row < self._resp.Tq:
            self.ctx.set_view(query=row)

    def _grid_head(self, r: int, c: int) -> int:
        return r * grid_columns(max(1, n_heads(self._resp))) + c

    def _on_grid_clicked(self, r: int, c: int) -> None:
        if self.maps_shown():
            self._maps_head = r * grid_columns(self.ctx.maps.shape[1]) + c
            self._redraw()
            return
        self.ctx.set_view(head=self._grid_head(r, c))

    def _on_grid_hovered(self, r: int, c: int) -> None:
        if self.maps_shown():
            head = r * grid_columns(self.ctx.maps.shape[1]) + c
            self.grid.readout.setText(f"layer {self.layer_combo.currentIndex()} head {head}" if r >= 0 else " ")
            return
        self.grid.readout.setText(f"head {self._grid_head(r, c)}" if r >= 0 else " ")

    def _select_grid_head(self, head) -> None:
        nh = n_heads(self._resp)
        cols = grid_columns(max(1, nh))
        if head == "mean" or self.grid.grid_shape() != (max(1, nh) // cols, cols):
            self.grid.set_selected(None)
        else:
            self.grid.set_selected(*divmod(head, grid_columns(n_heads(self._resp))))

    def _show_grid(self, maps, allowed, levels=None) -> None:
        g, m, titles = grid_layout(maps, allowed)
        self.grid.set_matrices(g, titles, [""] * g.shape[1], mask=m, levels=levels)

    def _grid_wanted(self) -> bool:
        """The small maps are shown: asked for, more than one head, and room for them (in a short,
        narrow column, the mask workspace's at 1280 x 800, the heatmap takes the whole pane: the
        attention workspace shows every head)."""
        nh = self.ctx.maps.shape[1] if self.maps_shown() else n_heads(self._resp)
        return self.grid_check.isChecked() and nh > 1 and not self._cramped()

    def _cramped(self) -> bool:
        return self.width() < NARROW_WIDTH and self.height() < SHORT_HEIGHT

    def _on_grid_toggled(self, on: bool) -> None:
        self._draw_grid_later()

    def _on_region(self, r0: int, r1: int, c0: int, c1: int) -> None:
        if self._mode != "overview" or self._resp is None:
            return
        if (r0, r1, c0, c1) == (0, self._resp.Tq, 0, self._resp.Tk):
            return  # the base picture already shows everything
        if self._base_coarse:  # the full picture first (its job then refines the visible block)
            self._request_overview(None, None, coarse_first=False)
            return
        self._request_overview((r0, r1), (c0, c1))

    # ------------------------------------------------------------------ drawing
    def _sync_controls(self, view) -> None:
        for w in (self.head_combo, self.matrix_combo, self.cmap_combo, self.log_check):
            w.blockSignals(True)
        idx = 0 if view.head == "mean" else (view.head + 1 if isinstance(view.head, int) else 1)
        if idx < self.head_combo.count() and not self.maps_shown():
            self.head_combo.setCurrentIndex(idx)
        self.matrix_combo.setCurrentIndex(MATRICES.index(view.matrix))
        if view.colormap in colormaps.NAMES:
            self.cmap_combo.setCurrentIndex(colormaps.NAMES.index(view.colormap))
        self.log_check.setChecked(view.log_scale)
        for w in (self.head_combo, self.matrix_combo, self.cmap_combo, self.log_check):
            w.blockSignals(False)

    @staticmethod
    def _cmap_name(view) -> str:
        return view.colormap if view.colormap in colormaps.NAMES else colormaps.DEFAULT

    def _sync_colormap(self, view) -> str:
        """Give the heatmap and the grid the view's colormap (when they have another); its name."""
        cmap = self._cmap_name(view)
        if self.heatmap.colormap_name() != cmap:
            self.heatmap.set_colormap(cmap)
        if self._grid_cmap != cmap:
            self.grid.set_colormap(cmap)
            self._grid_cmap = cmap
        return cmap

    def _apply_colormap(self, name: str) -> None:
        name = name if name in colormaps.NAMES else colormaps.DEFAULT
        self.heatmap.set_colormap(name)
        self.grid.set_colormap(name)
        self._grid_cmap = name
        v = self._drawn_view
        if v is not None:
            self._drawn_view = v[:3] + (name,)

    def _select_row(self, query) -> None:
        resp = self._resp
        ok = resp is not None and isinstance(query, int) and 0 <= query < resp.Tq and self._mode != "empty"
        self.heatmap.set_selected_row(query if ok else None)

    def _title(self, matrix: str, head, extra: str = "", source=None) -> str:
        """The heatmap's title; ``source`` (a response or preview, default the response) says whether
        it is cross-attention and its sizes."""
        who = "mean over heads" if head == "mean" else f"head {head}"
        src = source if source is not None else self._resp
        if src is not None and getattr(src, "cross", False):  # say which way the attention goes
            extra = f" · cross-attention {src.Tq:,} queries × {src.Tk:,} keys" + extra
        return f"{matrix} · {who}{extra}"

    def showEvent(self, ev):  # noqa: N802 - Qt's name
        super().showEvent(ev)
        if self._hidden_change:
            self._hidden_change = False
            self._redraw()

    def _redraw(self) -> None:
        if self.maps_shown():
            self._draw_maps()
            return
        resp = self._resp
        if resp is None:
            return
        if self.window().isVisible() and not self.isVisible():
            # another workspace is shown: an overview of thousands of tokens (its job, its labels, its
            # pixels) would hold up the window for what nobody sees; it is drawn when this one shows
            self._hidden_change = True
            return
        view = self.ctx.session.state.view
        head = check_head(resp, view.head)
        self._preview = None
        self.drawn_request_id = resp.request_id
        cmap = self._sync_colormap(view)
        self._drawn_view = (view.head, view.matrix, view.log_scale, cmap)
        mv = matrix_view(resp, view.matrix, head)
        overview_possible = view.matrix in ("weights", "scores") and self._scale is not None
        self.pool_label.setVisible(mv is None)
        self.pool_combo.setVisible(mv is None)
        if mv is None and not overview_possible:
            self._mode = "message"
            self.heatmap.clear()
            if view.matrix == "mask":
                self._show_note(f"T = {resp.Tq:,}: the mask is held per flash tile ({resp.sparsity:.1f} % of the tiles "
                                "empty), not cell by cell. The weights overview shows where attention goes.")
            else:
                self._show_note(f"T = {resp.Tq:,} is beyond the dense limit and the "
                                f"{self.ctx.session.state.score_rule.name} rule (or ALiBi) keeps no log-sum-exp the "
                                "overview can use: choose a smaller sequence, or the output / mask view.")
            self.rendered.emit()
            return
        if mv is None:
            self._mode = "overview"
            note = ""
            if view.matrix == "scores":
                note = "Scores are not held for long sequences: the overview shows the weights."
            self._show_note(note)
            self._request_overview(None, None)
            self._draw_grid_later()
            return
        self._show_dense(mv.values, mv.allowed, self._row_labels, self._key_labels if mv.per_key else mv.col_labels,
                         resp.query_segments, resp.key_segments, view.matrix, head, mv.per_key, mv.value_label)
        self._select_grid_head(head)  # at once; the maps follow when the grid is redrawn
        self._draw_grid_later()
        self.rendered.emit()

    def _show_dense(self, values, allowed, row_labels, col_labels, row_segments, col_segments, matrix: str, head,
                    per_key: bool, value_label: str, source=None) -> None:
        """Draw one (Tq, Tk|hv) matrix in the heatmap, of ``source`` (a preview; default the response);
        ``col_segments`` band the columns only when they are keys (``per_key``)."""
        view = self.ctx.session.state.view
        self._mode = "dense"
        self._show_note("")
        log = view.log_scale and matrix == "weights"
        levels = None
        if matrix == "weights" and not log:
            hi = float(values.max())  # masked weights are exactly 0, so the max is over allowed cells
            levels = (0.0, hi if hi > 0 else 1.0)
        elif matrix == "mask":
            levels = (0.0, 1.0)
        self.heatmap.set_matrix(values, mask=allowed, row_labels=row_labels, col_labels=col_labels,
                                row_segments=row_segments, col_segments=col_segments if per_key else (),
                                levels=levels, log_scale=log, title=self._title(matrix, head, source=source),
                                value_label=value_label)
        self._select_row(view.query)

    def _show_note(self, text: str) -> None:
        self.note.setText(text)
        self.note.setVisible(bool(text))

    def _draw_grid_later(self) -> None:
        show = self._grid_wanted()
        self.grid.setVisible(show)
        if show:
            self._grid_timer.start()  # after the main heatmap is painted

    def _draw_grid(self) -> None:
        """Pool every head's map to a grid tile on a worker (tens of ms at T = 1024, off the GUI
        thread); the grid is drawn when the pooled maps arrive."""
        if self._mode == "maps":
            self._draw_maps_grid()
            return
        resp = self._resp
        if resp is None or not self.grid.isVisible() or self._mode != "dense":
            return  # overview mode: the overview job brings the grid's maps
        matrix = self.ctx.session.state.view.matrix
        nh = n_heads(resp)
        if matrix == "output":
            maps, mask = resp.output, None
        elif matrix == "mask":
            maps = resp.mask if resp.mask.ndim == 3 else np.broadcast_to(resp.mask, (nh,) + resp.mask.shape)
            mask = maps
        else:
            maps = resp.weights if matrix == "weights" else resp.scores
            mask = resp.mask

        def job():
            pooled, ok = pool_max(maps, mask, (GRID_TILE, GRID_TILE))  # (nh, h, w); a bool mask pools as 0/1
            return resp, matrix, np.where(ok, pooled, 0.0).astype(np.float32), ok

        self.grid_job.submit(job)

    def _on_grid_pooled(self, _jid: int, result) -> None:
        if isinstance(result[0], str):  # "maps": the file's layer, pooled by _draw_maps_grid
            _tag, shown, layer, maps, ok = result
            if self._mode == "maps" and shown is self.ctx.maps and layer == self.layer_combo.currentIndex():
                self._show_grid(maps, ok)
                self._select_maps_grid_head()
            return
        resp, matrix, maps, ok = result
        if resp is not self._resp or self._mode != "dense" or matrix != self.ctx.session.state.view.matrix:
            return
        self._show_grid(maps, ok, (0.0, 1.0) if matrix == "mask" else None)
        self._select_grid_head(check_head(resp, self.ctx.session.state.view.head))

    # ------------------------------------------------------------------ overview (long sequences)
    def _display_shape(self, rows: int, cols: int) -> tuple[int, int]:
        vb = self.heatmap.frame.view.sceneBoundingRect()
        ratio = self.devicePixelRatioF()
        cap = self.heatmap.config.max_display
        H = int(min(cap, max(64, vb.height() * ratio)))
        W = int(min(cap, max(64, vb.width() * ratio)))
        return min(H, rows), min(W, cols)

    def _request_overview(self, rows, cols, coarse_first: bool = True) -> None:
        resp, scale = self._resp, self._scale
        view = self.ctx.session.state.view
        head = check_head(resp, view.head)
        reduce = self.pool_combo.currentText()
        full = rows is None
        rows = rows or (0, resp.Tq)
        cols = cols or (0, resp.Tk)
        shape = self._display_shape(rows[1] - rows[0], cols[1] - cols[0])
        want_grid = full and self.grid_check.isChecked() and n_heads(resp) > 1
        what = ", and every head's small map" if want_grid else ""
        self._overview_text = (f"drawing the overview of {resp.Tq:,} × {resp.Tk:,} weights\n"
                               f"({reduce} per pixel{what})…")
        token = self._overview_token = object()
        coarse = coarse_first and full and resp.Tq * resp.Tk * (n_heads(resp) if head == "mean" else 1) > COARSE_CELLS
        relay = self._relay

        def still_wanted():
            if self._overview_token is not token:
                raise Cancelled  # a newer edit, head or zoom: its own job draws

        def job():
            if coarse:
                small = coarse_overview(resp, head, scale, reduce, shape[1])
                still_wanted()
                try:
                    relay.coarse.emit((token, resp, head, reduce, small))
                except RuntimeError:  # the panel was closed while the job ran
                    raise Cancelled from None
            still_wanted()
            img = overview_image(resp, head, scale, reduce, shape, rows, cols)
            still_wanted()
            grid = overview_grid(resp, scale, reduce) if want_grid else None
            return resp, head, reduce, rows, cols, img, grid

        self.job.submit(job)
        self._update_busy()

    def _on_coarse(self, payload) -> None:
        """The coarse picture of the newest full overview request: drawn at once, unveiled (the title
        says it is coarse); the full picture replaces it when ready."""
        token, resp, head, reduce, img = payload
        if token is not self._overview_token or resp is not self._resp or self._mode != "overview":
            return
        self._draw_overview(resp, head, reduce, (0, resp.Tq), (0, resp.Tk), img,
                            f" · coarse: {img.shape[0]} of {resp.Tq:,} query rows, the full picture follows")
        self._base_coarse = True
        self._overview_text = ""  # the picture is up: no veil over it while the full one is computed
        self._update_busy()
        self.coarse_rendered.emit()

    def _draw_overview(self, resp, head, reduce, rows, cols, img, extra: str = "") -> None:
        view = self.ctx.session.state.view
        log = view.log_scale
        full = rows == (0, resp.Tq) and cols == (0, resp.Tk)
        levels = None
        if full and not log:
            finite = img[~np.isnan(img)]
            hi = float(finite.max()) if finite.size else 1.0
            levels = (0.0, hi if hi > 0 else 1.0)
        self.heatmap.set_overview(img, (rows[0], rows[1], cols[0], cols[1]), resp.Tq, resp.Tk, levels=levels,
                                  log_scale=log, row_labels=self._row_labels, col_labels=self._key_labels,
                                  row_segments=resp.query_segments, col_segments=resp.key_segments,
                                  row_flags=fully_masked_rows(resp, head),
                                  title=self._title("weights", head, f" · {reduce} per pixel{extra}"),
                                  value_label=f"{reduce} weight")
        self._select_row(view.query)

    def _on_overview(self, _jid: int, result) -> None:
        resp, head, reduce, rows, cols, img, grid = result
        if resp is not self._resp:
            return
        full = rows == (0, resp.Tq) and cols == (0, resp.Tk)
        if full:
            self._base_coarse = False
        self._draw_overview(resp, head, reduce, rows, cols, img)
        if grid is not None:
            maps, ok = grid
            self._show_grid(maps, ok)
            self._select_grid_head(head)
        if full:
            region = self.heatmap.frame.visible_region()
            if region != (0, resp.Tq, 0, resp.Tk):  # zoomed in: refine the visible block too
                self._request_overview(region[:2], region[2:])
        self.rendered.emit()

    # ------------------------------------------------------------------ readout
    def _readout_extra(self, row: int, col: int) -> str:
        if self.maps_shown():
            return ""  # the heatmap's own readout gives the file's weight
        p = self._preview
        if p is not None:  # the preview on screen holds both matrices of its head
            if row >= p.Tq or col >= p.Tk:
                return ""
            matrix = self.ctx.session.state.view.matrix
            if matrix == "weights":
                return f"score {float(p.scores[row, col]):.4g}"
            return f"weight {float(p.weights[row, col]):.4g}" if p.mask[row, col] else "weight 0 (masked)"
        resp = self._resp
        if resp is None or not resp.ok or row >= resp.Tq:
            return ""
        view = self.ctx.session.state.view
        if view.matrix == "output" or col >= resp.Tk:
            return ""
        score, weight, allowed = cell_values(resp, row, col, view.head, self._scale)
        parts = []
        if score is not None and view.matrix != "scores":
            parts.append(f"score {score:.4g}")
        if weight is not None and (view.matrix != "weights" or self._mode == "overview"):
            parts.append(f"weight {weight:.4g}" if allowed else "weight 0 (masked)")
        return "  ·  ".join(parts)

    # ------------------------------------------------------------------ read-only maps of a file
    def maps_shown(self) -> bool:
        """True while the heatmap shows the file's read-only maps, not the session's computation."""
        return getattr(self.ctx, "maps", None) is not None and self.maps_check.isChecked()

    def _on_maps_changed(self, shown) -> None:
        """New maps (ticked at once: the window was asked to show them) or none (back to the session)."""
        self.maps_check.blockSignals(True)
        if shown is None:
            self.maps_check.setChecked(False)
            self.maps_check.setVisible(False)
        else:
            L, nh = shown.shape[:2]
            self.maps_check.setText(f"maps from {shown.name}")
            self.maps_check.setVisible(True)
            self.maps_check.setChecked(True)
            self.layer_combo.clear()
            self.layer_combo.addItems([f"{i}" for i in range(L)])
            self._maps_head = 0
        self.maps_check.blockSignals(False)
        self._on_maps_toggled(self.maps_check.isChecked())

    def _on_maps_toggled(self, on: bool) -> None:
        self._layer_pair.setVisible(self.maps_shown())
        self.matrix_combo.setEnabled(not self.maps_shown())  # a file holds weights only
        if self.maps_shown():
            nh = self.ctx.maps.shape[1]
            self.head_combo.blockSignals(True)
            self.head_combo.clear()
            self.head_combo.addItems(["mean"] + [f"head {h}" for h in range(nh)])
            self.head_combo.setCurrentIndex(0 if self._maps_head == "mean" else self._maps_head + 1)
            self.head_combo.blockSignals(False)
            self._update_busy()
            self._redraw()
            return
        # back to the session's own attention: its newest response (computed meanwhile) is drawn
        self._drawn_view = None
        self.head_combo.blockSignals(True)
        self.head_combo.clear()
        self.head_combo.blockSignals(False)
        self._show_note("")
        self._mode = "empty"
        resp = self.ctx.response
        if resp is not None and resp.ok:
            self._on_response(resp)
        else:
            self.heatmap.clear("")
            self.grid.setVisible(False)
        self._update_busy()

    def _maps_matrix(self):
        """((Tq, Tk) float32 weights of the file's chosen layer and head (or their mean), the head)."""
        a = self.ctx.maps.maps.attentions  # (L, nh, Tq, Tk)
        layer = max(0, self.layer_combo.currentIndex())
        head = self._maps_head
        if head != "mean" and not 0 <= head < a.shape[1]:
            head = self._maps_head = 0
        values = a[layer].mean(axis=0, dtype=np.float32) if head == "mean" else a[layer, head]
        return values, head

    def _draw_maps(self) -> None:
        """The file's chosen map in the heatmap (pooled to the screen and zoomable, as any held matrix), its
        layer's heads in the grid and the banner saying where they come from."""
        shown = self.ctx.maps
        if self.window().isVisible() and not self.isVisible():
            self._hidden_change = True
            return
        view = self.ctx.session.state.view
        cmap = self._sync_colormap(view)
        values, head = self._maps_matrix()
        L, nh, Tq, Tk = shown.shape
        layer = self.layer_combo.currentIndex()
        self._mode = "maps"
        self._preview = None
        self._drawn_view = ("maps", view.log_scale, cmap)
        self.pool_label.setVisible(False)
        self.pool_combo.setVisible(False)
        hi = float(values.max())
        levels = None if view.log_scale else (0.0, hi if hi > 0 else 1.0)
        who = "mean over heads" if head == "mean" else f"head {head}"
        self.heatmap.set_matrix(values, row_labels=compact_labels(shown.row_tokens),
                                col_labels=compact_labels(list(shown.maps.tokens)), levels=levels,
                                log_scale=view.log_scale, value_label="weight",
                                title=f"weights · layer {layer} · {who} · read-only maps from {shown.name}")
        self.heatmap.set_selected_row(None)
        size = f"{Tq:,} × {Tk:,} tokens" + (" (cross-attention)" if shown.maps.cross else "")
        self._show_note(f"Read-only maps from {shown.name} ({L} layers × {nh} heads, {size}): the inputs, model "
                        f"and mask designer do not recompute them. Untick the box to return to the session's "
                        f"attention.")
        self._select_maps_grid_head()
        self._draw_grid_later()
        self.rendered.emit()

    def _select_maps_grid_head(self) -> None:
        nh = self.ctx.maps.shape[1]
        cols = grid_columns(max(1, nh))
        if self._maps_head == "mean" or self.grid.grid_shape() != (max(1, nh) // cols, cols):
            self.grid.set_selected(None)
        else:
            self.grid.set_selected(*divmod(self._maps_head, cols))

    def _draw_maps_grid(self) -> None:
        """Pool the chosen layer's heads to grid tiles on the grid's worker."""
        shown = self.ctx.maps
        if shown is None or not self.grid.isVisible():
            return
        layer = self.layer_combo.currentIndex()
        maps = shown.maps.attentions[layer]  # (nh, Tq, Tk)

        def job():
            pooled, ok = pool_max(maps, None, (GRID_TILE, GRID_TILE))  # (nh, h, w)
            return "maps", shown, layer, np.where(ok, pooled, 0.0).astype(np.float32), ok

        self.grid_job.submit(job)
