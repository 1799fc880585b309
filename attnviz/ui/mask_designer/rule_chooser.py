"""RuleChooser: the popup a block-grid click opens, to pick what one (query block, key block) pair
allows, or "inherit" (remove the pair's own rule). It only builds a
:class:`~attnviz.model.mask.rules.Rule`; the panel turns it into a command. A mistake in typed text
(the ar_mask vector, :func:`parse_bits`) is shown in the chooser, never raised.
"""

from __future__ import annotations

import re

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QKeySequence, QShortcut
from PySide6.QtWidgets import (QButtonGroup, QCheckBox, QFrame, QGridLayout, QHBoxLayout, QLabel,
                               QLineEdit, QPushButton, QRadioButton, QSpinBox, QVBoxLayout)

from attnviz.model.mask.rules import Rule
from attnviz.ui.messages import Level
from attnviz.ui.theme import current_theme
from attnviz.ui.widgets.message_line import ERROR_STYLE, MessageLine

#: (kind, button text) in the order the chooser lists them; "inherit" removes the pair's own rule
CHOICES = (("allow", "Allow"), ("deny", "Deny"), ("causal", "Causal"), ("anti_causal", "Anti-causal"),
           ("sliding_window", "Sliding window"), ("ar_mask", "From ar_mask"), ("inherit", "Inherit (no own rule)"))
_TRUE = {"1", "true", "t", "yes", "y"}
_FALSE = {"0", "false", "f", "no", "n"}


def parse_bits(text: str, what: str) -> list[int]:
    """``"1 0 0 1"``, ``"1,0,0,1"``, ``"[1, 0, true]"`` -> [1, 0, 0, 1]; ValueError naming ``what``."""
    words = [w for w in re.split(r"[\s,;\[\]()]+", text.strip()) if w]
    out = []
    for w in words:
        low = w.lower()
        if low in _TRUE:
            out.append(1)
        elif low in _FALSE:
            out.append(0)
        else:
            raise ValueError(f"{what}: {w!r} is not 0/1 (write e.g. 1 0 0 1)")
    return out


