"""The Intervene tab on an encoder-decoder (tiny BART): enabled, its stack chosen (one undo step), heads of that
stack ablated by a click with the logits of intervention_seq2seq_study, the stack's maps before | after |
difference and the per-layer change, a head patch from a clean source, the encoder's knockout refused in one
line when the session's mask is not as wide as the source, and the sweep over the chosen stack."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("PySide6")

from attnviz.checkpoints import load_checkpoint  # noqa: E402
from attnviz.checkpoints.intervention_seq2seq_study import seq2seq_study  # noqa: E402
from attnviz.model.demos import build_demo  # noqa: E402
from attnviz.model.session import Session  # noqa: E402
from attnviz.model.state import Interventions  # noqa: E402
from attnviz.ui.context import AppContext  # noqa: E402
from attnviz.ui.model_view.panel import ModelViewPanel  # noqa: E402

BART = Path(__file__).resolve().parents[1] / "data" / "tiny_bart"
SOURCE = "the bank of the river"
TARGET = "die Bank"
WAIT_MS = 60000


@pytest.fixture
def panel(qtbot):
    ctx = AppContext(Session(build_demo("translation")))
    p = ModelViewPanel(ctx, auto_load=False)
    qtbot.addWidget(p)
    p.resize(1024, 700)
    p.show()
    qtbot.waitExposed(p)
    p.set_target(TARGET)
    view = p.intervention
    with qtbot.waitSignal(p.seq2seq_ready, timeout=WAIT_MS):
        p.load_model(BART, prompt=SOURCE)
    with qtbot.waitSignal(view.effects_ready, timeout=WAIT_MS):
        p.tabs.setCurrentWidget(view)
        view.refresh()
    yield p
    view.shutdown()
    p.shutdown()


@pytest.fixture(scope="module")
def ckpt():
    return load_checkpoint(BART)


def changed(qtbot, view, action):
    with qtbot.assertNotEmitted(view.failed, wait=0), qtbot.waitSignal(view.effects_ready, timeout=WAIT_MS) as blocker:
        action()
    return blocker.args[0]


def _ids(panel):
    r = panel.outcome.result
    return r.encoder_ids, r.decoder_ids


def test_the_tab_runs_an_encoder_decoders_chosen_stack_like_the_core(panel, qtbot, ckpt):
    view = panel.intervention
    assert panel.tabs.isTabEnabled(panel.tabs.indexOf(view)) and view.ready() and view.seq2seq()
    assert view.stack_row.isVisibleTo(view) and not view.means_row.isVisibleTo(view)
    assert view.code_button.isEnabled()  # the encoder-decoder's hook script (intervention_seq2seq_code)
    eff = changed(qtbot, view, lambda: view.stack_row.chosen.emit("cross"))
    assert view.spec.stack == "cross" and eff.stack == "cross"
    eff = changed(qtbot, view, lambda: view.toggle_head(1, 1))
    src, dec = _ids(panel)
    ref = seq2seq_study(ckpt, src, dec, Interventions(heads=((1, 1),)), "cross")
    np.testing.assert_array_equal(eff.after.logits, ref.after.logits)
    assert eff.kl == ref.kl > 0 and f"{eff.kl:.4g}" in view.results.text()
    assert "last decoder row" in view.results.text()
    b, a, d = eff.attention(*view.selected)
    assert b.shape == (dec.size, src.size)  # the cross-attention: target rows over source columns
    assert "cross-attention" in view.maps_title.text()
    assert view.residual.labels[0] == "E0" and view.residual.labels[-1].startswith("D")
    # the stack is an undoable edit like the heads: undo twice is the plain decoder-stack session
    stack = panel.ctx.undo_stack
    assert stack.undoText() == "Ablate head 1.1"
    changed(qtbot, view, stack.undo)
    assert view.spec.heads == () and view.spec.stack == "cross"
    assert stack.undoText() == "Edit the heads of the cross attention"
    changed(qtbot, view, stack.undo)
    assert view.spec.stack == "decoder" and view.stack_row.stack() == "decoder"


def test_a_head_patch_takes_the_clean_source(panel, qtbot, ckpt):
    view = panel.intervention
    src, dec = _ids(panel)
    clean = "the bank of the rivet"  # as many tokens as SOURCE for the tiny tokenizer
    from attnviz.checkpoints.seq2seq_run import encode_source

    clean_ids = encode_source(ckpt, clean, np.float32)[0].ids
    assert clean_ids.size == src.size and not np.array_equal(clean_ids, src)
    spec = Interventions(stack="encoder", patch="head", patch_layer=1, patch_head=2, clean=clean)
    eff = changed(qtbot, view, lambda: view.set_interventions(spec))
    ref = seq2seq_study(ckpt, src, dec, spec, "encoder", clean_ids=clean_ids)
    np.testing.assert_array_equal(eff.after.logits, ref.after.logits)
    assert "patched from the clean source" in view.results.text()
    assert not view.patch_combo.model().item(view.patch_combo.findData("residual")).isEnabled()
    with qtbot.waitSignal(view.failed, timeout=WAIT_MS) as blocker:
        view.set_interventions(Interventions(stack="encoder", patch="head", clean="a"))
    assert "same length" in blocker.args[0]


def test_a_knockout_needs_a_mask_as_wide_as_the_source(panel, qtbot, ckpt):
    from dataclasses import replace

    from attnviz.model.sequence import assemble
    from attnviz.model.state import TextSource

    view = panel.intervention
    with qtbot.waitSignal(view.failed, timeout=WAIT_MS) as blocker:  # the translation demo: a cross-attention
        view.knockout_check.setChecked(True)
    assert "cross-attention" in blocker.args[0] and "self-attention" in blocker.args[0]
    assert view.spec.knockout_layers == tuple(range(ckpt.spec.enc_layers))  # the encoder's layers
    src, dec = _ids(panel)
    state = panel.ctx.session.state
    narrow = replace(state, sources=(TextSource("t", text="a b"),), cross=None)
    with qtbot.waitSignal(view.failed, timeout=WAIT_MS) as blocker:
        panel.ctx.session.replace_state(narrow)
    n = assemble(narrow)[0].T
    assert f"{n} tokens wide; the source has {src.size} tokens" in blocker.args[0]
    fits = next(s for s in (replace(state, sources=(TextSource("t", text=" ".join(["a"] * k)),), cross=None)
                            for k in range(1, 60)) if assemble(s)[0].T == src.size)
    eff = changed(qtbot, view, lambda: panel.ctx.session.replace_state(fits))
    allowed = np.asarray(fits.mask.compile(list(assemble(fits)[0].segments), None, src.size), dtype=bool)
    ref = seq2seq_study(ckpt, src, dec, fits.interventions, "decoder", allowed=allowed)
    np.testing.assert_array_equal(eff.after.logits, ref.after.logits)
    assert "encoder's self-attention" in eff.applied[0]


def test_the_sweep_ranks_the_chosen_stacks_heads(panel, qtbot, ckpt):
    view = panel.intervention
    changed(qtbot, view, lambda: view.stack_row.chosen.emit("encoder"))
    with qtbot.waitSignal(view.sweep_ready, timeout=WAIT_MS) as blocker:
        view.run_sweep()
    sw = blocker.args[0]
    s = ckpt.spec
    assert sw.grid.shape == (s.enc_layers, s.enc_heads) and sw.complete
    assert view.sweep_bar.value() == view.sweep_bar.maximum() == s.enc_layers * s.enc_heads
    src, dec = _ids(panel)
    one = seq2seq_study(ckpt, src, dec, Interventions(heads=((1, 2),)), "encoder")
    assert sw.grid[1, 2] == pytest.approx(one.kl, abs=1e-12)
    assert "head" in view.ranking.text()
    changed(qtbot, view, lambda: view.stack_row.chosen.emit("decoder"))
    assert view.sweep_result is None  # another attention's heads: the sweep shown was the encoder's
    changed(qtbot, view, view.panel.ctx.undo_stack.undo)
    assert view.spec.stack == "encoder" and view.sweep_result is None
    out = os.environ.get("ATTNVIZ_SHOTS")
    if out:  # screenshots for the docs and for review: ATTNVIZ_SHOTS=folder
        view.toggle_head(1, 2)
        qtbot.wait(1500)
        panel.grab().save(str(Path(out) / "intervene_seq2seq.png"))
