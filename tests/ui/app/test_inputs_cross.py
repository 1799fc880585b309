"""Cross-attention from the inputs panel (self / cross, a role per source) and what the heatmaps then
show (Tq x Tk, query labels on rows, key labels on columns); drag-and-drop reordering of sources."""

from __future__ import annotations

import numpy as np
from PySide6.QtCore import QMimeData, QPointF, Qt
from PySide6.QtGui import QDropEvent

from attnviz.model.source_list import ROLES
from attnviz.model.state import CrossConfig
from attnviz.ui.panels.heatmap_panel import HeatmapPanel
from attnviz.ui.panels.inputs_panel import ROLE_COLUMN, InputsPanel


def _show(qtbot, w, size=(420, 760)):
    qtbot.addWidget(w)
    w.resize(*size)
    w.show()
    return w


def _role(p, name):
    return p.role_combos[name].currentText()


def _pick_role(p, name, role):
    combo = p.role_combos[name]
    combo.setCurrentIndex(ROLES.index(role))
    combo.activated.emit(combo.currentIndex())


def test_translation_demo_shows_cross_roles_and_switches_to_self_and_back(qtbot, make_ctx, respond):
    ctx = make_ctx("translation")
    p = _show(qtbot, InputsPanel(ctx))
    heat = _show(qtbot, HeatmapPanel(ctx), (700, 500))
    assert p.attention.currentText() == "cross-attention" and not p.tree.isColumnHidden(ROLE_COLUMN)
    assert _role(p, "French (decoder)") == "queries" and _role(p, "English (encoder)") == "keys/values"
    assert "queries (rows): French (decoder)" in p.cross_info.text()
    resp = respond(ctx)
    values, rows, cols, _ = heat.current_matrix()
    assert values.shape == (3, 3) and rows == ["je", "t'", "aime"] and cols == ["I", "love", "you"]
    np.testing.assert_allclose(values[1], [0.11, 0.01, 0.88], atol=1e-9)  # seed 001's alignment row

    p.attention.setCurrentIndex(0)
    p.attention.activated.emit(0)
    assert ctx.session.state.cross is None and p.tree.isColumnHidden(ROLE_COLUMN)
    resp = respond(ctx)
    assert (resp.Tq, resp.Tk) == (6, 6)
    p.attention.setCurrentIndex(1)
    p.attention.activated.emit(1)  # back to cross: the roles used before
    assert ctx.session.state.cross == CrossConfig(("French (decoder)",), ("English (encoder)",))
    ctx.undo_stack.undo()
    ctx.undo_stack.undo()
    assert ctx.session.state.cross == CrossConfig(("French (decoder)",), ("English (encoder)",))
    assert p.attention.currentText() == "cross-attention"


def test_text_queries_over_image_keys_give_a_non_square_heatmap(qtbot, make_ctx, respond):
    ctx = make_ctx("vit-image")  # one image source: 14 x 14 patches and a class token
    p = _show(qtbot, InputsPanel(ctx))
    heat = _show(qtbot, HeatmapPanel(ctx), (900, 500))
    assert p.attention.currentText() == "self-attention" and p.tree.isColumnHidden(ROLE_COLUMN)
    assert p.add_text("a boat on the river")
    p.text_editor.commit()
    assert p.set_attention("cross")  # first source (the image) gives the queries, the text the keys
    assert ctx.session.state.cross == CrossConfig(("image",), ("text",))
    _pick_role(p, "text", "queries")  # now nothing gives keys/values: refused and reported
    assert ctx.session.state.cross == CrossConfig(("image",), ("text",))
    assert _role(p, "text") == "keys/values"  # the combo shows the session's role again
    p.swap_button.click()
    assert ctx.session.state.cross == CrossConfig(("text",), ("image",))
    assert _role(p, "text") == "queries" and _role(p, "image") == "keys/values"
    with qtbot.waitSignal(heat.rendered, timeout=30000):
        resp = respond(ctx)
    assert resp.ok and resp.cross and resp.Tk == 197 and 0 < resp.Tq < 20
    values, rows, cols, _ = heat.current_matrix()
    assert values.shape == (resp.Tq, 197)  # queries x keys
    assert rows == list(resp.query_labels) and cols[0] == "[CLS]" and cols == list(resp.key_labels)
    np.testing.assert_allclose(values.sum(axis=1), 1.0, atol=1e-9)  # softmax over the image's keys
    shown_rows = dict(heat.heatmap.frame.left_axis.shown_labels())
    shown_cols = dict(heat.heatmap.frame.top_axis.shown_labels())
    assert shown_rows and max(shown_rows) < resp.Tq  # rows are the text's queries ...
    assert shown_cols and max(shown_cols) > 100 and shown_cols.get(0) == "[CLS]"  # ... columns the 197 keys
    assert f"cross-attention {resp.Tq} queries × 197 keys" in heat.heatmap.frame.title.text
    text = heat.heatmap.readout_text(0, 5)
    assert "[text]" in text and "[image]" in text
    # a source with role "unused" is left out and said so
    _pick_role(p, "image", "both")
    assert ctx.session.state.cross == CrossConfig(("text", "image"), ("image",))
    ctx.undo_stack.undo()
    assert ctx.session.state.cross == CrossConfig(("text",), ("image",))
    assert _role(p, "image") == "keys/values"


def _drop(tree, row_from: int, row_to: int, below: bool):
    """Drop row ``row_from`` on the upper/lower half of row ``row_to``: the drop event the list gets at
    the end of an internal drag (a real QDrag needs a window system's drag loop)."""
    tree.setCurrentItem(tree.topLevelItem(row_from))
    rect = tree.visualItemRect(tree.topLevelItem(row_to))
    y = rect.bottom() - 2 if below else rect.top() + 2
    mime = tree.mimeData([tree.topLevelItem(row_from)]) or QMimeData()
    ev = QDropEvent(QPointF(rect.center().x(), y), Qt.DropAction.MoveAction, mime, Qt.MouseButton.LeftButton,
                    Qt.KeyboardModifier.NoModifier)
    tree.dropEvent(ev)
    return ev


def test_dragging_a_source_to_another_row_is_one_move(qtbot, make_ctx):
    ctx = make_ctx("vla-mask")
    p = _show(qtbot, InputsPanel(ctx))
    names = lambda: [s.name for s in ctx.session.state.sources]  # noqa: E731
    assert names() == ["image", "prompt", "state", "fast actions", "expert actions"]
    ev = _drop(p.tree, 4, 1, below=False)  # expert actions above prompt
    assert ev.isAccepted() and ev.dropAction() != Qt.DropAction.MoveAction  # the view removes nothing itself
    qtbot.waitUntil(lambda: names()[1] == "expert actions", timeout=2000)
    assert names() == ["image", "expert actions", "prompt", "state", "fast actions"]
    assert ctx.undo_stack.count() == 1 and ctx.undo_stack.undoText() == "Move source"
    assert p.current_name() == "expert actions"
    assert [p.tree.topLevelItem(i).text(0) for i in range(5)] == names()
    _drop(p.tree, 0, 4, below=True)  # image to the end
    qtbot.waitUntil(lambda: names()[-1] == "image", timeout=2000)
    assert ctx.undo_stack.count() == 2
    _drop(p.tree, 2, 2, below=False)  # onto itself: nothing
    qtbot.wait(50)
    assert ctx.undo_stack.count() == 2
    ctx.undo_stack.undo()
    ctx.undo_stack.undo()
    assert names() == ["image", "prompt", "state", "fast actions", "expert actions"]
    assert p.tree.dragDropMode() == p.tree.DragDropMode.InternalMove
