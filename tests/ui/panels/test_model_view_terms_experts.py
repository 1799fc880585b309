"""The Pretrained panel's "Score terms" tab (DeBERTa's three disentangled terms of the selected head and their
sum) and "Experts" tab (a mixture of experts' routing, layers x tokens, the selected layer outlined): enabled
for those models only, showing what the pass kept, following the selected head, in both themes."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("PySide6")

from PySide6.QtCore import QPoint, Qt  # noqa: E402
from PySide6.QtWidgets import QApplication  # noqa: E402

from attnviz.checkpoints import load_checkpoint, run_text  # noqa: E402
from attnviz.checkpoints.score_terms import head_terms  # noqa: E402
from attnviz.model.demos import build_demo  # noqa: E402
from attnviz.model.session import Session  # noqa: E402
from attnviz.ui.context import AppContext  # noqa: E402
from attnviz.ui.model_view.panel import TAB_HEADS, ModelViewPanel  # noqa: E402
from attnviz.ui.model_view.router_view import DENSE_RGB, expert_palette, strip_image  # noqa: E402
from attnviz.ui.theme import apply_theme  # noqa: E402

DATA = Path(__file__).resolve().parents[2] / "data" / "checkpoints"
WAIT_MS = 30000
TEXT = "The river bank was steep after the rain."


def _panel(qtbot):
    panel = ModelViewPanel(AppContext(Session(build_demo("river-bank"))), auto_load=False)
    qtbot.addWidget(panel)
    panel.resize(1024, 700)
    panel.show()
    qtbot.waitExposed(panel)
    return panel


def _load(qtbot, panel, name):
    with qtbot.waitSignal(panel.attention_ready, timeout=WAIT_MS) as blocker:
        panel.load_model(DATA / name, prompt=TEXT)
    return blocker.args[0]


def _tab(panel, view) -> int:
    return panel.tabs.indexOf(view)


def test_score_terms_tab_shows_the_selected_heads_three_terms_and_their_sum(qtbot, tmp_path):
    panel = _panel(qtbot)
    shown = _load(qtbot, panel, "tiny_deberta_v3")
    view = panel.score_terms
    assert panel.tabs.isTabEnabled(_tab(panel, view)) and not panel.tabs.isTabEnabled(_tab(panel, panel.router))
    panel.tabs.setCurrentWidget(view)
    panel.select_head(1, 2)
    ckpt = load_checkpoint(DATA / "tiny_deberta_v3")
    want = head_terms(run_text(ckpt, TEXT), 1, 2, ckpt.config)
    for h, (_, m, _) in zip(view.maps, want.terms):
        np.testing.assert_allclose(h.values, m, atol=1e-6)
    np.testing.assert_allclose(view.maps[3].values, want.total, atol=1e-5)
    np.testing.assert_allclose(view.shown.weights, shown.attentions[1, 2])
    assert [h.levels() for h in view.maps[1:]] == [view.maps[0].levels()] * 3  # one colour scale
    assert "\u221a(3\u00b74)" in view.legend.text()
    note = view.maps[1].readout_text(3, 0)
    assert "c2c" in note and "c2p" in note and "p2c" in note and "= score" in note
    for theme in ("light", "dark"):
        apply_theme(QApplication.instance(), theme)
        qtbot.wait(50)
        assert panel.grab().save(str(tmp_path / f"score_terms_{theme}.png"))
    apply_theme(QApplication.instance(), "light")
    _load(qtbot, panel, "tiny_roberta")  # another family: the tab is disabled and left
    assert not panel.tabs.isTabEnabled(_tab(panel, view)) and panel.tabs.currentIndex() == TAB_HEADS
    assert view.shown is None


def test_experts_tab_shows_the_routing_kept_from_the_pass(qtbot, tmp_path):
    panel = _panel(qtbot)
    shown = _load(qtbot, panel, "tiny_qwen2_moe")
    view = panel.router
    assert panel.tabs.isTabEnabled(_tab(panel, view)) and not panel.tabs.isTabEnabled(_tab(panel, panel.score_terms))
    panel.tabs.setCurrentWidget(view)
    np.testing.assert_array_equal(view.strip.experts, shown.decoder.experts)
    assert view.strip.experts.shape == (3, len(shown.tokens), 2) and view.n_experts == 4
    assert "shared expert" in view.legend.text()
    panel.select_head(2, 1)
    assert view.strip.layer == 2 and view.load.text().startswith(f"L2: its {len(shown.tokens)} tokens go to")
    qtbot.wait(50)
    r = view.strip.plot_rect()
    L, T = 3, len(shown.tokens)
    x = int(r.left() + 1.5 * r.width() / T)  # token 1
    y0 = int(r.top() + 0.5 * r.height() / L)  # layer 0
    e, w = shown.decoder.experts[0, 1], shown.decoder.expert_weights[0, 1]
    assert view.strip.tooltip_at(x, y0).endswith(f"expert {e[0]} ({w[0]:.2f}), expert {e[1]} ({w[1]:.2f})")
    assert "dense MLP" in view.strip.tooltip_at(x, int(r.top() + 1.5 * r.height() / L))
    with qtbot.waitSignal(panel.head_selected, timeout=2000) as blocker:  # a click on a row selects that layer
        qtbot.mouseClick(view.strip, Qt.MouseButton.LeftButton, pos=QPoint(x, y0))
    assert blocker.args == [0, 1] and view.strip.layer == 0
    for theme in ("light", "dark"):
        apply_theme(QApplication.instance(), theme)
        qtbot.wait(50)
        img = view.strip.grab().toImage()
        assert img.pixelColor(x, int(r.top() + 1.5 * r.height() / L)).getRgb()[:3] == DENSE_RGB  # layer 1: dense
        assert panel.grab().save(str(tmp_path / f"experts_{theme}.png"))
    apply_theme(QApplication.instance(), "light")
    _load(qtbot, panel, "tiny_llama")  # a dense decoder routes nothing
    assert not panel.tabs.isTabEnabled(_tab(panel, view)) and panel.tabs.currentIndex() == TAB_HEADS


def test_strip_image_splits_each_cell_by_weight():
    experts = np.array([[[2, 0], [1, 3]], [[-1, -1], [-1, -1]]])  # (L 2, T 2, k 2); layer 1 dense
    weights = np.array([[[0.75, 0.25], [0.5, 0.5]], [[0, 0], [0, 0]]], dtype=np.float32)
    pal = expert_palette(4)
    assert len({tuple(c) for c in pal.tolist()}) == 4
    img = strip_image(experts, weights, pal, sub=8)  # (16, 2, 3)
    assert img.shape == (16, 2, 3)
    assert (img[:6, 0] == pal[2]).all() and (img[6:8, 0] == pal[0]).all()  # 3/4 then 1/4 of the rows
    assert (img[:4, 1] == pal[1]).all() and (img[4:8, 1] == pal[3]).all()
    assert (img[8:] == DENSE_RGB).all()


def test_many_experts_get_colours_and_a_key_that_says_the_tooltip_names_them(qtbot):
    from types import SimpleNamespace

    from attnviz.ui.model_view.router_view import RouterView

    rng = np.random.default_rng(3)
    experts = rng.integers(0, 128, size=(4, 300, 8))  # Qwen3-MoE's 128 experts, top-8, 300 tokens
    weights = rng.random((4, 300, 8)).astype(np.float32)
    result = SimpleNamespace(decoder=SimpleNamespace(experts=experts, expert_weights=weights),
                             labels=[f"t{i}" for i in range(300)])
    view = RouterView()
    qtbot.addWidget(view)
    view.resize(600, 300)
    assert view.set_result(result)
    assert view.n_experts == 128 and "the tooltip names each" in view.key.text()
    assert len({tuple(c) for c in expert_palette(128).tolist()}) > 100  # nearly all distinct
    assert view.strip.minimumWidth() >= 300 * 4  # too many tokens for the width: the strip scrolls
    view.set_layer(3)
    assert view.load.text().startswith("L3: its 300 tokens go to")
    assert not view.set_result(SimpleNamespace(decoder=None, labels=[]))
    assert view.strip.experts is None and view.load.text() == ""
