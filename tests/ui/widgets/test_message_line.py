"""One message line for the panels and dialogs that say something under their controls (MessageLine): a
message at a level, cleared by an empty text, hidden while empty where the owner wants it, and an error's
own style where the owner gives one."""

from __future__ import annotations

import pytest

pytest.importorskip("PySide6")

from PySide6.QtWidgets import QWidget  # noqa: E402

from attnviz.ui.messages import Level  # noqa: E402
from attnviz.ui.widgets.message_line import ERROR_STYLE, MessageLine  # noqa: E402


def test_a_message_is_said_at_its_level_and_cleared(qtbot):
    host = QWidget()
    qtbot.addWidget(host)
    line = MessageLine(host, style="QLabel { padding: 2px; }", error_style=ERROR_STYLE)
    host.show()
    assert line.wordWrap() and line.level is None
    line.say(Level.ERROR, "cannot show the mask")
    assert line.isVisible() and line.text() == "cannot show the mask"
    assert line.level is Level.ERROR and line.styleSheet() == ERROR_STYLE
    line.say(Level.INFO, "wrote mask.npy")
    assert line.level is Level.INFO and line.styleSheet() == "QLabel { padding: 2px; }"
    line.clear()
    assert not line.isVisible() and line.text() == "" and line.level is None


def test_a_line_that_keeps_its_place_and_a_fixed_style(qtbot):
    host = QWidget()
    qtbot.addWidget(host)
    keep = MessageLine(host, hide_empty=False)
    fixed = MessageLine(host, style="QLabel { color: #c62828; }")
    host.show()
    keep.say(Level.ERROR, "no")
    keep.clear()
    assert keep.isVisible() and keep.text() == ""
    fixed.say(Level.ERROR, "Load a model first")
    assert fixed.styleSheet() == "QLabel { color: #c62828; }"  # no error style given: the owner's colour stays


def test_the_panels_say_their_messages_on_a_message_line(qtbot):
    """The Pretrained panel, its Corpus, Generate, Audio and Intervene views and the mask designer with its two
    dialogs: each message line is the one widget, and none of them keeps a helper of its own."""
    import inspect

    from attnviz.ui.mask_designer import export_dialog, rule_chooser
    from attnviz.ui.model_view import audio_view, corpus_view, generate_view, intervene_view, panel
    from attnviz.ui.panels import mask_designer_panel

    modules = (panel, corpus_view, generate_view, audio_view, intervene_view, mask_designer_panel, export_dialog,
               rule_chooser)
    for module in modules:
        source = inspect.getsource(module)
        assert "MessageLine(self" in source, module.__name__
        for helper in ("def _say(", "def _show_message(", "def _clear_message("):
            assert helper not in source, (module.__name__, helper)


@pytest.mark.parametrize("style, error_style, level", [
    ("QLabel { color: #c62828; padding: 2px 6px; }", None, Level.ERROR),  # the Pretrained workspace's views
    ("", ERROR_STYLE, Level.ERROR),  # the mask designer and its dialogs
    ("", ERROR_STYLE, Level.INFO),
])
def test_a_message_line_draws_as_the_label_it_replaced(qtbot, style, error_style, level):
    from attnviz.ui.export import capture
    from PySide6.QtWidgets import QLabel

    text = "cannot show the mask: the sequence is not built yet, so nothing is drawn here"
    old = QLabel("")
    old.setWordWrap(True)
    old.setText(text)
    old.setStyleSheet(style or (ERROR_STYLE if level is Level.ERROR else ""))
    new = MessageLine(style=style, error_style=error_style)
    new.say(level, text)
    for w in (old, new):
        qtbot.addWidget(w)
        w.resize(260, 60)
        w.show()
    assert capture(old) == capture(new)
