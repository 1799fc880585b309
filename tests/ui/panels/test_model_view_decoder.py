"""The Pretrained panel with decoder LLMs: the hub cache in the model list, grouped-query heads named
with their kv head, the decoder summaries, and a long input drawn from q, k and lse by overviews."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("PySide6")

from attnviz.checkpoints import decoder_run, load_checkpoint  # noqa: E402
from attnviz.checkpoints.decoder_run import run_decoder  # noqa: E402
from attnviz.checkpoints.study import LongOutcome  # noqa: E402
from attnviz.model.demos import build_demo  # noqa: E402
from attnviz.model.session import Session  # noqa: E402
from attnviz.ui.context import AppContext  # noqa: E402
from attnviz.ui.model_view.panel import ModelViewPanel  # noqa: E402

DATA = Path(__file__).resolve().parents[2] / "data" / "checkpoints"
WAIT_MS = 30000
LONG_TEXT = " ".join(["the river bank flooded after the rain, and the boats drifted away"] * 3)


@pytest.fixture
def hub(tmp_path, monkeypatch):
    repo = tmp_path / "hub" / "models--acme--tiny-llama"
    shutil.copytree(DATA / "tiny_llama_bf16_sharded", repo / "snapshots" / "abc123")
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("abc123")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    return repo / "snapshots" / "abc123"


def make_panel(qtbot):
    ctx = AppContext(Session(build_demo("river-bank")))
    panel = ModelViewPanel(ctx, auto_load=False)
    qtbot.addWidget(panel)
    panel.resize(1200, 760)
    panel.show()
    qtbot.waitExposed(panel)
    return panel


def load(qtbot, panel, folder, name=None):
    with qtbot.waitSignal(panel.attention_ready, timeout=WAIT_MS) as blocker:
        panel.load_model(folder, name=name)
    return blocker.args[0]


def test_hub_cache_models_are_offered_and_load_by_repo_id(qtbot, hub):
    panel = make_panel(qtbot)
    qtbot.waitUntil(lambda: not panel.model_list.busy, timeout=WAIT_MS)  # listed on a worker
    index = panel.model_combo.findData(str(hub))
    assert index >= 0 and panel.model_combo.itemText(index) == "acme/tiny-llama · Llama · 21,728 · bf16"
    tips = [panel.model_combo.itemData(i, 3) for i in range(panel.model_combo.count() - 1)]  # 3: ToolTipRole
    assert all(tips) and any(t.startswith("all-MiniLM-L6-v2 · BERT · 22.7 M · f32") for t in tips) == (
        panel.model_combo.findText("all-MiniLM-L6-v2") >= 0)
    shown = load(qtbot, panel, str(hub))
    assert shown.model == "acme/tiny-llama" and shown.kind == "decoder"
    assert "bf16, computed in float32" in panel.describe.text() and "every map held" in panel.describe.text()


def test_decoder_heads_name_their_kv_head_and_summaries_add_sinks_and_distance(qtbot):
    panel = make_panel(qtbot)
    panel.set_text("the river bank flooded after the rain")
    shown = load(qtbot, panel, DATA / "tiny_qwen2")
    want = run_decoder(load_checkpoint(DATA / "tiny_qwen2"), "the river bank flooded after the rain")
    np.testing.assert_array_equal(shown.attentions, want.attentions)
    panel.select_head(1, 3)
    assert "kv head 1 (shared by 2 heads)" in panel.detail.frame.title_text
    keys = [panel.summary.metric_combo.itemData(i) for i in range(panel.summary.metric_combo.count())]
    assert keys[-2:] == ["first", "distance"]
    panel.summary.set_metric("first")
    np.testing.assert_allclose(panel.summary.shown_matrix(), want.summaries().to_first)
    assert "to first" in panel.summary.line.text() and "distance" in panel.summary.line.text()


def test_long_input_is_drawn_by_overviews_and_zooms_to_cells(qtbot, monkeypatch):
    monkeypatch.setattr(decoder_run, "WEIGHTS_BUDGET", 1024)  # every map of this text no longer "fits"
    panel = make_panel(qtbot)
    panel.set_text(LONG_TEXT)
    load(qtbot, panel, DATA / "tiny_llama")
    out = panel.outcome
    assert isinstance(out, LongOutcome) and out.decoder.attentions is None
    T = out.decoder.T
    assert panel.grid.grid_shape() == (2, 4) and out.thumbs.shape[:2] == (2, 4)
    assert "recomputed from q, k and log-sum-exp" in panel.describe.text()
    full = run_decoder(load_checkpoint(DATA / "tiny_llama"), LONG_TEXT, mode="weights")
    with qtbot.waitSignal(panel.long_map.job.done, timeout=WAIT_MS):
        panel.select_head(1, 2)
    assert panel.shown_matrix() is None and panel.detail._overview
    base = panel.detail.base.values  # (H, W) display pixels of the whole map
    assert base.shape[0] <= T and np.nanmax(base) == pytest.approx(full.attentions[1, 2].max(), abs=1e-5)
    # zoom to a 6 x 6 block across the diagonal: computed cell by cell, later keys masked
    with qtbot.waitSignal(panel.long_map.job.done, timeout=WAIT_MS):
        panel.detail.view_region_changed.emit(4, 10, 4, 10)
    block = panel.detail.detail.values  # (6, 6) exact cells
    want = full.attentions[1, 2, 4:10, 4:10]
    future = np.triu(np.ones((6, 6), dtype=bool), 1)
    assert np.isnan(block[future]).all() and (want[future] == 0).all()
    np.testing.assert_allclose(block[~future], want[~future], atol=1e-5)


def test_a_cached_model_is_never_loaded_without_being_chosen(qtbot, hub, monkeypatch):
    import attnviz.checkpoints.study as study_module

    monkeypatch.setattr(study_module, "ready_models", lambda: [])
    ctx = AppContext(Session(build_demo("river-bank")))
    panel = ModelViewPanel(ctx, auto_load=True)
    qtbot.addWidget(panel)
    panel.show()
    qtbot.waitExposed(panel)
    qtbot.waitUntil(lambda: not panel.model_list.busy, timeout=WAIT_MS)  # listed on a worker
    assert panel.model_combo.count() == 2 and panel.model_combo.itemData(0) == str(hub)
    assert not panel.loading and panel.ckpt is None and not panel.jobs.busy
