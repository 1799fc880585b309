"""StatusLine: the cell painter's status under the canvas in the mask designer, whole at any width.

The canvas writes one line of parts joined by "  ·  " (size, painted cells, fully masked rows, the
flash-tile counts, the hovered cell). In the designer the tile counts and the fully masked rows are
already said by the tile controls right under it, so this line keeps the other parts, wraps between
words when the column is narrow (341 px at 1024 x 700 cut the line), and keeps the height of its longest
possible text at this width so a hovered cell never moves the painter under the mouse.
"""

from __future__ import annotations

from PySide6.QtCore import QRect, QSize, Qt
from PySide6.QtWidgets import QLabel, QSizePolicy

SEPARATOR = "  ·  "
LONGEST_HOVER = "q 00000 · k 00000: painted allow"  # the widest hover text the canvas writes


def designer_parts(text: str) -> list[str]:
    """The parts of the canvas's status the designer shows: all but the tile counts and the fully
    masked rows (the tile controls under the canvas show both)."""
    return [p for p in text.split(SEPARATOR)
            if p and not p.startswith("tiles ") and not p.rstrip().endswith(("fully masked row", "fully masked rows"))]


class StatusLine(QLabel):
    """A word-wrapped status whose height is that of its longest text at the current width."""

    def __init__(self, parent=None):
        super().__init__(" ", parent)
        self.setWordWrap(True)
        self.setContentsMargins(6, 0, 6, 2)
        self.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Fixed)
        self.full_text = ""  # what the canvas wrote
        self._longest = " "

    def setText(self, text: str) -> None:  # noqa: N802 - Qt's name
        self.full_text = text
        parts = designer_parts(text)
        steady = [p for p in parts if not p.startswith("q ")]  # without the hovered cell
        longest = SEPARATOR.join(steady + [LONGEST_HOVER])
        if longest != self._longest:
            self._longest = longest
            self._fit_height()
        super().setText(SEPARATOR.join(parts) or " ")
        self.setToolTip(text.replace(SEPARATOR, "\n"))

    def lines_needed(self, text: str, width: int) -> int:
        m = self.contentsMargins()
        inner = max(1, width - m.left() - m.right())
        rect = self.fontMetrics().boundingRect(QRect(0, 0, inner, 10_000), Qt.TextFlag.TextWordWrap, text)
        return max(1, round(rect.height() / self.fontMetrics().lineSpacing()))

    def text_fits(self) -> bool:
        """True when the text shown fits the label's rectangle (no line cut off)."""
        m = self.contentsMargins()
        inner = max(1, self.width() - m.left() - m.right())
        rect = self.fontMetrics().boundingRect(QRect(0, 0, inner, 10_000), Qt.TextFlag.TextWordWrap, self.text())
        return rect.width() <= inner and rect.height() <= self.height() - m.top() - m.bottom()

    def _fit_height(self) -> None:
        m = self.contentsMargins()
        lines = self.lines_needed(self._longest, self.width())
        self.setFixedHeight(lines * self.fontMetrics().lineSpacing() + m.top() + m.bottom() + 1)

    def resizeEvent(self, ev):  # noqa: N802 - Qt's name
        super().resizeEvent(ev)
        if ev.size().width() != ev.oldSize().width():
            self._fit_height()

    def sizeHint(self) -> QSize:  # noqa: N802 - Qt's name
        return QSize(80, self.height())

    def minimumSizeHint(self) -> QSize:  # noqa: N802 - Qt's name
        return QSize(40, self.height())
