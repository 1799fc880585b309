"""The Positional-encodings tab (seed 000's three properties, and the same views for RoPE): the table,
the Gram matrix and its profile against t - s (measured and by formula), the rotation M_k with its
measured error at every start position, and every dimension's wavelength. The settings start from the
session's and follow it; the studies run off the GUI thread (a large table takes ~0.3 s).
"""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtWidgets import (QDoubleSpinBox, QGridLayout, QLabel, QPushButton, QSpinBox,
                               QTabWidget, QVBoxLayout, QWidget)

from attnviz.model.diagnostics.positional_study import rope_study, sinusoidal_study
from attnviz.model.positional import apply_rope
from attnviz.ui.diagnostics.common import KEY_COLOUR, QUERY_COLOUR, connect_event, fmt_sci, make_plot
from attnviz.ui.diagnostics.tab import STUDY_MEMORY_MESSAGE, DiagnosticTab
from attnviz.ui.diagnostics.titled_view import TitledView
from attnviz.ui.latest_job import LatestJob
from attnviz.ui.widgets.flow_layout import flow_row, labelled
from attnviz.ui.widgets.heatmap import AttentionHeatmap
from attnviz.ui.widgets.whole_tabs import keep_tab_texts_whole

DEFAULT_POSITIONS = 64  # enough positions to see the slow dimensions move
MAX_POSITIONS = 1024
MAX_DIM = 1024


def rope_error_per_position(r) -> np.ndarray:
    """max_dim |rope(q, pos + k) - R_k rope(q, pos)| for every start pos of a RopeStudy, (T - |k|,)."""
    T, hs = r.table.shape
    qr = apply_rope(np.broadcast_to(r.q, (T, hs)), None, r.base)  # (T, hs)
    lo, hi = max(0, -r.k), min(T, T - r.k)
    return np.abs(qr[lo:hi] @ r.rotation.T - qr[lo + r.k:hi + r.k]).max(axis=1, initial=0.0)  # (T-|k|,)


def run_studies(T: int, d_model: int, hs: int, base: float, k: int):
    """(SinusoidalStudy, RopeStudy or the reason it cannot run, RoPE error per position); pure, runs
    on the worker."""
    sin = sinusoidal_study(T, d_model, base, k)
    try:
        rope = rope_study(T, hs, base, k)
    except ValueError as exc:
        return sin, str(exc), None
    return sin, rope, rope_error_per_position(rope)


class _Page(QWidget):
    """Six views of one encoding in a 2 x 3 grid."""

    def __init__(self, parent, table_title: str, gram_title: str):
        super().__init__(parent)
        self.table = TitledView(AttentionHeatmap())  # each title whole above its map
        self.gram = TitledView(AttentionHeatmap())
        self.rotation = TitledView(AttentionHeatmap())
        self.profile = make_plot(gram_title + " against t − s", "t − s", "diagonal mean")
        self.error_plot = make_plot("error of M_k per position", "pos", "max abs error")  # the formula: the line below
        self.error_plot.getPlotItem().setLogMode(y=True)
        self.wavelengths = make_plot("wavelength per dimension", "dimension", "positions (log)", log_y=True)
        self.error = QLabel(" ", self)
        self.error.setWordWrap(True)  # the measured error line wraps under its plot, never wider than it
        self.error.setStyleSheet("font-weight: bold;")
        self.dependence = QLabel(" ", self)
        self.dependence.setWordWrap(True)
        grid = QGridLayout(self)
        grid.setContentsMargins(0, 0, 0, 0)
        grid.addWidget(self.table, 0, 0)
        grid.addWidget(self.gram, 0, 1)
        col = QVBoxLayout()
        col.addWidget(self.profile, 1)
        col.addWidget(self.dependence)
        grid.addLayout(col, 0, 2)
        grid.addWidget(self.rotation, 1, 0)
        col = QVBoxLayout()
        col.addWidget(self.error_plot, 1)
        col.addWidget(self.error)
        grid.addLayout(col, 1, 1)
        grid.addWidget(self.wavelengths, 1, 2)
        for plot in (self.profile, self.error_plot, self.wavelengths):
            plot.setMinimumWidth(190)  # three columns fit beside the sidebar in a 1024-pixel window
        self.profile.view.setMinimumHeight(116)  # its two-line title, its legend and the line below fit 1024 x 700
        for c in range(3):
            grid.setColumnStretch(c, 1)
        for r in range(2):
            grid.setRowStretch(r, 1)
        for w in (self.table, self.gram, self.rotation):
            w.setMinimumWidth(220)
        self._table_title = table_title

    def show_profile(self, offsets, measured, formula=None):
        p = self.profile.getPlotItem()
        p.clear()
        p.plot(offsets, measured, pen=pg.mkPen(KEY_COLOUR, width=2), name="measured mean")
        legend = [(KEY_COLOUR, "measured mean")]
        if formula is not None:
            p.plot(offsets, formula, pen=pg.mkPen(QUERY_COLOUR, width=1, style=pg.QtCore.Qt.PenStyle.DashLine),
                   name="Σ cos(wᵢ (t − s))")
            legend.append((QUERY_COLOUR, "Σ cos(wᵢ (t − s))", "dash"))
        self.profile.set_legend(legend)  # above the plot: the curves fill it from side to side

    def show_error(self, per_pos):
        p = self.error_plot.getPlotItem()
        p.clear()
        vals = np.maximum(np.asarray(per_pos, dtype=float), 1e-18)  # (n,) zero errors drawn at the floor
        p.plot(np.arange(vals.shape[0]), vals, pen=None, symbol="o", symbolSize=4, symbolBrush=KEY_COLOUR,
               symbolPen=None)

    def show_wavelengths(self, lam, label_dims: bool):
        p = self.wavelengths.getPlotItem()
        p.clear()
        x = np.arange(lam.shape[0])
        p.plot(x, lam, pen=pg.mkPen(KEY_COLOUR, width=1.5), symbol="o", symbolSize=4, symbolBrush=KEY_COLOUR,
               symbolPen=None)
        p.getAxis("bottom").setLabel("dimension" if label_dims else "pair i")  # short: the axis is 190 px wide
        self.wavelengths.set_title("wavelength per dimension" if label_dims
                                   else "wavelength per rotated pair (dimensions 2i, 2i+1)")


