"""Translation models in the window: the Pretrained panel on tiny MarianMT and T5 checkpoints (teacher-forced
on a target, or writing their own greedy translation), the three stacks of maps against transformers'
goldens and attnviz's own pass, T5's position-bias term, and the Diagnostics alignment view fed by the model's
cross-attention (the mean of chosen heads, the argmax path) beside the toy session's table."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("PySide6")

from attnviz.checkpoints import generate_seq2seq, load_checkpoint, run_seq2seq  # noqa: E402
from attnviz.checkpoints.seq2seq_t5 import relative_buckets  # noqa: E402
from attnviz.model.demos import build_demo  # noqa: E402
from attnviz.model.session import Session  # noqa: E402
from attnviz.ui.context import AppContext  # noqa: E402
from attnviz.ui.diagnostics.alignment import AlignmentTab  # noqa: E402
from attnviz.ui.model_view.panel import ModelViewPanel  # noqa: E402
from attnviz.ui.panels.diagnostics_panel import DiagnosticsPanel  # noqa: E402

DATA = Path(__file__).resolve().parents[1] / "data"
MARIAN, T5 = DATA / "tiny_marian", DATA / "tiny_t5"
WAIT_MS = 60000


@pytest.fixture
def golden():
    return np.load(MARIAN / "golden.npz")


@pytest.fixture
def window(qtbot):
    """A Pretrained panel and a Diagnostics panel sharing one context (the translation demo's session)."""
    ctx = AppContext(Session(build_demo("translation")))
    panel = ModelViewPanel(ctx, auto_load=False)
    diag = DiagnosticsPanel(ctx)
    for w in (panel, diag):
        qtbot.addWidget(w)
        w.resize(1000, 700)
        w.show()
    qtbot.waitExposed(panel)
    with qtbot.waitSignal(ctx.response_changed, timeout=WAIT_MS):
        ctx.recompute(now=True)  # the toy session's attention, for the toy alignment table
    yield ctx, panel, diag
    panel.shutdown()
    diag.shutdown()


def _load(qtbot, panel, folder, source, target=""):
    panel.set_target(target)
    with qtbot.waitSignal(panel.seq2seq_ready, timeout=WAIT_MS) as blocker:
        panel.load_model(folder, prompt=source)
    return blocker.args[0]


def _run(qtbot, panel, target):
    with qtbot.waitSignal(panel.seq2seq_ready, timeout=WAIT_MS) as blocker:
        panel.set_target(target, run=True)
    return blocker.args[0]


def _failure(qtbot, panel, source):
    with qtbot.waitSignal(panel.failed, timeout=WAIT_MS) as blocker:
        panel.set_text(source, run=True)
    return blocker.args[0]


def test_teacher_forced_maps_are_transformers_and_run_seq2seq(qtbot, window, golden):
    _ctx, panel, _diag = window
    source, target = str(golden["source"]), str(golden["target"])
    out = _load(qtbot, panel, MARIAN, source, target)
    assert not out.generated and panel.seq2seq.isVisible() and panel.text_label.text() == "source"
    np.testing.assert_array_equal(out.result.decoder_ids, golden["decoder_input_ids"])
    ref = run_seq2seq(load_checkpoint(MARIAN), source, target)
    assert panel.study.stack == "cross" and panel.seq2seq.stack() == "cross"
    assert panel.grid.grid_shape() == (3, 2)  # decoder layers x heads
    for layer in range(3):
        for head in range(2):
            panel.select_head(layer, head)
            shown = panel.shown_matrix()  # (T_dec, T_enc): decoder rows over the source tokens
            np.testing.assert_array_equal(shown, ref.cross_attentions[layer, head])
            np.testing.assert_allclose(shown, golden["cross_attentions"][layer, head], atol=1e-5)
    assert panel.detail.col_labels == ref.encoder_tokens  # source tokens on the key axis
    assert panel.detail.row_labels == ref.decoder_tokens
    panel.set_stack("encoder")
    assert panel.seq2seq.stack() == "encoder" and panel.grid.grid_shape() == (2, 4)
    panel.select_head(1, 3)
    np.testing.assert_allclose(panel.shown_matrix(), golden["encoder_attentions"][1, 3], atol=1e-5)
    assert panel.summary.metric_combo.findData("self") >= 0  # a square stack has attention to self
    panel.set_stack("decoder")
    panel.select_head(2, 1)
    np.testing.assert_allclose(panel.shown_matrix(), golden["decoder_attentions"][2, 1], atol=1e-5)
    assert not panel.detail.allowed[0, 1] and panel.detail.allowed[1, 0]  # causal: later keys hatched
    panel.seq2seq.set_stack("cross")  # the combo, as a person picks it
    assert panel.study.stack == "cross" and panel.summary.metric_combo.findData("self") < 0
    np.testing.assert_allclose(panel.summary.shown_matrix(),
                               _entropy(ref.cross_attentions), atol=1e-9)  # the summaries follow the stack


def _entropy(maps):
    p = np.asarray(maps, dtype=np.float64)
    return -(p * np.log(np.where(p > 0, p, 1.0))).sum(-1).mean(-1)


def test_empty_target_writes_the_models_greedy_translation(qtbot, window):
    _ctx, panel, _diag = window
    g = np.load(MARIAN / "golden_generate.npz")
    source, n = str(g["source_0"]), int(g["max_new_tokens"])
    panel.seq2seq.max_new.setValue(n)
    out = _load(qtbot, panel, MARIAN, source, "")
    assert out.generated and "greedy translation" in panel.describe.text()
    np.testing.assert_array_equal(out.result.decoder_ids, g["sequences_0"][:-1])  # transformers' generate
    np.testing.assert_array_equal(out.result.target_ids, g["sequences_0"][1:])
    want = generate_seq2seq(load_checkpoint(MARIAN), source, max_new_tokens=n)
    panel.select_head(2, 0)
    np.testing.assert_array_equal(panel.shown_matrix(), want.attention.cross_attentions[2, 0])
    assert out.text == want.text
    again = _run(qtbot, panel, "   ")  # only spaces: no target either
    assert again.generated


def test_alignment_view_shows_the_models_mean_cross_attention(qtbot, window, golden):
    ctx, panel, diag = window
    tab = diag.show_tab(AlignmentTab)
    assert not tab.showing_model() and tab.table.rowCount() == 3  # the toy session's table first
    assert not tab.source.model().item(1).isEnabled()  # no translation model has run yet
    assert not tab.show_model()
    source, target = str(golden["source"]), str(golden["target"])
    out = _load(qtbot, panel, MARIAN, source, target)
    assert tab.source.model().item(1).isEnabled() and not tab.showing_model()  # offered, not forced
    assert panel.show_alignment()
    assert diag.current_tab() is tab and tab.showing_model()
    view = tab.model_view
    a = view.aligned
    mean = np.asarray(golden["cross_attentions_f64"], dtype=np.float64).mean(axis=(0, 1))  # (T_dec, T_enc)
    np.testing.assert_allclose(a.weights, mean, atol=1e-5)
    np.testing.assert_allclose(a.weights, out.result.cross_attentions.astype(np.float64).mean(axis=(0, 1)),
                               atol=1e-12)
    np.testing.assert_array_equal(a.path, np.argmax(a.weights, axis=1))
    xs, ys = view.path_item.getData()
    np.testing.assert_array_equal(xs, a.path + 0.5)  # one marker per target row, on its strongest source token
    np.testing.assert_array_equal(ys, np.arange(len(a.path)) + 0.5)
    tok = load_checkpoint(MARIAN).tokenizer
    assert list(a.target_labels) == [tok.piece(int(i), "target") for i in golden["labels"]]  # what each step writes
    assert list(a.source_labels) == out.result.encoder_tokens
    assert view.map.values.shape == (len(golden["labels"]), len(golden["input_ids"]))
    first = a.target_labels[0]
    pairs = view.lines.text().removeprefix("argmax path:  ").split("   ·   ")
    assert len(pairs) == len(a.path) and pairs[0].startswith(f"{first!r} → {a.source_labels[a.path[0]]!r} ")
    view.set_heads([(1, 0)])  # one head: that head's map alone
    np.testing.assert_allclose(view.aligned.weights, golden["cross_attentions"][1, 0], atol=1e-5)
    assert "layer 1 · head 0" in view.picked_line.text()
    view.last_button.click()
    np.testing.assert_allclose(view.aligned.weights, out.result.cross_attentions[2].astype(np.float64).mean(0),
                               atol=1e-12)
    view.set_heads([])  # nothing ticked: one message, nothing drawn
    assert view.aligned is None and "at least one head" in view.picked_line.text()
    view.all_button.click()
    assert len(view.aligned.heads) == 6
    tab.show_session()  # the toy table is still there
    assert tab.pages.currentWidget() is tab.toy and tab.table.rowCount() == 3


def test_alignment_of_the_models_own_translation(qtbot, window):
    ctx, panel, diag = window
    panel.seq2seq.max_new.setValue(6)
    out = _load(qtbot, panel, MARIAN, "the cat sat", "")
    assert panel.show_alignment()
    a = diag.tab(AlignmentTab).model_view.aligned
    assert a.weights.shape == (len(out.result.target_ids), len(out.result.encoder_ids)) and out.generated
    np.testing.assert_allclose(a.weights, out.result.cross_attentions.astype(np.float64).mean(axis=(0, 1)))
    assert "greedy translation" in diag.tab(AlignmentTab).model_view.heading.text()


def test_a_diagnostics_panel_built_later_reads_the_last_run(qtbot, window):
    ctx, panel, _diag = window
    out = _load(qtbot, panel, MARIAN, "where is it?", "où ?")
    late = DiagnosticsPanel(ctx)
    qtbot.addWidget(late)
    assert late.show_model_alignment()
    assert late.tab(AlignmentTab).model_view.outcome is out


def test_bad_sources_are_one_clear_message(qtbot, window):
    _ctx, panel, _diag = window
    out = _load(qtbot, panel, MARIAN, "the cat", "le chat")
    text = _failure(qtbot, panel, "   ")
    assert "source text is empty" in text and "Traceback" not in text and "\n" not in text
    assert panel.outcome is out  # the last run stays shown
    text = _failure(qtbot, panel, "the cat sat on the mat " * 20)
    assert "reads at most 64" in text and "shorten it" in text and "Traceback" not in text
    assert panel.message_text() == text and panel.outcome is out
    assert np.isfinite(panel.shown_matrix()).all()


def test_stop_leaves_the_last_run_shown(qtbot, window):
    _ctx, panel, _diag = window
    out = _load(qtbot, panel, MARIAN, "the cat", "le chat")
    panel.seq2seq.max_new.setValue(60)
    panel.set_target("", run=True)
    assert panel.seq2seq.stop_button.isVisibleTo(panel)
    stop = panel.stop_event
    panel.seq2seq.stop_button.click()
    assert stop.is_set() and not panel.seq2seq.stop_button.isVisibleTo(panel)
    assert panel.jobs.wait_idle(30)
    qtbot.wait(50)
    assert panel.outcome is out and "Stopped" in panel.message_text()
    assert "writing" not in panel.describe.text() and "teacher-forced on the target 'le chat'" in panel.describe.text()


def test_the_model_line_counts_the_tokens_written(qtbot, window):
    _ctx, panel, _diag = window
    _load(qtbot, panel, MARIAN, "the cat", "le chat")
    panel.seq2seq.max_new.setValue(12)
    seen = []
    panel.describe.setText = lambda text, f=panel.describe.setText: (seen.append(text), f(text))
    _run(qtbot, panel, "")
    counts = [int(t.split("translation, ")[1].split(" of")[0]) for t in seen if "writing the translation" in t]
    assert counts == list(range(1, len(counts) + 1)) and 1 <= len(counts) <= 12
    assert all("of at most 12 tokens" in t for t in seen if "writing" in t)
    assert "writing" not in panel.describe.text() and "greedy translation" in panel.describe.text()


def test_t5_shows_its_position_bias_term(qtbot, window):
    _ctx, panel, _diag = window
    source, target = "translate English to German: the house", "das Haus"
    out = _load(qtbot, panel, T5, source, target)
    t5 = load_checkpoint(T5)
    ref = run_seq2seq(t5, source, target)
    assert out.t5_bias and not panel.seq2seq.term_box.isVisibleTo(panel)  # cross-attention has no bias
    panel.set_stack("encoder")
    assert panel.seq2seq.term_box.isVisibleTo(panel)
    panel.seq2seq.set_term("bias")
    panel.select_head(1, 2)
    np.testing.assert_array_equal(panel.shown_matrix(), ref.position_bias["encoder"][2])  # the same in every layer
    assert "position bias" in panel.detail.frame.title.text
    bucket = relative_buckets(len(ref.encoder_ids), len(ref.encoder_ids), True, t5.spec.buckets,
                              t5.spec.max_distance)[1, 4]
    readout = panel.detail.readout_text(1, 4)  # the weight of layer 1 beside the bias drawn
    assert f"weight {ref.encoder_attentions[1, 2, 1, 4]:.4g} (layer 1)" in readout
    assert f"j − i = +3, bucket {bucket}" in readout
    panel.set_stack("decoder")
    panel.select_head(0, 3)
    np.testing.assert_array_equal(panel.shown_matrix(), ref.position_bias["decoder"][3])
    panel.set_stack("cross")  # no bias here: the weights again
    np.testing.assert_array_equal(panel.shown_matrix(), ref.cross_attentions[0, 3])
    assert "position bias" not in panel.detail.readout_text(2, 1)
    panel.set_stack("encoder", "weights")
    np.testing.assert_array_equal(panel.shown_matrix(), ref.encoder_attentions[0, 3])
    assert f"position bias {ref.position_bias['encoder'][3, 2, 0]:.4g} added to the score" in \
        panel.detail.readout_text(2, 0)
    panel.seq2seq.set_term("bias")
    _load(qtbot, panel, T5, source, target)  # a new load starts on the weights, the row saying so
    assert panel.study.term == "weights" and panel.seq2seq.term() == "weights"
    np.testing.assert_array_equal(panel.shown_matrix(), ref.encoder_attentions[0, 3])
    marian = _load(qtbot, panel, MARIAN, "the cat", "le chat")
    assert not marian.t5_bias and panel.seq2seq.term() == "weights"
    panel.set_stack("encoder")
    assert not panel.seq2seq.term_box.isVisibleTo(panel)


def test_other_models_hide_the_translation_row(qtbot, window):
    _ctx, panel, _diag = window
    _load(qtbot, panel, MARIAN, "the cat", "le chat")
    with qtbot.waitSignal(panel.attention_ready, timeout=WAIT_MS) as blocker:
        panel.load_model(DATA / "checkpoints" / "tiny_roberta")
    assert blocker.args[0] is not None and blocker.args[0].kind != "seq2seq"
    assert not panel.seq2seq.isVisible() and panel.text_label.text() == "text"
    assert not panel.show_alignment() and "encoder-decoder" in panel.message_text()


def _overlapping(root):
    """Visible sibling widgets under ``root`` drawn over each other, and wrapped labels shorter than their text."""
    from PySide6.QtWidgets import QLabel, QWidget

    found = []
    for parent in [root] + root.findChildren(QWidget):
        if not parent.isVisible():
            continue
        kids = [c for c in parent.children() if isinstance(c, QWidget) and c.isVisible() and not c.isWindow()
                and c.width() * c.height() > 0]
        for a in range(len(kids)):
            for b in range(a + 1, len(kids)):
                inter = kids[a].geometry().intersected(kids[b].geometry())
                if inter.width() > 2 and inter.height() > 2:
                    found.append(f"{type(kids[a]).__name__} over {type(kids[b]).__name__}")
        if isinstance(parent, QLabel) and parent.wordWrap() and parent.text().strip():
            if parent.height() < parent.heightForWidth(parent.width()) - 2:
                found.append(f"label {parent.text()[:40]!r} cut")
    return found


def test_in_the_window_the_button_opens_the_alignment_at_1024_by_700(qtbot, tmp_path):
    from PySide6.QtCore import Qt

    from attnviz.persist import AutosaveStore
    from attnviz.ui.file_actions import Prompts
    from attnviz.ui.main_window import MainWindow
    from attnviz.ui.panels import PANELS
    from attnviz.ui.settings import AppSettings

    class Discard(Prompts):
        def save_changes(self, parent, what):
            return "discard"

    ctx = AppContext(Session(build_demo("translation")))
    specs = [s for s in PANELS if s.id in ("inputs", "model", "heatmap", "image", "pretrained",
                                                      "diagnostics")]
    store = AutosaveStore(tmp_path / "data")
    store.mark_running()
    w = MainWindow(ctx, settings=AppSettings(tmp_path / "settings.ini"), autosave=store, prompts=Discard(),
                   panels=specs)
    qtbot.addWidget(w)
    try:
        w.resize(1024, 700)
        w.show()
        panel = w.panel("pretrained")
        panel.auto_load = False
        w.show_workspace("pretrained")
        _load(qtbot, panel, MARIAN, "where is the station?", "où est la gare ?")
        qtbot.wait(100)
        hint = w.minimumSizeHint()
        assert hint.width() <= 1024 and hint.height() <= 700 and (w.width(), w.height()) == (1024, 700)
        assert panel.seq2seq.align_button.isVisible()
        qtbot.mouseClick(panel.seq2seq.align_button, Qt.MouseButton.LeftButton)
        assert w.workspace == "diagnostics"
        tab = w.panel("diagnostics").current_tab()
        assert isinstance(tab, AlignmentTab) and tab.showing_model()
        qtbot.wait(100)
        hint = w.minimumSizeHint()
        assert hint.width() <= 1024 and hint.height() <= 700 and (w.width(), w.height()) == (1024, 700)
        assert _overlapping(tab.model_view) == []
        assert tab.model_view.aligned.weights.shape == (14, 16)
    finally:
        w.close()
        ctx.compute.shutdown(timeout=5)


def test_the_alignment_runs_the_model_again_on_another_target(qtbot, window, golden):
    _ctx, panel, diag = window
    out = _load(qtbot, panel, MARIAN, str(golden["source"]), str(golden["target"]))
    panel.show_alignment()
    view = diag.tab(AlignmentTab).model_view
    assert view.target_edit.text() == str(golden["target"])  # the target the run was forced on
    view.target_edit.setText("la gare")
    with qtbot.waitSignal(panel.seq2seq_ready, timeout=WAIT_MS) as blocker:
        view.run_button.click()
        assert view.run_state.isVisibleTo(view) and "running" in view.run_state.text()
    again = blocker.args[0]
    assert not again.generated and again.text == "la gare" and panel.seq2seq.target_edit.text() == "la gare"
    ref = run_seq2seq(load_checkpoint(MARIAN), str(golden["source"]), "la gare")
    assert view.outcome is again and not view.run_state.isVisibleTo(view)
    np.testing.assert_allclose(view.aligned.weights, ref.cross_attentions.astype(np.float64).mean(axis=(0, 1)),
                               atol=1e-12)
    view.target_edit.setText("")  # the model's own translation
    with qtbot.waitSignal(panel.seq2seq_ready, timeout=WAIT_MS) as blocker:
        view.target_edit.returnPressed.emit()
    assert blocker.args[0].generated and view.aligned.weights.shape[0] == len(blocker.args[0].result.target_ids)
    assert view.target_edit.text() == ""
    with qtbot.waitSignal(panel.failed, timeout=WAIT_MS):
        view.target_edit.setText("le chat " * 40)  # longer than the model reads
        view.run_button.click()
    assert "shorten it" in view.run_state.text() and view.run_state.isVisibleTo(view)
    assert view.outcome is blocker.args[0]  # the alignment shown stays
    assert out is not view.outcome


@pytest.mark.parametrize("name", ["tiny_marian_separate", "tiny_bart", "tiny_bart_bf16", "tiny_mbart", "tiny_mbart50",
                                  "tiny_t5", "tiny_t5_gated", "tiny_t5_mt5"])
def test_every_family_shows_transformers_cross_attention(qtbot, window, name):
    _ctx, panel, diag = window
    g = np.load(DATA / name / "golden.npz")
    out = _load(qtbot, panel, DATA / name, str(g["source"]), str(g["target"]))
    np.testing.assert_array_equal(out.result.encoder_ids, g["input_ids"])
    np.testing.assert_array_equal(out.result.decoder_ids, g["decoder_input_ids"])
    L, nh = g["cross_attentions"].shape[:2]
    assert panel.grid.grid_shape() == (L, nh)
    panel.select_head(L - 1, nh - 1)
    np.testing.assert_allclose(panel.shown_matrix(), g["cross_attentions"][L - 1, nh - 1], atol=1e-5)
    assert panel.show_alignment()
    np.testing.assert_allclose(diag.tab(AlignmentTab).model_view.aligned.weights,
                               np.asarray(g["cross_attentions_f64"]).mean(axis=(0, 1)), atol=1e-5)
    panel.set_stack("encoder")  # the bias term is offered for T5's self-attention only
    assert panel.seq2seq.term_box.isVisibleTo(panel) == name.startswith("tiny_t5")
    panel.select_head(0, 0)
    np.testing.assert_allclose(panel.shown_matrix(), g["encoder_attentions"][0, 0], atol=1e-5)
