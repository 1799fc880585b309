"""Ctrl+1..6 put the keyboard focus on a real control of the workspace they show, the first of that
workspace's Tab order: never the workspace's page itself, the first-steps hint or nothing (Diagnostics
and Pretrained once left it on their page), on a first visit as on a return, from the sidebar as from
another workspace."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication, QWidget


def _first_in_tab_order(page: QWidget) -> QWidget | None:
    """The first widget after ``page`` in the window's focus chain that Tab would stop on inside it."""
    w = page.nextInFocusChain()
    while w is not None and w is not page:
        if (page.isAncestorOf(w) and w.isVisible() and w.isEnabled() and w.focusProxy() is None
                and w.focusPolicy() & Qt.FocusPolicy.TabFocus == Qt.FocusPolicy.TabFocus):
            return w
        w = w.nextInFocusChain()
    return None


def _press_ctrl(n: int, window) -> None:
    QTest.keyClick(QApplication.focusWidget() or window, getattr(Qt.Key, f"Key_{n}"),
                   Qt.KeyboardModifier.ControlModifier)


def _describe(w) -> str:
    return "nothing" if w is None else f"{type(w).__name__}#{w.objectName()}"


@pytest.mark.parametrize("order", [(1, 2, 3, 4, 5, 6), (6, 4, 2, 5, 3, 1)])
def test_every_ctrl_number_lands_on_the_first_control_of_its_workspace(make_window, qtbot, order):
    w = make_window("river-bank", all_panels=True)
    w.activateWindow()
    qtbot.wait(100)
    names = w.area.names()
    assert len(names) >= 6
    table = next(t for t in w.sidebar.findChildren(QWidget) if t.isVisible()
                 and t.focusPolicy() & Qt.FocusPolicy.TabFocus == Qt.FocusPolicy.TabFocus)
    for visit in ("first", "again"):
        table.setFocus(Qt.FocusReason.TabFocusReason)  # from the sidebar
        for n in order:
            _press_ctrl(n, w)
            name = names[n - 1]
            assert w.workspace == name
            page = w.area.page(name)
            qtbot.wait(50)  # a panel built on this key, then a turn of the event loop
            focused = QApplication.focusWidget()
            assert focused is not page, f"Ctrl+{n} ({visit} visit) left the focus on the {name} page itself"
            assert focused is not None and page.isAncestorOf(focused), \
                f"Ctrl+{n} ({visit} visit): the focus is on {_describe(focused)}, outside the {name} workspace"
            assert focused.focusPolicy() & Qt.FocusPolicy.TabFocus == Qt.FocusPolicy.TabFocus
            assert focused is _first_in_tab_order(page), \
                f"Ctrl+{n} ({visit} visit): {_describe(focused)}, not the first control {_describe(_first_in_tab_order(page))}"
