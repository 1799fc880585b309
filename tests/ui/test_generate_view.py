"""The Pretrained panel's Generate tab on tiny decoders: the text grows as steps arrive, the step slider
and the clicked tokens pick the row shown (equal to the engine's row of the whole final sequence), the strip
and the panel share the selected head, the top-k and lens tables are the study's, Stop stops, bad inputs
are one message, and models that do not generate get a disabled tab saying why."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("PySide6")

from PySide6.QtCore import QUrl  # noqa: E402

from attnviz.checkpoints import load_checkpoint  # noqa: E402
from attnviz.checkpoints import generation_study  # noqa: E402
from attnviz.checkpoints.decoder import forward_decoder  # noqa: E402
from attnviz.checkpoints.generate import generate  # noqa: E402
from attnviz.model.demos import build_demo  # noqa: E402
from attnviz.model.session import Session  # noqa: E402
from attnviz.ui.context import AppContext  # noqa: E402
from attnviz.ui.model_view.panel import ModelViewPanel  # noqa: E402

DATA = Path(__file__).resolve().parents[1] / "data" / "checkpoints"
WAIT_MS = 30000


def make_panel(qtbot, folder=DATA / "tiny_llama_lm"):
    ctx = AppContext(Session(build_demo("river-bank")))
    panel = ModelViewPanel(ctx, auto_load=False)
    qtbot.addWidget(panel)
    panel.resize(1024, 700)
    panel.show()
    qtbot.waitExposed(panel)
    if folder is not None:
        with qtbot.waitSignal(panel.attention_ready, timeout=WAIT_MS):
            panel.load_model(folder)
    return panel


def tab_index(panel):
    return panel.tabs.indexOf(panel.generation)


def run(qtbot, view, **kwargs):
    with qtbot.waitSignal(view.finished, timeout=WAIT_MS) as blocker:
        assert view.generate(**kwargs) is not None, view.message_text()
    qtbot.waitUntil(lambda: view.study.n_steps == view.slider.maximum() + 1, timeout=WAIT_MS)
    return blocker.args[0]


def test_the_text_grows_and_the_slider_picks_the_row_of_the_full_sequence(qtbot):
    panel = make_panel(qtbot)
    view = panel.generation
    assert panel.tabs.isTabEnabled(tab_index(panel)) and view.prompt_edit.text() == panel.text_edit.text()
    panel.tabs.setCurrentIndex(tab_index(panel))
    arrived = []
    view.progress_moved.connect(lambda _run, p: arrived.append(p.start))
    assert run(qtbot, view, max_new_tokens=9) == "length"
    s = view.study
    assert s.n_steps == 9 and view.slider.maximum() == 8 and view.slider.value() == 8
    assert arrived == [0] + list(range(s.n_prompt, s.n_prompt + 9))  # one chunk per new token, in order
    assert view.status.text().endswith("(max new tokens)")
    # the text holds every token, the newest selected
    shown = view.text_view.toPlainText().replace("\u200a", "")
    assert shown.endswith(s.pieces()[-1].replace("\n", "↵")) and view.position == s.T - 1
    # the engine's own full pass over the final sequence
    ck = load_checkpoint(DATA / "tiny_llama_lm")
    full, _ = forward_decoder(ck.config, ck.weights, s.ids)
    panel.select_head(1, 2)
    assert (view.layer, view.head) == (1, 2)
    rows = []
    for step in (2, 6):
        view.slider.setValue(step)
        p = s.n_prompt + step
        assert view.position == p and view.step_label.text().startswith(f"{step + 1}/9")
        np.testing.assert_allclose(view.shown_row(), full[1, 2, p, :p + 1], atol=1e-5)
        np.testing.assert_allclose(view.strip_matrix(), full[:, :, p, :p + 1].reshape(-1, p + 1), atol=1e-5)
        rows.append(view.shown_row())
    assert rows[0].size != rows[1].size
    # the top-k of step 6, the chosen token marked; the lens at its position, the study's
    top = s.top(6)
    assert view.top_table.item(top.chosen_rank, 0).text() == "▶"
    assert view.top_table.item(0, 2).text() == f"{top.top_probs[0]:.4f}"
    qtbot.waitUntil(lambda: f"(token {view.position})" in view.lens_title.text(), timeout=WAIT_MS)
    assert view.lens_table.rowCount() == ck.config.n_layer + 1
    lens = s.lens(view.position, 5)
    piece = view.lens_table.item(ck.config.n_layer, 0).text()
    assert piece.endswith(f"{lens.top_probs[-1, 0]:.2f}")


def test_tokens_and_strip_rows_are_clickable(qtbot):
    panel = make_panel(qtbot)
    view = panel.generation
    run(qtbot, view, max_new_tokens=5)
    s = view.study
    view.text_view.anchorClicked.emit(QUrl("tok:2"))  # a prompt token: its row, no step chose it
    assert view.position == 2 and view.top_table.rowCount() == 0 and "prompt token" in view.top_title.text()
    np.testing.assert_array_equal(view.shown_row(), s.row_at(2, view.layer, view.head))
    view.text_view.anchorClicked.emit(QUrl(f"tok:{s.n_prompt + 1}"))
    assert view.slider.value() == 1 and view.top_table.rowCount() >= 10
    nh = s.shape[1]
    view.strip.cell_clicked.emit(1 * nh + 3, 0)  # as a click on row "L1 h3"
    assert panel.selected == (1, 3) and (view.layer, view.head) == (1, 3)


def test_seeded_sampling_repeats_in_the_window(qtbot):
    panel = make_panel(qtbot)
    view = panel.generation
    view.set_sampling(True, temperature=1.5, top_k=8, top_p=0.9, seed=5)
    run(qtbot, view, max_new_tokens=8)
    first = view.study.ids
    run(qtbot, view, max_new_tokens=8)
    np.testing.assert_array_equal(view.study.ids, first)
    ck = load_checkpoint(DATA / "tiny_llama_lm")
    how = generation_study.parse_sampling(True, 1.5, 8, 0.9, 5)
    want = generate(ck.config, ck.weights, view.study.prompt_ids, max_new_tokens=8, how=how,
                    eos_ids=generation_study.eos_ids(ck))
    np.testing.assert_array_equal(first, want.ids)


def test_stop_ends_the_generation_and_keeps_what_was_written(qtbot, monkeypatch):
    import time

    real = generation_study.generate

    def slow(*args, on_progress=None, **kwargs):  # a step takes 50 ms, as a real model's would
        def later(p):
            time.sleep(0.05)
            on_progress(p)
        return real(*args, on_progress=later, **kwargs)

    monkeypatch.setattr(generation_study, "generate", slow)
    panel = make_panel(qtbot)
    view = panel.generation
    with qtbot.waitSignal(view.finished, timeout=WAIT_MS) as blocker:
        view.generate(max_new_tokens=40)
        assert view.stop_button.isEnabled()
        qtbot.waitUntil(lambda: view.study.n_steps >= 3, timeout=WAIT_MS)
        # following the newest step, the lens waits: the cores are the model's while it writes
        qtbot.waitUntil(lambda: "when the model stops" in view.lens_title.text(), timeout=WAIT_MS)
        assert view.lens_table.rowCount() == 0
        view.stop_button.click()
    assert blocker.args[0] == "cancelled" and 3 <= view.study.n_steps < 40
    assert view.status.text().endswith("(stopped)") and not view.stop_button.isEnabled()
    qtbot.waitUntil(lambda: view.lens_table.rowCount() == 3, timeout=WAIT_MS)  # stopped: the lens is drawn


@pytest.mark.parametrize("kwargs, message", [
    ({"prompt": "   "}, "prompt is empty"),
    ({"max_new_tokens": 0}, "max new tokens"),
    ({"sample": True, "temperature": 0.0}, "temperature"),
    ({"sample": True, "top_p": 1.5}, "top-p"),
])
def test_bad_inputs_are_one_message(qtbot, kwargs, message):
    panel = make_panel(qtbot)
    view = panel.generation
    assert view.generate(**kwargs) is None
    assert message in view.message_text() and "Traceback" not in view.message_text()
    assert not view.running


def test_more_tokens_than_the_context_holds_is_a_message(qtbot):
    panel = make_panel(qtbot)
    view = panel.generation
    with qtbot.waitSignal(view.finished, timeout=WAIT_MS) as blocker:
        assert view.generate(max_new_tokens=4000) is not None  # refused on the worker, before any work
    assert "positions" in blocker.args[0] and "positions" in view.message_text()


def test_models_that_do_not_generate_get_a_disabled_tab(qtbot):
    panel = make_panel(qtbot, None)
    index = tab_index(panel)
    assert not panel.tabs.isTabEnabled(index) and "decoder LLM" in panel.tabs.tabToolTip(index)
    with qtbot.waitSignal(panel.attention_ready, timeout=WAIT_MS):
        panel.load_model(DATA / "tiny_roberta")
    assert not panel.tabs.isTabEnabled(index) and "Generate tab runs decoder" in panel.tabs.tabToolTip(index)
    assert panel.generation.generate(prompt="hello") is None and "decoder" in panel.generation.message_text()
    with qtbot.waitSignal(panel.attention_ready, timeout=WAIT_MS):
        panel.load_model(DATA / "tiny_qwen2")
    assert panel.tabs.isTabEnabled(index)


def test_the_tab_fits_the_smallest_window(qtbot):
    panel = make_panel(qtbot)
    panel.tabs.setCurrentIndex(tab_index(panel))
    run(qtbot, panel.generation, max_new_tokens=4)
    hint = panel.minimumSizeHint()
    assert hint.width() <= 1024 and hint.height() <= 700


def test_the_text_follows_the_theme(qtbot):
    from PySide6.QtWidgets import QApplication

    from attnviz.ui.theme import DARK, LIGHT, apply_theme, current_theme

    panel = make_panel(qtbot)
    view = panel.generation
    run(qtbot, view, max_new_tokens=3)
    before = current_theme().name
    try:
        apply_theme(QApplication.instance(), "dark")
        assert DARK.text in view.text_view.toHtml().lower()
        apply_theme(QApplication.instance(), "light")
        assert LIGHT.text in view.text_view.toHtml().lower() and DARK.text not in view.text_view.toHtml().lower()
    finally:
        apply_theme(QApplication.instance(), before)


def test_the_panels_chat_box_puts_the_prompt_in_the_template(qtbot):
    with np.load(DATA / "tiny_qwen2" / "golden_chat.npz") as z:
        text, want_ids = str(z["text"]), z["input_ids"]
    panel = make_panel(qtbot, DATA / "tiny_qwen2")
    view = panel.generation
    view.set_prompt(text)
    run(qtbot, view, max_new_tokens=3)
    assert view.study.n_prompt < len(want_ids)  # plain text
    with qtbot.waitSignal(panel.attention_ready, timeout=WAIT_MS):
        panel.chat_box.setChecked(True)
    run(qtbot, view, max_new_tokens=3)
    np.testing.assert_array_equal(view.study.prompt_ids, want_ids)
    assert view.study.pieces()[0] == "<|im_start|>"


def test_the_prompt_follows_the_panels_text_until_typed_here(qtbot):
    panel = make_panel(qtbot)
    view = panel.generation
    panel.set_text("a new sentence for the model")
    assert view.prompt_edit.text() == "a new sentence for the model"
    qtbot.keyClicks(view.prompt_edit, " and more")  # typed in the tab: the prompt is the person's now
    panel.set_text("another sentence")
    assert view.prompt_edit.text() == "a new sentence for the model and more"


def test_running_the_panel_again_stays_on_the_generate_tab(qtbot):
    panel = make_panel(qtbot)
    view = panel.generation
    panel.tabs.setCurrentIndex(tab_index(panel))
    with qtbot.waitSignal(panel.attention_ready, timeout=WAIT_MS):
        panel.set_text("The heron waited by the water.", run=True)
    assert panel.tabs.currentWidget() is view
    with qtbot.waitSignal(panel.attention_ready, timeout=WAIT_MS):
        panel.run_input()  # the Run button
    assert panel.tabs.currentWidget() is view
