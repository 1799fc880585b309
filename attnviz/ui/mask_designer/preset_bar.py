"""PresetBar: one button per mask preset with its parameter beside it, how a preset lands on the design
(replace the rules, or AND / OR onto them), the combined terms and the head whose mask is edited. It
only emits requests (``preset_requested(name, op, params)`` ...); the panel builds the commands. The
controls wrap in a narrow dock (:class:`~attnviz.ui.widgets.flow_layout.FlowLayout`).
"""

from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtWidgets import (QComboBox, QHBoxLayout, QLabel, QLineEdit, QPushButton, QSpinBox,
                               QVBoxLayout, QWidget)

from attnviz.ui.widgets.flow_layout import FlowLayout

from attnviz.model.mask.design import MaskDesign
from attnviz.model.mask.presets import PRESETS

#: (preset name, button text) in the order of the bar
BUTTONS = (("none", "None"), ("causal", "Causal"), ("prefix_lm", "Prefix-LM"),
           ("block_diagonal", "Block-diagonal"), ("sliding_window", "Sliding window"), ("vla", "VLA (seed 000)"))
MODES = (("replace", "Replace rules"), ("and", "AND onto mask"), ("or", "OR onto mask"))


def parse_lengths(text: str) -> list[int] | None:
    """``"5, 7 3"`` -> [5, 7, 3]; empty -> None (one document per segment); ValueError otherwise."""
    words = [w for w in text.replace(",", " ").replace(";", " ").split() if w]
    if not words:
        return None
    out = []
    for w in words:
        if not w.isdigit():
            raise ValueError(f"document lengths: {w!r} is not a whole number of tokens")
        out.append(int(w))
    return out


