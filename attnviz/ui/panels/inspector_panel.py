"""The Q/K/V inspector: what one head does, down to single numbers. For the selected head it shows Q,
K, V and the projections as heatmaps, a joint PCA of queries and keys, and the breakdown of the
selected (query, key) pair as seed 002 walks ``by the river bank``. The PCA of a long input (an SVD of
thousands of rows) runs on its own worker (:class:`~attnviz.ui.latest_job.LatestJob`) and is drawn when it
arrives. In a hand-set session a q or k
component can be edited; the edit is a ``SetQKComponent`` command, so it is undoable and everything
downstream recomputes.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
from PySide6.QtWidgets import (QComboBox, QGridLayout, QHBoxLayout, QLabel, QSpinBox, QTabWidget, QVBoxLayout,
                               QWidget)
from PySide6.QtCore import Qt, QTimer

from attnviz.model.commands import SetQKComponent
from attnviz.model.diagnostics.breakdown import pair_breakdown
from attnviz.model.diagnostics.qk_embedding import qk_embedding
from attnviz.model.score_rules import FORMULAS
from attnviz.model.state import ToySource
from attnviz.ui.diagnostics.breakdown_view import BreakdownView
from attnviz.ui.diagnostics.common import connect_event, head_mask, selected_head
from attnviz.ui.diagnostics.qk_scatter import QKScatter
from attnviz.ui.diagnostics.titled_view import TitledView
from attnviz.ui.latest_job import LatestJob
from attnviz.ui.widgets.flow_layout import flow_row, labelled
from attnviz.ui.widgets.heatmap import AttentionHeatmap
from attnviz.ui.workspaces.area import ShareSplitter
from attnviz.ui.workspaces.sidebar import VerticalScroll

#: above this many labels an axis shows indices instead of names (the token axis thins them anyway)
LABEL_LIMIT = 4096
NORMALISATION_NAMES = {"scaled": "Scaled", "unscaled": "No √dₖ", "uniform": "Uniform"}
RULE_MODES = {"dot": "unscaled", "uniform": "uniform"}
#: query + key rows whose PCA still runs on the GUI thread (a few ms); more go to the PCA's worker
SYNC_PCA_ROWS = 2048
QKV_STRETCH = (6, 5, 5)  # widths of the Q, K and V maps (Q also holds the token labels)
PCA_TAB = 2  # the matrices' tab of the Q-K PCA


def _dims(prefix: str, n: int):
    return [f"{prefix}{c}" for c in range(n)]


def breakdown_mode(state) -> str | None:
    """The normalisation the breakdown uses, or None when scores come from the response (another score
    rule, or ALiBi's bias)."""
    if state.positional.kind == "alibi":
        return None
    name = state.score_rule.name
    if name == "scaled_dot":
        return state.view.normalisation
    return RULE_MODES.get(name)


def hand_set(state) -> bool:
    """True for a toy session: hand-set weights or components, or hand-set token embeddings."""
    return state.model.handset or any(isinstance(s, ToySource) for s in state.sources)


class InspectorPanel(QWidget):
    """Q/K/V heatmaps, the (query, key) breakdown and the Q-K PCA of the selected head."""

    def __init__(self, ctx, parent=None):
        super().__init__(parent)
        self.ctx = ctx
        self._labels = ((), ())
        self._updating = False

        self.head = QSpinBox(self)
        self.head.setPrefix("head ")
        self.query = QComboBox(self)
        self.key = QComboBox(self)
        for combo in (self.query, self.key):
            combo.setMinimumContentsLength(10)
            combo.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        self.decimals = QSpinBox(self)
        self.decimals.setRange(0, 8)
        self.decimals.setValue(2)
        self.decimals.setPrefix("decimals ")
        self.decimals.setToolTip("Digits after the point in the tables (hover a cell for the full value)")
        self.note = QLabel(" ", self)
        self.note.setWordWrap(True)
        self.note.setStyleSheet("color: palette(mid);")
        bar = flow_row((self.head, labelled("&query", self.query, self), labelled("&key", self.key, self),
                        self.decimals, self.note))  # wraps when the workspace is narrow

        # matrices: the Q map now, the K and V maps and the PCA's scatter on the next turns of the event
        # loop once the panel shows, or when first asked for (see _lazy_part): building all of them in
        # the turn that builds and places the panel held the window up on the workspace's first visit
        self.q_map = AttentionHeatmap()
        qkv = QWidget(self)
        self.qkv_page = qkv
        ql = QHBoxLayout(qkv)
        ql.setContentsMargins(0, 0, 0, 0)
        ql.addWidget(self.q_map, QKV_STRETCH[0])  # Q also holds the token labels
        ws = QWidget(self)  # its four maps are made when first wanted (see _weight_maps)
        wl = QGridLayout(ws)
        wl.setContentsMargins(0, 0, 0, 0)
        self.matrices = QTabWidget(self)
        self.matrices.addTab(qkv, "Q · K · V")
        self.matrices.addTab(ws, "W^Q · W^K · W^V · W^O")
        self.matrices.addTab(QWidget(self), "Q-K PCA")  # the scatter's place; short: the tabs fit 1024 pixels
        self.matrices.setTabToolTip(PCA_TAB, "queries and keys in one PCA embedding")
        self.matrices.currentChanged.connect(lambda _i: self._pca_shown() and self._redraw_breakdown())
        self.weights_page = ws
        self.matrices.currentChanged.connect(lambda _i: self._weights_stale and self._show_weights())

        self.breakdown = BreakdownView(self)
        self.breakdown.edit_hint.setWordWrap(True)  # a long hint must not widen the panel
        self.breakdown.edit_hint.setMinimumWidth(80)  # wraps between words, never inside one
        self.breakdown.value.setMaximumWidth(100)
        # the breakdown scrolls up and down in its own area: its wrapped lines (the formula, the edit
        # hint) get the height they need at its width instead of being drawn over the tables
        self.breakdown_scroll = VerticalScroll(self)
        self.breakdown_scroll.setObjectName("breakdown_scroll")
        self.breakdown_scroll.setWidget(self.breakdown)
        split = ShareSplitter(Qt.Orientation.Horizontal, self)  # the qkv workspace remembers its shares
        split.addWidget(self.matrices)
        split.addWidget(self.breakdown_scroll)
        split.setStretchFactor(0, 1)
        split.setStretchFactor(1, 1)
        split.set_shares(self.default_shares("panel"))
        self.splitter = split
        lay = QVBoxLayout(self)
        lay.setContentsMargins(4, 4, 4, 4)
        lay.addLayout(bar)
        lay.addWidget(split, 1)

        self.head.valueChanged.connect(self._on_head_edited)
        self.query.currentIndexChanged.connect(lambda i: self._select(query=i))
        self.key.currentIndexChanged.connect(lambda j: self._select(key=j))
        self.decimals.valueChanged.connect(lambda *_: self._redraw_breakdown())
        self.q_map.cell_clicked.connect(self._on_q_clicked)
        self.breakdown.key_clicked.connect(lambda j: self._select(key=j))
        self.breakdown.component_edited.connect(self._on_component_edited)
        self.breakdown.component_reset.connect(lambda which, dim: self._on_component_edited(which, dim, None))
        self.pca_job = LatestJob("attnviz-qk-pca", self)  # the PCA of a long input, off the GUI thread
        self.pca_job.done.connect(self._on_pca_done)
        self.pca_job.failed.connect(self._on_pca_failed)
        ctx.response_changed.connect(self._on_response_changed)
        connect_event(self, ctx.session.events.view, self._on_view_changed)
        # a result already there is drawn when the panel is first shown, on a later turn: building and
        # drawing a long input's maps in one go held up the window on the workspace's first visit
        self._hidden_change = ctx.response is not None
        self._steps: list[tuple[str, object]] = []  # (kind, callable): the work left, one per turn
        self._drawn_ahead: dict[int, tuple] = {}  # {1 or 2: (response, head)} K or V map drawn before Q's

    WEIGHT_MAPS = ("wq_map", "wk_map", "wv_map", "wo_map")
    LATER_PARTS = ("k_map", "v_map", "scatter")  # made on the turns after the first show, or when asked for

    def _lazy_part(self, name: str):
        """The K or V map or the PCA's scatter, made now if it is not there yet (the K map before the V
        map: they sit in that order beside the Q map)."""
        if name == "scatter":
            if "scatter" not in self.__dict__:
                self._make_scatter()
        else:
            for n, part in enumerate(("k_map", "v_map"), start=1):
                if part not in self.__dict__:
                    m = AttentionHeatmap()
                    axis = m.frame.left_axis  # rows line up with Q's: its token labels serve all three
                    axis.setStyle(showValues=False)
                    axis.setWidth(0)
                    axis.hide()
                    self.__dict__[part] = m
                    self.qkv_page.layout().addWidget(m, QKV_STRETCH[n])
                    if part == "k_map":
                        m.cell_clicked.connect(self._on_k_clicked)
                if part == name:
                    break
        return self.__dict__[name]

    def _make_scatter(self):
        sc = QKScatter(self)
        sc.point_clicked.connect(lambda side, t: self._select(**{"query" if side == "q" else "key": t}))
        self.__dict__["scatter"] = sc
        tabs = self.matrices
        current, place = tabs.currentIndex(), tabs.widget(PCA_TAB)
        blocked = tabs.blockSignals(True)  # the same tab stays forward: nothing changed for its slots
        try:
            tabs.removeTab(PCA_TAB)
            tabs.insertTab(PCA_TAB, sc, "Q-K PCA")
            tabs.setTabToolTip(PCA_TAB, "queries and keys in one PCA embedding")
            tabs.setCurrentIndex(current)
        finally:
            tabs.blockSignals(blocked)
        place.deleteLater()

    def _pca_shown(self) -> bool:
        """True when the PCA's tab is the one shown (its scatter may not be made yet)."""
        return self.matrices.widget(PCA_TAB).isVisible()

    def _weight_maps(self) -> tuple:
        """The W^Q, W^K, W^V, W^O maps, made the first time they are wanted (their tab shown, or asked
        for): four heatmaps and their plots in a tab that is often never opened."""
        for n in range(len(self.WEIGHT_MAPS)):
            self._make_weight_map(n)
        return tuple(self.__dict__[name] for name in self.WEIGHT_MAPS)

    def _make_weight_map(self, n: int) -> None:
        name = self.WEIGHT_MAPS[n]
        if name not in self.__dict__:
            # the titles ("W^O rows, head 3") sit whole above their maps, wrapped where narrow
            m = TitledView(AttentionHeatmap())
            setattr(self, name, m)
            self.weights_page.layout().addWidget(m, n // 2, n % 2)

    def __getattr__(self, name: str):
        # only for attributes not found: a map or the scatter asked for before it was made
        if "weights_page" in self.__dict__:
            if name in self.WEIGHT_MAPS:
                return dict(zip(self.WEIGHT_MAPS, self._weight_maps()))[name]
            if name in self.LATER_PARTS:
                return self._lazy_part(name)
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    # -- work spread over turns ----------------------------------------------------------------
    def _queue(self, kind: str, *steps) -> None:
        """Run ``steps`` one per turn of the event loop, after the ones queued before. 1 ms timers
        rather than posted calls: input and paints waiting come first."""
        self._steps += [(kind, f) for f in steps]
        self._next_step()

    def _drop_steps(self, kind: str) -> None:
        """Queued steps of this kind are no longer wanted (done in one go, or for an older result)."""
        self._steps = [s for s in self._steps if s[0] != kind]

    _step_timed = False  # a timer runs the next step

    def _next_step(self) -> None:
        if self._steps and not self._step_timed:
            self._step_timed = True
            QTimer.singleShot(1, self, self._run_step)

    def _run_step(self) -> None:
        self._step_timed = False
        if self._steps and self.window().isVisible() and not self.isVisible():
            # another workspace came forward: the work waits for the next show, which queues it again
            self._hidden_change = self._hidden_change or any(kind == "draw" for kind, _ in self._steps)
            self._steps = []
            return
        try:
            if self._steps:
                _kind, step = self._steps.pop(0)
                step()
        finally:
            self._next_step()  # a step that raised does not stop the ones after it

    @property
    def drawing_in_steps(self) -> bool:
        """True while work is queued for later turns (parts to make, maps to draw)."""
        return bool(self._steps)

    @staticmethod
    def default_shares(key: str) -> list[float] | None:
        """Default shares of the panel's splitter: the maps a little more than the breakdown, whose
        tables scroll sideways."""
        return [0.56, 0.44] if key == "panel" else None

    _hidden_change = False  # a response or view change skipped while another workspace was shown

    def _hidden(self) -> bool:
        """True while the window shows another workspace: redraws wait until this one shows (three
        maps of thousands of rows and a PCA of as many points would hold up the window for nobody)."""
        if self.window().isVisible() and not self.isVisible():
            self._hidden_change = True
            return True
        return False

    def showEvent(self, ev):  # noqa: N802 - Qt's name
        super().showEvent(ev)
        # the parts not made yet, each on a turn of its own
        self._queue("make", *(lambda p=p: self._lazy_part(p) for p in ("k_map", "v_map")
                              if p not in self.__dict__))
        if self._hidden_change:  # a result to draw: the controls, the K map, the V map, the breakdown
            self._hidden_change = False  # and then the Q map, each on a turn of its own
            self._drop_steps("draw")
            self._queue("draw", self._first_draw_controls, lambda: self._draw_ahead(1),
                        lambda: self._draw_ahead(2), self._first_draw_breakdown, self._first_draw_last)
        else:
            self._queue("draw", self._redraw_breakdown)  # tables fit their rows once they have a real size
        if self._weights_stale and self.matrices.currentWidget() is self.weights_page:
            self._queue("w", self._show_weights)  # their drawing was left when the panel was hidden
        if "scatter" not in self.__dict__:
            self._queue("make", lambda: self._lazy_part("scatter"))

    def _first_draw_controls(self):
        resp = self.ctx.response
        if resp is None or not resp.ok or resp.q is None:
            self._on_response_changed(resp)  # says why there is nothing to show
            return
        self._sync_controls(resp)
        if self.q_map.is_empty():
            self.q_map.frame.set_title("Q")  # its title stands over it from the first turn, as K's and V's

    def _draw_ahead(self, n):
        """Draw the K (n = 1) or V map of the result before the others: _redraw_matrices then leaves it."""
        resp = self.ctx.response
        if resp is None or not resp.ok or resp.q is None:
            return
        h, _ = selected_head(self.ctx.session.state, resp.q.shape[0])
        self._draw_qkv_map(resp, h, n)
        self._drawn_ahead[n] = (resp, h)

    def _first_draw_breakdown(self):
        resp = self.ctx.response
        if resp is not None and resp.ok and resp.q is not None:
            self._redraw_breakdown()

    def _first_draw_last(self):
        """The Q map (the one with the token labels, the longest to draw) after the breakdown."""
        resp = self.ctx.response
        if resp is None or not resp.ok or resp.q is None:
            return
        self._redraw_matrices()
        sel = self.selection()
        if sel is not None:
            self.q_map.set_selected_row(sel[1])  # as the breakdown marks it

    # -- selection -----------------------------------------------------------------------------
    def selection(self) -> tuple[int, int, int] | None:
        """(head, query i, key j) the breakdown shows, or None without a response."""
        resp = self.ctx.response
        if resp is None or not resp.ok or resp.q is None or resp.Tq == 0 or resp.Tk == 0:
            return None
        view = self.ctx.session.state.view
        h, _ = selected_head(self.ctx.session.state, resp.q.shape[0])
        i = view.query if view.query is not None and view.query < resp.Tq else 0
        if view.key is not None and view.key < resp.Tk:
            j = view.key
        else:
            row = self._row_weights(resp, h, i)
            j = int(np.argmax(row)) if row is not None and row.any() else 0
        return h, i, j

    @staticmethod
    def _row_weights(resp, h, i):
        if resp.weights is not None:
            return resp.weights[h, i]  # (Tk,)
        rw = resp.row_weights.get(i)
        return None if rw is None else rw[h]  # (Tk,)

    def _select(self, **fields):
        if self._updating or any(v is None or v < 0 for v in fields.values()):
            return
        view = self.ctx.session.state.view
        if all(getattr(view, k) == v for k, v in fields.items()):
            return
        self.ctx.set_view(**fields)

    def _on_head_edited(self, h):
        if not self._updating and self.ctx.session.state.view.head != h:
            self.ctx.set_view(head=int(h))

    def _on_q_clicked(self, row, col):
        self.breakdown.which.setCurrentIndex(0)
        self.breakdown.dim.setValue(col)
        self._select(query=row)

    def _on_k_clicked(self, row, col):
        self.breakdown.which.setCurrentIndex(1)
        self.breakdown.dim.setValue(col)
        self._select(key=row)

    def _on_component_edited(self, which, dim, value):
        sel = self.selection()
        if sel is None:
            return
        h, i, j = sel
        self.ctx.execute(SetQKComponent(which, h, i if which == "q" else j, int(dim),
                                        None if value is None else float(value)))

    # -- redraw --------------------------------------------------------------------------------
    def _on_response_changed(self, resp):
        if self._hidden():
            return
        self._drop_steps("draw")  # drawn now: a first draw still queued would only repeat it
        if resp is None or not resp.ok or resp.q is None:
            self.note.setText(f"nothing to show: {getattr(resp, 'error', None) or 'no computation yet'}")
            self.breakdown.clear(" ")
            if "scatter" in self.__dict__:
                self.scatter.clear()
            return
        self._sync_controls(resp)
        self._redraw_matrices()
        self._redraw_breakdown()

    def _on_view_changed(self, view):
        if self._hidden():
            return
        resp = self.ctx.response
        if resp is None or not resp.ok or resp.q is None:
            return
        self._sync_controls(resp)
        if self.head.value() != self._drawn_head:
            self._redraw_matrices()
        self._redraw_breakdown()

    _drawn_head = -1

    def _sync_controls(self, resp):
        self._updating = True
        try:
            nh = resp.q.shape[0]
            self.head.setRange(0, nh - 1)
            h, _ = selected_head(self.ctx.session.state, nh)
            self.head.setValue(h)
            labels = (tuple(resp.query_labels), tuple(resp.key_labels))
            if labels != self._labels:
                self._labels = labels
                for combo, names in ((self.query, labels[0]), (self.key, labels[1])):
                    combo.clear()
                    combo.addItems([f"{t} {s}" for t, s in enumerate(names)])
            sel = self.selection()
            if sel is not None:
                self.query.setCurrentIndex(sel[1])
                self.key.setCurrentIndex(sel[2])
        finally:
            self._updating = False

    _weights_stale = False  # the weight maps wait for their tab to come forward

    @property
    def weights_stale(self) -> bool:
        """True while the weight maps show an older result than the Q/K/V maps (drawn when their tab is)."""
        return self._weights_stale

    def _redraw_matrices(self):
        """The Q, K and V maps of the selected head (but a K or V map the first draw after a show drew
        ahead, on a turn of its own, for this result and head)."""
        self._drop_steps("draw")  # the callers redraw the breakdown too
        resp = self.ctx.response
        h, _ = selected_head(self.ctx.session.state, resp.q.shape[0])
        self._drawn_head = h
        ahead, self._drawn_ahead = self._drawn_ahead, {}
        for n in range(3):
            if n not in ahead or ahead[n][0] is not resp or ahead[n][1] != h:
                self._draw_qkv_map(resp, h, n)
        self._weights_stale = True
        if not (self.window().isVisible() and not self.weights_page.isVisible()):
            self._redraw_weights()  # else when the tab is shown: four more maps nobody looks at yet

    def _draw_qkv_map(self, resp, h, n):
        """Draw the Q (n = 0), K or V map of head h (the breakdown drawn next marks the selected rows)."""
        hs, hv = resp.q.shape[2], resp.v.shape[2]
        if n == 0:
            rows = list(resp.query_labels) if resp.Tq <= LABEL_LIMIT else None
            m, data, segs, cols, title = self.q_map, resp.q[h], resp.query_segments, _dims("d", hs), "Q"
        else:
            rows = list(resp.key_labels) if resp.Tk <= LABEL_LIMIT else None
            m, data, segs = self._lazy_part("k_map" if n == 1 else "v_map"), (resp.k if n == 1 else resp.v)[h], \
                resp.key_segments
            cols, title = (_dims("d", hs), "K") if n == 1 else (_dims("v", hv), "V")  # the head is in the bar above
        m.set_matrix(data, row_labels=rows, col_labels=cols, row_segments=segs, title=title, value_label="")
        self._follow_colormap((m,))

    def _show_weights(self):
        """The weight tab came forward with its maps to draw: drawn now if they are all there; else the
        first is made now and the others on the next turns, then each is drawn on a turn of its own
        (making and drawing four maps in one or two turns held the window up)."""
        if all(name in self.__dict__ for name in self.WEIGHT_MAPS):
            self._redraw_weights()
            return
        self._drop_steps("w")
        self._make_weight_map(0)
        n_maps = len(self.WEIGHT_MAPS)
        self._queue("w", *(lambda n=n: self._make_weight_map(n) for n in range(1, n_maps)),
                    *(lambda n=n: self._draw_weight_step(n) for n in range(n_maps)))

    def _draw_weight_step(self, n: int):
        if not self._weights_stale:
            return  # drawn in one go since
        self._draw_weight_map(n)
        if n == len(self.WEIGHT_MAPS) - 1:
            self._weights_stale = False

    def _redraw_weights(self):
        """The four projection maps of the selected head."""
        self._drop_steps("w")
        self._weights_stale = False
        for n in range(len(self.WEIGHT_MAPS)):
            self._draw_weight_map(n)

    def _draw_weight_map(self, n: int):
        """Draw projection map n (W^Q, W^K, W^V, W^O) of the selected head."""
        resp = self.ctx.response
        if resp is None or not resp.ok or resp.q is None:
            return
        h, _ = selected_head(self.ctx.session.state, resp.q.shape[0])
        hs, hv = resp.q.shape[2], resp.v.shape[2]
        W = resp.projections
        xs = _dims("x", W.W_q.shape[1])  # d_model
        data, rows, cols, title = (
            (W.W_q[h], xs, _dims("d", hs), f"W^Q, head {h}"),
            (W.W_k[h], xs, _dims("d", hs), f"W^K, head {h}"),
            (W.W_v[h], xs, _dims("v", hv), f"W^V, head {h}"),
            (W.W_o[h * hv:(h + 1) * hv], _dims("v", hv), xs, f"W^O rows, head {h}"))[n]
        self._make_weight_map(n)
        m = self.__dict__[self.WEIGHT_MAPS[n]]
        m.set_matrix(data, row_labels=rows, col_labels=cols, title=title, value_label="weight")
        self._follow_colormap((m,))

    def _follow_colormap(self, maps):
        cmap = self.ctx.session.state.view.colormap
        for m in maps:
            if m.colormap_name() != cmap:
                try:
                    m.set_colormap(cmap)
                except ValueError:
                    pass

    def _redraw_breakdown(self):
        resp = self.ctx.response
        if resp is None or not resp.ok or resp.q is None:
            return
        sel = self.selection()
        if sel is None:
            self.breakdown.clear("the sequence is empty")
            return
        state = self.ctx.session.state
        h, i, j = sel
        notes = [selected_head(state, resp.q.shape[0])[1]]
        mode = breakdown_mode(state)
        mask = head_mask(resp, h)  # (Tq, Tk)
        qh, kh, vh = resp.q[h], resp.k[h], resp.v[h]  # (Tq, hs), (Tk, hs), (Tk, hv)
        rule_note = ""
        if mode is not None:
            bd = pair_breakdown(qh, kh, i, j, mask=mask, mode=mode, v=vh)
            if state.score_rule.name == "scaled_dot" and mode != "scaled":
                notes.append(f"diagnostic normalisation {NORMALISATION_NAMES[mode]!r} (Diagnostics > "
                             "Normalisation); the session itself computes Scaled")
            else:
                notes.append(f"normalisation: {NORMALISATION_NAMES[mode]}")
        else:
            bd = self._from_response(resp, h, i, j, qh, kh, vh, mask)
            rule = state.score_rule.name
            rule_note = (f"score rule {rule}: {FORMULAS.get(rule, '')}" if rule not in ("scaled_dot", "dot", "uniform")
                         else "ALiBi adds −slope·|i − j| to the scaled score")
            notes.append(rule_note)
        overridden = {(o.which, o.dim) for o in state.model.qk_overrides
                      if o.head == h and o.token == (i if o.which == "q" else j)}
        editable = hand_set(state)
        self.breakdown.set_editable(editable, "" if editable else
                                    "components are editable in hand-set (toy) sessions such as river-bank")
        capped = state.score_rule.name == "softcap" and state.positional.kind != "alibi"  # ALiBi: scores as given
        cap = state.score_rule.cap if capped else None
        self.breakdown.show_breakdown(bd, resp.query_labels[i], resp.key_labels[j], resp.key_labels, vh,
                                      rule_note=rule_note, overridden=overridden, decimals=self.decimals.value(),
                                      softcap=cap)
        self.note.setText("  ·  ".join(n for n in notes if n))
        for m, row in ((self.q_map, i), (self.__dict__.get("k_map"), j)):  # the K map may not be made yet
            if m is not None and row < m.frame.n_rows:  # a map not drawn yet is marked when it is
                m.set_selected_row(row)
        self._redraw_scatter(resp, h, i, j)

    def _from_response(self, resp, h, i, j, qh, kh, vh, mask):
        """A breakdown whose scores and weights are the response's (other score rules, ALiBi)."""
        bd = pair_breakdown(qh, kh, i, j, mask=mask, mode="scaled", v=vh)
        row_w = self._row_weights(resp, h, i)
        row_w = np.zeros(resp.Tk) if row_w is None else np.asarray(row_w, dtype=np.float64)  # (Tk,)
        if resp.scores is not None:
            row_s = np.where(mask[i], resp.scores[h, i], -np.inf)  # (Tk,)
        else:
            row_s = np.full(resp.Tk, np.nan)  # (Tk,) not held for a large sequence
        out = resp.output[h, i]  # (hv,)
        return replace(bd, mode=self.ctx.session.state.score_rule.name, scale=float("nan"),
                       score=float(row_s[j]), row_scores=row_s, row_weights=row_w, weight=float(row_w[j]),
                       output=out, contribution=row_w[j] * vh[j])

    _scatter_of = None  # (response, head) the scatter was drawn for
    _scatter_asked = None  # (response, head) whose PCA is on the worker

    def _redraw_scatter(self, resp, h, i, j):
        if self.window().isVisible() and not self._pca_shown():
            return  # another matrix tab is shown: drawn when the PCA tab comes forward
        key = (id(resp), h)
        if self._scatter_of == key:
            self.scatter.set_selection(i, j)  # same points: only the outline moves
            return
        q, k = resp.q[h], resp.k[h]  # (Tq, hs), (Tk, hs)
        if q.shape[0] + k.shape[0] > SYNC_PCA_ROWS:
            if self._scatter_asked != key:
                self._scatter_asked = key
                self.scatter.clear(f"computing the PCA of {q.shape[0]:,} queries and {k.shape[0]:,} keys …")
                self.pca_job.submit(lambda: (resp, h, qk_embedding(q, k)))
            return  # drawn when it arrives, with the selection of then
        self.pca_job.cancel()  # an older, longer PCA must not arrive after this one
        self._scatter_asked = None
        try:
            emb = qk_embedding(q, k)
        except ValueError as exc:
            self._show_pca_failure(str(exc))
            return
        self._draw_scatter(resp, h, emb, i, j)

    def _draw_scatter(self, resp, h, emb, i, j):
        self._scatter_of = (id(resp), h)
        self.scatter.set_embedding(emb, resp.query_labels, resp.key_labels, resp.query_segments,
                                   resp.key_segments, selected_query=i, selected_key=j)

    def _on_pca_done(self, _jid, result):
        resp, h, emb = result
        self._scatter_asked = None
        if resp is not self.ctx.response:
            return  # a newer response is on its way (or drawn)
        sel = self.selection()
        if sel is None or sel[0] != h:
            return  # another head is chosen now: its PCA was asked for
        self._draw_scatter(resp, h, emb, sel[1], sel[2])

    def _on_pca_failed(self, _jid, message):
        self._scatter_asked = None
        self._show_pca_failure(message)

    def _show_pca_failure(self, message):
        self.scatter.clear(message)
        self._scatter_of = None
