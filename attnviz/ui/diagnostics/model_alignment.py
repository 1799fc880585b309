"""Seed 001's alignment on a real translation model: the cross-attention of the encoder-decoder last run in the
Pretrained workspace, target tokens as rows (the token each decoder step writes), source tokens as columns,
for one head or the mean of the heads ticked in a layers x heads picker, with each row's strongest source
token joined into the argmax alignment path.

The Pretrained panel hands its newest encoder-decoder run to the window's :class:`AlignmentFeed` (one per
:class:`~attnviz.ui.context.AppContext`, found with :func:`feed_for`); the Alignment tab offers it beside the
toy session's alignment and shows it when the panel's "Show alignment in Diagnostics" asks. The view's own
target field asks the panel, through the feed, to run the model again: teacher-forced on that target, or,
empty, writing its own translation.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QObject, QRect, Qt, Signal
from PySide6.QtWidgets import (QHBoxLayout, QLabel, QLineEdit, QPushButton, QSizePolicy, QTableWidget, QTableWidgetItem,
                               QVBoxLayout, QWidget)

from attnviz.model.diagnostics.alignment import alignment_table
from attnviz.ui import colormaps
from attnviz.ui.diagnostics.common import fmt
from attnviz.ui.theme import Theme, current_theme
from attnviz.ui.widgets.heatmap import AttentionHeatmap

if TYPE_CHECKING:  # the checkpoints package takes 0.3-0.6 s to import: only the view's first run needs it
    from attnviz.checkpoints.seq2seq_study import Alignment, Seq2SeqOutcome

FEED_NAME = "attnviz-alignment-feed"
MAX_LINES = 40  # "target → source" pairs listed under the map at most


class AlignmentFeed(QObject):
    """The newest encoder-decoder run of the Pretrained panel, for the Diagnostics alignment view."""

    changed = Signal(object)  # Seq2SeqOutcome (None: the model shown is no longer an encoder-decoder)
    show_requested = Signal()  # "Show alignment in Diagnostics"
    rerun_requested = Signal(str)  # run the model again on this target ("": its own translation)
    failed = Signal(str)  # the run asked for could not be made (the panel's message)

    def __init__(self, parent=None):
        super().__init__(parent)
        self.setObjectName(FEED_NAME)
        self.outcome: Seq2SeqOutcome | None = None

    def publish(self, outcome: Seq2SeqOutcome | None) -> None:
        self.outcome = outcome
        self.changed.emit(outcome)

    def request_show(self) -> None:
        self.show_requested.emit()

    def request_rerun(self, target: str) -> None:
        self.rerun_requested.emit(target)

    def report_failure(self, text: str) -> None:
        self.failed.emit(text)


def feed_for(ctx) -> AlignmentFeed:
    """The AlignmentFeed of ``ctx`` (made on first use, a child of the context so it lives as long)."""
    feed = ctx.findChild(AlignmentFeed, FEED_NAME)
    if feed is None:
        feed = AlignmentFeed(ctx)
    return feed


class WrapLabel(QLabel):
    """A word-wrapped label whose minimum height is that of its text at its width, and which asks its layout
    for no height-for-width (a layout then places its items by their heights for the width while the window's
    minimum counts one line: what follows is drawn over the rest)."""

    def __init__(self, text: str, parent=None):
        super().__init__(text, parent)
        self.setWordWrap(True)
        self.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)

    def _fit(self) -> None:
        m = self.contentsMargins()
        width = max(self.width() - m.left() - m.right(), 40)
        box = self.fontMetrics().boundingRect(QRect(0, 0, width, 100000), Qt.TextFlag.TextWordWrap, self.text())
        need = box.height() + m.top() + m.bottom() + 2
        if need != self.minimumHeight():
            self.setMinimumHeight(need)

    def hasHeightForWidth(self) -> bool:  # noqa: N802 - Qt's name
        return False  # the layout reads the height set for the current width, as it reads every other minimum

    def sizeHint(self):  # noqa: N802 - Qt's name
        hint = super().sizeHint()
        hint.setHeight(max(self.minimumHeight(), 1))
        return hint

    def minimumSizeHint(self):  # noqa: N802 - Qt's name
        hint = super().minimumSizeHint()
        hint.setHeight(max(self.minimumHeight(), 1))
        return hint

    def setText(self, text: str) -> None:  # noqa: N802 - Qt's name
        super().setText(text)
        self._fit()

    def resizeEvent(self, ev):  # noqa: N802 - Qt's name
        super().resizeEvent(ev)
        self._fit()


class HeadPicker(QTableWidget):
    """Layers x heads tick boxes: the heads whose cross-attention is averaged."""

    picked = Signal()

    def __init__(self, parent=None):
        super().__init__(parent)
        self.horizontalHeader().setDefaultSectionSize(28)  # 16 heads fit beside the buttons at 1024 x 700
        self.verticalHeader().setDefaultSectionSize(22)
        self.setSizeAdjustPolicy(QTableWidget.SizeAdjustPolicy.AdjustToContents)
        self.setSizePolicy(QSizePolicy.Policy.Maximum, QSizePolicy.Policy.Maximum)
        self.setToolTip("tick the heads whose cross-attention is averaged (one tick: that head alone)")
        self.itemChanged.connect(lambda _it: None if self.signalsBlocked() else self.picked.emit())

    def set_shape(self, L: int, nh: int) -> None:
        """L x nh boxes, every head ticked (the shape unchanged: the ticks are kept)."""
        if (self.rowCount(), self.columnCount()) == (L, nh):
            return
        self.blockSignals(True)
        self.clear()
        self.setRowCount(L)
        self.setColumnCount(nh)
        self.setVerticalHeaderLabels([f"L{i}" for i in range(L)])
        self.setHorizontalHeaderLabels([f"h{j}" for j in range(nh)])
        for i in range(L):
            for j in range(nh):
                it = QTableWidgetItem("")
                it.setFlags(Qt.ItemFlag.ItemIsUserCheckable | Qt.ItemFlag.ItemIsEnabled)
                it.setCheckState(Qt.CheckState.Checked)
                it.setToolTip(f"layer {i} · head {j}")
                self.setItem(i, j, it)
        self.blockSignals(False)
        self.setFixedHeight(self.horizontalHeader().sizeHint().height() + 22 * min(L, 8) + 2 * self.frameWidth())

    def heads(self) -> list[tuple[int, int]]:
        return [(i, j) for i in range(self.rowCount()) for j in range(self.columnCount())
                if self.item(i, j).checkState() == Qt.CheckState.Checked]

    def set_heads(self, heads) -> None:
        """Tick exactly ``heads`` ((layer, head) pairs); one ``picked`` follows."""
        want = {(int(a), int(b)) for a, b in heads}
        self.blockSignals(True)
        for i in range(self.rowCount()):
            for j in range(self.columnCount()):
                self.item(i, j).setCheckState(Qt.CheckState.Checked if (i, j) in want else Qt.CheckState.Unchecked)
        self.blockSignals(False)
        self.picked.emit()


class ModelAlignmentView(QWidget):
    """The loaded translation model's alignment: head picker, map with its argmax path, one line per row."""

    rerun = Signal(str)  # the target typed here ("": the model's own translation)

    def __init__(self, parent=None):
        super().__init__(parent)
        self.heading = WrapLabel("Run an encoder-decoder (MarianMT, BART, mBART, T5) in the Pretrained workspace: "
                                 "its cross-attention is aligned here.", self)
        self.picker = HeadPicker(self)
        self.all_button = QPushButton("every head", self)
        self.all_button.setToolTip("the mean of every head of every layer")
        self.last_button = QPushButton("last layer", self)
        self.last_button.setToolTip("the mean of the last decoder layer's heads")
        self.picked_line = WrapLabel(" ", self)
        buttons = QVBoxLayout()
        buttons.addWidget(QLabel("heads averaged", self))
        buttons.addWidget(self.all_button)
        buttons.addWidget(self.last_button)
        buttons.addStretch(1)
        self.target_edit = QLineEdit(self)
        self.target_edit.setPlaceholderText("empty: the model's own translation")
        self.target_edit.setToolTip("run the model again in the Pretrained workspace: teacher-forced on this target, "
                                    "or, left empty, writing its own greedy translation (Enter runs)")
        self.run_button = QPushButton("Align", self)
        self.run_button.setToolTip(self.target_edit.toolTip())
        self.run_state = WrapLabel("", self)  # a run asked for: running, or why it failed
        self.run_state.setVisible(False)
        row = QHBoxLayout()
        row.addWidget(QLabel("target", self))
        row.addWidget(self.target_edit, 1)
        row.addWidget(self.run_button)
        top = QHBoxLayout()
        top.addWidget(self.picker)
        top.addLayout(buttons)
        top.addWidget(self.picked_line, 1)
        self.map = AttentionHeatmap(self)
        self.map.setMinimumHeight(320)
        self.path_item = pg.PlotDataItem(symbol="o", symbolSize=7)
        self.path_item.setZValue(50)
        self.map.frame.view.addItem(self.path_item)
        self.lines = WrapLabel(" ", self)
        self.lines.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(self.heading)
        lay.addLayout(row)
        lay.addWidget(self.run_state)
        lay.addLayout(top)
        lay.addWidget(self.map, 1)
        lay.addWidget(self.lines)
        self.outcome: Seq2SeqOutcome | None = None
        self.aligned: Alignment | None = None
        self.picker.picked.connect(self._draw)
        self.run_button.clicked.connect(self._ask_rerun)
        self.target_edit.returnPressed.connect(self._ask_rerun)
        self.all_button.clicked.connect(lambda: self.picker.set_heads(self._every_head()))
        self.last_button.clicked.connect(lambda: self.picker.set_heads(self._last_layer()))
        self.on_theme_changed(current_theme())

    def _ask_rerun(self) -> None:
        if self.outcome is None:
            return
        self._say("running in the Pretrained workspace…")
        self.rerun.emit(self.target_edit.text())

    def show_failure(self, text: str) -> None:
        """The run asked for failed: say why under the field (the alignment shown stays)."""
        self._say(text)

    def _say(self, text: str) -> None:
        self.run_state.setText(text)
        self.run_state.setVisible(bool(text))

    def _every_head(self):
        return [(i, j) for i in range(self.picker.rowCount()) for j in range(self.picker.columnCount())]

    def _last_layer(self):
        L = self.picker.rowCount()
        return [(L - 1, j) for j in range(self.picker.columnCount())] if L else []

    def set_colormap(self, name: str) -> None:
        if name in colormaps.NAMES:
            self.map.set_colormap(name)

    def set_outcome(self, outcome: Seq2SeqOutcome | None) -> None:
        """Align ``outcome``'s cross-attention (None: nothing to align)."""
        self.outcome = outcome
        if outcome is None:
            self.aligned = None
            self.map.clear("no encoder-decoder run")
            self.path_item.setData([], [])
            self.lines.setText(" ")
            return
        self._say("")
        self.target_edit.setText("" if outcome.generated else outcome.text)
        L, nh = outcome.result.cross_attentions.shape[:2]
        self.picker.set_shape(L, nh)
        self._draw()

    def set_heads(self, heads) -> None:
        """Average ``heads`` ((layer, head) pairs) and redraw."""
        self.picker.set_heads(heads)

    def _draw(self) -> None:
        out = self.outcome
        if out is None:
            return
        r = out.result
        how = ("the model's own greedy translation" if out.generated else "teacher forcing on the given target")
        self.heading.setText(f"{r.model}: cross-attention alignment, {how}. Rows: the target token each decoder "
                             f"step writes; columns: the source tokens; ● each row's strongest source token. "
                             f"{out.describe()}")
        from attnviz.checkpoints.seq2seq_study import alignment  # imported with the first run to align

        try:
            a = alignment(out, self.picker.heads())
        except ValueError as exc:
            self.aligned = None
            self.picked_line.setText(str(exc))
            self.map.clear(str(exc))
            self.path_item.setData([], [])
            self.lines.setText(" ")
            return
        self.aligned = a
        self.picked_line.setText(f"showing {a.what}")
        self.map.set_matrix(a.weights, row_labels=list(a.target_labels), col_labels=list(a.source_labels),
                            levels=(0.0, max(float(a.weights.max()), 1e-9)),
                            title=f"{a.what} · rows target, columns source", value_label="weight")
        rows = np.arange(len(a.path))
        self.path_item.setData(a.path + 0.5, rows + 0.5)  # view x = source column, y = target row
        t = alignment_table(a.weights, a.target_labels, a.source_labels)
        shown = t.rows[:MAX_LINES]
        more = len(t.rows) - len(shown)
        self.lines.setText("argmax path:  " + "   ·   ".join(
            f"{row.label!r} → {row.best_label!r} {fmt(100 * row.best_weight, 0)}%" for row in shown)
            + (f"   … {more} more rows" if more > 0 else ""))

    def on_theme_changed(self, theme: Theme) -> None:
        pen = pg.mkPen(theme.hover, width=2)
        self.path_item.setPen(pen)
        self.path_item.setSymbolPen(pg.mkPen(theme.plot_background, width=1))
        self.path_item.setSymbolBrush(pg.mkBrush(theme.hover))
