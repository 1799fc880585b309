"""The Intervene tab of the vision-language page on the tiny PaliGemma and SmolVLM: enabled there, a head ablated by
the session gives vlm_study's logits, the last token's attention is drawn over the picture before | after on one
colour scale (the maps of VlmEffects.overlay), the sweep ranks the language model's heads, a patch from a clean
prompt of another length is one message, and the code dialog saves the script with the pictures it opens."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("PySide6")

from test_vlm_generate_view import golden, make_panel, pictures  # noqa: E402

from attnviz.checkpoints.intervention_vlm import vlm_study  # noqa: E402
from attnviz.model.state import Interventions  # noqa: E402

WAIT_MS = 60000


def _open(qtbot, name):
    panel = make_panel(qtbot, name)
    view = panel.vlm_intervention
    page = panel.vlm
    assert page.tabs.isTabEnabled(page.tabs.indexOf(view)) and view.ready() and view.vlm()
    assert not panel.intervention.ready()  # the panel's own tab is hidden while the page is shown
    with qtbot.waitSignal(view.effects_ready, timeout=WAIT_MS):
        page.tabs.setCurrentWidget(view)
    return panel, view


def changed(qtbot, view, action):
    with qtbot.assertNotEmitted(view.failed, wait=0), qtbot.waitSignal(view.effects_ready, timeout=WAIT_MS) as blocker:
        action()
    return blocker.args[0]


@pytest.mark.parametrize("name", ["tiny_paligemma", "tiny_smolvlm"])
def test_a_head_ablated_in_the_tab_is_vlm_studys_and_drawn_over_the_picture(qtbot, name, tmp_path):
    panel, view = _open(qtbot, name)
    spec = Interventions(heads=((0, 1), (1, 1)), mode="zero")
    eff = changed(qtbot, view, lambda: view.set_interventions(spec))
    imgs = [rgb for _n, rgb in pictures(name)]
    ref = vlm_study(panel.ckpt, imgs, str(golden(name, "golden.npz")["prompt"]), spec)
    np.testing.assert_array_equal(eff.after.logits, ref.after.logits)
    assert eff.kl > 0 and f"{eff.kl:.4g}" in view.results.text()
    view.set_selected(1, 0)
    ov = view.vlm_overlay
    assert ov.isVisibleTo(view)
    before, after = ov.maps
    for g in range(len(eff.patches)):
        b, a = eff.overlay(1, 0, -1, g)
        np.testing.assert_array_equal(before[g], b)
        np.testing.assert_array_equal(after[g], a)
    assert not np.array_equal(before[0], after[0])  # layer 1 reads the ablated layer 0
    lo, hi = ov.views[0].levels
    assert lo == 0.0 and hi == ov.views[1].levels[1] >= max(float(m.max()) for m in before + after)
    assert "layer 1 · head 0" in ov.title.text()
    # a token chosen in the page's strip: its row over the picture
    q = int(eff.patches[0].tokens[0]) if name == "tiny_paligemma" else len(eff.ids) - 2
    panel.vlm.select_query(q)
    before, after = ov.maps
    np.testing.assert_array_equal(before[0], eff.overlay(1, 0, q, 0)[0])
    np.testing.assert_array_equal(after[0], eff.overlay(1, 0, q, 0)[1])
    assert f"token {q}" in ov.title.text()
    out = os.environ.get("ATTNVIZ_SHOTS")
    if out:
        qtbot.wait(800)
        panel.grab().save(str(Path(out) / f"intervene_{name}.png"))
        view.grab().save(str(Path(out) / f"intervene_{name}_tab.png"))


def test_the_sweep_patch_and_code_on_a_vlm(qtbot, tmp_path):
    panel, view = _open(qtbot, "tiny_paligemma")
    with qtbot.waitSignal(view.sweep_ready, timeout=WAIT_MS) as blocker:
        view.run_sweep()
    sw = blocker.args[0]
    c = panel.ckpt.spec.text
    assert sw.grid.shape == (c.n_layer, c.n_head) and sw.complete and np.isfinite(sw.grid).all()
    with qtbot.waitSignal(view.failed, timeout=WAIT_MS) as blocker:
        view.set_interventions(Interventions(patch="head", clean="a much longer clean prompt than the one given"))
    assert "same length" in blocker.args[0] and "\n" not in blocker.args[0]
    changed(qtbot, view, lambda: view.set_interventions(Interventions(heads=((0, 1),))))
    dialog = view.show_code()
    assert dialog is not None and "o_proj" in dialog.text("pytorch")
    assert dialog.save(tmp_path / "hooks.py")
    assert (tmp_path / "hooks.py").read_text().startswith(dialog.text("pytorch")[:20])
    assert (tmp_path / dialog.code["image_files"][0]).is_file()
    dialog.close()
