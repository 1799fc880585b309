"""The Intervene tab on Swin: enabled, its heads grid spans every stage's blocks (a stage's missing heads hatched), a
head ablated there gives intervention_swin_study's pooled output and class logits on the panel's own picture, the
maps are the layer's stage's, a knockout mask of another stage's size is one line, and the sweep ranks every head of
every stage and is complete without the missing ones."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("PySide6")

from attnviz.checkpoints import load_checkpoint  # noqa: E402
from attnviz.checkpoints.intervention_swin import swin_classifier  # noqa: E402
from attnviz.checkpoints.intervention_swin_study import swin_study  # noqa: E402
from attnviz.model.demos import build_demo  # noqa: E402
from attnviz.model.session import Session  # noqa: E402
from attnviz.model.state import Interventions  # noqa: E402
from attnviz.ui.context import AppContext  # noqa: E402
from attnviz.ui.model_view.panel import ModelViewPanel  # noqa: E402

SWIN = Path(__file__).resolve().parents[1] / "data" / "checkpoints" / "tiny_swin_cls"
WAIT_MS = 60000


@pytest.fixture
def panel(qtbot):
    ctx = AppContext(Session(build_demo("river-bank")))
    p = ModelViewPanel(ctx, auto_load=False)
    qtbot.addWidget(p)
    p.resize(1024, 700)
    p.show()
    with qtbot.waitSignal(p.attention_ready, timeout=WAIT_MS):
        p.load_model(SWIN)
    view = p.intervention
    with qtbot.waitSignal(view.effects_ready, timeout=WAIT_MS):
        p.tabs.setCurrentWidget(view)
        view.refresh()
    yield p
    view.shutdown()
    p.shutdown()


def changed(qtbot, view, action):
    with qtbot.assertNotEmitted(view.failed, wait=0), qtbot.waitSignal(view.effects_ready, timeout=WAIT_MS) as blocker:
        action()
    return blocker.args[0]


def test_a_head_of_a_later_stage_is_ablated_like_the_core(panel, qtbot):
    view = panel.intervention
    ck = load_checkpoint(SWIN)
    pixels = panel.outcome.result.pixels
    assert panel.tabs.isTabEnabled(panel.tabs.indexOf(view)) and view.ready() and view.encoder()
    eff = view.effects
    heads = eff.heads_per_layer
    assert len(heads) > ck.config.n_layer and len(set(heads)) > 1  # every stage's blocks, stages of other widths
    assert view.shape() == (len(heads), max(heads))
    last = len(heads) - 1
    eff = changed(qtbot, view, lambda: view.toggle_head(last, heads[last] - 1))
    ref = swin_study(ck.config, ck.weights, pixels, Interventions(heads=((last, heads[last] - 1),)),
                     classifier=swin_classifier(SWIN))
    assert eff.cosine == pytest.approx(ref.cosine, abs=1e-12) and eff.cosine < 1.0
    np.testing.assert_array_equal(eff.logits[1], ref.logits[1])
    text = view.results.text()
    assert "pooled output" in text and "classes (before → after)" in text
    change = eff.attention_change()
    assert heads[0] < max(heads)  # the first stage has fewer heads than the last
    assert np.isnan(change[0, heads[0]:]).all() and np.isfinite(change[last, :heads[last]]).all()
    b, _a, _d = eff.attention(last, 0)
    T_last = eff.before.hidden.shape[0]
    assert b.shape == (T_last, T_last)


def test_a_knockout_mask_of_another_stages_size_is_one_line(panel, qtbot):
    view = panel.intervention
    from attnviz.ui.model_view import intervene_view

    orig = intervene_view.session_mask
    intervene_view.session_mask = lambda _state: np.ones((3, 3), bool)
    try:
        with qtbot.waitSignal(view.failed, timeout=WAIT_MS) as blocker:
            view.set_interventions(Interventions(knockout_layers=(0,)))
    finally:
        intervene_view.session_mask = orig
    text = blocker.args[0]
    assert "3 tokens wide" in text and "Window mask" in text and "\n" not in text


def test_the_sweep_covers_every_stages_heads(panel, qtbot):
    view = panel.intervention
    with qtbot.waitSignal(view.sweep_ready, timeout=WAIT_MS) as blocker:
        view.run_sweep()
    sw = blocker.args[0]
    heads = view.effects.heads_per_layer
    assert sw.complete and sw.done == sum(heads) and sw.grid.shape == (len(heads), max(heads))
    out = os.environ.get("ATTNVIZ_SHOTS")
    if out:
        changed(qtbot, view, lambda: view.toggle_head(*sw.ranking()[0][:2]))
        qtbot.wait(800)
        panel.grab().save(str(Path(out) / "intervene_swin.png"))


def test_the_code_dialog_saves_the_swin_script_and_its_pixels(panel, qtbot, tmp_path):
    view = panel.intervention
    changed(qtbot, view, lambda: view.toggle_head(5, 1))
    dialog = view.show_code()
    assert dialog is not None and "register_forward_pre_hook" in dialog.text("pytorch")
    assert "TransformerLens has no bridge for Swin" in dialog.code["lens_problem"]
    out = tmp_path / "hooks.py"
    assert dialog.save(out)
    pixels = np.load(tmp_path / "intervention_pixels.npy")
    np.testing.assert_array_equal(pixels, panel.outcome.result.pixels)
    assert out.read_text(encoding="utf-8") == dialog.text("pytorch") and "AutoModelForImageClassification" in dialog.text()
    dialog.close()
