"""Encoder-decoders (MarianMT, BART, mBART, T5, mT5) in the Pretrained panel: the row under the source text.

The panel's text field holds the source; this row adds the target (empty: the model writes its own greedy
translation, at most "max tokens" long, on the panel's worker and stoppable with Stop), the stack whose
maps fill the layers x heads grid and the detail map (encoder self-attention, decoder self-attention, or
the decoder's cross-attention over the source tokens), for T5 whether the detail map shows the weights or
the relative-position term its self-attention adds to the scores, and "Show alignment in Diagnostics".
"""

from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QComboBox, QLineEdit, QPushButton, QSpinBox, QWidget

from attnviz.checkpoints.seq2seq_generate import MAX_NEW_TOKENS
from attnviz.checkpoints.seq2seq_study import DEFAULT_MAX_NEW, STACK_LABELS, STACKS, TERM_LABELS, TERMS
from attnviz.ui.widgets.flow_layout import flow_row, labelled


class Seq2SeqControls(QWidget):
    """Target, token limit, stack and score term of an encoder-decoder run; hidden for other models."""

    stack_changed = Signal(str)
    term_changed = Signal(str)
    alignment_requested = Signal()
    stop_requested = Signal()
    run_requested = Signal()

    def __init__(self, parent=None):
        super().__init__(parent)
        self.target_edit = QLineEdit(self)
        self.target_edit.setPlaceholderText("empty: the model's own translation")
        self.target_edit.setToolTip("the target the decoder is teacher-forced on (Enter runs); leave it empty and "
                                    "the model writes its own greedy translation")
        self.target_edit.setMinimumWidth(220)
        self.max_new = QSpinBox(self)
        self.max_new.setRange(1, MAX_NEW_TOKENS)
        self.max_new.setValue(DEFAULT_MAX_NEW)
        self.max_new.setToolTip("the longest translation the model writes when the target is empty")
        self.stack_combo = QComboBox(self)
        for key in STACKS:
            self.stack_combo.addItem(STACK_LABELS[key], key)
        self.stack_combo.setToolTip("which attention fills the layers x heads grid and the detail map")
        self.term_combo = QComboBox(self)
        for key in TERMS:
            self.term_combo.addItem(TERM_LABELS[key], key)
        self.term_combo.setToolTip("T5 adds a learned bias per head and relative position to its self-attention "
                                   "scores: show it instead of the weights")
        self.term_box = labelled("show", self.term_combo, self)
        self.term_box.setVisible(False)
        self.stop_button = QPushButton("Stop", self)
        self.stop_button.setToolTip("stop the translation being written")
        self.stop_button.setVisible(False)
        self.align_button = QPushButton("Show alignment in Diagnostics", self)
        self.align_button.setToolTip("the cross-attention of this run as seed 001's alignment matrix, in the "
                                     "Diagnostics workspace")
        row = flow_row([labelled("target", self.target_edit, self), labelled("max tokens", self.max_new, self),
                        labelled("attention", self.stack_combo, self), self.term_box, self.stop_button,
                        self.align_button])
        row.setContentsMargins(6, 0, 6, 0)
        self.setLayout(row)
        self.setVisible(False)
        self._t5 = False
        self.stack_combo.currentIndexChanged.connect(self._on_stack)
        self.term_combo.currentIndexChanged.connect(lambda _i: self.term_changed.emit(self.term()))
        self.align_button.clicked.connect(self.alignment_requested.emit)
        self.stop_button.clicked.connect(self.stop_requested.emit)
        self.target_edit.returnPressed.connect(self.run_requested.emit)

    def stack(self) -> str:
        return self.stack_combo.currentData()

    def term(self) -> str:
        return self.term_combo.currentData() if self.term_box.isVisibleTo(self) else "weights"

    def set_stack(self, stack: str) -> None:
        index = self.stack_combo.findData(stack)
        if index < 0:
            raise ValueError(f"unknown stack {stack!r}; choose one of {', '.join(STACKS)}")
        self.stack_combo.setCurrentIndex(index)

    def set_term(self, term: str) -> None:
        index = self.term_combo.findData(term)
        if index < 0:
            raise ValueError(f"unknown term {term!r}; choose one of {', '.join(TERMS)}")
        self.term_combo.setCurrentIndex(index)

    def show_for(self, ckpt) -> None:
        """Show the row for an encoder-decoder checkpoint (the term choice for T5-like ones), hide it otherwise."""
        seq = getattr(ckpt, "kind", None) == "seq2seq"
        self._t5 = seq and bool(getattr(ckpt.spec, "t5_like", False))
        self.setVisible(seq)
        self.term_combo.setCurrentIndex(0)
        self._sync_term()

    def set_running(self, running: bool) -> None:
        self.stop_button.setVisible(running)

    def _on_stack(self, _index: int) -> None:
        self._sync_term()
        self.stack_changed.emit(self.stack())

    def _sync_term(self) -> None:
        self.term_box.setVisible(self._t5 and self.stack() != "cross")
