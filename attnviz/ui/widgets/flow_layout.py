"""FlowLayout: a layout that places its widgets left to right and wraps onto further lines when the
width runs out, so a bar of buttons fits a narrow dock instead of pushing the panel wider than it.

The line breaking is the pure function :func:`flow_lines`; the layout only measures and places.
"""

from __future__ import annotations

from PySide6.QtCore import QPoint, QRect, QSize, Qt
from PySide6.QtWidgets import QLayout, QSizePolicy


def flow_lines(widths: list[int], available: int, spacing: int) -> list[list[int]]:
    """Indices of ``widths`` grouped into lines no wider than ``available`` (every line holds at
    least one item, even one wider than the space)."""
    lines: list[list[int]] = []
    line: list[int] = []
    used = 0
    for i, w in enumerate(widths):
        need = w if not line else used + spacing + w
        if line and need > available:
            lines.append(line)
            line, used = [i], w
        else:
            line.append(i)
            used = need
    if line:
        lines.append(line)
    return lines


class FlowLayout(QLayout):
    """Left-to-right layout that wraps; its height follows its width (heightForWidth)."""

    def __init__(self, parent=None, spacing: int = 4):
        super().__init__(parent)
        self._items = []
        self._spacing = spacing
        self._heights: dict[int, int] = {}  # width -> heightForWidth, until the layout is invalidated
        self._minimum: QSize | None = None  # minimumSize, until then too
        self.setContentsMargins(0, 0, 0, 0)

    # -- QLayout's item list ---------------------------------------------------------------------
    def addItem(self, item) -> None:  # noqa: N802 - Qt's name
        self._items.append(item)
        self._forget_sizes()

    def count(self) -> int:
        return len(self._items)

    def itemAt(self, index: int):  # noqa: N802 - Qt's name
        return self._items[index] if 0 <= index < len(self._items) else None

    def takeAt(self, index: int):  # noqa: N802 - Qt's name
        self._forget_sizes()
        return self._items.pop(index) if 0 <= index < len(self._items) else None

    def invalidate(self) -> None:
        """Qt calls this when an item's size hint or visibility changes: the sizes held no longer hold."""
        self._forget_sizes()
        super().invalidate()

    def _forget_sizes(self) -> None:
        self._heights.clear()
        self._minimum = None

    # -- sizes -----------------------------------------------------------------------------------
    def expandingDirections(self):  # noqa: N802 - Qt's name
        return Qt.Orientation(0)

    def hasHeightForWidth(self) -> bool:  # noqa: N802 - Qt's name
        return True

    def heightForWidth(self, width: int) -> int:  # noqa: N802 - Qt's name
        # asked for the same few widths hundreds of times while a panel is laid out (a workspace's first
        # visit: 300 calls, each measuring every item), so held per width until the layout is invalidated
        h = self._heights.get(width)
        if h is None:
            h = self._heights[width] = self._place(QRect(0, 0, width, 0), move=False)
        return h

    def setGeometry(self, rect: QRect) -> None:  # noqa: N802 - Qt's name
        super().setGeometry(rect)
        self._place(rect, move=True)

    def sizeHint(self) -> QSize:  # noqa: N802 - Qt's name
        return self.minimumSize()

    def minimumSize(self) -> QSize:  # noqa: N802 - Qt's name
        if self._minimum is None:  # held as the heights are (group boxes ask it again and again)
            size = QSize()
            for item in self._visible():
                size = size.expandedTo(item.minimumSize())
            m = self.contentsMargins()
            self._minimum = size + QSize(m.left() + m.right(), m.top() + m.bottom())
        return QSize(self._minimum)

    def _visible(self):
        return [it for it in self._items if not (it.widget() is not None and it.widget().isHidden())]

    def _place(self, rect: QRect, move: bool) -> int:
        m = self.contentsMargins()
        area = rect.adjusted(m.left(), m.top(), -m.right(), -m.bottom())
        items = self._visible()
        hints = [it.sizeHint() for it in items]
        lines = flow_lines([h.width() for h in hints], max(1, area.width()), self._spacing)
        y = area.y()
        for line in lines:
            height = max(hints[i].height() for i in line)
            x = area.x()
            for i in line:
                w = min(hints[i].width(), area.width())
                if move:
                    policy = items[i].widget().sizePolicy() if items[i].widget() is not None else None
                    h = height if policy is not None and policy.verticalPolicy() != QSizePolicy.Policy.Fixed \
                        else hints[i].height()
                    items[i].setGeometry(QRect(QPoint(x, y + (height - h) // 2), QSize(w, h)))
                x += w + self._spacing
            y += height + self._spacing
        return y - self._spacing - rect.y() + m.bottom() if lines else m.top() + m.bottom()


def labelled(text: str, widget, parent=None):
    """``text`` and ``widget`` side by side in one widget, so a wrapping row never parts a control from
    its label. The label is the widget's buddy (an ``&`` in ``text`` gives it an access key)."""
    from PySide6.QtWidgets import QHBoxLayout, QLabel, QWidget

    box = QWidget(parent)
    lay = QHBoxLayout(box)
    lay.setContentsMargins(0, 0, 0, 0)
    lay.setSpacing(4)
    label = QLabel(text, box)
    label.setBuddy(widget)
    lay.addWidget(label)
    lay.addWidget(widget)
    box.label = label
    return box


def flow_row(widgets, spacing: int = 6) -> FlowLayout:
    """A FlowLayout holding ``widgets`` (left to right, wrapping when the width runs out)."""
    row = FlowLayout(spacing=spacing)
    for w in widgets:
        row.addWidget(w)
    return row
