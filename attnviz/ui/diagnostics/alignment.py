"""The Cross-attention alignment tab (seed 001): the selected head's weights laid out as the article's
alignment table (query tokens as rows, key tokens as columns, shaded white to black, each row's
strongest key in bold). It works for any session up to ``MAX_CELLS`` rows and columns; the
translation demo reproduces the article's numbers.
"""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel, QSpinBox, QHBoxLayout

from attnviz.model.diagnostics.alignment import alignment_table
from attnviz.ui.diagnostics.common import cell, fit_height, fmt, new_table, selected_head, shade
from attnviz.ui.diagnostics.tab import DiagnosticTab

MAX_CELLS = 40  # rows and columns shown at most: beyond that the heatmap is the better view


class AlignmentTab(DiagnosticTab):
    """Seed 001's alignment matrix for the current session and head."""

    title = "Alignment"

    def __init__(self, ctx, parent=None):
        super().__init__(ctx, parent)
        self.decimals = QSpinBox(self)
        self.decimals.setRange(1, 6)
        self.decimals.setValue(2)
        self.decimals.setPrefix("decimals ")
        self.decimals.valueChanged.connect(lambda *_: self.refresh())
        self.heading = QLabel(" ", self)
        self.heading.setWordWrap(True)
        bar = QHBoxLayout()
        bar.addWidget(self.heading, 1)
        bar.addWidget(self.decimals)
        self.table = new_table()
        self.table.horizontalHeader().setDefaultSectionSize(64)
        self.table.verticalHeader().setDefaultSectionSize(30)
        self.lines = QLabel(" ", self)
        self.lines.setWordWrap(True)
        self.lines.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.outer.addLayout(bar)
        self.outer.addWidget(self.table)
        self.outer.addWidget(self.lines)
        self.outer.addStretch(1)
        self.outer.addWidget(self.status)
        self.aligned = None  # the AlignmentTable drawn last

    def redraw(self, resp, state):
        self.table.clear()
        self.table.setRowCount(0)
        self.table.setColumnCount(0)
        self.lines.setText(" ")
        if resp is None or resp.q is None:
            return
        if resp.weights is None:
            self.heading.setText("the weight matrix is too large to hold; use the heatmap's overview")
            return
        h, note = selected_head(state, resp.q.shape[0])
        nq, nk = min(resp.Tq, MAX_CELLS), min(resp.Tk, MAX_CELLS)
        t = alignment_table(resp.weights[h, :nq, :nk], resp.query_labels[:nq], resp.key_labels[:nk])
        self.aligned = t
        kind = "cross-attention" if resp.cross else "self-attention"
        cut = f" (first {nq} x {nk} of {resp.Tq} x {resp.Tk})" if (nq, nk) != (resp.Tq, resp.Tk) else ""
        self.heading.setText(f"Alignment matrix, {kind}, head {h}{cut}: row = query token, column = key "
                             "token, the weight the query puts on the key." + (f"  {note}" if note else ""))
        d = self.decimals.value()
        self.table.setRowCount(nq)
        self.table.setColumnCount(nk)
        self.table.setHorizontalHeaderLabels(list(t.key_labels))
        self.table.setVerticalHeaderLabels(list(t.query_labels))
        for i, row in enumerate(t.rows):
            for j, w in enumerate(row.weights):
                it = cell(f"{w:.{d}f}", tooltip=f"{row.label} → {t.key_labels[j]}: {w!r}",
                          bold=j == row.best, align=Qt.AlignmentFlag.AlignCenter)
                shade(it, w)
                self.table.setItem(i, j, it)
        fit_height(self.table, 12)  # longer sequences scroll: the tab never forces the window larger
        self.table.setMaximumWidth(min(1200, self.table.verticalHeader().width()
                                       + nk * self.table.horizontalHeader().defaultSectionSize() + 4))
        self.lines.setText("\n".join(
            f"{r.label} → {r.best_label} ({fmt(100 * r.best_weight, 0)}% of its attention)" if r.best >= 0
            else f"{r.label} → nothing (fully masked)" for r in t.rows[:12]))
