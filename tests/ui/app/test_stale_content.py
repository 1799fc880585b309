"""What the window shows after the session changes under it: File > New clears the old picture, a
problem of the last computation goes once it is fixed, and the hover readout names tokens of the
current session only."""

from __future__ import annotations

from attnviz.model.commands import SetText


def test_new_session_clears_the_old_picture_and_typing_clears_the_problem(make_window, qtbot):
    w = make_window("vla-mask")
    heat, image = w.panel("heatmap"), w.panel("image")
    assert heat.mode == "dense" and not heat.heatmap.is_empty()
    assert w.files.new_session()
    qtbot.waitUntil(lambda: w.ctx.response is not None and not w.ctx.response.ok, timeout=10000)
    qtbot.waitUntil(lambda: w.notice.isVisible(), timeout=5000)
    assert "no tokens" in w.notice.label.text()
    # nothing of the vla-mask demo is left on screen
    assert heat.mode == "message" and heat.heatmap.is_empty() and heat.heatmap.base.values is None
    assert heat.heatmap.frame.selected_row is None and not heat.grid.isVisible()
    assert "no tokens" in heat.note.text()
    assert image.bar_weights() is None and "no tokens" in image.placeholder.text()
    w.ctx.execute(SetText("text", "the cat sat on the mat"))
    qtbot.waitUntil(lambda: w.ctx.response is not None and w.ctx.response.ok, timeout=10000)
    qtbot.waitUntil(lambda: heat.mode == "dense", timeout=5000)
    assert not w.notice.isVisible()
    assert "no tokens" not in w.status.currentMessage()
    assert not heat.note.isVisible() and not heat.heatmap.is_empty()
    assert image.bar_weights() is not None and len(image.bar_weights()) == w.ctx.response.Tk


def test_hover_readout_names_tokens_of_the_current_session_only(make_window, qtbot):
    w = make_window("vla-mask")
    heat = w.panel("heatmap").heatmap
    heat.frame.picker.hovered.emit(3, 2)  # the mouse rests over a cell of the vla-mask demo
    assert "'p3'" in heat.readout.text()
    assert w.files.new_session("river-bank")
    qtbot.waitUntil(lambda: w.ctx.response is not None and w.ctx.response.Tq == 4, timeout=10000)
    qtbot.waitUntil(lambda: "'p3'" not in heat.readout.text(), timeout=5000)
    assert "'bank'" in heat.readout.text() and "'river'" in heat.readout.text()  # the same cell, new tokens
    assert w.files.new_session("vla-mask")
    qtbot.waitUntil(lambda: w.panel("heatmap").heatmap.frame.n_rows == 44, timeout=10000)
    heat.frame.picker.hovered.emit(30, 30)
    assert "q 30" in heat.readout.text()
    assert w.files.new_session("river-bank")
    qtbot.waitUntil(lambda: w.ctx.response is not None and w.ctx.response.Tq == 4, timeout=10000)
    qtbot.waitUntil(lambda: heat.readout.text().strip() == "", timeout=5000)  # that cell is gone
