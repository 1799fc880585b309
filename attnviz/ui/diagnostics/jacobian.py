"""The softmax-Jacobian tab (seed 000): why scores are divided by sqrt(d_k). Left, the seed's
simulation: unscaled logits saturate the softmax and its Jacobian norm collapses as d_k grows, scaled
ones stay flat (it takes ~0.1 s, so it runs off the GUI thread, and depends only on its own settings).
Right, the same effect on the selected head's own dot products, row by row.
"""

from __future__ import annotations

import math

import numpy as np
import pyqtgraph as pg
from PySide6.QtWidgets import QLabel, QPushButton, QSpinBox, QSplitter

from PySide6.QtCore import Qt

from attnviz.model.diagnostics.jacobian import jacobian_norm_study, row_jacobian_norms
from attnviz.ui.diagnostics.common import KEY_COLOUR, QUERY_COLOUR, fmt, head_mask, make_plot, selected_head
from attnviz.ui.diagnostics.tab import STUDY_MEMORY_MESSAGE, DiagnosticTab
from attnviz.ui.latest_job import LatestJob
from attnviz.ui.widgets.label_ticks import clear_label_ticks, label_ticks
from attnviz.ui.widgets.flow_layout import flow_row

UNSCALED_COLOUR = "#d62728"  # the seed's red scatter
SCALED_COLOUR = KEY_COLOUR
MAX_ROWS = 512  # query rows in the per-row plot at most
BAR_LIMIT = 64  # bars (with token ticks) up to this many rows, a line beyond


