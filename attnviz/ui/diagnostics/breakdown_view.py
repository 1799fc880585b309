"""BreakdownView: one (query i, key j) cell of one head, step by step, as seed 002 walks it: q_i, k_j
and their product per dimension, the scale and the scaled score (soft-capped to c·tanh(s/c) under the
softcap rule), the row's softmax weights, and v_j's share of the output o_i. In a hand-set session q_i
and k_j are editable; an edit is only reported (``component_edited``) and the owner turns it into a
session command.
"""

from __future__ import annotations

import math

import numpy as np
from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QColor
from PySide6.QtWidgets import (QComboBox, QDoubleSpinBox, QGroupBox, QLabel, QPushButton, QSizePolicy,
                               QSpinBox, QTableWidget, QVBoxLayout, QWidget)

from attnviz.ui.diagnostics.common import cell, fit_height, fmt, new_table
from attnviz.ui.theme import current_theme
from attnviz.ui.widgets.flow_layout import flow_row, labelled

#: the rows of the per-dimension table
PAIR_ROWS = ("q", "k", "product")
#: the rows of the per-key table
ROW_ROWS = ("dot", "score", "weight")
#: ... under the softcap rule: the scaled score, then its soft cap
SOFTCAP_ROWS = ("dot", "scaled", "capped", "weight")
#: key columns of the per-key table at most (a window around the selected key beyond)
ROW_KEYS = 128
#: the rows of the per-value-dimension table
OUTPUT_ROWS = ("v", "contribution", "output")


def _caption(parent) -> QLabel:
    """A wrapped line under a box's title; it never widens the box (breaks anywhere when it must)."""
    label = QLabel(" ", parent)
    label.setWordWrap(True)
    label.setMinimumWidth(60)
    label.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
    return label


def dot_text(bd, d: int) -> str:
    """``q_3 · k_2 = Σ q⊙k = 4.6``: the dot product as the sum of the table's last row."""
    return f"q_{bd.i} · k_{bd.j} = Σ q⊙k = {fmt(bd.dot, d)}"


