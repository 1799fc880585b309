"""The first-steps hint's "type your own sentence" is one action to put one's own sentence in place of
the demo's: on the river-bank demo (hand-set tokens, no text source) it once added a text source beside
them (4 tokens became 9); now the hand-set tokens become a text source of the same words, all selected
in the focused editor, in one undo step, and Ctrl+Z brings the demo's tokens back."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication

from attnviz.model.state import TextSource, ToySource
from attnviz.ui.source_editors.common import TEXT_COMMIT_MS


def _ctrl_z(qtbot):
    QTest.keyClick(QApplication.focusWidget(), Qt.Key.Key_Z, Qt.KeyboardModifier.ControlModifier)
    qtbot.wait(50)


def test_own_sentence_replaces_the_river_bank_tokens_in_one_undoable_step(make_window, qtbot):
    w = make_window("river-bank")
    demo = w.ctx.session.state.sources
    assert len(demo) == 1 and isinstance(demo[0], ToySource)
    w.activateWindow()
    steps = w.ctx.undo_stack.count()
    w.hint.label.linkActivated.emit("text")  # what a click on the link sends
    inputs = w.panel("inputs")
    edit = inputs.text_editor.edit
    qtbot.waitUntil(edit.hasFocus, timeout=2000)
    sources = w.ctx.session.state.sources
    assert len(sources) == 1, [s.name for s in sources]  # in place of the demo's tokens, not beside them
    text = sources[0]
    assert isinstance(text, TextSource) and text.text == "by the river bank"
    assert text.color == demo[0].color
    assert inputs.current_name() == text.name
    assert edit.textCursor().selectedText() == "by the river bank"  # typing replaces it
    assert w.ctx.undo_stack.count() == steps + 1  # one step
    QTest.keyClicks(QApplication.focusWidget(), "the cat sat")
    qtbot.wait(TEXT_COMMIT_MS + 150)
    sources = w.ctx.session.state.sources
    assert len(sources) == 1 and sources[0].text == "the cat sat"
    _ctrl_z(qtbot)  # the typing
    assert w.ctx.session.state.sources[0].text == "by the river bank"
    if QApplication.focusWidget() is None:
        edit.setFocus()
    _ctrl_z(qtbot)  # the replacement: the demo's hand-set tokens again
    assert w.ctx.session.state.sources == demo
    assert w.ctx.undo_stack.index() == steps


def test_own_sentence_selects_a_sessions_only_text_and_adds_one_only_when_there_is_none(make_window, qtbot):
    w = make_window("vla-mask")  # one text source, the prompt, among an image and blocks
    before = w.ctx.session.state.sources
    w.activateWindow()
    w.hint.label.linkActivated.emit("text")
    inputs = w.panel("inputs")
    edit = inputs.text_editor.edit
    qtbot.waitUntil(edit.hasFocus, timeout=2000)
    assert w.ctx.session.state.sources == before  # nothing added or replaced
    prompt = next(s for s in before if isinstance(s, TextSource))
    assert inputs.current_name() == prompt.name and edit.textCursor().selectedText() == prompt.text
    w2 = make_window("vit-image")  # an image alone: a new, empty text source beside it
    n = len(w2.ctx.session.state.sources)
    w2.activateWindow()
    w2.hint.label.linkActivated.emit("text")
    sources = w2.ctx.session.state.sources
    assert len(sources) == n + 1 and isinstance(sources[-1], TextSource) and sources[-1].text == ""