class JacobianTab(DiagnosticTab):
    """The d_k study (background) and the per-row norms of the current head."""

    title = "Softmax Jacobian"

    def __init__(self, ctx, parent=None):
        super().__init__(ctx, parent)
        self.samples = QSpinBox(self)
        self.samples.setRange(10, 20000)
        self.samples.setValue(1000)
        self.samples.setPrefix("draws ")
        self.size = QSpinBox(self)
        self.size.setRange(2, 4096)
        self.size.setValue(50)
        self.size.setPrefix("keys ")
        self.seed = QSpinBox(self)
        self.seed.setRange(0, 1_000_000)
        self.seed.setPrefix("seed ")
        self.run_button = QPushButton("Run study", self)
        self.busy = QLabel(" ", self)
        self.busy.setWordWrap(True)  # under the controls: a long line wraps instead of widening the tab
        bar = flow_row((QLabel("Simulation:", self), self.samples, self.size, self.seed, self.run_button))

        self.study_plot = make_plot("mean ‖J‖_F of softmax(z) against d_k", "d_k", "mean Frobenius norm",
                                    log_x=True, log_y=True)
        self.unscaled_curve = self.study_plot.plot([], [], pen=pg.mkPen(UNSCALED_COLOUR, width=1.5),
                                                   symbol="o", symbolBrush=UNSCALED_COLOUR, symbolPen=None,
                                                   symbolSize=6, name="unscaled  z ~ N(0, d_k)")
        self.scaled_curve = self.study_plot.plot([], [], pen=pg.mkPen(SCALED_COLOUR, width=1.5), symbol="s",
                                                 symbolBrush=SCALED_COLOUR, symbolPen=None, symbolSize=6,
                                                 name="scaled  z / √d_k")
        self.study_plot.set_legend([(UNSCALED_COLOUR, "unscaled z ~ N(0, d_k)"), (SCALED_COLOUR, "scaled z / √d_k")])
        self.row_plot = make_plot("‖J‖_F per query row (selected head)", "query", "Frobenius norm")
        self.row_plot.getPlotItem().getAxis("bottom").enableAutoSIPrefix(False)
        self.row_items = []
        split = QSplitter(Qt.Orientation.Horizontal, self)
        split.addWidget(self.study_plot)
        split.addWidget(self.row_plot)
        self.summary = QLabel(" ", self)
        self.summary.setWordWrap(True)
        self.outer.addLayout(bar)
        self.outer.addWidget(self.busy)
        self.outer.addWidget(split, 1)
        self.outer.addWidget(self.summary)
        self.outer.addWidget(self.status)

        self.study = None  # the last JacobianStudy drawn
        self.row_norms = None  # (unscaled (rows,), scaled (rows,)) of the last redraw
        self._line_rows = None  # rows of the lines on the per-row plot (None: bars or nothing)
        self._row_title = None  # the per-row plot's title as set
        self.job = LatestJob("attnviz-jacobian", self, memory_message=STUDY_MEMORY_MESSAGE)
        self.job.done.connect(self._on_study)
        self.job.failed.connect(lambda _jid, msg: self.busy.setText(msg))
        self.run_button.clicked.connect(self.run_study)

    def run_study(self) -> int:
        """Start the d_k simulation with the current settings off the GUI thread."""
        self.busy.setText("running…")
        self.run_button.setEnabled(False)
        return self.job.submit(jacobian_norm_study, n_samples=self.samples.value(), size=self.size.value(),
                               seed=self.seed.value())

    def _on_study(self, _jid, study):
        self.study = study
        self.run_button.setEnabled(True)
        self.busy.setText(f"{study.n_samples} draws of {study.size} logits per d_k, {self.job.last_seconds:.2f} s")
        self.unscaled_curve.setData(study.d_k, study.unscaled_mean)
        self.scaled_curve.setData(study.d_k, study.scaled_mean)
        u, s = study.unscaled_mean, study.scaled_mean
        self.summary.setText(
            f"From d_k = 1 to {study.d_k[-1]:.0f}: unscaled mean norm {fmt(u[0], 3)} → {fmt(u[-1], 3)} "
            f"(peak {fmt(u.max(), 3)}), scaled stays within {fmt(s.min(), 3)}–{fmt(s.max(), 3)}. "
            "A small Jacobian passes little gradient back through the softmax.")

    def refresh(self):
        super().refresh()
        if self.study is None and not self.job.busy:
            self.run_study()

    def work_size(self, resp, state) -> int:
        return 0 if resp is None or resp.q is None else min(resp.Tq, MAX_ROWS) * resp.Tk * 2

    def compute(self, resp, state):
        """(head, note, rows, d_k, unscaled norms, scaled norms) of the selected head's first rows (no Qt)."""
        if resp is None or resp.q is None or resp.Tq == 0 or resp.Tk == 0:
            return None
        h, note = selected_head(state, resp.q.shape[0])
        rows = min(resp.Tq, MAX_ROWS)
        q, k = resp.q[h, :rows], resp.k[h]  # (rows, hs), (Tk, hs)
        dots = q @ k.T  # (rows, Tk)
        mask = head_mask(resp, h, slice(0, rows))  # (rows, Tk)
        hs = q.shape[1]
        return (h, note, rows, hs, row_jacobian_norms(dots, mask, 1.0),  # (rows,)
                row_jacobian_norms(dots, mask, 1.0 / math.sqrt(hs)))  # (rows,)

    def present(self, numbers, resp, state):
        """Hand the norms of ``numbers`` to the plot: bars are made anew, lines of as many rows as the last
        ones keep their items and only take the new arrays (an edit of a long input makes no items)."""
        plot = self.row_plot.getPlotItem()
        if numbers is None:
            for it in self.row_items:
                plot.removeItem(it)
            self.row_items, self._line_rows = [], None
            self.row_norms = None
            return
        h, note, rows, hs, un, sc = numbers
        self.row_norms = (un, sc)
        x = np.arange(rows, dtype=float)  # (rows,)
        if rows <= BAR_LIMIT or rows != self._line_rows:
            for it in self.row_items:
                plot.removeItem(it)
            self.row_items, self._line_rows = [], None
        if rows <= BAR_LIMIT:
            w = 0.38
            for vals, off, colour, name in ((un, -w / 2, UNSCALED_COLOUR, "unscaled q·k"),
                                            (sc, w / 2, SCALED_COLOUR, f"scaled q·k / √{hs}")):
                bars = pg.BarGraphItem(x=x + off, height=vals, width=w, brush=colour, pen=None, name=name)
                plot.addItem(bars)
                self.row_items.append(bars)
            label_ticks(plot, [resp.query_labels[i] for i in range(rows)])  # as many as fit, never overlapping
            self.row_plot.set_legend([(UNSCALED_COLOUR, "unscaled q·k", "bar"),
                                      (SCALED_COLOUR, f"scaled q·k / √{hs}", "bar")])
        elif self._line_rows == rows:
            for item, vals in zip(self.row_items, (un, sc)):
                item.setData(x, vals)
        else:
            for vals, colour, name in ((un, UNSCALED_COLOUR, "unscaled q·k"), (sc, SCALED_COLOUR, "scaled")):
                self.row_items.append(plot.plot(x, vals, pen=pg.mkPen(colour, width=1), name=name))
            self._line_rows = rows
            clear_label_ticks(plot)
            self.row_plot.set_legend([(UNSCALED_COLOUR, "unscaled q·k"), (SCALED_COLOUR, f"scaled q·k / √{hs}")])
        title = f"‖J‖_F per query row, head {h} (d_k = {hs})" + (f" — {note}" if note else "")
        if title != self._row_title:  # the same title again would still lay the plot out again
            self.row_plot.set_title(title)
            self._row_title = title
        plot.enableAutoRange()
        self.status.setText(f"mean over rows: unscaled {fmt(un.mean(), 3)}, scaled {fmt(sc.mean(), 3)}"
                            + (f" (first {rows} of {resp.Tq} rows)" if resp.Tq > rows else ""))
