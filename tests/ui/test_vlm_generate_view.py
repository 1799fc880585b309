"""The Generate tab of the Pretrained panel's vision-language page on the tiny PaliGemma, LLaVA and SmolVLM
checkpoints: the ids the window writes equal transformers' greedy ids (golden_generate.npz), the row shown
and the strip equal transformers' attention over the final sequence, the picture draws the selected token's
row over the image patches, seeded sampling repeats, Stop stops, a policy gets a disabled tab saying why,
a bad prompt is one message."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("PySide6")

from PIL import Image  # noqa: E402

from attnviz.checkpoints import vlm_generation_study  # noqa: E402
from attnviz.checkpoints.study import patch_maps  # noqa: E402
from attnviz.model.demos import build_demo  # noqa: E402
from attnviz.model.session import Session  # noqa: E402
from attnviz.ui.context import AppContext  # noqa: E402
from attnviz.ui.model_view.panel import ModelViewPanel  # noqa: E402

DATA = Path(__file__).resolve().parents[1] / "data" / "checkpoints"
WAIT_MS = 30000


def golden(name: str, file: str = "golden_generate.npz") -> dict:
    with np.load(DATA / name / file, allow_pickle=False) as z:
        return {k: z[k] for k in z.files}


def pictures(name: str) -> list[tuple[str, np.ndarray]]:
    files = ["image.png", "image2.png"] if name == "tiny_smolvlm" else ["image.png"]
    return [(f, np.asarray(Image.open(DATA / name / f).convert("RGB"))) for f in files]


def make_panel(qtbot, name: str | None = "tiny_paligemma"):
    """The panel with ``name`` loaded and run on its golden picture(s) and prompt, the Generate tab in front."""
    ctx = AppContext(Session(build_demo("river-bank")))
    panel = ModelViewPanel(ctx, auto_load=False)
    qtbot.addWidget(panel)
    panel.resize(1024, 700)
    panel.show()
    qtbot.waitExposed(panel)
    if name is None:
        return panel
    with qtbot.waitSignal(panel.attention_ready, timeout=WAIT_MS):
        panel.load_model(DATA / name)
    with qtbot.waitSignal(panel.attention_ready, timeout=WAIT_MS):
        panel.set_images(pictures(name))
        panel.set_prompt(str(golden(name, "golden.npz")["prompt"]), run=True)
    page = panel.vlm
    page.tabs.setCurrentWidget(panel.vlm_generation)
    return panel


def run(qtbot, view, **kwargs):
    with qtbot.waitSignal(view.finished, timeout=WAIT_MS) as blocker:
        assert view.generate(**kwargs) is not None, view.message_text()
    qtbot.waitUntil(lambda: view.study.n_steps == view.slider.maximum() + 1, timeout=WAIT_MS)
    return blocker.args[0]


@pytest.mark.parametrize("name", ["tiny_paligemma", "tiny_paligemma2", "tiny_llava", "tiny_llava_full",
                                  "tiny_idefics3", "tiny_smolvlm"])
def test_the_window_writes_transformers_greedy_ids_and_shows_their_rows(qtbot, name):
    g = golden(name)
    panel = make_panel(qtbot, name)
    view, page = panel.vlm_generation, panel.vlm
    assert page.tabs.isTabEnabled(page.tabs.indexOf(view))
    n_new = len(g["greedy_ids"]) - len(g["prompt_ids"])
    assert run(qtbot, view, max_new_tokens=n_new) == "length"
    s = view.study
    np.testing.assert_array_equal(s.prompt_ids, g["prompt_ids"])  # the processor's expansion, image tokens in
    np.testing.assert_array_equal(s.ids, g["greedy_ids"])
    assert s.n_steps == n_new and view.slider.maximum() == n_new - 1
    L, nh = s.shape
    layer, head = L - 1, nh - 1
    panel.select_head(layer, head)
    assert (view.layer, view.head) == (layer, head)
    full = g["attentions"]  # (L, nh, T, T) transformers' eager attention over the final sequence
    image = np.flatnonzero(s.is_image)
    patches = np.sort(page.result.image_tokens())  # the patch groups' tokens: image tokens of the prefix
    assert patches.size and np.isin(patches, image).all()
    for step in (0, n_new - 1):
        view.slider.setValue(step)
        p = s.n_prompt + step
        assert view.position == p
        np.testing.assert_allclose(view.shown_row(), full[layer, head, p, :p + 1], atol=1e-5)
        np.testing.assert_allclose(view.strip_matrix(), full[:, :, p, :p + 1].reshape(-1, p + 1), atol=1e-5)
        # the page's picture: the same row on the image patches
        want = np.zeros(page.result.T)
        want[patches] = full[layer, head, p, patches]
        for got, expected in zip(page.overlay_maps, patch_maps(page.result, want)):
            np.testing.assert_allclose(got, expected, atol=1e-5)
        assert page.caption.text().startswith(f"generated ") and f"step {step + 1}" in page.caption.text()
    # the top-k of the last step: the chosen token marked, transformers' probability beside it
    top = view.top_table
    marked = [r for r in range(top.rowCount()) if top.item(r, 0).text() == "▶"]
    assert len(marked) == 1
    chosen = int(g["greedy_ids"][-1])
    want_p = g["probs"][-1][chosen]
    assert abs(float(top.item(marked[0], 2).text()) - want_p) < 1e-4


def test_the_text_shows_the_picture_as_one_piece_and_the_mean_and_rollout_draw(qtbot):
    panel = make_panel(qtbot)
    view, page = panel.vlm_generation, panel.vlm
    run(qtbot, view, max_new_tokens=3)
    text = view.text_view.toPlainText()
    assert "[image · 16 tokens]" in text and text.count("<image>") == 0
    s = view.study
    p = s.T - 1
    page.set_mode("mean")
    want = s.rows_at(p)[page.selected[0]].mean(axis=0)
    image = np.flatnonzero(s.is_image)
    got = np.concatenate([m.ravel() for m in page.overlay_maps])
    np.testing.assert_allclose(np.sort(got), np.sort(want[image]), atol=1e-6)
    assert "mean over heads" in page.caption.text()
    page.set_mode("rollout")
    assert "rollout" in page.caption.text() and page.overlay_maps is not None
    assert float(sum(m.sum() for m in page.overlay_maps)) > 0
    # another tab in front: the picture shows the run's query again
    page.tabs.setCurrentIndex(0)
    assert not page.caption.text().startswith("generated")
    page.tabs.setCurrentWidget(view)
    assert page.caption.text().startswith("generated")


def test_seeded_sampling_repeats_and_stays_in_the_top_k(qtbot):
    panel = make_panel(qtbot, "tiny_llava")
    view = panel.vlm_generation
    run(qtbot, view, max_new_tokens=6, sample=True, temperature=1.3, top_k=3, seed=5)
    first = view.study.ids.copy()
    assert all(view.study.top(i).chosen_rank is not None and view.study.top(i).chosen_rank < 3 for i in range(6))
    run(qtbot, view, max_new_tokens=6, sample=True, temperature=1.3, top_k=3, seed=5)
    np.testing.assert_array_equal(view.study.ids, first)


def test_stop_ends_the_generation_and_keeps_what_was_written(qtbot, monkeypatch):
    import time

    real = vlm_generation_study.generate_vlm

    def slow(*args, on_progress=None, **kwargs):  # a step takes 50 ms, as a real model's would
        def later(p):
            time.sleep(0.05)
            on_progress(p)
        return real(*args, on_progress=later, **kwargs)

    monkeypatch.setattr(vlm_generation_study, "generate_vlm", slow)
    panel = make_panel(qtbot)
    view = panel.vlm_generation
    with qtbot.waitSignal(view.finished, timeout=WAIT_MS) as blocker:
        view.generate(max_new_tokens=40)
        qtbot.waitUntil(lambda: view.study.n_steps >= 2, timeout=WAIT_MS)
        view.stop_button.click()
    assert blocker.args[0] == "cancelled" and 2 <= view.study.n_steps < 40
    assert view.status.text().endswith("(stopped)")


def test_a_policy_gets_a_disabled_tab_and_a_bad_prompt_is_one_message(qtbot):
    panel = make_panel(qtbot, None)
    page, view = panel.vlm, panel.vlm_generation
    index = page.tabs.indexOf(view)
    with qtbot.waitSignal(panel.model_loaded, timeout=WAIT_MS):
        panel.load_model(DATA / "tiny_smolvla")
    assert not page.tabs.isTabEnabled(index) and "does not write text" in page.tabs.tabToolTip(index)
    assert view.generate(prompt="pick up the cup") is None and "actions" in view.message_text()
    panel2 = make_panel(qtbot, "tiny_llava")
    view2 = panel2.vlm_generation
    with qtbot.waitSignal(view2.finished, timeout=WAIT_MS) as blocker:
        assert view2.generate(prompt="USER: no picture here ASSISTANT:") is not None
    assert "<image>" in blocker.args[0] and "Traceback" not in view2.message_text()


def test_a_generated_token_over_another_runs_picture_says_so(qtbot):
    panel = make_panel(qtbot, "tiny_llava")
    view, page = panel.vlm_generation, panel.vlm
    run(qtbot, view, prompt="USER: a longer question first <image>\\nwhat? ASSISTANT:", max_new_tokens=2)
    assert page.overlay_maps is None and "another run" in page.caption.text()


def test_the_page_with_the_tab_in_front_fits_the_smallest_window(qtbot):
    panel = make_panel(qtbot)
    run(qtbot, panel.vlm_generation, max_new_tokens=4)
    assert not panel.vlm.chart.isVisible()
    hint = panel.minimumSizeHint()
    assert hint.width() <= 1024 and hint.height() <= 700


def test_the_study_takes_the_prefix_first_and_its_layer_means_are_the_rows(qtbot):
    from attnviz.checkpoints import CheckpointError, load_checkpoint
    from attnviz.checkpoints.generate import Progress
    from attnviz.checkpoints.vlm_generation_study import VlmGenerationStudy

    name = "tiny_paligemma"
    ck = load_checkpoint(DATA / name)
    images = [rgb for _f, rgb in pictures(name)]
    prompt = str(golden(name, "golden.npz")["prompt"])
    study = VlmGenerationStudy(ck, images, prompt)
    assert study.describe() == "reading the picture and the prompt…"
    with pytest.raises(CheckpointError, match="not its prefix"):  # a plain chunk cannot start the study
        study.add(Progress(start=0, ids=np.array([1]), rows=np.zeros((2, 4, 1, 1), np.float32),
                           stream=np.zeros((3, 1, 8), np.float32)))
    arrived = []
    gen = study.job(4, on_progress=arrived.append)()
    for p in arrived:
        study.add(p)
    study.finish(gen)
    assert study.n_prompt == 24 and int(study.is_image.sum()) == 16 and study.describe().startswith("24 prompt "
                                                                                                     "tokens (16 image)")
    full = study.attentions()  # (L, nh, T, T)
    np.testing.assert_allclose(study.fused(study.T - 1), full.mean(axis=1), atol=1e-6)
    np.testing.assert_allclose(study.fused(10), full[:, :, :11, :11].mean(axis=1), atol=1e-6)
    with pytest.raises(CheckpointError, match="unknown view"):
        study.values_at(study.T - 1, "sideways")


def test_a_token_of_the_run_clicked_under_the_picture_is_drawn_again(qtbot):
    panel = make_panel(qtbot)
    view, page = panel.vlm_generation, panel.vlm
    run(qtbot, view, max_new_tokens=2)
    assert page.caption.text().startswith("generated")
    page.select_query(20)  # a prompt token of the run, as a click in the strip
    assert page.query == 20 and not page.caption.text().startswith("generated")
    view.show_step(0)  # a step picked again: the generated token is drawn again
    assert page.caption.text().startswith("generated") and "step 1" in page.caption.text()
