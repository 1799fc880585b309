"""Attention maps from a file in the Pretrained workspace: the panel loads an .npz written by attnviz.save and
its layers x heads grid, detail heatmap and head summaries show those very maps, read-only (no input row,
Run does nothing, a line says where they came from); cross-attention rows are the target's tokens; a bad file
is the panel's message line; and ``attnviz FILE.npz`` opens the window on the maps at 1024 x 700."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("PySide6")

import attnviz  # noqa: E402
from attnviz.checkpoints.maps_file import map_summaries  # noqa: E402
from attnviz.model.demos import build_demo  # noqa: E402
from attnviz.model.session import Session  # noqa: E402
from attnviz.ui.context import AppContext  # noqa: E402
from attnviz.ui.model_view.panel import ModelViewPanel  # noqa: E402

WAIT_MS = 60000
TOKENS = ["[CLS]", "the", "river", " bank", "[SEP]", "was", "steep"]


def softmax(shape, seed=0):
    x = np.random.default_rng(seed).normal(size=shape) * 2
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


@pytest.fixture
def panel(qtbot):
    ctx = AppContext(Session(build_demo("river-bank")))
    p = ModelViewPanel(ctx, auto_load=False)
    qtbot.addWidget(p)
    p.resize(1024, 640)
    p.show()
    qtbot.waitExposed(p)
    yield p
    p.shutdown()


def load(qtbot, panel, path):
    with qtbot.waitSignal(panel.attention_ready, timeout=WAIT_MS) as blocker:
        panel.load_model(path)
    return blocker.args[0]


def test_the_grid_shows_the_saved_maps(qtbot, panel, tmp_path):
    a = softmax((2, 3, 7, 7))
    path = attnviz.save(tmp_path / "river.npz", tuple(a[:, None]), TOKENS, title="river maps")
    shown = load(qtbot, panel, path)
    assert shown.kind == "maps" and shown.tokens == TOKENS
    assert panel.grid.grid_shape() == (2, 3)
    np.testing.assert_allclose(panel.grid.maps, a, atol=6e-8)  # the grid's own (L, nh, T, T) float32 maps
    assert panel.describe.text().startswith("river maps: attention maps from river.npz, 2 layers x 3 heads, 7 tokens")
    assert str(path) in panel.hint.text() and panel.hint.isVisibleTo(panel)
    assert not panel.inputs.isVisibleTo(panel) and not panel.run_button.isVisibleTo(panel)
    assert panel.message_text() == ""

    panel.select_head(1, 2)
    np.testing.assert_allclose(panel.detail.values, a[1, 2], atol=6e-8)
    np.testing.assert_allclose(panel.shown_matrix(), a[1, 2], atol=6e-8)
    want = map_summaries(a, np.array([t in ("[CLS]", "[SEP]") for t in TOKENS]))
    panel.summary.set_metric("entropy")
    np.testing.assert_allclose(panel.summary.shown_matrix(), want.entropy, rtol=1e-6)
    panel.summary.set_metric("first")
    np.testing.assert_allclose(panel.summary.shown_matrix(), a[..., 0].mean(axis=-1), rtol=1e-6)

    with qtbot.assertNotEmitted(panel.attention_ready, wait=300):
        assert panel.run_input() is None  # Run does nothing: the maps are what they are
    assert panel.selected == (1, 2)


def test_cross_attention_rows_are_the_target_tokens(qtbot, panel, tmp_path):
    a = softmax((2, 2, 3, 7), seed=1)
    path = attnviz.save(tmp_path / "cross.safetensors", a, TOKENS, target_tokens=["je", "t'", "aime"])
    load(qtbot, panel, path)
    panel.select_head(0, 1)
    assert panel.detail.values.shape == (3, 7)
    np.testing.assert_allclose(panel.detail.values, a[0, 1], atol=6e-8)
    assert list(panel.detail.row_labels) == ["je", "t'", "aime"]
    assert list(panel.detail.col_labels)[:3] == ["[CLS]", "the", "river"]
    metrics = [panel.summary.metric_combo.itemData(i) for i in range(panel.summary.metric_combo.count())]
    assert "self" not in metrics and "entropy" in metrics and "first" in metrics


def test_a_bad_file_is_a_message_and_a_model_shown_stays(qtbot, panel, tmp_path):
    good = attnviz.save(tmp_path / "good.npz", softmax((1, 2, 7, 7)), TOKENS)
    load(qtbot, panel, good)
    bad = tmp_path / "bad.npz"
    np.savez(bad, attentions=softmax((1, 2, 7, 7)) * 3, tokens=np.array(TOKENS))
    with qtbot.waitSignal(panel.failed, timeout=WAIT_MS) as blocker:
        panel.load_model(bad)
    text = blocker.args[0]
    assert text.startswith(f"Could not load {bad}: bad.npz: 14 row(s) of layer 0 do not sum to one")
    assert "\n" not in text and panel.message_text() == text
    assert panel.grid.grid_shape() == (1, 2) and panel.ckpt.folder == good


def test_attnviz_file_opens_the_pretrained_workspace_at_1024x700(qtbot, tmp_path):
    from attnviz.ui.app import open_file_argument
    from attnviz.ui.main_window import MainWindow
    from attnviz.ui.settings import AppSettings

    a = softmax((2, 2, 7, 7), seed=2)
    path = attnviz.save(tmp_path / "opened.npz", a, TOKENS)
    ctx = AppContext(Session(build_demo("river-bank")))
    window = MainWindow(ctx, settings=AppSettings(tmp_path / "settings.ini"), autosave=None)
    qtbot.addWidget(window)
    window.resize(1024, 700)
    window.show()
    qtbot.waitExposed(window)
    try:
        panel = window.panel("pretrained")
        with qtbot.waitSignal(panel.attention_ready, timeout=WAIT_MS):
            assert open_file_argument(window, str(path))
        assert window.workspace == "pretrained"
        np.testing.assert_allclose(panel.grid.maps, a, atol=6e-8)
        qtbot.wait(200)
        assert window.width() <= 1024 and window.height() <= 700
        window.grab().save(str(tmp_path / "window.png"))
    finally:
        window.stop_workers()
        ctx.compute.shutdown(timeout=5)
