"""The Pretrained panel's Intervene tab on a tiny decoder: a head ablated by a click in the grid gives the
after-logits of interventions.ablate, undo restores the pass, the interventions travel in the session file,
a mask of the wrong size is one message, the sweep shows progress and stops on Cancel, and the code dialog
holds the scripts the core writes."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("PySide6")

from attnviz.checkpoints import intervention_study, load_checkpoint  # noqa: E402
from attnviz.checkpoints.interventions import ablate, run  # noqa: E402
from attnviz.model.demos import build_demo  # noqa: E402
from attnviz.model.session import Session  # noqa: E402
from attnviz.model.state import Interventions  # noqa: E402
from attnviz.persist import load_session, save_session  # noqa: E402
from attnviz.ui.context import AppContext  # noqa: E402
from attnviz.ui.model_view.intervene_view import InterveneView, parse_indices  # noqa: E402
from attnviz.ui.model_view.panel import ModelViewPanel  # noqa: E402

DATA = Path(__file__).resolve().parents[1] / "data" / "checkpoints"
LLAMA = DATA / "tiny_llama_lm"
TEXT = "the river bank flooded after the rain"
CLEAN = "the river bank flooded after the k"  # as many tokens as TEXT for the tiny tokenizer (5), the last one differs
WAIT_MS = 30000


@pytest.fixture
def panel(qtbot):
    ctx = AppContext(Session(build_demo("river-bank")))
    p = ModelViewPanel(ctx, auto_load=False)
    qtbot.addWidget(p)
    p.resize(1024, 700)
    p.show()
    qtbot.waitExposed(p)
    p.set_text(TEXT)
    view = p.intervention
    with qtbot.waitSignal(view.effects_ready, timeout=WAIT_MS):
        p.load_model(LLAMA)
    p.tabs.setCurrentWidget(view)
    yield p
    view.shutdown()
    p.shutdown()


@pytest.fixture(scope="module")
def ckpt():
    return load_checkpoint(LLAMA)


def changed(qtbot, view, action):
    with qtbot.assertNotEmitted(view.failed, wait=0), qtbot.waitSignal(view.effects_ready, timeout=WAIT_MS) as blocker:
        action()
    return blocker.args[0]


def test_the_tab_is_installed_and_runs_gpt2_like_the_core(panel, qtbot):
    view = panel.intervention
    assert isinstance(view, InterveneView)
    index = panel.tabs.indexOf(view)
    assert panel.tabs.tabText(index) == "Intervene" and panel.tabs.isTabEnabled(index)
    with qtbot.waitSignal(view.effects_ready, timeout=WAIT_MS):
        panel.load_model(DATA / "tiny_gpt2")
    assert panel.tabs.isTabEnabled(index) and view.ready() and not view.encoder()
    assert view.decoder_rows.isVisibleTo(view) and view.code_button.isEnabled()
    ck = panel.ckpt
    ids = panel.outcome.result.ids
    eff = changed(qtbot, view, lambda: view.toggle_head(1, 0))
    before, after = ablate(ck.config, ck.weights, ids, [(1, 0)], "zero")
    np.testing.assert_array_equal(eff.after.logits, after.logits)
    np.testing.assert_array_equal(eff.before.logits, before.logits)
    assert eff.kl > 0 and f"{eff.kl:.4g}" in view.results.text()
    code = view.code()
    assert "transformer.h.{i}.attn.c_proj" in code["pytorch"] and "hook_z" in code["lens"]
    # a patch from a clean prompt of the same length (GPT-2's own tokenizer)
    clean = "the river bank flooded after the sun"
    assert ck.tokenizer.encode(clean, add_special_tokens=True).ids.size == ids.size
    eff = changed(qtbot, view, lambda: view.set_interventions(Interventions(patch="head", patch_layer=1, patch_head=1,
                                                                            clean=clean)))
    assert eff.clean is not None and not np.array_equal(eff.after.logits, eff.before.logits)
    # the corpus sweep is offered for GPT-2 as for the other decoders
    assert view.over_combo.model().item(view.over_combo.findData("corpus")).isEnabled()


def test_the_tab_scrolls_instead_of_widening_or_lengthening_the_window(panel, qtbot):
    view = panel.intervention
    changed(qtbot, view, lambda: view.toggle_head(0, 1))
    hint = view.minimumSizeHint()
    assert hint.width() <= 360 and hint.height() <= 300  # the Pretrained workspace at 1024 x 700 holds it
    panel.resize(700, 600)
    qtbot.wait(50)
    assert panel.tabs.currentWidget() is view and view.scroll.verticalScrollBar().maximum() > 0
    assert view.body.width() <= view.scroll.viewport().width()  # never a horizontal scroll


def test_a_click_in_the_grid_ablates_the_head_like_the_core_and_undo_restores(panel, qtbot, mouse, ckpt):
    view = panel.intervention
    ids = panel.outcome.result.ids
    plain = run(ckpt.config, ckpt.weights, ids)
    view.scroll.ensureWidgetVisible(view.heads_map)
    qtbot.wait(50)
    frame = view.heads_map.frame
    eff = changed(qtbot, view, lambda: mouse.click(frame.viewport(), frame.cell_to_widget(0, 2)))
    assert panel.ctx.session.state.interventions.heads == ((0, 2),)
    before, after = ablate(ckpt.config, ckpt.weights, ids, [(0, 2)], "zero")
    np.testing.assert_array_equal(eff.after.logits, after.logits)
    np.testing.assert_array_equal(eff.before.logits, before.logits)
    assert eff.kl > 0 and f"{eff.kl:.4g}" in view.results.text()
    assert "heads zeroed: 0.2" in view.heads_line.text()
    assert eff.attention_change()[1].max() > 0  # the later layer's maps changed
    # the mode applies to the chosen heads: mean over positions, one more undo step
    view.mode_combo.setCurrentIndex(view.mode_combo.findData("mean"))
    eff = changed(qtbot, view, lambda: view.mode_combo.activated.emit(view.mode_combo.currentIndex()))
    np.testing.assert_array_equal(eff.after.logits, ablate(ckpt.config, ckpt.weights, ids, [(0, 2)], "mean")[1].logits)
    stack = panel.ctx.undo_stack
    assert stack.undoText() == "Change the intervention mode"
    eff = changed(qtbot, view, stack.undo)
    np.testing.assert_array_equal(eff.after.logits, after.logits)
    eff = changed(qtbot, view, stack.undo)
    assert panel.ctx.session.state.interventions == Interventions()
    np.testing.assert_array_equal(eff.after.logits, plain.logits)
    assert eff.kl == 0.0 and "no head edited" in view.heads_line.text()
    eff = changed(qtbot, view, stack.redo)
    np.testing.assert_array_equal(eff.after.logits, after.logits)
    # a second click on the (hatched) edited head restores it
    eff = changed(qtbot, view, lambda: mouse.click(frame.viewport(), frame.cell_to_widget(0, 2)))
    assert panel.ctx.session.state.interventions.heads == () and eff.kl == 0.0
    assert stack.undoText() == "Restore head 0.2"


def test_the_selected_head_shows_before_after_and_difference(panel, qtbot):
    view = panel.intervention
    eff = changed(qtbot, view, lambda: view.toggle_head(0, 1))
    panel.select_head(1, 3)
    b, a, d = eff.attention(1, 3)
    assert view.selected == (1, 3) and "layer 1 · head 3" in view.maps_title.text()
    np.testing.assert_allclose(view.maps[2].values, d.astype(np.float32))
    np.testing.assert_allclose(view.maps[0].values, b.astype(np.float32))
    np.testing.assert_allclose(view.residual.values, eff.residual_change)
    # head 3 in the first edited layer (0) and every later one: before | after | difference
    later = view.later.maps  # (layers, 3, T, T)
    assert later.shape[:2] == (2, 3) and view.later.selected == (1, 1)
    for i in range(2):
        for j, m in enumerate(eff.attention(i, 3)):
            np.testing.assert_allclose(later[i, j], m.astype(np.float32))
    panel.select_head(1, 1)
    assert view.later.selected == (1, 1)
    np.testing.assert_allclose(view.later.maps[1, 2], eff.attention(1, 1)[2].astype(np.float32))
    view.token_a.setText("#5")
    view.token_b.setText("#9")
    view.token_a.editingFinished.emit()
    lb, la = eff.logit_difference(5, 9)
    assert f"{la:+.4f}" in view.results.text() and f"{lb:+.4f}" in view.results.text()


def test_interventions_round_trip_through_the_session_file(panel, qtbot, tmp_path):
    view = panel.intervention
    spec = Interventions(heads=((1, 0), (0, 3)), mode="scale", factor=0.25, patch="head", patch_layer=1,
                         patch_head=2, clean=CLEAN)
    changed(qtbot, view, lambda: view.set_interventions(spec))
    path = save_session(tmp_path / "iv.attnviz", panel.ctx.session.state)
    panel.ctx.session.replace_state(build_demo("river-bank"))
    assert view.spec == Interventions() and not view.factor_spin.isVisible()
    eff = changed(qtbot, view, lambda: panel.ctx.session.replace_state(load_session(path)))
    assert view.spec == spec and view.factor_spin.value() == 0.25 and view.factor_spin.isVisible()
    assert view.clean_edit.text() == spec.clean and view.patch_combo.currentData() == "head"
    assert any("patched from the clean prompt" in a for a in eff.applied)


def test_a_knockout_mask_of_the_wrong_size_is_one_message(panel, qtbot):
    view = panel.intervention
    T = len(panel.outcome.result.ids)
    view.ko_layers.setText("1")  # typing the layers turns the knockout on
    with qtbot.waitSignal(view.failed, timeout=WAIT_MS) as blocker:
        view.ko_layers.editingFinished.emit()
    assert view.spec.knockout_layers == (1,) and view.knockout_check.isChecked()
    text = view.message_text()
    assert blocker.args[0] == text and "the prompt has" in text and f"{T}" in text and "\n" not in text
    assert "Traceback" not in text and view.message.isVisible()


def test_a_knockout_with_a_mask_of_the_right_size_removes_its_edges(panel, qtbot):
    from attnviz.model.state import TextSource

    view = panel.intervention
    ids = panel.outcome.result.ids
    T = len(ids)
    ctx = panel.ctx
    state = ctx.session.state
    # a session of T tokens under the default (full) mask: a knockout that removes nothing
    from dataclasses import replace

    from attnviz.model.sequence import assemble
    words = []
    for n in range(1, 200):
        s = replace(state, sources=(TextSource("t", text=" ".join(["a"] * n)),), cross=None)
        if assemble(s)[0].T == T:
            words = s
            break
    assert words, "no session text of the prompt's length"
    ctx.session.replace_state(words)
    eff = changed(qtbot, view, lambda: view.knockout_check.setChecked(True))
    assert view.message_text() == ""
    allowed = np.asarray(words.mask.compile(list(assemble(words)[0].segments), None, T))
    assert eff.applied and "knocked out in layers 0, 1" in eff.applied[0]
    ko_edges = ~allowed & np.tril(np.ones((T, T), bool))
    assert np.all(eff.after.attentions[:, :, ko_edges] == 0)


def test_the_sweep_reports_progress_and_stops_on_cancel(panel, qtbot, monkeypatch):
    view = panel.intervention
    real = intervention_study.run

    def slow(*a, **k):
        time.sleep(0.15)
        return real(*a, **k)

    monkeypatch.setattr(intervention_study, "run", slow)
    seen = []
    view.progress_moved.connect(lambda n, i, total: seen.append((i, total)))
    with qtbot.waitSignal(view.sweep_ready, timeout=WAIT_MS) as blocker:
        assert view.run_sweep() is not None
        qtbot.waitUntil(lambda: len(seen) >= 2, timeout=WAIT_MS)
        assert view.cancel_button.isEnabled() and not view.sweep_button.isEnabled()
        view.cancel_sweep()
    result = blocker.args[0]
    assert 2 <= result.done < result.grid.size and not result.complete
    assert view.sweep_bar.value() == seen[-1][0] and seen[-1][1] == 8
    assert "cancelled after" in view.importance_map.frame.title_text
    assert view.sweep_button.isEnabled() and not view.cancel_button.isEnabled()
    monkeypatch.setattr(intervention_study, "run", real)
    with qtbot.waitSignal(view.sweep_ready, timeout=WAIT_MS) as blocker:
        view.run_sweep()
    full = blocker.args[0]
    assert full.complete
    layer, head, value = full.ranking()[0]
    assert f"head <b>{layer}.{head}</b>" in view.ranking.text().split("<br>")[0]
    with qtbot.waitSignal(view.effects_ready, timeout=WAIT_MS):
        panel.set_text(CLEAN, run=True)  # another input: the sweep shown is of the old one
    assert view.sweep_result is None and "sweep again" in view.importance_map.frame.title_text


def test_the_code_dialog_holds_the_core_scripts_with_copy_and_save(panel, qtbot, tmp_path, ckpt):
    from PySide6.QtGui import QGuiApplication

    from attnviz.checkpoints.intervention_code import pytorch_script

    view = panel.intervention
    changed(qtbot, view, lambda: view.set_interventions(Interventions(heads=((0, 1), (1, 3)))))
    dialog = view.show_code()
    qtbot.addWidget(dialog)
    ids = panel.outcome.result.ids
    assert dialog.text("pytorch") == pytorch_script(str(ckpt.folder), ids, ablate={(0, 1): "zero", (1, 3): "zero"},
                                                    scale={}, knockout=None, n_layer=ckpt.config.n_layer)
    dialog.copy()
    assert QGuiApplication.clipboard().text() == dialog.text("pytorch")
    assert dialog.save(tmp_path / "hooks.py") and (tmp_path / "hooks.py").read_text() == dialog.text("pytorch")
    dialog.tabs.setCurrentIndex(1)
    assert "hook_z" in dialog.text() and dialog.copy_button.isEnabled()
    changed(qtbot, view, lambda: view.set_interventions(Interventions(patch="head", clean=TEXT)))
    dialog = view.show_code()
    qtbot.addWidget(dialog)
    assert not dialog.copy_button.isEnabled() and "patching" in dialog.message.text()


def test_index_lists_are_parsed_or_refused_in_one_line():
    assert parse_indices("0, 2-3", 4, "layer") == (0, 2, 3) and parse_indices("all", 4, "layer") == ()
    with pytest.raises(ValueError, match="layer 7 is out of range"):
        parse_indices("7", 4, "layer")
    with pytest.raises(ValueError, match="not a head"):
        parse_indices("x", 4, "head")


# ---- over a corpus, encoders and vision models ------------------------------------------------------------


def test_the_sweep_over_a_corpus_runs_off_the_gui_thread_and_fills_the_grid(panel, qtbot, tmp_path, ckpt):
    from attnviz.corpus.sweep import document_ids

    texts = ["the river bank", "after the rain the bank", "the rain"]
    corpus = tmp_path / "c.txt"
    corpus.write_text("".join(t + "\n" for t in texts), encoding="utf-8")
    view = panel.intervention
    view.over_combo.setCurrentIndex(view.over_combo.findData("corpus"))
    assert view.corpus_row.isVisibleTo(view) and view.sweep_button.text() == "Sweep the corpus"
    view.corpus_edit.setText("")
    with qtbot.waitSignal(view.failed, timeout=WAIT_MS):
        assert view.run_sweep() is None  # no corpus named: one line
    assert "Name the corpus" in view.message_text()
    view.corpus_edit.setText(str(corpus))
    seen = []
    view.progress_moved.connect(lambda n, i, total: seen.append((i, total)))
    with qtbot.waitSignal(view.sweep_ready, timeout=60000) as blocker:
        assert view.run_sweep() is not None
    grids = [intervention_study.sweep(ckpt.config, ckpt.weights, document_ids(ckpt, t, None)).grid for t in texts]
    mean = np.mean(grids, axis=0)
    np.testing.assert_allclose(blocker.args[0].grid, mean, atol=1e-12, rtol=0)
    res = view.corpus_result
    assert res.complete and res.documents == 3
    np.testing.assert_allclose(res.std, np.std(grids, axis=0), atol=1e-12, rtol=0)
    assert seen[-1] == (3, 3) and view.sweep_bar.value() == 3
    assert "3 docs" in view.importance_map.frame.title_text
    layer, head = np.unravel_index(np.argmax(mean), mean.shape)
    assert f"head <b>{layer}.{head}</b>" in view.ranking.text().split("<br>")[0]
    with qtbot.waitSignal(view.effects_ready, timeout=WAIT_MS):
        panel.set_text(CLEAN, run=True)  # a corpus sweep does not depend on the panel's input
    assert view.sweep_result is not None


def test_a_cancelled_corpus_sweep_shows_what_it_swept(panel, qtbot, tmp_path, monkeypatch):
    corpus = tmp_path / "c.txt"
    corpus.write_text("the river bank\n" * 12, encoding="utf-8")
    view = panel.intervention
    real = intervention_study.run

    def slow(*a, **k):
        time.sleep(0.02)
        return real(*a, **k)

    monkeypatch.setattr(intervention_study, "run", slow)
    view.over_combo.setCurrentIndex(view.over_combo.findData("corpus"))
    view.corpus_edit.setText(str(corpus))
    seen = []
    view.progress_moved.connect(lambda n, i, total: seen.append(i))
    with qtbot.waitSignal(view.sweep_ready, timeout=60000):
        assert view.run_sweep() is not None
        qtbot.waitUntil(lambda: len(seen) >= 1, timeout=60000)
        assert view.cancel_button.isEnabled()
        view.cancel_sweep()
    res = view.corpus_result
    assert not res.complete and 1 <= res.documents < 12
    assert "cancelled after" in view.importance_map.frame.title_text
    assert view.sweep_button.isEnabled() and not view.cancel_button.isEnabled()


def test_an_encoder_is_intervened_on_with_the_pooled_cosine(panel, qtbot):
    from attnviz.checkpoints.interventions import Edit, cosine, encoder_run

    view = panel.intervention
    with qtbot.waitSignal(view.effects_ready, timeout=WAIT_MS):
        panel.load_model(DATA / "tiny_roberta")
    index = panel.tabs.indexOf(view)
    assert panel.tabs.isTabEnabled(index) and view.ready() and view.encoder()
    assert not view.decoder_rows.isVisibleTo(view) and view.code_button.isEnabled()
    assert [view.metric_combo.itemData(i) for i in range(view.metric_combo.count())] == ["cosine"]
    eff = changed(qtbot, view, lambda: view.toggle_head(1, 0))
    ck = panel.ckpt
    ids = panel.outcome.result.ids
    ref = encoder_run(ck.config, ck.weights, ids, Edit(ablate={(1, 0): "zero"}))
    np.testing.assert_array_equal(eff.after.hidden, ref.hidden)
    np.testing.assert_array_equal(eff.before.hidden, panel.outcome.result.hidden)
    assert eff.cosine == pytest.approx(cosine(panel.outcome.result.hidden[0], ref.hidden[0]), abs=1e-12)
    assert f"{eff.cosine:.6f}" in view.results.text() and eff.cosine < 1
    assert not view.overlay_box.isVisibleTo(view)  # text: no picture
    with qtbot.waitSignal(view.sweep_ready, timeout=WAIT_MS) as blocker:
        view.run_sweep()
    grid = blocker.args[0].grid
    assert grid[1, 0] == pytest.approx(1.0 - eff.cosine, abs=1e-12)
    # a patch is for decoder LLMs: one line, not a traceback
    with qtbot.waitSignal(view.failed, timeout=WAIT_MS):
        view.set_interventions(Interventions(patch="head"), "patch")
    assert "runs on decoder LLMs" in view.message_text()


def test_a_vision_model_draws_the_class_tokens_attention_before_and_after(panel, qtbot, tmp_path):
    view = panel.intervention
    yy, xx = np.mgrid[0:96, 0:160]
    rgb = np.stack([(xx * 1.5) % 256, (yy * 2.5) % 256, ((xx + yy) * 0.8) % 256], -1).astype(np.uint8)
    with qtbot.waitSignal(panel.model_loaded, timeout=WAIT_MS):
        panel.load_model(DATA / "tiny_vit")
    with qtbot.waitSignal(panel.attention_ready, timeout=WAIT_MS):
        panel.set_image(rgb, "stripes", run=True)
    if panel.tabs.currentWidget() is not view:  # the panel shows a picture's model in its Image tab
        with qtbot.waitSignal(view.effects_ready, timeout=WAIT_MS):
            panel.tabs.setCurrentWidget(view)
    assert panel.tabs.isTabEnabled(panel.tabs.indexOf(view)) and view.ready()
    corpus = view.over_combo.model().item(view.over_combo.findData("corpus"))
    assert not corpus.isEnabled()  # the corpus sweep reads text
    eff = changed(qtbot, view, lambda: view.toggle_head(0, 1))
    panel.select_head(1, 0)
    assert view.overlay_box.isVisibleTo(view) and eff.has_overlay
    before, after = eff.overlay(1, 0)
    np.testing.assert_array_equal(view.overlays[0]._weights, before.astype(np.float32))
    np.testing.assert_array_equal(view.overlays[1]._weights, after.astype(np.float32))
    assert np.abs(after - before).max() > 0  # ablating 0.1 moved layer 1's class-token attention
    assert view.overlays[0].colour_scale() == view.overlays[1].colour_scale()  # one scale for both
    assert "layer 1 · head 0" in view.overlay_title.text()
    view.resize(700, 600)
    assert view.minimumSizeHint().height() <= 300  # it scrolls inside the tab
    # the code export: the hook script on the pixels the model saw, saved beside it
    dialog = view.show_code()
    qtbot.addWidget(dialog)
    assert "edits = {0: [(1, 'zero', None)]}" in dialog.text("pytorch") and dialog.copy_button.isEnabled()
    assert dialog.save(tmp_path / "hooks.py") and "beside it" in dialog.message.text()
    np.testing.assert_array_equal(np.load(tmp_path / "interventions_pixels.npy"), panel.outcome.result.pixels)
    dialog.tabs.setCurrentIndex(1)
    assert not dialog.copy_button.isEnabled() and "decoder LLMs" in dialog.message.text()


def test_an_encoders_effects_wait_until_the_tab_is_shown(panel, qtbot):
    view = panel.intervention
    panel.tabs.setCurrentIndex(0)
    with qtbot.waitSignal(panel.attention_ready, timeout=WAIT_MS):
        panel.load_model(DATA / "tiny_roberta")
    qtbot.wait(100)
    assert view.effects is None and view.stale  # no extra passes while another tab is shown
    with qtbot.waitSignal(view.effects_ready, timeout=WAIT_MS) as blocker:
        panel.tabs.setCurrentWidget(view)
    assert blocker.args[0].cosine == pytest.approx(1.0) and not view.stale


def test_a_sweep_stopped_by_loading_another_model_is_not_drawn(panel, qtbot, monkeypatch):
    import threading

    view = panel.intervention
    real = intervention_study.run
    gate = threading.Event()
    calls = []

    def held(*a, **k):  # the sweep waits after its first head until the other model is loaded
        calls.append(1)
        if len(calls) > 2:
            gate.wait(WAIT_MS / 1000)
        return real(*a, **k)

    monkeypatch.setattr(intervention_study, "run", held)
    seen = []
    view.progress_moved.connect(lambda n, i, total: seen.append(i))
    assert view.run_sweep() is not None
    qtbot.waitUntil(lambda: len(seen) >= 1, timeout=WAIT_MS)
    with qtbot.waitSignal(panel.attention_ready, timeout=WAIT_MS):  # loaded, and its run shown
        panel.load_model(DATA / "tiny_qwen2")
    gate.set()
    qtbot.waitUntil(lambda: view.sweep_button.isEnabled(), timeout=WAIT_MS)  # the stopped sweep came back
    assert view.sweep_result is None and view.corpus_result is None


def _sweep_file(path, head_means):
    """A head sweep file as ``attnviz-cli model sweep`` writes it, holding ``head_means`` (L, nh, hd)."""
    from attnviz.corpus.files import AtomicParquet
    from attnviz.corpus.sweep import CorpusSweep, sweep_columns, sweep_schema

    L, nh = head_means.shape[:2]
    res = CorpusSweep(mean=np.ones((L, nh)), std=np.zeros((L, nh)), documents=3, total=3, metric="kl", mode="zero",
                      complete=True, head_means=head_means)
    f = AtomicParquet(path, sweep_schema({"model": "m"}))
    f.write(sweep_columns(res))
    f.commit()
    return path


def test_mean_ablation_takes_its_means_from_a_sweep_file_chosen_in_the_tab(panel, qtbot, tmp_path, ckpt):
    from dataclasses import replace

    from attnviz.checkpoints.interventions import Edit

    view = panel.intervention
    changed(qtbot, view, lambda: view.set_interventions(Interventions(heads=((0, 1), (1, 3)), mode="mean")))
    assert view.means_row.isVisibleTo(view) and view.means() is None
    c = ckpt.config
    means = np.random.default_rng(3).normal(size=(c.n_layer, c.n_head, c.decoder.head_dim))
    good = _sweep_file(tmp_path / "sweep.parquet", means)
    eff = changed(qtbot, view, lambda: view.means_row.choose(good))
    ids = panel.outcome.result.decoder.ids
    ref = run(c, ckpt.weights, ids, Edit(ablate={(0, 1): means[0, 1], (1, 3): means[1, 3]}))
    np.testing.assert_array_equal(eff.after.logits, ref.logits)
    assert "corpus means (sweep.parquet)" in view.heads_line.text()
    code = view.code()
    assert "torch.tensor(factor" in code["pytorch"] and repr(float(means[0, 1, 0])) in code["pytorch"]
    # another model's heads, or a file that is not a sweep file: one line, the input's positions again
    wrong = _sweep_file(tmp_path / "other.parquet", means[:, :2])
    with qtbot.waitSignal(view.effects_ready, timeout=WAIT_MS), qtbot.waitSignal(view.failed, timeout=WAIT_MS) as blocker:
        view.means_row.choose(wrong)
    assert "they come from another model" in blocker.args[0] and "\n" not in blocker.args[0]
    assert "they come from another model" in view.message_text()  # still said once the pass is redrawn
    assert view.means() is None and view.means_row.combo.currentData() == "positions"
    (tmp_path / "notes.txt").write_text("not parquet")
    with qtbot.waitSignal(view.failed, timeout=WAIT_MS) as blocker:
        view.means_row.choose(tmp_path / "notes.txt")
    assert "not a readable Parquet file" in blocker.args[0]
    # another mode hides the row (the session keeps a file chosen for when the mode is mean again)
    changed(qtbot, view, lambda: view.set_interventions(replace(view.spec, mode="zero")))
    assert not view.means_row.isVisibleTo(view)