class BreakdownView(QWidget):
    """Tables of one (query, key) cell; see the module docstring."""

    component_edited = Signal(str, int, float)  # ("q" or "k", dim, new value)
    component_reset = Signal(str, int)  # ("q" or "k", dim): drop the hand-set value
    key_clicked = Signal(int)  # a key column of the per-key table was clicked

    def __init__(self, parent=None):
        super().__init__(parent)
        self._filling = False
        self._editable = False
        self._softcap: float | None = None  # the softcap rule's c while its breakdown shows
        self._q = np.zeros(0)  # (hs,) q_i as shown
        self._k = np.zeros(0)  # (hs,) k_j as shown
        self._overridden: set[tuple[str, int]] = set()
        self.decimals = 2

        self.pair_box = QGroupBox("q_i · k_j, dimension by dimension", self)
        self.pair_table = new_table(len(PAIR_ROWS), 1)
        self.pair_table.setEditTriggers(QTableWidget.EditTrigger.DoubleClicked
                                        | QTableWidget.EditTrigger.EditKeyPressed)
        self.pair_table.itemChanged.connect(self._on_item_changed)
        self.formula = QLabel(" ", self)
        self.formula.setWordWrap(True)
        self.formula.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)

        self.which = QComboBox(self)
        self.which.addItem("q_i", "q")
        self.which.addItem("k_j", "k")
        self.dim = QSpinBox(self)
        self.dim.setPrefix("dim ")
        self.value = QDoubleSpinBox(self)
        self.value.setRange(-1e4, 1e4)
        self.value.setDecimals(4)
        self.value.setSingleStep(0.1)
        self.value.setKeyboardTracking(False)
        self.reset = QPushButton("Reset", self)
        self.reset.setToolTip("Drop the hand-set value: the computed component shows again")
        self.edit_hint = QLabel("", self)
        self.edit_hint.setStyleSheet("color: palette(mid);")
        self.which.currentIndexChanged.connect(self._sync_spin)
        self.dim.valueChanged.connect(self._sync_spin)
        self.value.valueChanged.connect(self._on_spin_value)
        self.reset.clicked.connect(self._on_reset)
        edit = flow_row((labelled("&Edit", self.which, self), self.dim, self.value, self.reset))
        self.edit_hint.setWordWrap(True)  # under the controls, wrapped: never wider than the view

        # the boxes' titles stay short (a group box is never narrower than its title): what they show
        # of which tokens, long labels and all, goes in a wrapped caption inside each
        self.pair_caption = _caption(self.pair_box)
        pl = QVBoxLayout(self.pair_box)
        pl.addWidget(self.pair_caption)
        pl.addWidget(self.pair_table)
        pl.addWidget(self.formula)
        pl.addLayout(edit)
        pl.addWidget(self.edit_hint)

        self.row_box = QGroupBox("the query's row over the keys", self)
        self.row_caption = _caption(self.row_box)
        self.row_table = new_table(len(ROW_ROWS), 1)
        self._row_keys = range(0)
        self.row_table.cellClicked.connect(lambda _r, c: self.key_clicked.emit(self._row_keys[c]))
        rl = QVBoxLayout(self.row_box)
        rl.addWidget(self.row_caption)
        rl.addWidget(self.row_table)

        self.output_box = QGroupBox("output of the query", self)
        self.output_table = new_table(len(OUTPUT_ROWS), 1)
        QVBoxLayout(self.output_box).addWidget(self.output_table)

        for t in (self.pair_table, self.row_table, self.output_table):
            # wide rows scroll sideways under a bar that is always there: a table's height (all its rows and
            # the bar) never depends on whether the columns happen to fit, so no row hides behind the bar
            t.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOn)
            t.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)  # every row shows (fit_height)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        for box in (self.pair_box, self.row_box, self.output_box):
            lay.addWidget(box)
        lay.addStretch(1)
        self.set_editable(False, "")

    # -- public ------------------------------------------------------------------------------
    def set_editable(self, editable: bool, hint: str) -> None:
        """Allow editing q_i / k_j components (hand-set sessions); ``hint`` says why not."""
        self._editable = bool(editable)
        for w in (self.which, self.dim, self.value, self.reset):
            w.setEnabled(self._editable)
        self.edit_hint.setText(hint)

    def clear(self, message: str) -> None:
        self._filling = True
        for t in (self.pair_table, self.row_table, self.output_table):
            t.clearContents()
            t.setColumnCount(0)
        self._filling = False
        self.formula.setText(message)

    def show_breakdown(self, bd, q_label: str, k_label: str, key_labels, v=None, *, rule_note: str = "",
                       overridden=frozenset(), decimals: int = 2, softcap: float | None = None) -> None:
        """Fill the tables from a ``PairBreakdown`` ``bd``; ``v`` (Tk, hv) the head's values; ``softcap``:
        the cap c of the softcap rule, whose steps (q·k, × 1/√dₖ, c·tanh(s/c)) are then shown."""
        self.decimals = int(decimals)
        self._softcap = None if softcap is None else float(softcap)
        d = self.decimals
        self._q, self._k = np.asarray(bd.q, float), np.asarray(bd.k, float)
        self._overridden = set(overridden)
        hs = self._q.shape[0]
        self._filling = True
        try:
            self._fill_pair(bd, q_label, k_label, d)
            self._fill_row(bd, key_labels, d)
            self._fill_output(bd, k_label, q_label, v, d)
        finally:
            self._filling = False
        for t in (self.pair_table, self.row_table, self.output_table):
            fit_height(t)
        self.dim.blockSignals(True)
        self.dim.setRange(0, max(hs - 1, 0))
        self.dim.blockSignals(False)
        self._sync_spin()
        self.pair_caption.setText(f"query {bd.i} {q_label!r} and key {bd.j} {k_label!r}")
        keys = self._row_keys
        part = "" if len(keys) == bd.row_weights.shape[0] else \
            f" (keys {keys.start}–{keys.stop - 1} of {bd.row_weights.shape[0]})"
        self.row_caption.setText(f"query {bd.i} {q_label!r}{part}")
        self.formula.setText(self._softcap_formula(bd, d) if self._softcap is not None else
                             self._formula(bd, d, rule_note))

    # -- filling -----------------------------------------------------------------------------
    def _fill_pair(self, bd, q_label, k_label, d):
        t = self.pair_table
        hs = bd.q.shape[0]
        t.setColumnCount(hs + 1)
        t.setHorizontalHeaderLabels([f"d{c}" for c in range(hs)] + ["Σ"])
        t.setVerticalHeaderLabels([f"q_{bd.i} {q_label}", f"k_{bd.j} {k_label}", "q ⊙ k"])
        hl = QColor(current_theme().highlight)
        hl.setAlpha(60)
        for r, (name, vec) in enumerate((("q", bd.q), ("k", bd.k), ("product", bd.products))):
            for c in range(hs):
                hand = (name, c) in self._overridden
                it = cell(fmt(vec[c], d), tooltip=repr(float(vec[c])) + (" (hand-set)" if hand else ""),
                          editable=self._editable and name in ("q", "k"), bold=hand)
                if hand:
                    it.setBackground(hl)
                t.setItem(r, c, it)
            t.setItem(r, hs, cell("" if name != "product" else fmt(bd.dot, d), tooltip=repr(bd.dot), bold=True))

    def key_window(self, j: int, Tk: int) -> range:
        """The keys the row table shows: all of them, or ROW_KEYS around key j for a long row."""
        if Tk <= ROW_KEYS:
            return range(Tk)
        start = min(max(0, j - ROW_KEYS // 2), Tk - ROW_KEYS)
        return range(start, start + ROW_KEYS)

    def capped_row(self, bd) -> tuple[np.ndarray, np.ndarray]:
        """(s, c·tanh(s/c)) (Tk,) of the row under the softcap rule, s = q·k/√dₖ; -inf where the mask
        denies a key (known from the response's scores when it holds them)."""
        hs = bd.q.shape[0]
        s = np.asarray(bd.row_dots, dtype=np.float64) / math.sqrt(hs)  # (Tk,)
        c = self._softcap
        capped = c * np.tanh(s / c)  # (Tk,)
        denied = np.isneginf(np.asarray(bd.row_scores, dtype=np.float64))  # (Tk,)
        return np.where(denied, -np.inf, s), np.where(denied, -np.inf, capped)

    def _fill_row(self, bd, key_labels, d):
        t = self.row_table
        Tk = bd.row_weights.shape[0]
        keys = self.key_window(bd.j, Tk)
        self._row_keys = keys
        t.setColumnCount(len(keys))
        t.setHorizontalHeaderLabels([f"{j} {key_labels[j]}" for j in keys])
        if self._softcap is not None:
            scaled, capped = self.capped_row(bd)
            t.setRowCount(len(SOFTCAP_ROWS))
            t.setVerticalHeaderLabels([f"q_{bd.i} · k", "s = q·k / √dₖ", f"{self._softcap:g}·tanh(s/{self._softcap:g})",
                                       "weight"])
            rows = (bd.row_dots, scaled, capped, bd.row_weights)
        else:
            score_name = "score × scale" if bd.mode in ("scaled", "unscaled", "uniform") else "score"
            t.setRowCount(len(ROW_ROWS))
            t.setVerticalHeaderLabels([f"q_{bd.i} · k", score_name, "weight"])
            rows = (bd.row_dots, bd.row_scores, bd.row_weights)
        last = len(rows) - 1
        hl = QColor(current_theme().highlight)
        hl.setAlpha(60)
        for c, j in enumerate(keys):
            vals = tuple(r[j] for r in rows)
            for r, x in enumerate(vals):
                masked = 0 < r < last and not np.isfinite(x)
                it = cell("masked" if masked else fmt(x, d), tooltip=repr(float(x)), bold=j == bd.j)
                if j == bd.j:
                    it.setBackground(hl)
                t.setItem(r, c, it)
        if bd.j in keys:
            t.scrollToItem(t.item(0, keys.index(bd.j)))

    def _fill_output(self, bd, k_label, q_label, v, d):
        t = self.output_table
        if bd.output is None or v is None:
            t.setColumnCount(0)
            return
        hv = bd.output.shape[0]
        t.setColumnCount(hv)
        t.setHorizontalHeaderLabels([f"v{c}" for c in range(hv)])
        t.setVerticalHeaderLabels([f"v_{bd.j} {k_label}", f"w_{bd.i},{bd.j} v_{bd.j}", f"o_{bd.i} {q_label}"])
        for c in range(hv):
            for r, vec in enumerate((v[bd.j], bd.contribution, bd.output)):
                t.setItem(r, c, cell(fmt(vec[c], d), tooltip=repr(float(vec[c])), bold=r == 2))

    def _softcap_formula(self, bd, d) -> str:
        """q·k, × 1/√dₖ, then c·tanh(s/c), then the weight: the softcap rule's steps for cell (i, j)."""
        dot = dot_text(bd, d)
        if not bd.allowed:
            return f"{dot};  the mask forbids key {bd.j} for query {bd.i}: weight 0"
        hs = bd.q.shape[0]
        c = self._softcap
        s = bd.dot / math.sqrt(hs)
        capped = c * math.tanh(s / c)
        return (f"{dot}   → s = {fmt(bd.dot, d)} × 1/√{hs} = {fmt(s, d)}   → {c:g}·tanh(s/{c:g}) = {fmt(capped, d)}   "
                f"→ weight {fmt(bd.weight, d)} (softmax over the row)   ·   soft cap c = {c:g}: about s while "
                f"|s| ≪ c, never beyond ±c")

    @staticmethod
    def _formula(bd, d, rule_note: str) -> str:
        dot = dot_text(bd, d)
        if not bd.allowed:
            return f"{dot};  the mask forbids key {bd.j} for query {bd.i}: weight 0"
        if bd.mode == "uniform":
            n = int(np.count_nonzero(np.isfinite(bd.row_scores)))
            return f"{dot};  uniform: scores are ignored, weight = 1/{n} = {fmt(bd.weight, d)}"
        if bd.mode == "scaled":
            hs = bd.q.shape[0]
            # each "=" closes one step: q·k, then the score it scales to (1/√dₖ's value after it)
            score = f"score = {fmt(bd.dot, d)} × 1/√{hs} = {fmt(bd.score, d)}   (1/√{hs} = {fmt(bd.scale, 4)})"
        elif bd.mode == "unscaled":
            score = f"score = {fmt(bd.dot, d)} × 1 = {fmt(bd.score, d)}   (No √dₖ)"
        else:
            return f"{dot} (for reference);  {rule_note}  score {fmt(bd.score, d)} → weight {fmt(bd.weight, d)}"
        text = f"{dot}   → {score}   → weight {fmt(bd.weight, d)} (softmax over the row)"
        return text + (f"   ·   {rule_note}" if rule_note else "")

    # -- editing -----------------------------------------------------------------------------
    def current_component(self) -> tuple[str, int]:
        return self.which.currentData(), int(self.dim.value())

    def _sync_spin(self, *_):
        which, dim = self.current_component()
        vec = self._q if which == "q" else self._k
        if dim < vec.shape[0]:
            self.value.blockSignals(True)
            self.value.setValue(float(vec[dim]))
            self.value.blockSignals(False)
        self.reset.setEnabled(self._editable and (which, dim) in self._overridden)

    def _on_spin_value(self, value: float):
        if self._editable:
            which, dim = self.current_component()
            self.component_edited.emit(which, dim, float(value))

    def _on_reset(self):
        which, dim = self.current_component()
        self.component_reset.emit(which, dim)

    def _on_item_changed(self, item):
        if self._filling or not self._editable or item.row() > 1 or item.column() >= self._q.shape[0]:
            return
        which = "q" if item.row() == 0 else "k"
        try:
            value = float(item.text().replace("−", "-"))
        except ValueError:
            value = math.nan
        if not math.isfinite(value):
            vec = self._q if which == "q" else self._k
            self._filling = True
            item.setText(fmt(vec[item.column()], self.decimals))
            self._filling = False
            self.edit_hint.setText(f"{item.text()!r} is not a number")
            return
        self.component_edited.emit(which, item.column(), value)
