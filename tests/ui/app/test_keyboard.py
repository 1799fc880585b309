"""Full keyboard operation: Tab leaves the sidebar's tables (it once cycled the token table's cells for
ever), F6 / Ctrl+Tab move the focus between the sidebar and the workspace, and Ctrl+1..6 move it into
the workspace they show."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QAbstractItemView, QApplication


def _focus(qtbot, widget):
    widget.window().activateWindow()
    widget.setFocus(Qt.FocusReason.TabFocusReason)
    qtbot.waitUntil(widget.hasFocus, timeout=2000)


def _visible_tables(root):
    return [t for t in root.findChildren(QAbstractItemView) if t.isVisible() and t.model() is not None
            and t.model().rowCount() * t.model().columnCount() > 1]


def test_tab_leaves_the_sidebars_tables(make_window, qtbot):
    w = make_window("river-bank")  # hand-set tokens: the sidebar shows their embedding table
    qtbot.wait(100)
    tables = _visible_tables(w.sidebar)
    assert tables, "the river-bank sidebar shows a token table"
    for table in tables:
        _focus(qtbot, table)
        cells = table.model().rowCount() * table.model().columnCount()
        for _ in range(3):
            QTest.keyClick(QApplication.focusWidget(), Qt.Key.Key_Tab)
        assert QApplication.focusWidget() is not table, f"Tab kept the focus in a {cells}-cell table"


def test_f6_and_ctrl_tab_move_between_sidebar_and_workspace(make_window, qtbot):
    w = make_window("river-bank")
    qtbot.wait(100)
    page = w.area.page(w.workspace)
    inside_tables = _visible_tables(w.sidebar)
    _focus(qtbot, inside_tables[0])
    for key, mod in ((Qt.Key.Key_F6, Qt.KeyboardModifier.NoModifier),
                     (Qt.Key.Key_Tab, Qt.KeyboardModifier.ControlModifier)):
        assert w.sidebar.isAncestorOf(QApplication.focusWidget())
        QTest.keyClick(QApplication.focusWidget(), key, mod)
        qtbot.waitUntil(lambda: page.isAncestorOf(QApplication.focusWidget()), timeout=2000)
        QTest.keyClick(QApplication.focusWidget(), key, mod)  # and back
        qtbot.waitUntil(lambda: w.sidebar.isAncestorOf(QApplication.focusWidget()), timeout=2000)
    QTest.keyClick(QApplication.focusWidget(), Qt.Key.Key_F6, Qt.KeyboardModifier.ShiftModifier)
    qtbot.waitUntil(lambda: page.isAncestorOf(QApplication.focusWidget()), timeout=2000)


def test_ctrl_number_moves_the_focus_into_the_workspace(make_window, qtbot):
    w = make_window("river-bank")
    qtbot.wait(100)
    _focus(qtbot, _visible_tables(w.sidebar)[0])
    for name in ("image", "attention"):
        key = w.workspace_actions[name].shortcut().toString()  # "Ctrl+2"
        QTest.keyClick(QApplication.focusWidget(), getattr(Qt.Key, f"Key_{key[-1]}"),
                       Qt.KeyboardModifier.ControlModifier)
        assert w.workspace == name
        qtbot.waitUntil(lambda: w.area.page(name).isAncestorOf(QApplication.focusWidget()), timeout=2000)
