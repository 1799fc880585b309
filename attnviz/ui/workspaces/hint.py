"""The first-start hint: one line above the workspace naming three first steps, dismissed for good
with its close button (the dismissal is kept in the settings). Its links ask for a workspace by name,
or for ``text``: the session's text to type over (a demo's hand-set tokens become one; a new text
source when it has neither)."""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QToolButton

HINT_HTML = ("<b>Start here:</b> &nbsp;1. <a href=\"text\">type your own sentence</a> &nbsp;·&nbsp; "
             "2. add an image (<i>File ▸ Open</i> or drop one here) &nbsp;·&nbsp; "
             "3. open the <a href=\"mask\">mask workspace</a>{key}")


class HintBar(QFrame):
    """The dismissable first-steps line; a click on its link asks for the mask workspace."""

    dismissed = Signal()
    workspace_requested = Signal(str)

    def __init__(self, mask_key: str = "", parent=None):
        super().__init__(parent)
        self.setObjectName("hint")
        self.setStyleSheet("QFrame#hint { background: palette(alternate-base); "
                           "border-bottom: 1px solid palette(mid); }")
        self.label = QLabel("", self)
        self.set_key(mask_key)
        self.label.setWordWrap(True)
        self.label.setTextFormat(Qt.TextFormat.RichText)
        self.label.setTextInteractionFlags(Qt.TextInteractionFlag.LinksAccessibleByMouse
                                           | Qt.TextInteractionFlag.LinksAccessibleByKeyboard)
        self.label.linkActivated.connect(self.workspace_requested)
        self.close_button = QToolButton(self)
        self.close_button.setText("✕")
        self.close_button.setAutoRaise(True)
        self.close_button.setToolTip("dismiss: do not show these first steps again")
        self.close_button.clicked.connect(self.dismiss)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(10, 4, 4, 4)
        layout.addWidget(self.label, 1)
        layout.addWidget(self.close_button, 0, Qt.AlignmentFlag.AlignVCenter)

    def set_key(self, key: str) -> None:
        """Name the mask workspace's shortcut in the line."""
        self.label.setText(HINT_HTML.format(key=f" ({key})" if key else ""))

    def dismiss(self) -> None:
        self.setVisible(False)
        self.dismissed.emit()
