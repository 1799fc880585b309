"""In the real window: a vision-language run's own mask opened from the Pretrained workspace as a new session of
its named segments in the Mask workspace (asking first about unsaved changes), equal to the model's mask."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("PySide6")

from PySide6.QtCore import Qt  # noqa: E402

from attnviz.model.commands import SetText  # noqa: E402
from vlm_samples import fake_checkpoint  # noqa: E402


def pretrained(w, qtbot, kind):
    panel = w.panel("pretrained")
    panel.auto_load = False
    ckpt = fake_checkpoint(kind)
    panel.study.load_job = lambda folder, name: (lambda: ckpt)
    w.show_workspace("pretrained")
    with qtbot.waitSignal(panel.attention_ready, timeout=30000):
        panel.load_model(f"/nonexistent/tiny_{kind}")
    return panel


def test_open_mask_asks_then_shows_the_models_segments_in_the_mask_workspace(make_window, qtbot):
    w = make_window("vla-mask", all_panels=True)
    ctx = w.ctx
    assert ctx.execute(SetText("prompt", "pick up the blue cup"))  # unsaved work
    panel = pretrained(w, qtbot, "pi0")
    res = panel.vlm.result
    w.files.prompts.changes_answer = "cancel"
    before = ctx.session.state
    assert not panel.open_model_mask()
    assert ctx.session.state is before and w.workspace == "pretrained"
    w.files.prompts.changes_answer = "discard"
    qtbot.mouseClick(panel.vlm.mask_button, Qt.MouseButton.LeftButton)
    assert w.files.prompts.asked[-1] == "save changes before opening the mask of tiny_pi0"
    assert w.workspace == "mask" and w.files.path is None and ctx.session.dirty
    state = ctx.session.state
    assert [s.name for s in state.sources] == ["images", "language", "state", "actions"]
    names = ["images", "language", "state", "actions"]
    qtbot.waitUntil(lambda: ctx.response is not None and ctx.response.ok
                    and [s.name for s in ctx.response.query_segments] == names, timeout=30000)
    resp = ctx.response
    designer = w.panel("mask_designer")
    designer.flush()
    assert [s.name for s in designer.axes.q_segments] == names
    np.testing.assert_array_equal(state.mask.compile(list(resp.query_segments), None, resp.Tq), res.mask)
    assert designer.apply_preset("vla")  # the seed-000 mask over the same segments: roles remembered, no dialog
    assert not np.array_equal(ctx.session.state.mask.compile(list(resp.query_segments), None, resp.Tq), res.mask)
    ctx.undo_stack.undo()
    assert ctx.session.state.mask == state.mask
