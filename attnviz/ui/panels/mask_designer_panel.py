"""The block-mask designer panel: edit which query may attend to which key, as block rules (right
column) or painted cells (left, one drag stroke = one undo step), and see what the mask does to
flash tiles while editing. The axes (segments, labels, Tq, Tk) come from the newest compute response:
after the sequence changes, the old axes no longer fit the design, so the panel keeps its last
picture until the response to the new state arrives. Redraws are coalesced per burst of edits.
"""

from __future__ import annotations

import itertools
import time

import numpy as np
from PySide6.QtCore import QCoreApplication, QEvent, QPoint, Qt, QTimer
from PySide6.QtWidgets import (QButtonGroup, QGroupBox, QHBoxLayout, QMenu, QPushButton, QTabWidget,
                               QToolButton, QVBoxLayout, QWidget)

from attnviz.model.commands import EditMask, SetKernel
from attnviz.model.display.mask_snapshot import (Axes, Snapshot, Target, axes_from_response, axes_from_state,
                                                 build_snapshot, describe_fully_masked)
from attnviz.model.display.response_views import compact_labels
from attnviz.model.mask.commands import (ApplyPreset, ClearPaint, CombinePreset, MergeBlocks, PaintCells,
                                         PaintRect, RemovePresetTerm, SetBlockRule, SetPerHead, SplitBlock)
from attnviz.model.segments import Segment
from attnviz.model.state import FIELDS
from attnviz.ui.latest_job import LatestJob
from attnviz.ui.mask_designer.block_grid import BlockGrid
from attnviz.ui.widgets.flow_layout import FlowLayout
from attnviz.ui.mask_designer.legend import MaskLegend
from attnviz.ui.mask_designer.narrow_layout import NarrowLayout
from attnviz.ui.mask_designer.preset_bar import PresetBar
from attnviz.ui.mask_designer.rule_chooser import RuleChooser
from attnviz.ui.mask_designer.split_controls import SplitControls
from attnviz.ui.mask_designer.status_line import StatusLine
from attnviz.ui.mask_designer.tile_controls import TileControls
from attnviz.ui.widgets.mask_canvas import TOOLS, MaskCanvas
from attnviz.ui.widgets.whole_tabs import keep_tab_texts_whole
from attnviz.ui.workspaces.area import ShareSplitter
from attnviz.ui.workspaces.sidebar import VerticalScroll
from attnviz.ui.messages import Level
from attnviz.ui.widgets.message_line import ERROR_STYLE, MessageLine

# imported when first used, not with the panel (the workspace's first visit imports the panel in one turn):
# the code dialog (attnviz.ui.mask_designer.export_dialog), the VLA roles dialog (.role_dialog) and the
# flash timing (attnviz.model.mask.flash_timing)

TOOL_TEXT = {"brush": "Brush", "rect": "Rectangle", "row": "Row", "column": "Column", "eraser": "Eraser"}
TOOL_TIPS = {
    "brush": "paint cells: left drag allows, right drag denies",
    "rect": "fill a rectangle: left drag allows, right drag denies",
    "row": "paint whole query rows",
    "column": "paint whole key columns",
    "eraser": "return cells to their rule",
}
TIMING_REPEATS = 5  # timed flash calls per method for "Time flash"
REDRAW_FAST_MS = 30  # a redraw faster than this follows the next edit at once
REDRAW_MAX_GAP_MS = 300  # slower redraws wait as long as they took, at most this long
CELLS_SHARE = 0.64  # default share of the panel's width the cell painter gets (its cells are square: height limits them first)
SEQUENCE_FIELDS = ("sources", "tokenizer", "cross")  # session fields that change the mask's axes


#: mask cells (Tq x Tk) whose design still compiles on the GUI thread (a stroke over them stays immediate)
SYNC_SNAPSHOT_CELLS = 1 << 18


def too_long_to_draw(axes) -> bool:
    """True for sequences whose mask the compute pipeline keeps per tile (never dense)."""
    from attnviz.model.compute import DENSE_MASK_CELLS  # the engine loads with it: after the first paint

    return axes.Tq * axes.Tk > DENSE_MASK_CELLS


#: the message's link to the roles dialog (for every segment, whatever was inferred)
ROLES_LINK = '<a href="roles">choose the roles…</a>'
ROLE_WORDS = {"I": "image", "P": "prompt or state", "A": "FAST actions", "E": "action expert"}


