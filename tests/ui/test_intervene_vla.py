"""The Intervene tab of the vision-language page on the tiny SmolVLA policy: enabled, its stack row offers the VLM
and the action expert, a head ablated there gives intervention_vla_study's velocity on the page's own inputs (its
pictures, instruction and state), the read-out is the action chunk's change, the VLA mask's actions → state edges
knocked out of the expert move the chunk, the sweep ranks the stack's heads by the chunk's change, and a bad state
field is one line."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("PySide6")

from attnviz.checkpoints import load_checkpoint  # noqa: E402
from attnviz.checkpoints.intervention_vla import block_knockout, vla_input  # noqa: E402
from attnviz.checkpoints.intervention_vla_study import vla_window_study  # noqa: E402
from attnviz.model.demos import build_demo  # noqa: E402
from attnviz.model.session import Session  # noqa: E402
from attnviz.model.state import Interventions  # noqa: E402
from attnviz.sources.image import load_image  # noqa: E402
from attnviz.ui.context import AppContext  # noqa: E402
from attnviz.ui.model_view.panel import ModelViewPanel  # noqa: E402

FOLDER = Path(__file__).resolve().parents[1] / "data" / "checkpoints" / "tiny_smolvla"
FILES = ["camera0.png", "camera1.png"]
STATE = "0.1,0.2,0.3,0.4"
WAIT_MS = 60000


@pytest.fixture
def panel(qtbot):
    ctx = AppContext(Session(build_demo("river-bank")))
    p = ModelViewPanel(ctx, auto_load=False)
    qtbot.addWidget(p)
    p.resize(1024, 700)
    p.show()
    p.set_images([(f, load_image(FOLDER / f, alpha="drop")) for f in FILES])
    with qtbot.waitSignal(p.attention_ready, timeout=WAIT_MS):
        p.load_model(FOLDER, options={"state": STATE})
    view = p.vlm_intervention
    with qtbot.waitSignal(view.effects_ready, timeout=WAIT_MS):
        p.vlm.tabs.setCurrentWidget(view)
    yield p
    view.shutdown()
    p.shutdown()


@pytest.fixture(scope="module")
def policy():
    return load_checkpoint(FOLDER)


def changed(qtbot, view, action):
    with qtbot.assertNotEmitted(view.failed, wait=0), qtbot.waitSignal(view.effects_ready, timeout=WAIT_MS) as blocker:
        action()
    return blocker.args[0]


def _inp(panel, policy):
    r = panel.outcome.result
    text = panel.vlm_inputs.prompt_edit.text()
    return vla_input(policy, list(r.images), text, state=[float(v) for v in STATE.split(",")])


def test_a_head_of_the_expert_ablated_in_the_tab_moves_the_action_chunk(panel, qtbot, policy):
    view = panel.vlm_intervention
    page = panel.vlm
    assert page.tabs.isTabEnabled(page.tabs.indexOf(view)) and view.ready() and view.vla() and not view.vlm()
    assert view.stack_row.isVisibleTo(view)
    assert [view.stack_row.combo.itemData(i) for i in range(view.stack_row.combo.count())] == ["vlm", "expert"]
    assert view.code_button.isEnabled()
    eff = changed(qtbot, view, lambda: view.stack_row.chosen.emit("expert"))
    assert view.spec.stack == "expert" and eff.stack == "expert" and eff.max_abs_change == 0.0
    eff = changed(qtbot, view, lambda: view.toggle_head(1, 2))
    ref = vla_window_study(policy, _inp(panel, policy), Interventions(heads=((1, 2),), stack="expert"), "expert")
    np.testing.assert_array_equal(eff.after.velocity, ref.after.velocity)
    assert eff.max_abs_change > 0 and f"{eff.max_abs_change:.4g}" in view.results.text()
    assert "action chunk" in view.results.text() and "action expert" in view.maps_title.text()
    b, _a, _d = eff.attention(*view.selected)
    assert b.shape == (policy.spec.chunk, panel.outcome.result.mask.shape[0])  # action rows over every token
    assert panel.ctx.undo_stack.undoText() == "Ablate head 1.2"
    # the VLM's heads move the chunk too: the expert reads the prefix's keys and values
    eff = changed(qtbot, view, lambda: view.stack_row.chosen.emit("vlm"))
    assert eff.stack == "vlm" and view.spec.heads == ((1, 2),)
    assert eff.max_abs_change > 0


def test_the_vla_masks_edges_knocked_out_of_the_expert(panel, qtbot, policy):
    view = panel.vlm_intervention
    changed(qtbot, view, lambda: view.stack_row.chosen.emit("expert"))
    r = panel.outcome.result
    removed = block_knockout(r, "actions", "state")
    from attnviz.ui.model_view import intervene_view

    view_mask = {"allowed": ~removed}
    orig = intervene_view.session_mask
    intervene_view.session_mask = lambda _state: view_mask["allowed"]  # the Mask workspace's design
    try:
        layers = tuple(range(policy.spec.expert.n_layer))
        eff = changed(qtbot, view, lambda: view.set_interventions(Interventions(knockout_layers=layers,
                                                                                stack="expert")))
    finally:
        intervene_view.session_mask = orig
    ref = vla_window_study(policy, _inp(panel, policy), Interventions(knockout_layers=layers, stack="expert"),
                           "expert", allowed=~removed)
    np.testing.assert_array_equal(eff.after.velocity, ref.after.velocity)
    assert eff.max_abs_change > 0 and "actions → state" in view.results.text()


def test_the_sweep_ranks_the_stacks_heads_by_the_chunk(panel, qtbot, policy):
    view = panel.vlm_intervention
    changed(qtbot, view, lambda: view.stack_row.chosen.emit("expert"))
    assert view.metric_combo.currentData() == "action_change"
    with qtbot.waitSignal(view.sweep_ready, timeout=WAIT_MS) as blocker:
        view.run_sweep()
    sw = blocker.args[0]
    L, nh = policy.spec.expert.n_layer, policy.spec.text.n_head
    assert sw.grid.shape == (L, nh) and sw.complete and np.all(sw.grid >= 0)
    one = vla_window_study(policy, _inp(panel, policy), Interventions(heads=((0, 1),), stack="expert"), "expert")
    assert sw.grid[0, 1] == pytest.approx(one.max_abs_change, abs=1e-9)
    assert "head" in view.ranking.text()
    out = os.environ.get("ATTNVIZ_SHOTS")
    if out:  # screenshots for the docs and for review: ATTNVIZ_SHOTS=folder
        changed(qtbot, view, lambda: view.toggle_head(*sw.ranking()[0][:2]))
        qtbot.wait(1000)
        panel.grab().save(str(Path(out) / "intervene_vla.png"))


def test_a_bad_state_field_is_one_line(panel, qtbot):
    view = panel.vlm_intervention
    panel.vlm_inputs.set_option("state", "1,x")
    with qtbot.waitSignal(view.failed, timeout=WAIT_MS) as blocker:
        view.toggle_head(0, 0)
    text = blocker.args[0]
    assert "state" in text and "\n" not in text and "Traceback" not in text


def test_the_code_dialog_saves_the_policy_script_and_its_pictures(panel, qtbot, policy, tmp_path):
    from attnviz.checkpoints.intervention_vla_code import vla_script

    view = panel.vlm_intervention
    changed(qtbot, view, lambda: view.stack_row.chosen.emit("expert"))
    changed(qtbot, view, lambda: view.toggle_head(1, 2))
    dialog = view.show_code()
    assert dialog is not None
    want = vla_script(policy, _inp(panel, policy), view.spec, "expert")
    assert dialog.text("pytorch") == want["pytorch"] and "register_forward_pre_hook" in want["pytorch"]
    out = tmp_path / "hooks.py"
    assert dialog.save(out)
    for name in want["image_files"]:
        assert (tmp_path / name).is_file()
    dialog.close()
