"""Token labels on a chart's axis that never overlap: :func:`label_ticks` names every index of a bar
chart (a query per bar) where the labels fit, and every second, fourth... one where they do not,
chosen again whenever the plot is resized or zoomed, from the labels' own widths in the axis font."""

from __future__ import annotations

import math
from typing import Sequence

from PySide6.QtCore import QObject
from PySide6.QtGui import QFont, QFontMetricsF

from attnviz.model.display.cell_geometry import AXIS_LABEL_CHARS, compact_label

GAP_PX = 10  # between two neighbouring labels


class LabelTicks(QObject):
    """The labels of one axis of one plot item (see :func:`label_ticks`)."""

    def __init__(self, plot_item, side: str = "bottom"):
        super().__init__(plot_item)
        self.axis = plot_item.getAxis(side)
        self.view = plot_item.getViewBox()
        self.labels: list[str] = []
        self._widths: list[float] = []
        self.view.sigXRangeChanged.connect(self.update)
        self.view.sigResized.connect(self.update)

    def set_labels(self, labels: Sequence[str], max_chars: int = AXIS_LABEL_CHARS) -> None:
        self.labels = [compact_label(s, max_chars) for s in labels]  # "fast actio…3": the index stays
        font = self.axis.style.get("tickFont") or QFont()
        metrics = QFontMetricsF(font)
        self._widths = [metrics.horizontalAdvance(s) for s in self.labels]
        self.update()

    def shown(self) -> list[tuple[float, str]]:
        """The (index, label) ticks on the axis now."""
        ticks = self.axis._tickLevels
        return list(ticks[0]) if ticks else []

    def update(self, *_args) -> None:
        n = len(self.labels)
        if n == 0:
            self.axis.setTicks(None)
            return
        (x0, x1), _ = self.view.viewRange()
        pixels = max(1.0, float(self.view.width()))
        per_index = pixels / max(x1 - x0, 1e-9)  # pixels between two neighbouring indices
        lo, hi = max(0, math.ceil(x0)), min(n - 1, math.floor(x1))
        widest = max(self._widths[lo:hi + 1], default=max(self._widths))
        step = max(1, math.ceil((widest + GAP_PX) / per_index))
        self.axis.setTicks([[(float(i), self.labels[i]) for i in range(0, n, step)], []])


def label_ticks(plot_item, labels: Sequence[str], side: str = "bottom",
                max_chars: int = AXIS_LABEL_CHARS) -> LabelTicks:
    """Name the indices 0..n-1 of ``plot_item``'s ``side`` axis with ``labels``, as many as fit without
    overlapping at the plot's width and zoom (kept up to date); returns the keeper."""
    keeper = getattr(plot_item, "_label_ticks", None)
    if keeper is None:
        keeper = plot_item._label_ticks = LabelTicks(plot_item, side)
    keeper.set_labels(labels, max_chars)
    return keeper


def label_ticks_of(plot_item) -> LabelTicks | None:
    """The keeper label_ticks() gave ``plot_item``, or None when it never named that plot's indices."""
    return getattr(plot_item, "_label_ticks", None)


def clear_label_ticks(plot_item) -> None:
    """Back to pyqtgraph's numeric ticks (a line chart of many rows)."""
    keeper = getattr(plot_item, "_label_ticks", None)
    if keeper is not None:
        keeper.labels, keeper._widths = [], []
    plot_item.getAxis("bottom").setTicks(None)
