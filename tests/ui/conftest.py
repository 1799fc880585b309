"""Shared set-up of the UI tests: Qt runs offscreen (set before anything imports it), and helpers
send real mouse events to a widget."""

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import pytest  # noqa: E402
from PySide6.QtCore import QEvent, QPointF, Qt  # noqa: E402
from PySide6.QtGui import QMouseEvent  # noqa: E402
from PySide6.QtWidgets import QApplication  # noqa: E402


class Mouse:
    """Real QMouseEvents sent to a widget (a pyqtgraph view's viewport, a plain widget)."""

    def __init__(self, qtbot):
        self.qtbot = qtbot

    def _send(self, widget, kind, pos, button, buttons):
        p = QPointF(pos)
        ev = QMouseEvent(kind, p, p, QPointF(widget.mapToGlobal(p.toPoint())), button, buttons,
                         Qt.KeyboardModifier.NoModifier)
        QApplication.sendEvent(widget, ev)

    def move(self, widget, pos, buttons=Qt.MouseButton.NoButton):
        self.qtbot.wait(15)  # pyqtgraph drops moves closer than 10 ms apart
        self._send(widget, QEvent.Type.MouseMove, pos, Qt.MouseButton.NoButton, buttons)

    def press(self, widget, pos, button=Qt.MouseButton.LeftButton):
        self._send(widget, QEvent.Type.MouseButtonPress, pos, button, button)

    def release(self, widget, pos, button=Qt.MouseButton.LeftButton):
        self._send(widget, QEvent.Type.MouseButtonRelease, pos, button, Qt.MouseButton.NoButton)

    def click(self, widget, pos, button=Qt.MouseButton.LeftButton):
        self.move(widget, pos)
        self.press(widget, pos, button)
        self.release(widget, pos, button)

    def drag(self, widget, points, button=Qt.MouseButton.LeftButton):
        """Press at points[0], move through the rest with the button held, release at the last."""
        self.move(widget, points[0])
        self.press(widget, points[0], button)
        for p in points[1:]:
            self.move(widget, p, buttons=button)
        self.release(widget, points[-1], button)


@pytest.fixture
def mouse(qtbot):
    return Mouse(qtbot)



@pytest.fixture(autouse=True)
def _unsaved_work_is_dropped_when_a_test_window_closes(monkeypatch):
    """A window a test leaves with unsaved work (an opened maps file or image marks the session so) is closed by
    pytest-qt at teardown; the application's own question would be a modal box no one answers offscreen, which
    hangs the run. Tests that ask their own questions pass their own Prompts, which this does not change."""
    from attnviz.ui.file_actions import Prompts

    monkeypatch.setattr(Prompts, "save_changes", lambda self, parent, what: "discard")
