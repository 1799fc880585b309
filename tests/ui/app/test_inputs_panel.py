"""The inputs dock and the model settings dock on real sessions: sources list edits, the text editor
with its token chips, the image patching controls, custom blocks and model settings — all through
undoable commands."""

from __future__ import annotations

import numpy as np
import pytest
from PySide6.QtCore import QPoint, Qt

from attnviz.model.state import CustomSource, ImageSource, TextSource
from attnviz.sources.image import bundled_image
from attnviz.ui.panels.inputs_panel import TEXT_COMMIT_MS, InputsPanel
from attnviz.ui.panels.settings_panel import SettingsPanel


def _panel(qtbot, ctx, cls=InputsPanel):
    p = cls(ctx)
    qtbot.addWidget(p)
    p.resize(420, 760)
    p.show()
    return p


def _names(ctx):
    return [s.name for s in ctx.session.state.sources]


def test_sources_list_shows_each_source_with_kind_and_tokens(qtbot, make_ctx, respond):
    ctx = make_ctx("vla-mask")
    p = _panel(qtbot, ctx)
    respond(ctx)
    rows = [(p.tree.topLevelItem(i).text(0), p.tree.topLevelItem(i).text(1), p.tree.topLevelItem(i).text(2))
            for i in range(p.tree.topLevelItemCount())]
    assert rows == [("image", "image", "15"), ("prompt", "text", "12"), ("state", "custom", "1"),
                    ("fast actions", "custom", "8"), ("expert actions", "custom", "8")]


def test_add_rename_recolour_move_remove_and_undo(qtbot, make_ctx):
    ctx = make_ctx("vla-mask")
    p = _panel(qtbot, ctx)
    before = ctx.session.state
    assert p.add_text()
    assert _names(ctx)[-1] == "text" and isinstance(ctx.session.state.sources[-1], TextSource)
    assert p.current_name() == "text" and p.editors.currentWidget() is p.text_editor
    assert p.add_block()
    assert isinstance(ctx.session.state.source("block"), CustomSource)
    # rename by editing the name in the list
    item = p.tree.topLevelItem(_names(ctx).index("block"))
    item.setText(0, "noise tokens")
    assert "noise tokens" in _names(ctx) and "block" not in _names(ctx)
    # a clash is refused and reported
    with qtbot.waitSignal(ctx.message, timeout=2000) as msg:
        assert not p.rename("noise tokens", "image")
    assert "already exists" in msg.args[1]
    assert p.recolour("prompt", "#123456")
    assert ctx.session.state.source("prompt").color == "#123456"
    p.select_source("noise tokens")
    p.up_button.click()
    assert _names(ctx)[-2:] == ["noise tokens", "text"]
    p.remove_button.click()
    assert "noise tokens" not in _names(ctx)
    while ctx.undo_stack.canUndo():
        ctx.undo_stack.undo()
    assert ctx.session.state == before


def test_typing_is_one_undo_step_and_chips_follow(qtbot, make_ctx, respond):
    ctx = make_ctx("vla-mask")
    p = _panel(qtbot, ctx)
    respond(ctx)
    p.select_source("prompt")
    ed = p.text_editor
    assert ed.chips.count() == 12
    ed.edit.setFocus()
    ed.edit.moveCursor(ed.edit.textCursor().MoveOperation.End)
    qtbot.keyClicks(ed.edit, " now")
    assert ctx.session.state.source("prompt").text.endswith("tray")  # not committed per key
    qtbot.wait(TEXT_COMMIT_MS + 150)
    assert ctx.session.state.source("prompt").text.endswith("tray now")
    qtbot.keyClicks(ed.edit, " please")
    qtbot.wait(TEXT_COMMIT_MS + 150)
    assert ctx.session.state.source("prompt").text.endswith("now please")
    assert ctx.undo_stack.count() == 1  # both pauses merged into one typing step
    from attnviz.model.sequence import encode_text

    state = ctx.session.state
    assert ed.chips.count() == len(encode_text(state.tokenizer, state.source("prompt").text)) > 12
    ctx.undo_stack.undo()
    assert ctx.session.state.source("prompt").text.endswith("tray")
    assert ed.edit.toPlainText().endswith("tray")


