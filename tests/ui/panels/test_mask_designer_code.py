"""Masks to and from code in the designer: export -> import round trips through real files, the
FlexAttention source run with numpy, messages (not tracebacks) for masks a format cannot express and
for files that cannot be read."""

from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("PySide6")

from PySide6.QtCore import Qt  # noqa: E402
from PySide6.QtGui import QGuiApplication  # noqa: E402

from attnviz.model.display.mask_snapshot import Target  # noqa: E402
from attnviz.model.mask.commands import PaintCells  # noqa: E402
from attnviz.model.mask.export import evaluate_mask_mod  # noqa: E402
from attnviz.ui.mask_designer.export_dialog import MaskCodeDialog  # noqa: E402
from test_mask_designer_support import make_panel  # noqa: E402


def _mask(ctx):
    r = ctx.response
    return ctx.session.state.mask.compile(list(r.query_segments), list(r.key_segments), r.Tq, r.Tk,
                                          nh=ctx.session.state.model.nh)


def _paint(ctx, cells, value):
    assert ctx.execute(Target().lift(PaintCells(cells, value)))


def test_export_import_round_trips_through_files(qtbot, tmp_path):
    ctx, panel = make_panel(qtbot)
    _paint(ctx, [(0, 40), (1, 40), (30, 2)], "allow")
    _paint(ctx, [(20, 3)], "deny")
    original = _mask(ctx)
    design = ctx.session.state.mask
    qtbot.mouseClick(panel.code_button, Qt.MouseButton.LeftButton)
    dialog = panel.findChild(MaskCodeDialog)
    assert dialog is not None and dialog.isVisible()
    files = {"npy": tmp_path / "m.npy", "json": tmp_path / "m.json"}
    for fmt, path in files.items():
        assert dialog.save_to(path, fmt), dialog.message_text
        assert path.exists() and "wrote" in dialog.message_text
    for fmt, path in files.items():
        panel.preset_bar.buttons["none"].click()
        ctx.execute(Target().lift(PaintCells([(5, 5)], "deny")))
        assert not np.array_equal(_mask(ctx), original)
        assert dialog.import_from(path), dialog.message_text
        assert np.array_equal(_mask(ctx), original), fmt
    assert ctx.session.state.mask == design  # the JSON restores the design itself
    ctx.undo_stack.undo()  # an import is one undo step
    assert ctx.session.state.mask != design


def test_ar_mask_round_trip_and_flex_source(qtbot, tmp_path):
    ctx, panel = make_panel(qtbot)
    panel.preset_bar.prefix_len.setValue(12)
    panel.preset_bar.buttons["prefix_lm"].click()  # a prefix-LM is an ar_mask
    original = _mask(ctx)
    dialog = panel.open_code_dialog()
    dialog.set_format("ar-mask")
    doc = json.loads(dialog.code.toPlainText())
    assert doc["ar_mask"][:12] == [0] * 12 and all(doc["ar_mask"][12:]) and all(doc["valid"])
    path = tmp_path / "prefix.json"
    assert dialog.save_to(path)
    panel.preset_bar.buttons["causal"].click()
    assert dialog.import_from(path), dialog.message_text
    assert np.array_equal(_mask(ctx), original)

    _paint(ctx, [(3, 30), (4, 31)], "allow")
    dialog.set_format("flex")
    src = dialog.code.toPlainText()
    assert "def mask_mod(b, h, q_idx, kv_idx):" in src and dialog.code.isReadOnly()
    T = ctx.response.Tq
    assert np.array_equal(evaluate_mask_mod(src, T, T), _mask(ctx))
    assert dialog.copy()
    assert QGuiApplication.clipboard().text() == src
    out = tmp_path / "mask_mod.py"
    assert dialog.save_to(out)
    assert out.read_text(encoding="utf-8") == src


def test_ar_mask_of_a_painted_mask_is_a_message(qtbot, tmp_path):
    ctx, panel = make_panel(qtbot)
    panel.preset_bar.buttons["causal"].click()
    _paint(ctx, [(10, 2)], "deny")  # a hole in a causal row: not cumsum-expressible
    dialog = panel.open_code_dialog()
    dialog.set_format("ar-mask")
    assert "cannot be written as openpi ar_mask + valid" in dialog.message_text
    assert "Traceback" not in dialog.code.toPlainText()
    assert not dialog.copy()
    # Save… and Copy are disabled for it (Save… once stayed enabled and then wrote nothing)
    assert not dialog.save_button.isEnabled() and not dialog.copy_button.isEnabled()
    assert "cannot express" in dialog.save_button.toolTip()
    # the window names the format as attnviz-cli mask-export does
    assert "(ar-mask)" in dialog.format.currentText() and "openpi" in dialog.format.currentText()
    dialog.set_format("flex")
    assert dialog.save_button.isEnabled() and dialog.copy_button.isEnabled()
    dialog.set_format("ar-mask")
    path = tmp_path / "ar.json"
    assert not dialog.save_to(path, "ar-mask")
    assert not path.exists()
    assert "cannot be written as openpi ar_mask" in dialog.message_text
    dialog.set_format("seqlens")
    assert "not block-diagonal" in dialog.message_text


def test_seqlens_and_npy_summary(qtbot):
    ctx, panel = make_panel(qtbot)
    panel.preset_bar.buttons["block_diagonal"].click()  # one document per segment
    dialog = panel.open_code_dialog()
    dialog.set_format("seqlens")
    doc = json.loads(dialog.code.toPlainText())
    assert doc["q_seqlen"] == [len(s) for s in ctx.response.query_segments]
    assert doc["causal"] is False
    dialog.set_format("npy")
    lines = dialog.code.toPlainText().splitlines()
    assert "(44, 44)" in lines[0] and len(lines) == 1 + 44 and lines[1].startswith("█" * 15 + "·")


def test_imports_that_cannot_work_are_messages(qtbot, tmp_path):
    ctx, panel = make_panel(qtbot)
    dialog = panel.open_code_dialog()
    before = ctx.session.state.mask
    wrong = tmp_path / "small.npy"
    np.save(wrong, np.ones((5, 5), dtype=bool))
    assert not dialog.import_from(wrong)
    assert "5 x 5 mask but the sequence is 44 x 44" in dialog.message_text
    junk = tmp_path / "junk.json"
    junk.write_text("{not json", encoding="utf-8")
    assert not dialog.import_from(junk)
    assert "cannot import junk.json" in dialog.message_text
    assert not dialog.import_from(tmp_path / "missing.npy")
    assert "no such file" in dialog.message_text
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"ar_mask": [0, 2, 1]}), encoding="utf-8")
    assert not dialog.import_from(bad)
    assert "0/1" in dialog.message_text
    assert ctx.session.state.mask == before


def test_the_mask_code_dialog_has_access_keys(qtbot):
    ctx, panel = make_panel(qtbot)
    dialog = panel.open_code_dialog()
    texts = [b.text() for b in (dialog.copy_button, dialog.save_button, dialog.import_button, dialog.close_button)]
    keys = [t[t.index("&") + 1].lower() for t in texts if "&" in t]
    assert len(keys) == 4 and len(set(keys)) == 4, texts
    from PySide6.QtWidgets import QLabel

    buddies = [lab for lab in dialog.findChildren(QLabel) if lab.buddy() is dialog.format]
    assert buddies and "&" in buddies[0].text()
