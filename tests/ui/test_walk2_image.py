"""The Image workspace chooses the image's class token: a check box beside the image's name, an
undoable edit like every other, saved and reopened with the session."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt

from attnviz.model.demos import build_demo
from attnviz.model.session import Session
from attnviz.persist import load_session, save_session
from attnviz.ui.context import AppContext
from attnviz.ui.panels.image_panel import ImagePanel


@pytest.fixture
def ctx(qtbot):
    c = AppContext(Session(build_demo("vit-image")))
    yield c
    c.compute.shutdown(timeout=5)


def _respond(qtbot, ctx):
    with qtbot.waitSignal(ctx.response_changed, timeout=30000) as blocker:
        ctx.recompute(now=True)
    return blocker.args[0]


def _image(ctx):
    return next(s for s in ctx.session.state.sources if hasattr(s, "class_token"))


def test_the_class_token_is_chosen_in_the_image_workspace(qtbot, ctx, tmp_path):
    panel = ImagePanel(ctx)
    qtbot.addWidget(panel)
    panel.resize(900, 620)
    panel.show()
    assert _respond(qtbot, ctx).Tq == 197  # 14 x 14 patches and [CLS]
    box = panel.class_token
    assert box.isVisible() and box.isChecked() and "&" in box.text()
    qtbot.mouseClick(box, Qt.MouseButton.LeftButton)
    assert not _image(ctx).class_token  # the session changed, not only the box
    resp = _respond(qtbot, ctx)
    assert resp.Tq == 196 and "[CLS]" not in resp.query_labels
    assert panel.shown_query() == 0 and panel.overlay_weights() is not None  # the first patch's weights now
    assert ctx.undo_stack.count() == 1 and "class token" in ctx.undo_stack.undoText()
    save_session(tmp_path / "no_cls.attnviz", ctx.session.state)
    assert not next(s for s in load_session(tmp_path / "no_cls.attnviz").sources
                    if hasattr(s, "class_token")).class_token  # round-trips through save and open
    ctx.undo_stack.undo()
    assert _image(ctx).class_token and box.isChecked()  # the box follows the session back
    ctx.undo_stack.redo()
    assert not _image(ctx).class_token and not box.isChecked()
    ctx.session.replace_state(load_session(tmp_path / "no_cls.attnviz"))
    assert not box.isChecked()


def test_no_class_token_box_without_an_image(qtbot):
    c = AppContext(Session(build_demo("river-bank")))
    try:
        panel = ImagePanel(c)
        qtbot.addWidget(panel)
        panel.show()
        assert not panel.class_token.isVisible()
    finally:
        c.compute.shutdown(timeout=5)