class PresetBar(QWidget):
    """Preset buttons, their parameters, the combine mode, the terms and the head selector."""

    preset_requested = Signal(str, str, dict)  # name, "replace"|"and"|"or", keyword parameters
    remove_term_requested = Signal()
    head_changed = Signal(int)  # head index, -1 for the shared mask
    follow_shared_requested = Signal(int)  # head that should drop its own mask
    problem = Signal(str)  # a parameter the person typed is not valid

    def __init__(self, parent=None):
        super().__init__(parent)
        self.buttons: dict[str, QPushButton] = {}
        row1 = FlowLayout(spacing=4)
        row1.addWidget(QLabel("Presets:", self))
        self.prefix_len = QSpinBox(self)
        self.prefix_len.setRange(0, 10_000_000)
        self.prefix_len.setValue(8)
        self.prefix_len.setPrefix("L = ")
        self.prefix_len.setToolTip("prefix length: every query sees keys 0..L-1, the rest causally")
        self.window = QSpinBox(self)
        self.window.setRange(1, 10_000_000)
        self.window.setValue(8)
        self.window.setPrefix("w = ")
        self.window.setToolTip("sliding window: |query - key| < w")
        self.doc_lengths = QLineEdit(self)
        self.doc_lengths.setPlaceholderText("lengths (empty: segments)")
        self.doc_lengths.setToolTip("document lengths in tokens, e.g. 12 20 8; empty: each segment is a document")
        self.doc_lengths.setFixedWidth(150)
        params = {"prefix_lm": self.prefix_len, "sliding_window": self.window, "block_diagonal": self.doc_lengths}
        for name, text in BUTTONS:
            b = QPushButton(text, self)
            b.setToolTip(PRESETS[name].title)
            b.clicked.connect(lambda _=False, n=name: self.request(n))
            self.buttons[name] = b
            if name in params:  # the parameter wraps together with its button
                pair = QWidget(self)
                pl = QHBoxLayout(pair)
                pl.setContentsMargins(0, 0, 0, 0)
                pl.setSpacing(2)
                b.setParent(pair)
                params[name].setParent(pair)
                pl.addWidget(b)
                pl.addWidget(params[name])
                row1.addWidget(pair)
            else:
                row1.addWidget(b)
        row2 = FlowLayout(spacing=6)
        self.mode = QComboBox(self)
        for key, text in MODES:
            self.mode.addItem(text, key)
        self.mode.setToolTip("Replace: the preset becomes the block rules. AND / OR: the preset is combined "
                             "with the mask built so far (re-evaluated when the sequence changes)")
        row2.addWidget(self.mode)
        self.terms = QLabel("", self)
        self.terms.setToolTip("preset terms combined onto the block rules, in order")
        self.remove_term = QPushButton("Remove last term", self)
        self.remove_term.clicked.connect(self.remove_term_requested)
        row2.addWidget(self.terms)
        row2.addWidget(self.remove_term)
        head_box = QWidget(self)
        hl = QHBoxLayout(head_box)
        hl.setContentsMargins(0, 0, 0, 0)
        hl.setSpacing(4)
        hl.addWidget(QLabel("Mask of:", head_box))
        self.head = QComboBox(head_box)
        self.head.setToolTip("edit the mask every head shares, or one head's own mask")
        self.head.currentIndexChanged.connect(lambda *_: self.head_changed.emit(self.current_head()))
        hl.addWidget(self.head)
        row2.addWidget(head_box)
        self.follow_shared = QPushButton("Follow shared", self)
        self.follow_shared.setToolTip("drop this head's own mask: it uses the shared mask again")
        self.follow_shared.clicked.connect(lambda: self.follow_shared_requested.emit(self.current_head()))
        row2.addWidget(self.follow_shared)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(3)
        layout.addLayout(row1)
        layout.addLayout(row2)
        self.error = ""
        self.set_heads(1, ())

    # -- content -------------------------------------------------------------------------------
    def set_heads(self, nh: int, own: tuple[int, ...]) -> None:
        """Offer the shared mask and heads 0..nh-1 (heads with their own mask are marked)."""
        current = self.current_head()
        self.head.blockSignals(True)
        self.head.clear()
        self.head.addItem("all heads (shared)", -1)
        for h in range(nh):
            self.head.addItem(f"head {h}" + (" · own mask" if h in own else ""), h)
        idx = self.head.findData(current)
        self.head.setCurrentIndex(max(idx, 0))
        self.head.blockSignals(False)
        self.follow_shared.setEnabled(self.current_head() in own)
        if idx < 0 and current != -1:
            self.head_changed.emit(-1)

    def set_design(self, design: MaskDesign, T: int) -> None:
        """Show the design's combined terms; keep L within the sequence."""
        labels = [t.label() for t in design.presets]
        self.terms.setText("Terms: " + (" · ".join(labels) if labels else "none"))
        self.remove_term.setEnabled(bool(labels))
        self.prefix_len.setMaximum(max(0, T))

    def current_head(self) -> int:
        data = self.head.currentData()
        return -1 if data is None else int(data)

    def select_head(self, head: int) -> None:
        idx = self.head.findData(head)
        if idx < 0:
            raise ValueError(f"no head {head} to select")
        self.head.setCurrentIndex(idx)

    def set_mode(self, op: str) -> None:
        idx = self.mode.findData(op)
        if idx < 0:
            raise ValueError(f"preset mode must be replace, and or or, got {op!r}")
        self.mode.setCurrentIndex(idx)

    # -- requests ------------------------------------------------------------------------------
    def params_for(self, name: str) -> dict:
        """The preset's keyword parameters from the bar's fields (ValueError for bad lengths)."""
        if name == "prefix_lm":
            return {"L": self.prefix_len.value()}
        if name == "sliding_window":
            return {"w": self.window.value()}
        if name == "block_diagonal":
            lengths = parse_lengths(self.doc_lengths.text())
            return {} if lengths is None else {"lengths": lengths}
        return {}

    def request(self, name: str) -> bool:
        """Emit a request for preset ``name`` with the current mode; False (and ``error``) on bad input."""
        try:
            params = self.params_for(name)
        except ValueError as exc:
            self.error = str(exc)
            self.doc_lengths.setStyleSheet("border: 1px solid #d0342c;")
            self.doc_lengths.setToolTip(self.error)
            self.problem.emit(self.error)
            return False
        self.error = ""
        self.doc_lengths.setStyleSheet("")
        self.preset_requested.emit(name, self.mode.currentData(), params)
        return True
