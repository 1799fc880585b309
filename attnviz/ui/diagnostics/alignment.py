"""The Cross-attention alignment tab (seed 001): the selected head's weights laid out as the article's
alignment table (query tokens as rows, key tokens as columns, shaded white to black, each row's
strongest key in bold). It works for any session up to ``MAX_CELLS`` rows and columns; the
translation demo reproduces the article's numbers.

Once an encoder-decoder has run in the Pretrained workspace, the tab also offers that model's real
cross-attention (:class:`~attnviz.ui.diagnostics.model_alignment.ModelAlignmentView`): the choice above the
view switches between the session's table and the model's map.
"""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLabel, QSpinBox, QStackedWidget, QVBoxLayout, QWidget

from attnviz.model.diagnostics.alignment import alignment_table
from attnviz.ui.diagnostics.common import cell, connect_event, fit_height, fmt, new_table, selected_head, shade
from attnviz.ui.diagnostics.model_alignment import ModelAlignmentView, feed_for
from attnviz.ui.diagnostics.tab import DiagnosticTab

MAX_CELLS = 40  # rows and columns shown at most: beyond that the heatmap is the better view
SESSION, MODEL = "session", "model"  # what the tab aligns: the session's selected head, or a real model's


class AlignmentTab(DiagnosticTab):
    """Seed 001's alignment matrix for the current session and head."""

    title = "Alignment"

    def __init__(self, ctx, parent=None):
        super().__init__(ctx, parent)
        self.source = QComboBox(self)
        self.source.setToolTip("align the session's selected head, or the cross-attention of the translation "
                               "model last run in the Pretrained workspace")
        self.source.addItem("the session's selected head", SESSION)
        self.source.addItem("a translation model (run one in Pretrained)", MODEL)
        self.source.model().item(1).setEnabled(False)
        pick = QHBoxLayout()
        pick.addWidget(QLabel("align", self))
        pick.addWidget(self.source)
        pick.addStretch(1)
        self.outer.addLayout(pick)
        self.toy = QWidget(self)
        toy = QVBoxLayout(self.toy)
        toy.setContentsMargins(0, 0, 0, 0)
        self.model_view = ModelAlignmentView(self)
        self.pages = QStackedWidget(self)
        self.pages.addWidget(self.toy)
        self.pages.addWidget(self.model_view)
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
        toy.addLayout(bar)
        toy.addWidget(self.table)
        toy.addWidget(self.lines)
        toy.addStretch(1)
        toy.addWidget(self.status)
        self.outer.addWidget(self.pages, 1)
        self.aligned = None  # the AlignmentTable drawn last
        self.feed = feed_for(ctx)
        self.feed.changed.connect(self._on_model_run)
        self.feed.failed.connect(self.model_view.show_failure)
        self.model_view.rerun.connect(self.feed.request_rerun)
        self.source.currentIndexChanged.connect(self._on_source_chosen)
        connect_event(self, ctx.session.events.view, lambda view: self.model_view.set_colormap(view.colormap))
        self.model_view.set_colormap(ctx.session.state.view.colormap)
        if self.feed.outcome is not None:
            self._on_model_run(self.feed.outcome)

    # -- the real model ------------------------------------------------------------------------
    def _on_model_run(self, outcome) -> None:
        item = self.source.model().item(1)
        item.setEnabled(outcome is not None)
        self.source.setItemText(1, f"{outcome.model}: cross-attention" if outcome is not None
                                else "a translation model (run one in Pretrained)")
        self.model_view.set_outcome(outcome)
        if outcome is None and self.showing_model():
            self.show_session()

    def showing_model(self) -> bool:
        return self.source.currentData() == MODEL

    def show_model(self) -> bool:
        """Show the translation model's alignment; False when none has run."""
        if self.feed.outcome is None:
            return False
        self.source.setCurrentIndex(1)
        return True

    def show_session(self) -> None:
        self.source.setCurrentIndex(0)

    def _on_source_chosen(self, _index: int) -> None:
        self.pages.setCurrentWidget(self.model_view if self.showing_model() else self.toy)

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
