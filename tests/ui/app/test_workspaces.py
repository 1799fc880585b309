"""Workspaces: the mode bar and Ctrl+1..6 switch (and never hide what they show), each workspace keeps
its own splitter shares across switches and runs, a saved layout that does not fit the screen or
comes from an older version gives the default, View ▸ Reset layout, and the first-start hint."""

from __future__ import annotations

import pytest
from PySide6.QtCore import QByteArray, QRect, QSettings, Qt
from PySide6.QtTest import QTest

from attnviz.ui.settings import AppSettings
from attnviz.ui.workspaces import WORKSPACES, workspace_names
from attnviz.ui.workspaces.area import valid_shares


SCREEN = QRect(0, 0, 1920, 1040)  # the screen's available area in these tests (offscreen has 800 x 800)


@pytest.fixture
def screen(monkeypatch):
    from attnviz.ui.main_window import MainWindow

    monkeypatch.setattr(MainWindow, "_available", lambda self: SCREEN)
    return SCREEN


def _key(w, qtbot, n: int) -> None:
    w.activateWindow()
    qtbot.waitUntil(w.isActiveWindow, timeout=2000)
    QTest.keyClick(w, Qt.Key(Qt.Key.Key_0.value + n), Qt.KeyboardModifier.ControlModifier)
    qtbot.wait(20)


def test_the_mode_bar_and_the_menu_switch_workspaces(make_window, qtbot):
    w = make_window("vla-mask", all_panels=True)
    assert w.area.names() == list(workspace_names())
    assert [w.area.bar.tabText(i) for i in range(w.area.bar.count())] == [ws.title for ws in WORKSPACES]
    assert w.workspace == "attention" and w.panel("heatmap").isVisible()
    w.area.bar.setCurrentIndex(w.area.names().index("qkv"))  # a click on the tab
    assert w.workspace == "qkv"
    qtbot.waitUntil(lambda: "inspector" in w.panels and w.panels["inspector"].isVisible(), timeout=10000)
    assert not w.panel("heatmap").isVisible()
    w.workspace_actions["image"].trigger()
    assert w.workspace == "image" and w.area.bar.currentIndex() == w.area.names().index("image")
    assert w.workspace_actions["image"].isChecked()


def test_ctrl_5_brings_the_mask_workspace_and_never_hides_it(make_window, qtbot):
    w = make_window("vla-mask", all_panels=True)
    rows = {(m, a): k for m, a, k in w.shortcut_rows()}
    assert [rows[("View", f"{ws.title} workspace")] for ws in WORKSPACES] == [f"Ctrl+{i}" for i in range(1, 7)]
    _key(w, qtbot, 5)
    assert w.workspace == "mask"
    qtbot.waitUntil(lambda: "mask_designer" in w.panels, timeout=10000)
    designer = w.panels["mask_designer"]
    qtbot.waitUntil(designer.isVisible, timeout=5000)
    _key(w, qtbot, 5)  # again: still shown
    assert w.workspace == "mask" and designer.isVisible()
    heat = w.panel("heatmap")
    assert heat.isVisible() and designer.isAncestorOf(heat)  # the resulting heatmap, small, beside the cells
    _key(w, qtbot, 1)
    assert w.workspace == "attention" and heat.isVisible() and not designer.isVisible()
    for n, name in enumerate(workspace_names(), start=1):
        _key(w, qtbot, n)
        assert w.workspace == name


def test_each_workspace_keeps_its_own_splitter_shares(make_window, qtbot, tmp_path, screen):
    w = make_window("vla-mask", all_panels=True)
    w.show_workspace("mask")
    designer = w.panel("mask_designer")
    qtbot.waitUntil(designer.isVisible, timeout=5000)
    total = sum(designer.splitter.sizes())
    designer.splitter.moveSplitter(int(total * 0.5), 1)  # the person drags the handle
    mine = designer.splitter.shares()
    assert abs(mine[0] - 0.5) < 0.02
    w.show_workspace("attention")
    w.show_workspace("qkv")
    w.show_workspace("mask")
    assert designer.splitter.shares() == mine
    w.files.prompts.changes_answer = "discard"
    w.close()
    saved = w.settings.layout()
    assert saved["workspace"] == "mask" and saved["shares"]["mask/panel"] == mine
    w2 = make_window("vla-mask", all_panels=True)
    assert w2.workspace == "mask"
    d2 = w2.panel("mask_designer")
    qtbot.waitUntil(d2.isVisible, timeout=5000)
    qtbot.wait(50)
    assert [round(x, 2) for x in d2.splitter.shares()] == [round(x, 2) for x in mine]


