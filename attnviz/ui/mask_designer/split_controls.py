"""SplitControls: the row under the block grid that cuts a segment into sub-blocks and merges them
back: pick a segment, a cut offset (tokens after the segment start), then Split or Merge.

Emits ``split_requested(segment, offset)`` and ``merge_requested(segment, offset_or_-1)`` (-1: merge
every cut of the segment); the panel turns these into :class:`SplitBlock` / :class:`MergeBlocks`.
"""

from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLabel, QPushButton, QSpinBox, QWidget

from attnviz.model.mask.design import MaskDesign
from attnviz.ui.widgets.flow_layout import FlowLayout


class SplitControls(QWidget):
    """Segment chooser + offset + Split / Merge buttons."""

    split_requested = Signal(str, int)  # segment, offset
    merge_requested = Signal(str, int)  # segment, offset of the cut to remove (-1: all cuts)

    def __init__(self, parent=None):
        super().__init__(parent)
        self.segment = QComboBox(self)
        self.segment.setToolTip("segment to cut into sub-blocks")
        self.offset = QSpinBox(self)
        self.offset.setPrefix("at ")
        self.offset.setToolTip("cut this many tokens after the segment's first token")
        self.split_button = QPushButton("Split", self)
        self.merge_button = QPushButton("Merge", self)
        self.merge_button.setToolTip("remove the cut at this offset, or every cut when there is none there")
        self.cuts = QLabel("", self)
        layout = FlowLayout(self, spacing=4)  # wraps in a narrow dock
        layout.addWidget(QLabel("Sub-blocks:", self))
        layout.addWidget(self.segment)
        layout.addWidget(self.offset)
        buttons = QWidget(self)  # Split and Merge wrap together
        bl = QHBoxLayout(buttons)
        bl.setContentsMargins(0, 0, 0, 0)
        bl.setSpacing(4)
        self.split_button.setParent(buttons)
        self.merge_button.setParent(buttons)
        bl.addWidget(self.split_button)
        bl.addWidget(self.merge_button)
        layout.addWidget(buttons)
        layout.addWidget(self.cuts)
        self._lengths: dict[str, int] = {}
        self._design: MaskDesign | None = None
        self.segment.currentIndexChanged.connect(lambda *_: self._sync())
        self.split_button.clicked.connect(self._on_split)
        self.merge_button.clicked.connect(self._on_merge)

    def set_content(self, segments, design: MaskDesign) -> None:
        """The segments that can be split (name -> length, both axes) and the design's current cuts."""
        lengths: dict[str, int] = {}
        for s in segments:
            lengths[s.name] = max(lengths.get(s.name, 0), len(s))
        self._lengths, self._design = lengths, design
        current = self.segment.currentText()
        self.segment.blockSignals(True)
        self.segment.clear()
        self.segment.addItems(list(lengths))
        if current in lengths:
            self.segment.setCurrentText(current)
        self.segment.blockSignals(False)
        self._sync()

    def select(self, segment: str, offset: int | None = None) -> None:
        """Choose a segment (and a cut offset) as the person would."""
        self.segment.setCurrentText(segment)
        if offset is not None:
            self.offset.setValue(int(offset))

    def _sync(self) -> None:
        name = self.segment.currentText()
        n = self._lengths.get(name, 0)
        self.offset.setRange(1, max(1, n - 1))
        if self.offset.value() >= n:
            self.offset.setValue(max(1, n // 2))
        self.split_button.setEnabled(n >= 2)
        split = self._design.split_of(name) if self._design is not None else None
        self.merge_button.setEnabled(split is not None)
        self.cuts.setText("" if split is None else "cuts at " + ", ".join(map(str, split.offsets)))

    def _on_split(self) -> None:
        name = self.segment.currentText()
        if name:
            self.split_requested.emit(name, self.offset.value())

    def _on_merge(self) -> None:
        name = self.segment.currentText()
        split = self._design.split_of(name) if self._design is not None else None
        if split is None:
            return
        off = self.offset.value()
        self.merge_requested.emit(name, off if off in split.offsets else -1)
