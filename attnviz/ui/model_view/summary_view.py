"""HeadSummaryView: one per-head statistic of a checkpoint as a layers x heads heat grid.

A combo chooses which statistic colours the grid (entropy, attention to special tokens, to self, to
the previous token); hovering a cell reads its value; clicking one selects that layer's head
(``head_clicked(layer, head)``); the line below lists all four statistics of the selected head.
"""

from __future__ import annotations

import numpy as np
from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLabel, QVBoxLayout, QWidget

from attnviz.checkpoints import HeadSummaries
from attnviz.checkpoints.views import SUMMARY_METRICS, available_metrics, summary_line, summary_matrix
from attnviz.ui.widgets.heatmap import AttentionHeatmap


class HeadSummaryView(QWidget):
    """Layers x heads grid of the chosen head summary."""

    head_clicked = Signal(int, int)  # (layer, head)

    def __init__(self, parent=None):
        super().__init__(parent)
        self.metric_combo = QComboBox(self)
        for key, (_field, label, _short) in SUMMARY_METRICS.items():
            self.metric_combo.addItem(label, key)
        self.metric_combo.setToolTip("which per-head statistic colours the grid (averaged over query tokens)")
        # long statistic names are cut in the closed combo rather than widening the panel
        self.metric_combo.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        self.metric_combo.setMinimumContentsLength(14)
        self.heatmap = AttentionHeatmap(self)
        self.heatmap.setMinimumHeight(140)
        self.line = QLabel(" ", self)
        self.line.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.line.setWordWrap(True)
        bar = QHBoxLayout()
        bar.setContentsMargins(6, 2, 6, 0)
        bar.addWidget(QLabel("head summary", self))
        bar.addWidget(self.metric_combo, 1)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(2)
        layout.addLayout(bar)
        layout.addWidget(self.heatmap, 1)
        layout.addWidget(self.line)
        self.summaries: HeadSummaries | None = None
        self.selected: tuple[int, int] | None = None
        self.metric_combo.currentIndexChanged.connect(lambda _i: self._draw())
        self.heatmap.cell_clicked.connect(self.head_clicked.emit)

    def statistic(self) -> str:
        return self.metric_combo.currentData()

    def set_metric(self, metric: str) -> None:
        """Colour the grid by ``metric`` (a key of SUMMARY_METRICS)."""
        index = self.metric_combo.findData(metric)
        if index < 0:
            raise ValueError(f"unknown head summary {metric!r}; choose one of {', '.join(SUMMARY_METRICS)}")
        self.metric_combo.setCurrentIndex(index)

    def shown_matrix(self) -> np.ndarray | None:
        """(L, nh) values drawn, or None."""
        return None if self.summaries is None else summary_matrix(self.summaries, self.statistic())

    def set_summaries(self, summaries: HeadSummaries | None) -> None:
        self.summaries = summaries
        if summaries is not None:
            self._offer(available_metrics(summaries))
        if summaries is None:
            self.heatmap.clear()
            self.line.setText(" ")
            return
        self._draw()

    def _offer(self, keys: list[str]) -> None:
        """Offer only the metrics these summaries have (attention to the first token and distance: decoders)."""
        have = [self.metric_combo.itemData(i) for i in range(self.metric_combo.count())]
        if have == keys:
            return
        keep = self.statistic()
        self.metric_combo.blockSignals(True)
        self.metric_combo.clear()
        for key in keys:
            self.metric_combo.addItem(SUMMARY_METRICS[key][1], key)
        self.metric_combo.setCurrentIndex(max(0, self.metric_combo.findData(keep)))
        self.metric_combo.blockSignals(False)

    def set_selected(self, layer: int, head: int) -> None:
        self.selected = (int(layer), int(head))
        self.heatmap.set_selected_row(int(layer))
        self._update_line()

    def _draw(self) -> None:
        if self.summaries is None:
            return
        m = self.shown_matrix()  # (L, nh)
        L, nh = m.shape
        _field, label, short = SUMMARY_METRICS[self.statistic()]
        self.heatmap.set_matrix(m, row_labels=[f"L{i}" for i in range(L)], col_labels=[f"h{j}" for j in range(nh)],
                                title=f"{label} · rows layers, columns heads", value_label=short)
        if self.selected is not None and self.selected[0] < L:
            self.heatmap.set_selected_row(self.selected[0])
        self._update_line()

    def _update_line(self) -> None:
        if self.summaries is None or self.selected is None:
            self.line.setText(" ")
            return
        layer, head = self.selected
        L, nh = self.summaries.entropy.shape
        if layer < L and head < nh:
            self.line.setText(summary_line(self.summaries, layer, head))
