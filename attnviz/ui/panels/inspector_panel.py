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

        # matrices
        self.q_map, self.k_map, self.v_map = AttentionHeatmap(), AttentionHeatmap(), AttentionHeatmap()
        qkv = QWidget(self)
        ql = QHBoxLayout(qkv)
        ql.setContentsMargins(0, 0, 0, 0)
        for m, stretch in ((self.q_map, 6), (self.k_map, 5), (self.v_map, 5)):  # Q also holds the token labels
            ql.addWidget(m, stretch)
        for m in (self.k_map, self.v_map):  # rows line up with Q's: its token labels serve all three
            axis = m.frame.left_axis
            axis.setStyle(showValues=False)
            axis.setWidth(0)
            axis.hide()
        ws = QWidget(self)  # its four maps are made when first wanted (see _weight_maps)
        wl = QGridLayout(ws)
        wl.setContentsMargins(0, 0, 0, 0)
        self.matrices = QTabWidget(self)
        self.matrices.addTab(qkv, "Q · K · V")
        self.matrices.addTab(ws, "W^Q · W^K · W^V · W^O")
        self.scatter = QKScatter(self)
        self.matrices.addTab(self.scatter, "Q-K PCA")  # short: the three tabs fit a 1024-pixel window
        self.matrices.setTabToolTip(2, "queries and keys in one PCA embedding")
        self.matrices.currentChanged.connect(lambda _i: self.scatter.isVisible() and self._redraw_breakdown())
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
        self.k_map.cell_clicked.connect(self._on_k_clicked)
        self.breakdown.key_clicked.connect(lambda j: self._select(key=j))
        self.breakdown.component_edited.connect(self._on_component_edited)
        self.breakdown.component_reset.connect(lambda which, dim: self._on_component_edited(which, dim, None))
        self.pca_job = LatestJob("attnviz-qk-pca", self)  # the PCA of a long input, off the GUI thread
        self.pca_job.done.connect(self._on_pca_done)
        self.pca_job.failed.connect(self._on_pca_failed)
        self.scatter.point_clicked.connect(lambda side, t: self._select(**{"query" if side == "q" else "key": t}))
        ctx.response_changed.connect(self._on_response_changed)
        connect_event(self, ctx.session.events.view, self._on_view_changed)
        # a result already there is drawn when the panel is first shown, on a later turn: building and
        # drawing a long input's maps in one go held up the window on the workspace's first visit
        self._hidden_change = ctx.response is not None

    WEIGHT_MAPS = ("wq_map", "wk_map", "wv_map", "wo_map")

    def _weight_maps(self) -> tuple:
        """The W^Q, W^K, W^V, W^O maps, made the first time they are wanted (their tab shown, or asked
        for): four heatmaps and their plots in a tab that is often never opened."""
        if "wq_map" not in self.__dict__:
            grid = self.weights_page.layout()
            for n, name in enumerate(self.WEIGHT_MAPS):
                # the titles ("W^O rows, head 3") sit whole above their maps, wrapped where narrow
                m = TitledView(AttentionHeatmap())
                setattr(self, name, m)
                grid.addWidget(m, n // 2, n % 2)
        return tuple(self.__dict__[name] for name in self.WEIGHT_MAPS)

    def __getattr__(self, name: str):
        # only for attributes not found: a weight map asked for before its tab was shown
        if name in self.WEIGHT_MAPS and "weights_page" in self.__dict__:
            return dict(zip(self.WEIGHT_MAPS, self._weight_maps()))[name]
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

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
        # 1 ms timers rather than posted calls: input and paints waiting since this turn come first
        if self._hidden_change:
            self._hidden_change = False
            QTimer.singleShot(1, self, lambda: self._on_response_changed(self.ctx.response))
        else:
            QTimer.singleShot(1, self, self._redraw_breakdown)  # tables fit their rows once they have a real size

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
        if resp is None or not resp.ok or resp.q is None:
            self.note.setText(f"nothing to show: {getattr(resp, 'error', None) or 'no computation yet'}")
            self.breakdown.clear(" ")
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
        resp = self.ctx.response
        state = self.ctx.session.state
        h, _ = selected_head(state, resp.q.shape[0])
        self._drawn_head = h
        ql = list(resp.query_labels) if resp.Tq <= LABEL_LIMIT else None
        kl = list(resp.key_labels) if resp.Tk <= LABEL_LIMIT else None
        hs, hv = resp.q.shape[2], resp.v.shape[2]
        for m, data, rows, segs, cols, title in (
                (self.q_map, resp.q[h], ql, resp.query_segments, _dims("d", hs), "Q"),
                (self.k_map, resp.k[h], kl, resp.key_segments, _dims("d", hs), "K"),
                (self.v_map, resp.v[h], kl, resp.key_segments, _dims("v", hv), "V")):  # the head is in the bar above
            m.set_matrix(data, row_labels=rows, col_labels=cols, row_segments=segs, title=title, value_label="")
        self._follow_colormap((self.q_map, self.k_map, self.v_map))
        self._weights_stale = True
        if not (self.window().isVisible() and not self.weights_page.isVisible()):
            self._redraw_weights()  # else when the tab is shown: four more maps nobody looks at yet

    def _show_weights(self):
        """The weight tab came forward with its maps to draw: made now if they are not there yet, and
        then drawn on a later turn (making and drawing four maps in one turn held the window up)."""
        if "wq_map" in self.__dict__:
            self._redraw_weights()
        else:
            self._weight_maps()
            QTimer.singleShot(1, self, lambda: self._weights_stale and self._redraw_weights())

    def _redraw_weights(self):
        """The four projection maps of the selected head."""
        resp = self.ctx.response
        self._weights_stale = False
        if resp is None or not resp.ok or resp.q is None:
            return
        h, _ = selected_head(self.ctx.session.state, resp.q.shape[0])
        hs, hv = resp.q.shape[2], resp.v.shape[2]
        W = resp.projections
        d_model = W.W_q.shape[1]
        xs = _dims("x", d_model)
        wq, wk, wv, wo = maps = self._weight_maps()
        for m, data, rows, cols, title in (
                (wq, W.W_q[h], xs, _dims("d", hs), f"W^Q, head {h}"),
                (wk, W.W_k[h], xs, _dims("d", hs), f"W^K, head {h}"),
                (wv, W.W_v[h], xs, _dims("v", hv), f"W^V, head {h}"),
                (wo, W.W_o[h * hv:(h + 1) * hv], _dims("v", hv), xs, f"W^O rows, head {h}")):
            m.set_matrix(data, row_labels=rows, col_labels=cols, title=title, value_label="weight")
        self._follow_colormap(maps)

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
        for m, row in ((self.q_map, i), (self.k_map, j)):
            if row < m.frame.n_rows:  # a map not drawn yet (its first draw is on a later turn) is marked then
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
        if self.window().isVisible() and not self.scatter.isVisible():
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
