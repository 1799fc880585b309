"""The Image workspace without an image: its note names no control that does not exist (it said "Inputs ▸
Add ▸ Image…", and nothing in the window is called Inputs) and its link opens the add-image dialog; the
image chosen becomes a source in one undoable step."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QColor, QImage
from PySide6.QtWidgets import QLabel

from attnviz.model.demos import build_demo
from attnviz.model.session import Session
from attnviz.model.state import ImageSource
from attnviz.ui.context import AppContext
from attnviz.ui.panels.image_panel import ImagePanel

TIMEOUT = 30000


class OneFile:
    def __init__(self, path):
        self.path, self.asked = path, []

    def open_file(self, parent, caption, filters, folder=""):
        self.asked.append((caption, filters))
        return self.path


def test_the_no_image_note_links_to_the_add_image_dialog(qtbot, tmp_path):
    picture = QImage(64, 48, QImage.Format.Format_RGB32)
    picture.fill(QColor("#3070c0"))
    path = tmp_path / "photo.png"
    assert picture.save(str(path))
    ctx = AppContext(Session(build_demo("river-bank")))  # no image source: the bar chart and its note
    panel = ImagePanel(ctx)
    qtbot.addWidget(panel)
    panel.resize(800, 500)
    panel.show()
    try:
        with qtbot.waitSignal(ctx.response_changed, timeout=TIMEOUT):
            ctx.recompute(now=True)
        qtbot.waitUntil(lambda: panel.bars_hint.isVisible(), timeout=TIMEOUT)
        for label in panel.findChildren(QLabel):
            assert "Inputs" not in label.text(), label.text()  # no control is called so
        hint = panel.bars_hint
        assert 'href="add-image"' in hint.text()
        flags = hint.textInteractionFlags()
        assert flags & Qt.TextInteractionFlag.LinksAccessibleByKeyboard
        assert flags & Qt.TextInteractionFlag.LinksAccessibleByMouse
        panel.prompts = OneFile(str(path))
        before = ctx.session.state.sources
        hint.linkActivated.emit("add-image")  # what a click on the link sends
        assert panel.prompts.asked and panel.prompts.asked[0][0] == "Add image"
        sources = ctx.session.state.sources
        assert len(sources) == len(before) + 1 and isinstance(sources[-1], ImageSource)
        assert ctx.undo_stack.count() == 1
        ctx.undo_stack.undo()  # one step takes it away again
        assert ctx.session.state.sources == before
        panel.prompts = OneFile(None)  # cancelled: nothing added
        assert panel.add_image_dialog() is False and ctx.session.state.sources == before
    finally:
        ctx.compute.shutdown()
        panel.close()
        panel.deleteLater()
        ctx.deleteLater()
