"""The sidebar: the panels every workspace needs beside it (the token sources with the selected
source's editor, the model settings), one above the other. Each scrolls vertically only: the sidebar
is never narrower than its widest panel needs, so nothing is cut sideways and no horizontal scroll
bar appears."""

from __future__ import annotations

from PySide6.QtCore import QSize, Qt
from PySide6.QtWidgets import QFrame, QLabel, QScrollArea, QVBoxLayout, QWidget

from attnviz.ui.workspaces.area import ShareSplitter

DEFAULT_WIDTH = 330  # the sidebar's width in a new window, in pixels (at least what its panels need)


class VerticalScroll(QScrollArea):
    """A scroll area that scrolls up and down only and asks for its content's minimum width."""

    def __init__(self, parent=None):
        super().__init__(parent)
        self.setWidgetResizable(True)
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)

    def minimumSizeHint(self) -> QSize:  # noqa: N802 - Qt's name
        w = self.widget()
        inner = w.minimumSizeHint().width() if w is not None else 0
        bar = self.verticalScrollBar().sizeHint().width()
        return QSize(inner + bar + 2 * self.frameWidth(), 80)


class Sidebar(QWidget):
    """The sidebar's panels in a vertical splitter; ``put(panel_id, widget)`` places a built panel."""

    def __init__(self, specs, parent=None):
        super().__init__(parent)
        self.setObjectName("sidebar")
        self.split = ShareSplitter(Qt.Orientation.Vertical, self)
        self.split.setObjectName("sidebar_split")
        self.scrolls: dict[str, VerticalScroll] = {}
        for spec in specs:
            scroll = VerticalScroll(self.split)
            scroll.setObjectName(f"sidebar_{spec.id}")
            self.split.addWidget(scroll)
            self.scrolls[spec.id] = scroll
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.split)
        self.reset_sizes()

    def put(self, panel_id: str, widget: QWidget) -> None:
        self.scrolls[panel_id].setWidget(widget)
        self.updateGeometry()

    def default_shares(self) -> list[float]:
        n = self.split.count()
        if n == 2:
            return [0.58, 0.42]
        return [1.0 / n] * n if n else []

    def reset_sizes(self) -> None:
        if self.split.count() > 1:
            self.split.set_shares(self.default_shares())

    def minimumSizeHint(self) -> QSize:  # noqa: N802 - Qt's name
        width = max((s.minimumSizeHint().width() for s in self.scrolls.values()), default=0)
        return QSize(width, 120)


def placeholder(text: str) -> QLabel:
    label = QLabel(text)
    label.setAlignment(Qt.AlignmentFlag.AlignCenter)
    label.setWordWrap(True)
    return label