def test_hovering_a_chip_lights_up_its_span(qtbot, make_ctx, respond):
    ctx = make_ctx("vla-mask")
    p = _panel(qtbot, ctx)
    respond(ctx)
    p.select_source("prompt")
    ed = p.text_editor
    qtbot.wait(50)
    r = ed.chips.chip_rect(2)
    qtbot.mouseMove(ed.chips.viewport(), r.center())
    qtbot.waitUntil(lambda: ed.highlighted_span() is not None, timeout=2000)
    a, b = ed.highlighted_span()
    text = ctx.session.state.source("prompt").text
    assert text[a:b].strip() == "the"
    sels = ed.edit.extraSelections()
    assert any(s.cursor.selectionStart() == a and s.cursor.selectionEnd() == b for s in sels)
    # clicking a chip selects that token as the query everywhere
    qtbot.mouseClick(ed.chips.viewport(), Qt.MouseButton.LeftButton, pos=r.center())
    assert ctx.session.state.view.query == 15 + 2  # after the 15 image patches
    assert ed.chips.selected == 2


def test_image_patching_controls(qtbot, make_ctx, respond):
    ctx = make_ctx("vit-image")
    p = _panel(qtbot, ctx)
    respond(ctx)
    ed = p.image_editor
    assert p.editors.currentWidget() is ed
    assert "14 × 14 patches" in ed.info.text() and "197 tokens" in ed.info.text()
    ed.patch.setValue(32)
    src = ctx.session.state.source("image")
    assert src.patch == 32 and src.target == (224, 224)
    assert "7 × 7 patches" in ed.info.text()
    ed.policy.activated.emit(1)
    assert ctx.session.state.source("image").policy == "crop"
    ed.class_token.setChecked(False)
    assert not ctx.session.state.source("image").class_token
    ed.auto_size.setChecked(True)
    assert ctx.session.state.source("image").target is None
    # the patch under the mouse is read out
    qtbot.wait(50)
    c = ed.view.patch_center(3)
    qtbot.mouseMove(ed.view.graphics.viewport(), QPoint(int(c.x()), int(c.y())))
    qtbot.waitUntil(lambda: "patch 3" in ed.view.readout.text(), timeout=2000)


def test_adding_an_image_file_and_a_bad_one(qtbot, make_ctx, tmp_path):
    ctx = make_ctx("river-bank")
    p = _panel(qtbot, ctx)
    assert p.add_image(bundled_image("harbour-wide.png"))
    src = ctx.session.state.sources[-1]
    assert isinstance(src, ImageSource) and src.name == "harbour-wide"
    assert max(src.target) <= 240 and src.target[0] % src.patch == 0
    bad = tmp_path / "broken.png"
    bad.write_bytes(b"not an image at all")
    with qtbot.waitSignal(ctx.message, timeout=2000) as msg:
        assert not p.add_image(bad)
    assert msg.args[0] == "error" and "broken.png" in msg.args[1]
    assert len(ctx.session.state.sources) == 2


def test_custom_block_controls(qtbot, make_ctx, tmp_path):
    ctx = make_ctx("vla-mask")
    p = _panel(qtbot, ctx)
    p.select_source("fast actions")
    ed = p.custom_editor
    ed.count.setValue(5)
    assert ctx.session.state.source("fast actions").count == 5
    ed.seed.setValue(9)
    assert ctx.session.state.source("fast actions").seed == 9
    values = np.arange(3 * 64, dtype=float).reshape(3, 64)
    np.save(tmp_path / "v.npy", values)
    p.prompts = type("P", (), {"open_file": lambda *a, **k: str(tmp_path / "v.npy")})()
    ed.load_button.click()
    src = ctx.session.state.source("fast actions")
    assert src.generator == "file" and src.count == 3
    np.testing.assert_array_equal(src.values.array, values)


def test_model_settings_edit_and_refuse(qtbot, make_ctx):
    ctx = make_ctx("vla-mask")
    p = _panel(qtbot, ctx, SettingsPanel)
    p.nh.setValue(8)
    assert ctx.session.state.model.nh == 8 and ctx.session.state.model.head_size == 8
    p.seed.setValue(3)
    assert ctx.session.state.model.seed == 3
    p.kernel.activated.emit(p.kernel.findText("naive"))
    assert ctx.session.state.kernel.name == "naive"
    p.block_m.setValue(32)
    assert ctx.session.state.kernel.block_m == 32
    p.positional.activated.emit(p.positional.findText("rope"))
    assert ctx.session.state.positional.kind == "rope"
    p.score_rule.activated.emit(p.score_rule.findText("additive"))
    assert ctx.session.state.score_rule.name == "additive" and not p.kernel.isEnabled()
    with qtbot.waitSignal(ctx.message, timeout=2000) as msg:
        p.nh.setValue(7)  # 64 is not divisible by 7
    assert "divisible" in msg.args[1]
    assert p.nh.value() == 8 and ctx.session.state.model.nh == 8
    assert ctx.undo_stack.count() == 6