class PositionalTab(DiagnosticTab):
    """Sinusoidal and RoPE properties measured for chosen sizes."""

    title = "Positional encodings"
    state_fields = ()

    def __init__(self, ctx, parent=None):
        super().__init__(ctx, parent)
        self.positions = QSpinBox(self)
        self.positions.setRange(2, MAX_POSITIONS)
        self.positions.setValue(DEFAULT_POSITIONS)
        self.d_model = QSpinBox(self)
        self.d_model.setRange(1, MAX_DIM)
        self.hs = QSpinBox(self)
        self.hs.setRange(2, MAX_DIM)
        self.hs.setSingleStep(2)
        self.base = QDoubleSpinBox(self)
        self.base.setRange(1.01, 1e9)
        self.base.setDecimals(2)
        self.k = QSpinBox(self)
        self.k.setRange(-MAX_POSITIONS + 1, MAX_POSITIONS - 1)
        self.k.setValue(1)
        self.from_session = QPushButton("Session settings", self)
        self.from_session.setToolTip("Set d_model, head size and base back to the session's")
        self.busy = QLabel(" ", self)
        self.busy.setWordWrap(True)  # a long result line wraps instead of widening the window
        bar = flow_row([labelled(text, w, self) for text, w in (
            ("&positions", self.positions), ("&d_model", self.d_model), ("RoPE &head size", self.hs),
            ("&base", self.base), ("shift &k", self.k))] + [self.from_session])
        self.pages = keep_tab_texts_whole(QTabWidget(self))
        self.sin_page = _Page(self, "PE[pos, dim]", "PE(t)·PE(s)")
        self.rope_page = _Page(self, "RoPE of (1, 0, 1, 0, …)", "rope(q, t)·rope(k, s)")
        self.pages.addTab(self.sin_page, "Sinusoidal")
        self.pages.addTab(self.rope_page, "RoPE")
        self.outer.addLayout(bar)
        self.outer.addWidget(self.busy)
        self.outer.addWidget(self.pages, 1)
        self.outer.addWidget(self.status)

        self.sin = None  # last SinusoidalStudy drawn
        self.rope = None  # last RopeStudy drawn (or the reason it could not run)
        self.job = LatestJob("attnviz-positional", self, memory_message=STUDY_MEMORY_MESSAGE)
        self.job.done.connect(self._on_studies)
        self.job.failed.connect(lambda _jid, msg: self.busy.setText(msg))
        self._load_session(ctx.session.state)
        for w in (self.positions, self.d_model, self.hs, self.k):
            w.valueChanged.connect(lambda *_: self.run())
        self.base.valueChanged.connect(lambda *_: self.run())
        self.from_session.clicked.connect(lambda: (self._load_session(self.ctx.session.state), self.run()))
        for name in ("model", "positional"):
            connect_event(self, getattr(ctx.session.events, name), self._on_session_settings)

    def _load_session(self, state):
        widgets = (self.d_model, self.hs, self.base, self.positions)
        for w in widgets:
            w.blockSignals(True)
        self.d_model.setValue(min(state.model.d_model, MAX_DIM))
        hs = state.model.head_size
        self.hs.setValue(min(hs + (hs % 2), MAX_DIM))
        self.base.setValue(float(state.positional.base))
        for w in widgets:
            w.blockSignals(False)
        kind = state.positional.kind
        self.status.setText(f"the session uses positional encoding {kind!r}"
                            + (f" with base {state.positional.base:g}" if kind in ("sinusoidal", "rope") else ""))

    def _on_session_settings(self, *_):
        self._load_session(self.ctx.session.state)
        self.invalidate()

    def run(self) -> int:
        """Start both studies with the current settings."""
        T = self.positions.value()
        k = self.k.value()
        if abs(k) >= T:
            self.busy.setText(f"shift k = {k} needs |k| < positions = {T}")
            return -1
        self.busy.setText("computing…")
        return self.job.submit(run_studies, T, self.d_model.value(), self.hs.value(), self.base.value(), k)

    def _on_response_changed(self, _response):
        pass  # the studies depend on the settings above, not on the computed attention

    def refresh(self):
        self._stale = False
        self.run()

    def redraw(self, resp, state):  # pragma: no cover - refresh is overridden
        self.run()

    def _on_studies(self, _jid, result):
        sin, rope, rope_err = result
        self.sin = sin
        self.busy.setText(f"computed in {self.job.last_seconds * 1000:.0f} ms")
        self._draw_sinusoidal(sin)
        if isinstance(rope, str):
            self.rope = None
            self.rope_page.error.setText(f"RoPE: {rope}")
        else:
            self.rope = rope
            self._draw_rope(rope, rope_err)

    def _draw_sinusoidal(self, s):
        p = self.sin_page
        T, d = s.pe.shape
        p.table.set_matrix(s.pe, title=f"PE[pos, dim]  ({T} positions x d_model {d})", value_label="PE",
                           row_labels=[str(t) for t in range(T)], col_labels=[str(c) for c in range(d)])
        p.gram.set_matrix(s.gram, title="PE(t)·PE(s)", value_label="dot",
                          row_labels=[str(t) for t in range(T)], col_labels=[str(t) for t in range(T)])
        p.show_profile(s.offsets, s.profile, s.profile_formula)
        p.dependence.setText(f"largest spread along a diagonal: {fmt_sci(s.shift_deviation)} "
                             "(0 = depends on t − s only)")
        m = s.rotation.shape[0]
        p.rotation.set_matrix(s.rotation, title=f"M_k for k = {s.k}  ({m} x {m}, block-diagonal rotations)",
                              value_label="entry", row_labels=[str(c) for c in range(m)],
                              col_labels=[str(c) for c in range(m)])
        p.show_error(s.rotation_error_per_pos)
        p.error.setText(f"max |PE(pos + {s.k}) − M_{s.k} PE(pos)| = {fmt_sci(s.rotation_error)} "
                        f"over {s.rotation_error_per_pos.shape[0]} positions")
        p.show_wavelengths(s.wavelength_per_dim, True)

    def _draw_rope(self, r, err_per_pos):
        p = self.rope_page
        T, hs = r.table.shape
        p.table.set_matrix(r.table, title=f"RoPE of (1, 0, 1, 0, …)  ({T} positions x hs {hs})", value_label="value",
                           row_labels=[str(t) for t in range(T)], col_labels=[str(c) for c in range(hs)])
        p.gram.set_matrix(r.scores, title="rope(q, t)·rope(k, s), same q and k at every position",
                          value_label="score", row_labels=[str(t) for t in range(T)],
                          col_labels=[str(t) for t in range(T)])
        p.show_profile(r.offsets, r.profile)
        p.dependence.setText(f"largest spread along a diagonal: {fmt_sci(r.relative_error)} "
                             "(0 = depends on t − s only)")
        p.rotation.set_matrix(r.rotation, title=f"R_k for k = {r.k}  ({hs} x {hs})", value_label="entry",
                              row_labels=[str(c) for c in range(hs)], col_labels=[str(c) for c in range(hs)])
        p.show_error(err_per_pos)
        p.error_plot.set_title("error of R_k per position")
        p.error.setText(f"max |rope(q, pos + {r.k}) − R_{r.k} rope(q, pos)| = {fmt_sci(r.rotation_error)}")
        p.show_wavelengths(r.wavelengths, False)
