"""What the source editors share: the typing pause before a text is committed, a colour swatch, HTML
escaping and a compact spin box."""

from __future__ import annotations

from PySide6.QtGui import QColor, QIcon, QPixmap
from PySide6.QtWidgets import QSizePolicy, QSpinBox

TEXT_COMMIT_MS = 400  # typing pause after which the text is committed (and re-tokenised)


def swatch(colour: str) -> QIcon:
    pm = QPixmap(12, 12)
    pm.fill(QColor(colour))
    return QIcon(pm)


def html_text(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def spin_box(lo: int, hi: int, tip: str) -> QSpinBox:
    s = QSpinBox()
    s.setMinimumWidth(56)
    s.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Fixed)  # not as wide as the largest value
    s.setRange(lo, hi)
    s.setKeyboardTracking(False)
    s.setToolTip(tip)
    return s