class MaskDesignerPanel(QWidget):
    """Block rules, painted cells, presets, tiles and masks as code for the session's mask."""

    def __init__(self, ctx, parent=None):
        super().__init__(parent)
        self.ctx = ctx
        self.target = Target(None)
        self.axes: Axes | None = None
        self.ask_vla_roles = ask_roles_in_dialog  # (parent, rows) -> roles or None; tests answer it themselves
        self.snapshot: Snapshot | None = None
        self._strokes = itertools.count(1)
        self._stroke: int | None = None
        self._reported_dead: tuple[int, ...] = ()
        self._axes_stale = False  # the sequence changed: wait for the response to the new state
        self._quiet_next_report = False  # a session was opened: take its fully masked rows silently
        self._fields_seen: set[str] = set()  # fields emitted since the last state event
        self._labels_for: Axes | None = None  # axes whose compact labels are cached
        self._labels: tuple[tuple[str, ...], tuple[str, ...]] = ((), ())
        self._executing = False
        self._last_error = ""
        self._code_dialog = None  # the MaskCodeDialog, made when first opened

        # -- widgets ---------------------------------------------------------------------------
        self.preset_bar = PresetBar(self)
        self.grid = BlockGrid(self)
        self.split_controls = SplitControls(self)
        self.chooser = RuleChooser(self)
        self.canvas = MaskCanvas(self)
        status = StatusLine(self.canvas)  # the canvas's status whole, wrapped, without what the tile controls say
        self.canvas.layout().replaceWidget(self.canvas.status, status)
        self.canvas.status.deleteLater()
        self.canvas.status = status
        self.canvas.frame.view.setAspectLocked(True, ratio=1.0)  # square cells at every zoom
        self._fitted = True  # the view shows the whole mask (not zoomed or panned by the person)
        self.canvas.frame.view.sigResized.connect(self._on_view_resized)
        self.canvas.frame.view.sigRangeChangedManually.connect(self._unfit)
        self.tiles = TileControls(self)
        self.code_button = QPushButton("Mask as code…", self)
        self.code_button.setToolTip("export the mask as FlexAttention mask_mod, JSON, ar_mask, seqlens or .npy; "
                                    "import .npy, JSON or ar_mask")
        # the line keeps room for two lines whether or not it says anything, so a message that comes or goes
        # never moves the painter's buttons under the mouse (only a longer one takes more)
        self.message = MessageLine(self, error_style=ERROR_STYLE, hide_empty=False)
        self.message.setMinimumHeight(2 * self.message.fontMetrics().lineSpacing() + 2)
        self.message.setAlignment(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignTop)
        self.message.setTextInteractionFlags(Qt.TextInteractionFlag.LinksAccessibleByMouse
                                             | Qt.TextInteractionFlag.LinksAccessibleByKeyboard)
        self.message.linkActivated.connect(self._on_message_link)
        self.timer = QTimer(self)
        self.timer.setSingleShot(True)
        self.timer.setInterval(0)
        self.timer.timeout.connect(self._on_timer)
        self._hidden_change = False  # a redraw skipped while another workspace is shown
        self.timing_job = LatestJob("attnviz-flash-timing", self)
        self.snapshot_job = LatestJob("attnviz-mask-snapshot", self)  # long designs compile off the GUI thread
        self.snapshot_job.done.connect(self._on_snapshot)
        self.snapshot_job.failed.connect(
            lambda _jid, msg: self.message.say(Level.ERROR, f"cannot show the mask: {msg}"))

        blocks = QGroupBox("Blocks: queries (rows) → keys (columns)", self)
        bl = QVBoxLayout(blocks)
        bl.setContentsMargins(6, 6, 6, 6)
        bl.addWidget(self.grid, 1)
        bl.addWidget(self.split_controls)
        self.legend = MaskLegend(self)  # last in the column: reference, not a control

        cells = QGroupBox("Cells: left drag allows, right drag denies", self)
        cl = QVBoxLayout(cells)
        cl.setContentsMargins(6, 6, 6, 6)
        tools = FlowLayout(spacing=3)
        self.tool_group = QButtonGroup(self)
        self.tool_buttons: dict[str, QToolButton] = {}
        for name in TOOLS:
            b = QToolButton(self)
            b.setText(TOOL_TEXT.get(name, name))
            b.setToolTip(TOOL_TIPS.get(name, ""))
            b.setCheckable(True)
            b.clicked.connect(lambda _=False, n=name: self.set_tool(n))
            self.tool_group.addButton(b)
            self.tool_buttons[name] = b
            tools.addWidget(b)
        self.tool_buttons["brush"].setChecked(True)
        self.zoom_in = QToolButton(self)
        self.zoom_in.setText("+")
        self.zoom_in.setToolTip("zoom in (or use the mouse wheel; middle drag pans)")
        self.zoom_out = QToolButton(self)
        self.zoom_out.setText("−")
        self.zoom_out.setToolTip("zoom out")
        self.fit = QToolButton(self)
        self.fit.setText("Fit")
        self.fit.setToolTip("show the whole mask")
        self.clear_paint = QToolButton(self)
        self.clear_paint.setText("Clear paint")
        self.clear_paint.setToolTip("remove every painted cell: all cells follow their rules again")
        for b in (self.zoom_in, self.zoom_out, self.fit):
            tools.addWidget(b)
        tools.addWidget(self.clear_paint)
        cl.addLayout(tools)
        cl.addWidget(self.canvas, 1)
        below = QHBoxLayout()
        below.setContentsMargins(0, 0, 0, 0)
        below.addWidget(self.tiles, 1)
        below.addWidget(self.code_button, 0, Qt.AlignmentFlag.AlignBottom)
        cl.addLayout(below)

        # the cells large on the left with their tools, the flash tiles drawn over them and "Mask as
        # code"; on the right two tabs over the resulting heatmap: the presets with the legend, and the
        # block rules, each scrolling up and down in its own page (a 1024 x 700 window has about 300 px
        # for them: one column of presets, grid and legend put the grid under the fold); ``side_splitter``
        # takes more views under the tabs
        controls = QWidget(self)
        ctl = QVBoxLayout(controls)
        ctl.setContentsMargins(0, 0, 0, 0)
        ctl.setSpacing(4)
        ctl.addWidget(self.preset_bar)
        ctl.addWidget(self.legend)
        ctl.addStretch(1)
        self.controls = VerticalScroll(self)
        self.controls.setWidget(controls)
        self.blocks_scroll = VerticalScroll(self)
        self.blocks_scroll.setWidget(blocks)
        self.side_tabs = keep_tab_texts_whole(QTabWidget(self))
        self.side_tabs.setDocumentMode(True)
        self.side_tabs.addTab(self.controls, "Presets")
        self.side_tabs.addTab(self.blocks_scroll, "Block rules")
        self.side_tabs.setTabToolTip(0, "mask presets, how they combine, the head whose mask is edited; the colours")
        self.side_tabs.setTabToolTip(1, "one rule per (query block, key block); split a segment into sub-blocks")
        self.side_splitter = ShareSplitter(Qt.Orientation.Vertical, self)
        self.side_splitter.setObjectName("mask_side")
        self.side_splitter.addWidget(self.side_tabs)
        left = QWidget(self)
        ll = QVBoxLayout(left)
        ll.setContentsMargins(0, 0, 0, 0)
        ll.setSpacing(4)
        ll.addWidget(cells, 1)
        ll.addWidget(self.message)
        split = ShareSplitter(Qt.Orientation.Horizontal, self)
        split.addWidget(left)
        split.addWidget(self.side_splitter)
        split.setStretchFactor(0, 1)
        split.setStretchFactor(1, 0)
        split.set_shares([CELLS_SHARE, 1 - CELLS_SHARE])
        self.splitter = split
        self._blocks_box, self._cells_box = blocks, cells
        self.narrow_layout = NarrowLayout(self, left, below)  # one column when two do not fit (640 x 480)

        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 6, 6, 6)
        layout.setSpacing(4)
        layout.addWidget(split, 1)

        # -- wiring ----------------------------------------------------------------------------
        self.grid.cell_clicked.connect(self._on_cell_clicked)
        self.grid.header_menu.connect(self._on_header_menu)
        self.chooser.rule_chosen.connect(self._on_rule_chosen)
        self.split_controls.split_requested.connect(
            lambda seg, off: self.execute(self.target.lift(SplitBlock(seg, off))))
        self.split_controls.merge_requested.connect(
            lambda seg, off: self.execute(self.target.lift(MergeBlocks(seg, None if off < 0 else off))))
        self.preset_bar.preset_requested.connect(self.apply_preset)
        self.preset_bar.remove_term_requested.connect(self._on_remove_term)
        self.preset_bar.head_changed.connect(self.set_head)
        self.preset_bar.follow_shared_requested.connect(
            lambda h: h >= 0 and self.execute(EditMask(SetPerHead(h, None))))
        self.preset_bar.problem.connect(lambda text: self.message.say(Level.ERROR, text))
        self.canvas.stroke_started.connect(self._on_stroke_started)
        self.canvas.stroke_cells.connect(self._on_stroke_cells)
        self.canvas.stroke_rect.connect(self._on_stroke_rect)
        self.canvas.stroke_finished.connect(self._on_stroke_finished)
        self.zoom_in.clicked.connect(lambda: (self._unfit(), self.canvas.frame.view.scaleBy((0.7, 0.7))))
        self.zoom_out.clicked.connect(lambda: (self._unfit(), self.canvas.frame.view.scaleBy((1 / 0.7, 1 / 0.7))))
        self.fit.clicked.connect(self.fit_square)
        self.clear_paint.clicked.connect(lambda: self.execute(self.target.lift(ClearPaint())))
        self.tiles.tile_size_changed.connect(self._on_tile_size)
        self.tiles.overlay_toggled.connect(lambda *_: self.schedule())
        self.tiles.time_requested.connect(self.time_flash)
        self.timing_job.done.connect(lambda _id, res: self.tiles.set_timing(res.text()))
        self.timing_job.failed.connect(lambda _id, text: self.tiles.set_timing(text, error=True))
        self.code_button.clicked.connect(self.open_code_dialog)

        ev = ctx.session.events
        for name in ("mask", "kernel", "model"):
            getattr(ev, name).connect(self._on_session_changed)
        for name in SEQUENCE_FIELDS:
            getattr(ev, name).connect(self._on_sequence_changed)
        self._field_slots = {name: (lambda *_a, n=name: self._fields_seen.add(n)) for name in FIELDS}
        for name, slot in self._field_slots.items():
            getattr(ev, name).connect(slot)
        ev.state.connect(self._on_state_event)
        ctx.response_changed.connect(self._on_response)
        ctx.message.connect(self._on_ctx_message)
        self.destroyed.connect(lambda *_: self._disconnect(ev))

        self.axes = axes_from_response(ctx.response)
        if self.axes is None:
            try:
                self.axes = axes_from_state(ctx.session.state)
            except ValueError as exc:
                self.message.say(Level.ERROR, str(exc))
        self.refresh()
        self.canvas.setFocus()

    # -- layout ----------------------------------------------------------------------------------
    def shutdown(self) -> None:
        """Stop the flash-timing and snapshot threads (the window calls this when it closes)."""
        self.timing_job.shutdown()
        self.snapshot_job.shutdown()

    def fit_square(self) -> None:
        """Show the whole mask with square cells from its top-left corner: the view may reach past
        the mask on one axis (the frame's limits would otherwise stretch the cells to fill it)."""
        frame = self.canvas.frame
        rows, cols = frame.n_rows, frame.n_cols
        if rows <= 0 or cols <= 0:  # no mask drawn (a sequence kept per flash tile)
            return
        frame.view.setLimits(xMin=-cols, xMax=2 * cols, yMin=-rows, yMax=2 * rows,
                             minXRange=min(2, cols), minYRange=min(2, rows))
        size = frame.view.boundingRect()
        w, h = size.width(), size.height()
        if w <= 1 or h <= 1:
            frame.reset_view()
        else:
            cell = min(w / cols, h / rows)  # pixels per cell
            frame.view.setRange(xRange=(0, w / cell), yRange=(0, h / cell), padding=0)
        self._fitted = True

    def _on_view_resized(self, *_args) -> None:
        if self._fitted:  # not zoomed or panned since: keep the whole mask in view at the new size
            QTimer.singleShot(0, self, self.fit_square)

    def _unfit(self, *_args) -> None:
        self._fitted = False

    def default_shares(self, key: str) -> list[float] | None:
        """Default shares of the panel's splitters (the workspace's View ▸ Reset layout)."""
        if key == "panel":
            return [CELLS_SHARE, 1 - CELLS_SHARE]
        if key == "panel_side" and self.side_splitter.count() == 2:
            return [0.58, 0.42]
        return None

    def add_side_view(self, widget: QWidget) -> None:
        """Put another view (the workspace's heatmap) in the right column, under the controls."""
        self.side_splitter.addWidget(widget)
        n = self.side_splitter.count()
        self.side_splitter.set_shares(self.default_shares("panel_side") or [1 / n] * n)

    # -- session and response ----------------------------------------------------------------
    def _disconnect(self, ev) -> None:
        pairs = [(name, self._on_session_changed) for name in ("mask", "kernel", "model")]
        pairs += [(name, self._on_sequence_changed) for name in SEQUENCE_FIELDS]
        pairs += list(self._field_slots.items()) + [("state", self._on_state_event)]
        for name, slot in pairs:
            try:
                getattr(ev, name).disconnect(slot)
            except (ValueError, RuntimeError):
                pass

    def _on_session_changed(self, *_):
        self.schedule()

    def _on_sequence_changed(self, *_):
        """The tokens changed: the current axes describe the old sequence until the new response."""
        self._axes_stale = True
        self.schedule()

    def _on_state_event(self, *_):
        # a whole session opened (``Session.replace_state``) emits every field; an edit only some
        if set(FIELDS) <= self._fields_seen:
            self._quiet_next_report = True
        self._fields_seen = set()

    @property
    def axes_stale(self) -> bool:
        """True while the sequence changed and its new response has not arrived."""
        return self._axes_stale

    def _on_response(self, resp):
        if resp is None or getattr(resp, "request_id", None) != self.ctx.compute.latest_id:
            return  # an answer to an older state
        axes = axes_from_response(resp)
        if axes is None and self._axes_stale and not getattr(resp, "ok", False):
            try:  # the new state failed to compute: show its design on the axes it would have
                axes = axes_from_state(self.ctx.session.state)
            except ValueError as exc:
                self.message.say(Level.ERROR, str(exc))
                return
        if axes is None:
            return
        stale, self._axes_stale = self._axes_stale, False
        if axes != self.axes or stale:
            self.axes = axes
            self.schedule()

    def _on_ctx_message(self, level: Level, text: str) -> None:
        if self._executing:
            self._last_error = text

    def schedule(self) -> None:
        """Redraw once the current burst of events is over."""
        self.timer.start()

    def flush(self) -> None:
        """Redraw now if a redraw is pending, and lay the cells out at their final size (tests,
        screenshots): new labels change what the frame needs around the cells, which lays it out
        again and refits the whole mask."""
        if self.timer.isActive():
            self.timer.stop()
            self.refresh()
        if self.snapshot_job.busy:  # a long design compiled on the worker: deliver it now
            self.snapshot_job.wait_idle()
            QCoreApplication.sendPostedEvents(self.snapshot_job)
        QCoreApplication.sendPostedEvents(None, QEvent.Type.LayoutRequest)
        if self._fitted:
            self.fit_square()

    def _on_timer(self) -> None:
        if self.window().isVisible() and not self.isVisible():
            # another workspace is shown: compiling the design for thousands of tokens here would
            # hold up the window for what nobody sees; it is drawn when the mask workspace shows
            self._hidden_change = True
            return
        self.refresh()

    def showEvent(self, ev):  # noqa: N802 - Qt's name
        super().showEvent(ev)
        if self._hidden_change:
            self._hidden_change = False
            self.schedule()

    def refresh(self) -> None:
        """Recompile the edited design for the current axes and redraw everything."""
        t0 = time.perf_counter()
        try:
            self._refresh()
        finally:
            # a slow redraw (thousands of tokens) spaces the next one out, so a stroke stays fluid
            self.timer.setInterval(redraw_gap_ms((time.perf_counter() - t0) * 1e3))

    def _refresh(self) -> None:
        state = self.ctx.session.state
        nh = state.model.nh
        own = tuple(h for h, _ in state.mask.heads)
        self.preset_bar.set_heads(nh, own)
        if self.target.head is not None and self.target.head >= nh:
            self.target = Target(None)
        self.tiles.set_tile_size(state.kernel.block_m, state.kernel.block_n)
        if self.axes is None or self._axes_stale:
            return  # keep the last picture until the new sequence's response gives its axes
        if too_long_to_draw(self.axes):
            self.message.say(Level.ERROR, f"{self.axes.Tq:,} x {self.axes.Tk:,} tokens: a mask this long is kept per "
                                          "flash tile and not drawn cell by cell here; the heatmap's overview shows "
                                          "what it does")
            self.grid.clear(f"{self.axes.Tq:,} x {self.axes.Tk:,} tokens: not drawn cell by cell")
            return
        args = (state.mask, self.axes, self.target, state.kernel.block_m, state.kernel.block_n, nh)
        if self.axes.Tq * self.axes.Tk > SYNC_SNAPSHOT_CELLS:
            # thousands of tokens: the design is compiled on the worker, the last picture stays meanwhile
            self.snapshot_job.submit(lambda: (args, build_snapshot(*args)))
            return
        self.snapshot_job.cancel()  # an older, larger design must not arrive after this one
        try:
            snap = build_snapshot(*args)
        except ValueError as exc:
            self.message.say(Level.ERROR, f"cannot show the mask: {exc}")
            return
        self._show_snapshot(snap)

    def _on_snapshot(self, _jid, result) -> None:
        args, snap = result
        state = self.ctx.session.state
        if args[0] is not state.mask or args[1] is not self.axes or args[2] != self.target:
            return  # the design or its axes changed meanwhile: a newer snapshot is on its way
        self._show_snapshot(snap)

    def _show_snapshot(self, snap) -> None:
        state = self.ctx.session.state
        self.snapshot = snap
        ax = self.axes
        self.grid.set_snapshot(snap)
        self.split_controls.set_content(list(ax.q_segments) + (list(ax.k_segments) if ax.cross else []),
                                        snap.design)
        self.preset_bar.set_design(snap.design, ax.Tk)
        who = "all heads" if self.target.head is None else (
            f"head {self.target.head}" + (" (own mask)" if self.target.owns(state.mask) else " (shared mask)"))
        if self._labels_for is not ax:  # axis labels cut in the middle: "fast actions3" keeps its index
            self._labels_for, self._labels = ax, (compact_labels(ax.q_labels), compact_labels(ax.k_labels))
        frame = self.canvas.frame
        shape = (frame.n_rows, frame.n_cols)
        self.canvas.set_mask(snap.layers.rules, snap.layers.overrides, row_labels=self._labels[0],
                             col_labels=self._labels[1], row_segments=_segments(snap.q_blocks),
                             col_segments=_segments(snap.k_blocks),
                             title=f"mask of {who}")  # the legend beside it says how painted cells look
        if (frame.n_rows, frame.n_cols) != shape:
            self.fit_square()
        self.canvas.set_tiles(snap.tiles.tile_state[0] if self.tiles.overlay.isChecked() else None,
                              snap.tiles.block_m, snap.tiles.block_n)
        self.tiles.set_summary(snap.tiles, int(snap.fully_masked.sum()),
                               "" if not snap.heads_differ else who)
        self._report_dead()

    def _report_dead(self) -> None:
        """Tell the window about fully masked rows once per change (never in the middle of a stroke)."""
        if self.snapshot is None or self._stroke is not None or self._axes_stale:
            return
        rows = tuple(int(i) for i in np.flatnonzero(self.snapshot.all_heads_fully_masked))
        quiet, self._quiet_next_report = self._quiet_next_report, False
        if rows == self._reported_dead or quiet:
            self._reported_dead = rows
            return
        self._reported_dead = rows
        if rows:
            labels = self.axes.q_labels if self.axes is not None else ()
            self.ctx.report(Level.WARNING, describe_fully_masked(self.snapshot.all_heads_fully_masked, labels))

    # -- edits ---------------------------------------------------------------------------------
    def execute(self, command) -> bool:
        """Run a session command; a refused edit becomes a message in the panel."""
        self._executing, self._last_error = True, ""
        try:
            ok = self.ctx.execute(command)
        finally:
            self._executing = False
        if ok:
            if self.message.text():
                self.message.clear()  # what the last edit was told no longer holds
        else:
            self.message.say(Level.ERROR, self._last_error or "the edit was refused")
        return ok

    def set_head(self, head: int) -> None:
        """Edit the shared mask (-1 / None) or head ``head``'s."""
        self.target = Target(None if head is None or head < 0 else int(head))
        if self.target.head is not None and self.preset_bar.current_head() != self.target.head:
            self.preset_bar.select_head(self.target.head)
        self.schedule()

    def set_tool(self, name: str) -> None:
        self.canvas.set_tool(name)
        self.tool_buttons[name].setChecked(True)

    def apply_preset(self, name: str, op: str = "replace", params: dict | None = None) -> bool:
        """Replace the rules with a preset, or AND / OR it onto the mask, for the edited design."""
        params = dict(params or {})
        if self.axes is None:
            self.message.say(Level.ERROR, "the sequence is not built yet")
            return False
        if name == "vla" and not params.get("roles"):  # every segment's role, asked for only when unsure
            from attnviz.ui.mask_designer.role_dialog import choose_vla_roles

            roles = choose_vla_roles(self, self.ctx.session.state, self.axes.q_segments,
                                     self.axes.k_segments_arg,
                                     self.target.design(self.ctx.session.state.mask), self.ask_vla_roles,
                                     always_ask=bool(params.pop("ask_roles", False)))
            if roles is None:
                self.message.say(Level.ERROR, "The VLA preset was not applied: it needs every segment's role "
                                              f"(image, prompt or state, FAST actions, action expert). {ROLES_LINK}")
                return False
            params["roles"] = roles
        try:
            if op == "replace":
                inner = ApplyPreset.make(name, self.axes.q_segments, self.axes.k_segments_arg, **params)
            else:
                inner = CombinePreset.make(name, op, **params)
        except ValueError as exc:
            self.message.say(Level.ERROR, str(exc))
            return False
        ok = self.execute(self.target.lift(inner))
        if ok and name == "vla" and not set(params["roles"].values()) - {"I", "P"}:
            # no action tokens: every image and prompt token sees every other, as with no mask at all
            shown = ", ".join(f"'{seg}' as {ROLE_WORDS.get(role, role)}" for seg, role in params["roles"].items())
            self.message.say(Level.INFO, "The VLA mask only changes something where there are action tokens; "
                                         f"this session has none ({shown}), so every token sees every other. Add the "
                                         f"state and actions as custom blocks (Add ▸ Custom block), or {ROLES_LINK}")
        return ok

    def _on_message_link(self, link: str) -> None:
        if link == "roles":
            self.apply_preset("vla", params={"ask_roles": True})

    def _on_remove_term(self) -> None:
        if self.snapshot is not None and self.snapshot.design.presets:
            self.execute(self.target.lift(RemovePresetTerm(len(self.snapshot.design.presets) - 1)))

    def _on_cell_clicked(self, r: int, c: int) -> None:
        snap = self.snapshot
        if snap is None:
            return
        bq, bk = snap.q_blocks[r], snap.k_blocks[c]
        cell = snap.cells[r][c]
        self.chooser.set_pair(bq.name, bk.name, cell.rule, cell.explicit)
        self.chooser.adjustSize()
        rect = self.grid.geometry_now().cell_rect(r, c)
        self.chooser.move(self.grid.mapToGlobal(rect.bottomRight()) - QPoint(8, 8))
        self.chooser.show()

    def _on_rule_chosen(self, rule) -> None:
        self.execute(self.target.lift(SetBlockRule(self.chooser.q_block, self.chooser.k_block, rule)))

    def _on_header_menu(self, axis: str, index: int, pos: QPoint) -> None:
        snap = self.snapshot
        if snap is None:
            return
        block = (snap.q_blocks if axis == "q" else snap.k_blocks)[index]
        menu = self.header_menu(block)
        menu.exec(pos)

    def header_menu(self, block) -> QMenu:
        """Split / merge actions for one block of the grid."""
        menu = QMenu(self)
        seg_len = _segment_length(self.axes, block.segment)
        split = self.snapshot.design.split_of(block.segment)
        start = next((s.start for s in list(self.axes.q_segments) + list(self.axes.k_segments)
                      if s.name == block.segment), block.start)
        mid = block.start - start + len(block) // 2
        a = menu.addAction(f"Split {block.name} in half (at {mid})")
        a.setEnabled(len(block) >= 2)
        a.triggered.connect(lambda: self.execute(self.target.lift(SplitBlock(block.segment, mid))))
        if split is not None:
            stop_off = block.stop - start
            if stop_off in split.offsets:
                b = menu.addAction(f"Merge {block.name} with the next sub-block")
                b.triggered.connect(lambda: self.execute(self.target.lift(MergeBlocks(block.segment, stop_off))))
            c = menu.addAction(f"Merge all sub-blocks of {block.segment}")
            c.triggered.connect(lambda: self.execute(self.target.lift(MergeBlocks(block.segment, None))))
        menu.addSeparator()
        menu.addAction(f"{block.segment}: {seg_len} tokens").setEnabled(False)
        return menu

    # -- painting ------------------------------------------------------------------------------
    def _on_stroke_started(self) -> None:
        self._stroke = next(self._strokes)  # the stroke's commands share a merge key: one undo step

    def _on_stroke_cells(self, cells, mode: str) -> None:
        if self._stroke is None:  # cells without a start: treat them as their own stroke
            self._stroke = next(self._strokes)
        self.execute(self.target.lift(PaintCells(tuple(cells), mode, stroke=self._stroke)))

    def _on_stroke_rect(self, r0: int, r1: int, c0: int, c1: int, mode: str) -> None:
        self.execute(self.target.lift(PaintRect(r0, r1, c0, c1, mode)))

    def _on_stroke_finished(self) -> None:
        self._stroke = None
        self.flush()
        self._report_dead()

    # -- tiles and timing ------------------------------------------------------------------------
    def _on_tile_size(self, block_m: int, block_n: int) -> None:
        k = self.ctx.session.state.kernel
        if (k.block_m, k.block_n) != (block_m, block_n):
            self.execute(SetKernel(block_m=block_m, block_n=block_n, label="Change flash tile size"))

    def time_flash(self) -> int | None:
        """Start timing the flash kernel on this mask against the dense mask; returns the job id."""
        resp = self.ctx.response
        axes = axes_from_response(resp)
        if axes is None or resp.q is None or resp.k is None or resp.v is None:
            self.tiles.set_timing("no computed q, k, v yet: wait for the computation", error=True)
            return None
        state = self.ctx.session.state
        if too_long_to_draw(axes):
            self.tiles.set_timing(f"{axes.Tq:,} x {axes.Tk:,} tokens: the timing compares dense masks, which are not "
                                  "made this long", error=True)
            return None
        try:
            mask = state.mask.compile(list(axes.q_segments), list(axes.k_segments), axes.Tq, axes.Tk,
                                      nh=state.model.nh)
        except ValueError as exc:
            self.tiles.set_timing(f"cannot compile the mask: {exc}", error=True)
            return None
        q, k, v = resp.q, resp.k, resp.v
        bm, bn = state.kernel.block_m, state.kernel.block_n
        from attnviz.model.mask.flash_timing import time_flash

        self.tiles.set_timing(f"timing the flash kernel ({TIMING_REPEATS} runs each)…", busy=True)
        return self.timing_job.submit(lambda: time_flash(q, k, v, mask, bm, bn, TIMING_REPEATS))

    # -- code ----------------------------------------------------------------------------------
    def code_context(self):
        return self.axes, self.target, self.ctx.session.state.model.nh

    def open_code_dialog(self):
        """Show the mask as code (a MaskCodeDialog, made the first time) and return it."""
        if self._code_dialog is None:
            from attnviz.ui.mask_designer.export_dialog import MaskCodeDialog

            self._code_dialog = MaskCodeDialog(self.ctx, self.code_context, self)
        self._code_dialog.refresh()
        self._code_dialog.show()
        self._code_dialog.raise_()
        return self._code_dialog

    # -- messages ------------------------------------------------------------------------------
    @property
    def message_text(self) -> str:
        return self.message.text()


def ask_roles_in_dialog(parent, rows):
    """Ask for the VLA roles in the roles dialog (:func:`attnviz.ui.mask_designer.role_dialog.ask_in_dialog`)."""
    from attnviz.ui.mask_designer.role_dialog import ask_in_dialog

    return ask_in_dialog(parent, rows)


def redraw_gap_ms(spent_ms: float) -> int:
    """How long the next redraw waits after one that took ``spent_ms``."""
    return 0 if spent_ms < REDRAW_FAST_MS else int(min(REDRAW_MAX_GAP_MS, spent_ms))


def _segments(blocks) -> list[Segment]:
    return [Segment(b.name, b.start, b.stop, b.color) for b in blocks]


def _segment_length(axes: Axes | None, name: str) -> int:
    if axes is None:
        return 0
    return max((len(s) for s in list(axes.q_segments) + list(axes.k_segments) if s.name == name), default=0)