def test_hand_set_weights_are_dropped_only_for_size_changes(qtbot, make_ctx):
    ctx = make_ctx("river-bank")
    p = _panel(qtbot, ctx, SettingsPanel)
    assert p.handset_note.isVisibleTo(p)
    p.seed.setValue(5)
    assert ctx.session.state.model.handset
    with qtbot.waitSignal(ctx.message, timeout=2000) as msg:
        p.nh.setValue(2)
    assert "hand-set" in msg.args[1]
    assert ctx.session.state.model.nh == 2 and not ctx.session.state.model.handset
    ctx.undo_stack.undo()
    assert ctx.session.state.model.handset and ctx.session.state.model.nh == 1
    assert p.nh.value() == 1


@pytest.mark.parametrize("demo", ["river-bank", "translation", "long-context"])
def test_every_demo_gets_an_editor(qtbot, make_ctx, demo):
    ctx = make_ctx(demo)
    p = _panel(qtbot, ctx)
    assert p.editors.currentWidget() is not p.empty
    assert p.tree.topLevelItemCount() == len(ctx.session.state.sources)
    assert f"<b>{p.current_name()}</b>" in p.editor_title.text()  # the editor says whose it is


def test_value_size_and_positional_parameters(qtbot, make_ctx, respond):
    ctx = make_ctx("vla-mask")
    p = _panel(qtbot, ctx, SettingsPanel)
    assert p.hv_auto.isChecked() and not p.hv.isEnabled()
    p.hv_auto.setChecked(False)
    p.hv.setValue(24)
    assert ctx.session.state.model.hv == 24 and ctx.session.state.model.value_size == 24
    resp = respond(ctx)
    assert resp.ok and resp.output.shape[-1] == 24  # (nh, Tq, hv): each head's output has hv columns
    # vla-mask uses the sinusoidal table: its base is editable, the learned table's scale is not
    assert p.pos_base.isEnabled() and not p.pos_scale.isEnabled()
    assert p.pos_base.isVisibleTo(p) and not p.pos_scale.isVisibleTo(p)  # only the encoding's own parameters
    p.pos_base.setValue(500.0)
    assert ctx.session.state.positional.base == 500.0
    p.positional.activated.emit(p.positional.findText("learned"))
    assert p.pos_scale.isEnabled() and p.pos_seed.isEnabled() and not p.pos_base.isEnabled()
    assert p.pos_scale.isVisibleTo(p) and not p.pos_base.isVisibleTo(p)
    p.pos_scale.setValue(0.5)
    p.pos_seed.setValue(7)
    pos = ctx.session.state.positional
    assert (pos.kind, pos.base, pos.scale, pos.seed) == ("learned", 500.0, 0.5, 7)
    p.positional.activated.emit(p.positional.findText("none"))
    assert not p.pos_base.isEnabled() and not p.pos_scale.isEnabled()
    ctx.undo_stack.undo()
    ctx.undo_stack.undo()
    assert ctx.session.state.positional.scale == 0.5 and ctx.session.state.positional.seed == 0
    assert p.pos_seed.value() == 0 and p.pos_scale.value() == 0.5  # the form follows undo
    p.hv_auto.setChecked(True)
    assert ctx.session.state.model.hv is None and p.hv.value() == ctx.session.state.model.head_size


def test_positional_base_changes_the_attention(qtbot, make_ctx, respond):
    ctx = make_ctx("vla-mask")
    p = _panel(qtbot, ctx, SettingsPanel)
    before = respond(ctx).weights.copy()
    p.pos_base.setValue(50.0)
    after = respond(ctx).weights
    assert ctx.session.state.positional.base == 50.0
    assert not np.allclose(before, after)  # other wavelengths, other positions in X, other weights