def test_shares_are_checked_before_they_are_used():
    assert valid_shares([0.7, 0.3], 2)
    assert not valid_shares([0.7, 0.3], 3)  # a layout of another version
    assert not valid_shares([0.99, 0.01], 2)  # a pane squeezed to nothing
    assert not valid_shares([0.7, 0.7], 2) and not valid_shares(["a", 1], 2)


def test_a_saved_layout_larger_than_the_screen_or_from_an_older_version_gives_the_default(make_window, qtbot,
                                                                                         tmp_path, screen):
    w = make_window("river-bank")
    w.show_workspace("image")
    w.files.prompts.changes_answer = "discard"
    w.close()
    path = tmp_path / "settings.ini"
    s = AppSettings(path)
    assert w.restore_layout() and w.workspace == "image"  # fits: restored
    # a window saved on a larger screen than this one
    avail = screen
    w.resize(avail.width() + 400, avail.height() + 300)
    s.save_window(w.saveGeometry(), dict(w.layout_state(), workspace="image"))
    s.sync()
    assert not w.restore_layout()
    assert w.width() <= avail.width() and w.height() <= avail.height()
    assert not w.sidebar.isHidden() and w.body.sizes()[0] >= w.sidebar.minimumSizeHint().width()
    # a layout saved by an older version (docks) is not read at all
    old = QSettings(str(tmp_path / "old.ini"), QSettings.Format.IniFormat)
    old.setValue("window/geometry", QByteArray(b"x" * 40))
    old.setValue("window/state", QByteArray(b"y" * 40))
    old.setValue("window/layout_version", 1)
    old.sync()
    s2 = AppSettings(tmp_path / "old.ini")
    assert s2.layout() is None
    # a sidebar saved narrower than its panels need, and broken shares, keep their defaults
    w.resize(1400, 900)
    s.save_window(w.saveGeometry(), {"workspace": "attention", "size": [1400, 900], "sidebar": 20, "sidebar_visible": True,
                                     "shares": {"mask/panel": [0.99, 0.01]}})
    s.sync()
    assert w.restore_layout()
    assert w.body.sizes()[0] >= w.sidebar.minimumSizeHint().width()


