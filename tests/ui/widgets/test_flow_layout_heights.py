"""FlowLayout holds its height per width until Qt invalidates the layout: a panel's layout pass asks the same
few widths hundreds of times, and a change of an item (text, visibility, a new item) gives the new height."""

from __future__ import annotations

from PySide6.QtWidgets import QPushButton, QVBoxLayout, QWidget

from attnviz.ui.widgets.flow_layout import FlowLayout


def _bar(qtbot, n=8):
    box = QWidget()
    outer = QVBoxLayout(box)
    flow = FlowLayout(spacing=4)
    buttons = [QPushButton(f"button {i}") for i in range(n)]
    for b in buttons:
        flow.addWidget(b)
    outer.addLayout(flow)
    qtbot.addWidget(box)
    box.resize(300, 200)
    box.show()
    return box, flow, buttons


def test_the_same_width_is_measured_once_until_the_layout_is_invalidated(qtbot, monkeypatch):
    box, flow, buttons = _bar(qtbot)
    calls = []
    place = FlowLayout._place
    monkeypatch.setattr(FlowLayout, "_place", lambda self, rect, move: calls.append(move) or place(self, rect, move))
    flow.invalidate()
    h = flow.heightForWidth(150)
    assert [flow.heightForWidth(150) for _ in range(5)] == [h] * 5
    assert calls.count(False) == 1  # measured once
    flow.invalidate()
    assert flow.heightForWidth(150) == h and calls.count(False) == 2  # measured again after an invalidation


def test_a_change_of_an_item_gives_the_new_height(qtbot):
    box, flow, buttons = _bar(qtbot)
    width = 400
    wide = flow.heightForWidth(width)
    for b in buttons[2:]:
        b.hide()
    flow.activate()  # what the window does on its next layout pass
    fewer = flow.heightForWidth(width)
    assert fewer < wide  # two buttons: one line
    buttons[0].setText("a much longer text than before " * 3)
    flow.activate()
    longer = flow.heightForWidth(width)
    assert longer > fewer  # the first button takes a line of its own now
    flow.addWidget(QPushButton("another long text than before " * 3))
    qtbot.wait(20)  # a widget added to a shown one shows on the next turn of the event loop
    flow.activate()
    assert flow.heightForWidth(width) > longer  # a new item: a new line at this width


def test_the_minimum_size_follows_a_changed_item(qtbot):
    box, flow, buttons = _bar(qtbot, n=2)
    before = flow.minimumSize()
    assert flow.minimumSize() == before
    buttons[1].setMinimumWidth(before.width() + 50)
    flow.activate()
    assert flow.minimumSize().width() >= before.width() + 50
    buttons[1].hide()
    flow.activate()
    assert flow.minimumSize().width() < before.width() + 50  # a hidden item takes no room
