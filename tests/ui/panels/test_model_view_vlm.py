"""The Pretrained panel on vision-language(-action) models (hand-built runs behind a stand-in checkpoint): the
image and prompt row with the family's options, the picture with the query's attention over its patches,
clicks on a token, a patch and a head, the share chart with one point per layer, the model's mask opened as a
session of its segments, and every problem as one line."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("PySide6")

from PySide6.QtWidgets import QApplication  # noqa: E402

from attnviz.checkpoints.study import (VlmOutcome, patch_maps, prompt_to_field, query_values,  # noqa: E402
                                       share_curves)
from attnviz.model.demos import build_demo  # noqa: E402
from attnviz.model.sequence import assemble  # noqa: E402
from attnviz.model.session import Session  # noqa: E402
from attnviz.ui.context import AppContext  # noqa: E402
from attnviz.ui.model_view.panel import PAGE_VLM, ModelViewPanel  # noqa: E402
from attnviz.ui.model_view.share_chart import DARK_COLOURS, LIGHT_COLOURS  # noqa: E402
from attnviz.ui.theme import apply_theme  # noqa: E402
from vlm_samples import LLAVA_PROMPT, fake_checkpoint, llava_run, picture  # noqa: E402

WAIT_MS = 30000


def make_panel(qtbot, kind="llava", calls=None, demo="vla-mask"):
    ctx = AppContext(Session(build_demo(demo)))
    panel = ModelViewPanel(ctx, auto_load=False)
    qtbot.addWidget(panel)
    ckpt = fake_checkpoint(kind, calls=calls)
    panel.study.load_job = lambda folder, name: (lambda: ckpt)
    panel.resize(1100, 700)
    panel.show()
    qtbot.waitExposed(panel)
    with qtbot.waitSignal(panel.attention_ready, timeout=WAIT_MS):
        panel.load_model(f"/nonexistent/tiny_{kind}")
    return ctx, panel


def run(qtbot, panel, action):
    with qtbot.waitSignal(panel.attention_ready, timeout=WAIT_MS) as blocker:
        action()
    return blocker.args[0]


def expected_maps(panel, q, mode="head"):
    layer, head = panel.selected
    return patch_maps(panel.vlm.result, query_values(panel.outcome, q, mode, layer, head))


def test_the_vlm_view_shows_image_prompt_and_the_picture(qtbot):
    calls = []
    ctx, panel = make_panel(qtbot, calls=calls)
    assert panel.inputs.currentIndex() == PAGE_VLM
    inputs = panel.vlm_inputs
    assert inputs.prompt_edit.text() == prompt_to_field(LLAVA_PROMPT)
    assert inputs.image_combo.currentText() == "session: image"  # the vla-mask demo's camera image
    assert "Open image…" in [inputs.image_combo.itemText(i) for i in range(inputs.image_combo.count())]
    assert inputs.second_combo.isHidden() and not inputs.fields  # LLaVA: one image, no options
    assert calls[0][1] == LLAVA_PROMPT and len(calls[0][0]) == 1  # the line break reached the model
    assert panel.pages.currentWidget() is panel.vlm and panel.vlm.isVisible()
    r = panel.vlm.result
    assert panel.vlm.grid.grid_shape() == (2, 4)
    assert panel.vlm.chips.count() == r.T and panel.vlm.query == r.T - 1
    assert panel.vlm.picture.isVisible() and panel.vlm.page_combo.isHidden()
    for got, want in zip(panel.vlm.overlay_maps, expected_maps(panel, r.T - 1)):
        np.testing.assert_array_equal(got, want)
    assert "image patches" in panel.vlm.caption.text() and "layer 0 · head 0" in panel.vlm.caption.text()
    panel.vlm.tabs.setCurrentIndex(1)  # the selected head's whole map under the model's mask
    np.testing.assert_array_equal(panel.vlm.detail.allowed, r.mask)
    assert not panel.message.isVisibleTo(panel)


def test_a_click_on_a_token_a_patch_and_a_head_changes_the_overlay(qtbot, mouse):
    ctx, panel = make_panel(qtbot)
    view = panel.vlm
    before = [m.copy() for m in view.overlay_maps]
    qtbot.wait(50)
    word = view.result.labels.index("picture")
    with qtbot.waitSignal(view.overlay_changed, timeout=2000):
        mouse.click(view.chips.viewport(), view.chips.chip_rect(word).center())
    assert view.query == word and view.chips.selected == word
    after = view.overlay_maps
    assert not all(np.array_equal(a, b) for a, b in zip(before, after))
    for got, want in zip(after, expected_maps(panel, word)):
        np.testing.assert_array_equal(got, want)
    assert "'picture'" in view.caption.text()

    g = view.result.patches[0]  # a patch of the picture: that image token becomes the query
    with qtbot.waitSignal(view.overlay_changed, timeout=2000):
        mouse.click(view.picture.graphics.viewport(), view.picture.patch_center(0, 5).toPoint())
    assert view.query == int(g.tokens[5]) and view.picture.highlighted == (0, 5)
    (own,) = view.overlay_maps
    assert own.ravel()[6:].sum() == 0  # causal: a patch sees only the patches before it

    with qtbot.waitSignal(panel.head_selected, timeout=2000) as blocker:
        mouse.click(view.grid.plot.viewport(), view.grid.tile_center(1, 3).toPoint())
    assert blocker.args == [1, 3] and panel.selected == (1, 3) and view.grid.selected == (1, 3)
    for got, want in zip(view.overlay_maps, expected_maps(panel, view.query)):
        np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(view.detail.values, view.result.attentions[1, 3].astype(np.float32))

    view.set_mode("mean")
    np.testing.assert_allclose(view.overlay_maps[0], expected_maps(panel, view.query, "mean")[0], rtol=1e-6)
    view.set_mode("rollout")
    np.testing.assert_allclose(view.overlay_maps[0], expected_maps(panel, view.query, "rollout")[0])
    assert "rollout through 2 layers" in view.caption.text()


def test_the_share_chart_has_one_point_per_layer(qtbot):
    ctx, panel = make_panel(qtbot)
    chart = panel.vlm.chart
    want = share_curves(panel.vlm.result)
    pts = chart.points()
    assert list(pts) == [label for label, _v in want.lines] == ["image", "first token", "text"]
    for label, values in want.lines:
        x, y = pts[label]
        np.testing.assert_array_equal(x, np.arange(2))
        np.testing.assert_allclose(y, values)
    assert "to&nbsp;first&nbsp;token" in chart.legend.text() and "9 text tokens" in chart.title.text()
    assert LIGHT_COLOURS[0] in chart.legend.text()
    try:
        apply_theme(QApplication.instance(), "dark")
        assert DARK_COLOURS[0] in chart.legend.text()  # lines redrawn in the dark theme's colours
        assert chart.plot.backgroundBrush().color().name() == "#1b1b1b"
    finally:
        apply_theme(QApplication.instance(), "light")


def test_tiles_and_the_global_image_are_pages(qtbot):
    ctx, panel = make_panel(qtbot, kind="idefics3")
    view = panel.vlm
    assert not view.page_combo.isHidden()
    assert [view.page_combo.itemText(i) for i in range(view.page_combo.count())] == ["tiles", "global image"]
    assert view.picture.members == (0, 1, 2, 3)
    assert not panel.vlm_inputs.second_combo.isHidden()  # a model that reads several images
    view.set_page(1)
    assert view.picture.members == (4,)
    assert len(view.overlay_maps) == 5


def test_a_policys_options_and_action_tokens(qtbot):
    calls = []
    ctx, panel = make_panel(qtbot, kind="pi0", calls=calls)
    assert list(panel.vlm_inputs.fields) == ["state", "noise_seed", "time"]
    assert calls[0][2] == {"noise_seed": 0, "time": 1.0}
    run(qtbot, panel, lambda: panel.set_prompt("pick up the cup", run=True, state="0.1,0.2", time="0.5"))
    assert calls[-1][1:] == ("pick up the cup", {"state": [0.1, 0.2], "noise_seed": 0, "time": 0.5})
    view = panel.vlm
    assert view.result.labels[view.query] == "<act 0>"
    assert view.chart.title.text().startswith("Share of attention per layer, mean over heads and the 4 action tokens")
    view.set_mode("rollout")
    assert view.overlay_maps is None and "action expert" in view.caption.text()


@pytest.mark.parametrize("kind, act, problem", [
    ("llava", lambda p: p.set_prompt("What is in the picture?", run=True), "no <image> placeholder"),
    ("llava", lambda p: p.set_images([("a", picture()), ("b", picture(seed=1))], run=True),
     "takes 1 image per prompt; 2 were given"),
    ("pi0", lambda p: p.set_prompt("go", run=True, state="left"), "state must be comma-separated numbers"),
    ("pi0", lambda p: p.set_prompt("go", run=True, time="3"), r"time t must be in [0, 1]"),
])
def test_problems_are_one_line_in_the_panel(qtbot, kind, act, problem):
    ctx, panel = make_panel(qtbot, kind=kind)
    shown = panel.vlm.result
    with qtbot.waitSignal(panel.failed, timeout=WAIT_MS) as failed:
        act(panel)
    text = failed.args[0]
    assert problem in text and "\n" not in text and "Traceback" not in text
    assert panel.message.isVisibleTo(panel) and panel.message_text() == text
    assert panel.vlm.result is shown  # the last good run stays


def test_the_models_mask_opens_as_a_session_of_its_segments(qtbot):
    ctx, panel = make_panel(qtbot, kind="paligemma")
    res = panel.vlm.result
    before = ctx.session.state
    assert panel.open_model_mask()  # no window: one undoable step
    state = ctx.session.state
    assert [s.name for s in state.sources] == ["image", "prefix", "suffix"]
    seq, _ = assemble(state)
    np.testing.assert_array_equal(state.mask.compile(list(seq.segments), None, seq.T), res.mask)
    assert dict(state.mask.roles) == {"image": "I", "prefix": "P", "suffix": "A"}
    ctx.undo_stack.undo()
    assert ctx.session.state == before


def test_the_panel_runs_on_the_worker_and_newest_wins(qtbot):
    calls = []
    ctx, panel = make_panel(qtbot, calls=calls)
    panel.set_prompt("USER: <image>\nFirst? ASSISTANT:", run=True)
    last = run(qtbot, panel, lambda: panel.set_prompt("USER: <image>\nWhat colour is it? ASSISTANT:", run=True))
    qtbot.wait(100)
    assert "colour" in last.tokens and panel.vlm.result is last


def test_outcome_of_a_run_is_what_the_view_draws():
    out = VlmOutcome(llava_run())
    assert out.fused.shape == (2, out.result.T, out.result.T) and out.shares.lines