def test_reset_layout_brings_back_the_sidebar_and_the_default_shares(make_window, qtbot):
    w = make_window("vla-mask", all_panels=True)
    w.show_workspace("mask")
    designer = w.panel("mask_designer")
    qtbot.waitUntil(designer.isVisible, timeout=5000)
    total = sum(designer.splitter.sizes())
    designer.splitter.moveSplitter(total // 2, 1)
    w.set_sidebar_visible(False)
    w.reset_layout()
    qtbot.wait(50)
    assert w.sidebar.isVisible() and w.workspace == "mask"
    assert abs(designer.splitter.shares()[0] - designer.default_shares("panel")[0]) < 0.02


def test_the_first_start_hint_is_dismissed_for_good(make_window, qtbot, screen):
    w = make_window("river-bank", all_panels=True)
    assert w.hint.isVisible()
    text = w.hint.label.text()
    assert "type" in text and "image" in text and "mask workspace" in text and "Ctrl+5" in text
    w.hint.label.linkActivated.emit("mask")  # a click on "mask workspace"
    assert w.workspace == "mask"
    w.hint.close_button.click()
    assert not w.hint.isVisible() and w.settings.hint_dismissed()
    w.files.prompts.changes_answer = "discard"
    w.close()
    w2 = make_window("river-bank")
    assert not w2.hint.isVisible()


def test_keyboard_focus_is_drawn_on_views(make_window, qtbot):
    from PySide6.QtWidgets import QGraphicsView

    w = make_window("river-bank")
    w.activateWindow()
    qtbot.waitUntil(w.isActiveWindow, timeout=2000)
    view = w.panel("heatmap").heatmap.findChild(QGraphicsView) or w.panel("heatmap").findChild(QGraphicsView)
    w.area.bar.setFocus(Qt.FocusReason.TabFocusReason)
    qtbot.wait(20)
    assert w.focus_frame.widget() is None
    view.setFocus(Qt.FocusReason.TabFocusReason)
    qtbot.waitUntil(view.hasFocus, timeout=2000)
    qtbot.wait(50)
    assert w.focus_frame.widget() is view and w.focus_frame.isVisible()
    img = w.grab().toImage()
    top_left = view.mapTo(w, view.rect().topLeft())
    highlight = view.palette().highlight().color().rgb()
    lit = max(sum(img.pixel(x, y) == highlight for x in range(top_left.x() + 5, top_left.x() + view.width() - 5))
              for y in range(top_left.y() - 3, top_left.y() + 3))
    assert lit > 0.9 * (view.width() - 10)  # a line in the highlight colour along its top


def test_the_qkv_and_pretrained_workspaces_remember_their_panels_splitters(make_window, qtbot, screen):
    w = make_window("river-bank", all_panels=True)
    w.show_workspace("qkv")
    inspector = w.panel("inspector")
    qtbot.waitUntil(inspector.isVisible, timeout=5000)
    total = sum(inspector.splitter.sizes())
    inspector.splitter.moveSplitter(int(total * 0.3), 1)
    mine = inspector.splitter.shares()
    assert abs(mine[0] - 0.3) < 0.02
    w.files.prompts.changes_answer = "discard"
    w.close()
    assert w.settings.layout()["shares"]["qkv/panel"] == mine
    w2 = make_window("river-bank", all_panels=True)
    assert w2.workspace == "qkv"
    i2 = w2.panel("inspector")
    qtbot.waitUntil(i2.isVisible, timeout=5000)
    assert [round(x, 2) for x in i2.splitter.shares()] == [round(x, 2) for x in mine]
    w2.reset_layout()
    assert i2.splitter.shares() == i2.default_shares("panel")


@pytest.mark.parametrize("demo", ["savings-bank", "river-bank"])
def test_the_hints_first_step_is_one_click_to_type_a_sentence(make_window, qtbot, demo):
    """"type your own sentence" is a link (the hint once sent people to a control called Inputs that
    no label names): it selects the session's text for typing over (a hand-set demo's tokens become
    that text), or adds a text source to type in."""
    from PySide6.QtTest import QTest
    from PySide6.QtWidgets import QApplication

    from attnviz.model.state import TextSource

    w = make_window(demo)
    assert 'href="text"' in w.hint.label.text() and "Inputs" not in w.hint.label.text()
    texts_before = [s for s in w.ctx.session.state.sources if isinstance(s, TextSource)]
    hand_set = w.ctx.session.state.sources[0]
    w.activateWindow()
    w.hint.label.linkActivated.emit("text")
    inputs = w.panel("inputs")
    edit = inputs.text_editor.edit
    qtbot.waitUntil(edit.hasFocus, timeout=2000)
    texts = [s for s in w.ctx.session.state.sources if isinstance(s, TextSource)]
    if texts_before:  # the demo's sentence, all selected: typing replaces it
        assert texts == texts_before and inputs.current_name() == texts[0].name
        assert edit.textCursor().selectedText() == texts[0].text != ""
        QTest.keyClicks(QApplication.focusWidget(), "my own words")
        assert edit.toPlainText() == "my own words"
    else:  # a hand-set demo: its tokens become a text of the same words, all selected, to type over
        assert len(w.ctx.session.state.sources) == 1 and len(texts) == 1
        assert inputs.current_name() == texts[0].name
        assert edit.textCursor().selectedText() == texts[0].text == " ".join(hand_set.labels)  # its words