class RuleChooser(QFrame):
    """Popup editor of one block pair's rule; emits ``rule_chosen(rule or None)`` on Apply."""

    rule_chosen = Signal(object)  # a Rule, or None to remove the pair's explicit rule

    def __init__(self, parent=None):
        super().__init__(parent, Qt.WindowType.Popup)
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self.setObjectName("ruleChooser")
        self.title = QLabel("", self)
        self.title.setTextFormat(Qt.TextFormat.RichText)
        self.current = QLabel("", self)
        self.current.setStyleSheet(f"color: {current_theme().muted_text};")
        self.group = QButtonGroup(self)
        self.buttons: dict[str, QRadioButton] = {}
        grid = QGridLayout()
        grid.setVerticalSpacing(2)
        for row, (kind, text) in enumerate(CHOICES):
            b = QRadioButton(text, self)
            self.group.addButton(b, row)
            self.buttons[kind] = b
            grid.addWidget(b, row, 0)
        self.window = QSpinBox(self)
        self.window.setRange(1, 1_000_000)
        self.window.setValue(4)
        self.window.setPrefix("w = ")
        self.causal_window = QCheckBox("only past keys", self)
        w_row = QHBoxLayout()
        w_row.addWidget(self.window)
        w_row.addWidget(self.causal_window)
        grid.addLayout(w_row, 4, 1)
        self.ar_text = QLineEdit(self)
        self.ar_text.setPlaceholderText("ar_mask, e.g. 0 0 0 1 1 1")
        self.valid_text = QLineEdit(self)
        self.valid_text.setPlaceholderText("valid (empty: all valid)")
        ar_box = QVBoxLayout()
        ar_box.addWidget(self.ar_text)
        ar_box.addWidget(self.valid_text)
        grid.addLayout(ar_box, 5, 1)
        self.block_local = QCheckBox("positions local to the block", self)
        self.block_local.setToolTip("causal / anti-causal / window on the pair's own diagonal "
                                    "(bottom-right aligned) instead of global token positions")
        self.error = MessageLine(self, style=ERROR_STYLE)
        self.error.setVisible(False)
        self.apply_button = QPushButton("Apply", self)
        self.apply_button.setDefault(True)
        self.cancel_button = QPushButton("Cancel", self)
        buttons = QHBoxLayout()
        buttons.addStretch(1)
        buttons.addWidget(self.cancel_button)
        buttons.addWidget(self.apply_button)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(10, 8, 10, 8)
        layout.addWidget(self.title)
        layout.addWidget(self.current)
        layout.addLayout(grid)
        layout.addWidget(self.block_local)
        layout.addWidget(self.error)
        layout.addLayout(buttons)
        self.apply_button.clicked.connect(self.apply)
        self.cancel_button.clicked.connect(self.close)
        QShortcut(QKeySequence(Qt.Key.Key_Return), self, self.apply)
        self.group.idToggled.connect(lambda *_: self._sync_enabled())
        self.ar_text.textEdited.connect(lambda *_: self.buttons["ar_mask"].setChecked(True))
        self.valid_text.textEdited.connect(lambda *_: self.buttons["ar_mask"].setChecked(True))
        self.causal_window.toggled.connect(lambda *_: self.buttons["sliding_window"].setChecked(True))
        self.window.valueChanged.connect(lambda *_: self.buttons["sliding_window"].setChecked(True))
        self.q_block = self.k_block = ""

    # -- state ---------------------------------------------------------------------------------
    def set_pair(self, q_block: str, k_block: str, rule: Rule, explicit: bool) -> None:
        """Show the pair and preselect the rule it follows now."""
        self.q_block, self.k_block = q_block, k_block
        self.title.setText(f"<b>{_esc(q_block)}</b> → <b>{_esc(k_block)}</b> "
                           f"<span style='color:gray'>(queries → keys)</span>")
        self.current.setText(f"now: {rule.label()}" + ("" if explicit else " (default rule)"))
        self.buttons[rule.kind].setChecked(True)
        self.block_local.setChecked(rule.align == "block" and rule.kind != "ar_mask")
        if rule.kind == "sliding_window":
            self.window.setValue(rule.window)
            self.causal_window.setChecked(rule.causal_window)
        if rule.kind == "ar_mask":
            self.ar_text.setText(" ".join(str(a) for a in rule.ar))
            self.valid_text.setText("" if all(rule.valid) else " ".join(str(int(v)) for v in rule.valid))
        self.buttons[rule.kind].setChecked(True)
        self._show_error("")
        self._sync_enabled()

    def kind(self) -> str:
        for kind, b in self.buttons.items():
            if b.isChecked():
                return kind
        return "allow"

    def choose(self, kind: str) -> None:
        """Select a kind (as a click on its radio button would)."""
        if kind not in self.buttons:
            raise ValueError(f"unknown rule choice {kind!r}")
        self.buttons[kind].setChecked(True)

    def current_rule(self) -> Rule | None:
        """The rule the controls describe (None = inherit); ValueError for a bad ar_mask."""
        kind = self.kind()
        align = "block" if self.block_local.isChecked() else "global"
        if kind == "inherit":
            return None
        if kind in ("allow", "deny"):
            return Rule(kind)
        if kind == "causal":
            return Rule.causal(align)
        if kind == "anti_causal":
            return Rule.anti_causal(align)
        if kind == "sliding_window":
            return Rule.sliding_window(self.window.value(), self.causal_window.isChecked(), align)
        ar = parse_bits(self.ar_text.text(), "ar_mask")
        if not ar:
            raise ValueError("ar_mask: type one 0/1 entry per token of the block, e.g. 0 0 0 1 1 1")
        valid_text = self.valid_text.text().strip()
        valid = parse_bits(valid_text, "valid") if valid_text else None
        return Rule.ar_mask(ar, valid)

    def apply(self) -> bool:
        """Emit the chosen rule and close; a mistake stays open with its message."""
        try:
            rule = self.current_rule()
        except ValueError as exc:
            self._show_error(str(exc))
            return False
        self._show_error("")
        self.close()
        self.rule_chosen.emit(rule)
        return True

    def _show_error(self, text: str) -> None:
        self.error.say(Level.ERROR, text)
        self.adjustSize()  # the dialog grows or shrinks with the line

    def _sync_enabled(self) -> None:
        # the window and ar_mask fields stay editable: editing one selects its kind
        self.block_local.setEnabled(self.kind() in ("causal", "anti_causal", "sliding_window"))


def _esc(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
