"""The mask designer panel driven like a person would: block-grid clicks and the rule chooser, painting
strokes with real mouse events (one stroke = one undo step), presets against a brute-force seed-000
matrix, sub-block splits, per-head masks."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

pytest.importorskip("PySide6")

from PySide6.QtCore import Qt  # noqa: E402

from attnviz.model.commands import SetCustomBlock  # noqa: E402
from attnviz.model.mask.rules import Rule  # noqa: E402
from test_mask_designer_support import drag_cells, make_panel, vla_bruteforce, wait_response  # noqa: E402


def _index(blocks, name):
    return [b.name for b in blocks].index(name)


def _compiled(ctx, head=None):
    r = ctx.response
    m = ctx.session.state.mask
    d = m if head is None else m.head_design(head)
    return d.compile(list(r.query_segments), list(r.key_segments), r.Tq, r.Tk)


def test_clicking_a_block_cell_sets_its_rule_and_undo_restores(qtbot):
    ctx, panel = make_panel(qtbot)
    snap = panel.snapshot
    r, c = _index(snap.q_blocks, "expert actions"), _index(snap.k_blocks, "expert actions")
    before = ctx.session.state.mask
    qtbot.mouseClick(panel.grid, Qt.MouseButton.LeftButton, pos=panel.grid.cell_centre(r, c))
    assert panel.chooser.isVisible()
    assert panel.chooser.q_block == "expert actions" and panel.chooser.k_block == "expert actions"
    assert panel.chooser.kind() == "allow"  # the VLA mask lets the expert see itself fully
    panel.chooser.choose("causal")
    qtbot.mouseClick(panel.chooser.apply_button, Qt.MouseButton.LeftButton)
    assert not panel.chooser.isVisible()
    mask = ctx.session.state.mask
    assert mask.rule_for("expert actions", "expert actions") == Rule.causal()
    panel.flush()
    seg = next(s for s in ctx.response.query_segments if s.name == "expert actions")
    block = panel.snapshot.mask[seg.start:seg.stop, seg.start:seg.stop]
    assert np.array_equal(block, np.tri(len(seg), dtype=bool))  # causal on the diagonal block
    assert panel.snapshot.cells[r][c].rule == Rule.causal() and panel.snapshot.cells[r][c].explicit
    ctx.undo_stack.undo()
    assert ctx.session.state.mask == before


def test_rule_chooser_window_and_ar_mask_and_its_mistakes(qtbot):
    ctx, panel = make_panel(qtbot)
    snap = panel.snapshot
    r, c = _index(snap.q_blocks, "image"), _index(snap.k_blocks, "image")
    panel.grid.cell_clicked.emit(r, c)
    panel.chooser.window.setValue(3)  # editing the window selects the sliding window
    assert panel.chooser.kind() == "sliding_window"
    assert panel.chooser.apply()
    assert ctx.session.state.mask.rule_for("image", "image") == Rule.sliding_window(3)

    panel.grid.cell_clicked.emit(r, c)
    panel.chooser.choose("ar_mask")
    panel.chooser.ar_text.setText("0 0 1 x")
    assert not panel.chooser.apply()  # a typo stays in the chooser as a message
    assert panel.chooser.isVisible() and "'x' is not 0/1" in panel.chooser.error.text()
    panel.chooser.ar_text.setText("0 0 0 1 1")
    assert panel.chooser.apply()
    assert ctx.session.state.mask.rule_for("image", "image") == Rule.ar_mask([0, 0, 0, 1, 1])

    panel.grid.cell_clicked.emit(r, c)
    panel.chooser.choose("inherit")
    assert panel.chooser.apply()
    assert ctx.session.state.mask.rule_for("image", "image") is None


def test_a_paint_stroke_is_one_undo_step_that_restores_the_mask(qtbot):
    ctx, panel = make_panel(qtbot)
    before_design = ctx.session.state.mask
    before = panel.snapshot.mask.copy()
    emitted = []
    panel.canvas.stroke_cells.connect(lambda cells, mode: emitted.append(mode))
    n0 = ctx.undo_stack.count()
    cells = [(0, 40), (3, 40), (6, 40), (9, 42)]  # image queries onto expert keys: denied by the rules
    drag_cells(qtbot, panel.canvas, cells)
    assert len(emitted) >= 2  # several stroke updates ...
    assert ctx.undo_stack.count() == n0 + 1  # ... one undo step
    panel.flush()
    after = panel.snapshot.mask
    assert after[0, 40] and after[9, 42] and after[5, 40]  # interpolated between mouse samples
    assert not before[0, 40]
    ov = panel.snapshot.layers.overrides
    assert (ov == 1).sum() == (after & ~before).sum() > 0  # painted, shown as overrides
    assert ctx.undo_stack.undoText().startswith("Paint allow")
    ctx.undo_stack.undo()
    panel.flush()
    assert ctx.session.state.mask == before_design
    assert np.array_equal(panel.snapshot.mask, before)

    # right drag denies; the eraser returns cells to their rule
    drag_cells(qtbot, panel.canvas, [(20, 0), (20, 3), (20, 6)], button=Qt.MouseButton.RightButton)
    panel.flush()
    assert not panel.snapshot.mask[20, 0:7].any() and before[20, 0:7].all()
    assert ctx.undo_stack.count() == n0 + 1
    panel.set_tool("eraser")
    drag_cells(qtbot, panel.canvas, [(20, 0), (20, 3), (20, 6)])
    panel.flush()
    assert np.array_equal(panel.snapshot.mask, before)
    assert not ctx.session.state.mask.overrides
    assert ctx.undo_stack.count() == n0 + 2


def test_rectangle_and_row_tools(qtbot):
    ctx, panel = make_panel(qtbot)
    panel.set_tool("rect")
    n0 = ctx.undo_stack.count()
    drag_cells(qtbot, panel.canvas, [(2, 30), (4, 33), (5, 34)], button=Qt.MouseButton.LeftButton)
    panel.flush()
    assert panel.snapshot.mask[2:6, 30:35].all()
    assert ctx.undo_stack.count() == n0 + 1
    panel.set_tool("row")
    drag_cells(qtbot, panel.canvas, [(30, 5), (31, 5), (32, 5)], button=Qt.MouseButton.RightButton)
    panel.flush()
    assert not panel.snapshot.mask[30:33].any()
    assert ctx.undo_stack.count() == n0 + 2


def test_preset_buttons_give_the_seed_000_vla_matrix(qtbot):
    ctx, panel = make_panel(qtbot)
    qtbot.mouseClick(panel.preset_bar.buttons["none"], Qt.MouseButton.LeftButton)
    panel.flush()
    assert panel.snapshot.mask.all()
    qtbot.mouseClick(panel.preset_bar.buttons["vla"], Qt.MouseButton.LeftButton)
    panel.flush()
    segs = list(ctx.response.query_segments)
    assert np.array_equal(panel.snapshot.mask, vla_bruteforce(segs))
    # other block sizes: 3 FAST tokens and 5 expert tokens
    ctx.execute(SetCustomBlock("fast actions", count=3))
    ctx.execute(SetCustomBlock("expert actions", count=5))
    wait_response(qtbot, ctx)
    panel.flush()
    qtbot.mouseClick(panel.preset_bar.buttons["none"], Qt.MouseButton.LeftButton)
    qtbot.mouseClick(panel.preset_bar.buttons["vla"], Qt.MouseButton.LeftButton)
    panel.flush()
    segs = list(ctx.response.query_segments)
    assert segs[-1].stop == panel.snapshot.mask.shape[0] == 28 + 3 + 5
    assert np.array_equal(panel.snapshot.mask, vla_bruteforce(segs))


def test_presets_with_parameters_and_and_or(qtbot):
    ctx, panel = make_panel(qtbot)
    T = ctx.response.Tq
    bar = panel.preset_bar
    bar.prefix_len.setValue(10)
    bar.buttons["prefix_lm"].click()
    panel.flush()
    i, j = np.indices((T, T))
    assert np.array_equal(panel.snapshot.mask, (j < 10) | (j <= i))
    bar.set_mode("and")
    bar.window.setValue(4)
    bar.buttons["sliding_window"].click()
    panel.flush()
    assert np.array_equal(panel.snapshot.mask, ((j < 10) | (j <= i)) & (np.abs(i - j) < 4))
    assert "AND sliding_window(w=4)" in bar.terms.text()
    bar.remove_term.click()
    panel.flush()
    assert np.array_equal(panel.snapshot.mask, (j < 10) | (j <= i))
    bar.set_mode("replace")
    bar.doc_lengths.setText("10 x")
    assert not bar.request("block_diagonal")
    assert "not a whole number" in panel.message_text
    bar.doc_lengths.setText("10 20")
    bar.buttons["block_diagonal"].click()
    panel.flush()
    doc = np.minimum(np.arange(T) // 10, 1) + (np.arange(T) >= 30)
    assert np.array_equal(panel.snapshot.mask, doc[:, None] == doc[None, :])


def test_split_and_merge_sub_blocks(qtbot):
    ctx, panel = make_panel(qtbot)
    sc = panel.split_controls
    sc.select("image", 5)
    sc.split_button.click()
    panel.flush()
    names = [b.name for b in panel.snapshot.q_blocks]
    assert names[:2] == ["image.1", "image.2"] and len(names) == 6
    assert len(panel.snapshot.cells) == 6 and len(panel.snapshot.cells[0]) == 6
    r, c = names.index("image.1"), names.index("image.2")
    panel.grid.cell_clicked.emit(r, c)
    panel.chooser.choose("deny")
    panel.chooser.apply()
    panel.flush()
    assert not panel.snapshot.mask[0:5, 5:15].any() and panel.snapshot.mask[5:15, 0:5].all()
    sc.select("image", 5)
    sc.merge_button.click()
    panel.flush()
    assert [b.name for b in panel.snapshot.q_blocks][0] == "image"
    assert panel.snapshot.mask[0:15, 0:15].all()  # the sub-block's rule went with it


def test_per_head_mask_leaves_the_shared_one(qtbot):
    ctx, panel = make_panel(qtbot)
    shared = _compiled(ctx)
    panel.preset_bar.select_head(2)
    assert panel.target.head == 2
    panel.preset_bar.buttons["causal"].click()
    panel.flush()
    mask = ctx.session.state.mask
    assert dict(mask.heads).keys() == {2}
    assert np.array_equal(_compiled(ctx), shared)
    T = ctx.response.Tq
    assert np.array_equal(_compiled(ctx, 2), np.tri(T, dtype=bool))
    assert np.array_equal(panel.snapshot.mask, np.tri(T, dtype=bool))
    assert "own mask" in panel.preset_bar.head.currentText()
    panel.preset_bar.follow_shared.click()
    assert not ctx.session.state.mask.heads


def test_header_menu_splits_and_merges(qtbot):
    ctx, panel = make_panel(qtbot)
    block = panel.snapshot.q_blocks[_index(panel.snapshot.q_blocks, "prompt")]
    menu = panel.header_menu(block)
    split = next(a for a in menu.actions() if a.text().startswith("Split prompt"))
    split.trigger()
    panel.flush()
    assert [b.name for b in panel.snapshot.q_blocks][1:3] == ["prompt.1", "prompt.2"]
    first = panel.snapshot.q_blocks[1]
    menu = panel.header_menu(first)
    merge = next(a for a in menu.actions() if a.text().startswith("Merge prompt.1 with"))
    merge.trigger()
    panel.flush()
    assert [b.name for b in panel.snapshot.q_blocks][1] == "prompt"


def test_slow_redraws_are_spaced_out_and_fast_ones_are_not(qtbot, monkeypatch):
    from attnviz.ui.panels import mask_designer_panel as mod

    assert mod.redraw_gap_ms(5.0) == 0
    assert mod.redraw_gap_ms(80.0) == 80
    assert mod.redraw_gap_ms(5000.0) == mod.REDRAW_MAX_GAP_MS
    ctx, panel = make_panel(qtbot)
    clock = iter([10.0, 10.25])  # the redraw "took" 250 ms
    monkeypatch.setattr(mod, "time", SimpleNamespace(perf_counter=lambda: next(clock)))
    panel.refresh()
    assert panel.timer.interval() == 250


def test_legend_uses_the_canvas_colours(qtbot):
    from attnviz.ui.mask_designer.legend import entries
    from attnviz.ui.theme import current_theme
    from attnviz.ui.widgets.mask_canvas import mask_colours

    ctx, panel = make_panel(qtbot)
    c = mask_colours(current_theme())
    colours = {text: colour for _, colour, text in entries()}
    assert colours["painted allow"] == c.override_allow and colours["masked by its rule"] == c.rule_deny
    assert colours["fully masked query row"] == current_theme().marker
    assert panel.legend.isVisible() and panel.legend.height() >= panel.legend.sizeHint().height()


def test_vla_preset_infers_roles_and_asks_only_for_the_unsure_ones(qtbot):
    from attnviz.model.commands import RenameSource
    from attnviz.model.mask.presets import preset
    from attnviz.ui.mask_designer.role_dialog import RoleDialog

    ctx, panel = make_panel(qtbot)
    problems = []
    ctx.message.connect(lambda level, text: problems.append(text))
    ctx.execute(RenameSource("image", "china"))  # an image named after its file
    wait_response(qtbot, ctx)
    panel.flush()
    asked = []
    panel.ask_vla_roles = lambda parent, rows: asked.append(rows) or None
    qtbot.mouseClick(panel.preset_bar.buttons["none"], Qt.MouseButton.LeftButton)
    qtbot.mouseClick(panel.preset_bar.buttons["vla"], Qt.MouseButton.LeftButton)
    panel.flush()
    assert asked == [] and "no VLA role" not in panel.message_text  # image and text say what they are
    segs = list(ctx.response.query_segments)
    want = preset("vla", segs, roles={"china": "I", "prompt": "P", "state": "P", "fast actions": "A",
                                      "expert actions": "E"})
    assert np.array_equal(panel.snapshot.mask, want.compile(segs))
    assert ctx.session.state.mask.role_map()["china"] == "I"
    # a block whose name says nothing: the person is asked, once
    ctx.execute(RenameSource("expert actions", "block 7"))
    wait_response(qtbot, ctx)
    panel.flush()
    before = ctx.session.state.mask
    assert not panel.apply_preset("vla")  # cancelled: nothing changes
    assert ctx.session.state.mask == before and len(asked) == 1
    rows = {r.name: r.role for r in asked[0]}
    assert rows["block 7"] is None and rows["china"] == "I" and rows["fast actions"] == "A"
    dialog = RoleDialog(asked[0])
    qtbot.addWidget(dialog)
    ok = dialog.buttons.button(dialog.buttons.StandardButton.Ok)
    assert not ok.isEnabled() and dialog.roles() is None
    dialog.set_role("block 7", "E")
    assert ok.isEnabled() and dialog.roles()["block 7"] == "E"
    panel.ask_vla_roles = lambda parent, rows: asked.append(rows) or dialog.roles()
    assert panel.apply_preset("vla")
    panel.flush()
    segs = list(ctx.response.query_segments)
    want = preset("vla", segs, roles={"china": "I", "prompt": "P", "state": "P", "fast actions": "A", "block 7": "E"})
    assert np.array_equal(panel.snapshot.mask, want.compile(segs))
    assert ctx.session.state.mask.role_map()["block 7"] == "E"
    assert panel.apply_preset("vla") and len(asked) == 2  # remembered: not asked again
    assert not [p for p in problems if "VLA role" in p]


def test_role_dialog_reaches_every_role_by_its_access_key(qtbot):
    from PySide6.QtWidgets import QLabel

    from attnviz.ui.mask_designer.role_dialog import RoleDialog, RoleRow

    rows = [RoleRow(name, "#336699", kind, role) for name, kind, role in
            (("camera", "image", "I"), ("say & do", "text", None), ("block 7", "", None))]
    dialog = RoleDialog(rows)
    qtbot.addWidget(dialog)
    dialog.show()
    dialog.activateWindow()
    qtbot.waitUntil(dialog.isActiveWindow, timeout=3000)  # access keys act in the active window
    labels = {lab.buddy(): lab.text() for lab in dialog.findChildren(QLabel) if lab.buddy() is not None}
    assert labels[dialog.combos["camera"]].startswith("&1")
    assert labels[dialog.combos["say & do"]] == "&2  say && do  (text)"  # a literal & stays a character
    qtbot.keyClick(dialog, Qt.Key.Key_3, Qt.KeyboardModifier.AltModifier)
    assert dialog.focusWidget() is dialog.combos["block 7"]
    from attnviz.ui.access_keys import missing_access_keys

    assert missing_access_keys(dialog) == []  # OK and Cancel too, each its own key
