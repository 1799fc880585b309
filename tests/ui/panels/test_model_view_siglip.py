"""The "Pretrained model" panel on a SigLIP checkpoint, which has no class token: the image tab offers
a clicked patch's attention, the mean attention each patch receives (its default) and a rollout of the
mean over every query row, and says so; a ViT keeps its class-token view."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("PySide6")

from attnviz.checkpoints import attention_rollout, load_checkpoint, run_image  # noqa: E402
from attnviz.checkpoints.analysis import received_attention_maps  # noqa: E402
from attnviz.checkpoints.views import OverlaySpec  # noqa: E402
from attnviz.model.demos import build_demo  # noqa: E402
from attnviz.model.session import Session  # noqa: E402
from attnviz.ui.context import AppContext  # noqa: E402
from attnviz.ui.model_view.panel import TAB_IMAGE, ModelViewPanel  # noqa: E402

DATA = Path(__file__).resolve().parents[2] / "data" / "checkpoints"
WAIT_MS = 30000


def _panel(qtbot):
    panel = ModelViewPanel(AppContext(Session(build_demo("river-bank"))), auto_load=False)
    qtbot.addWidget(panel)
    panel.resize(1200, 760)
    panel.show()
    qtbot.waitExposed(panel)
    return panel


def _load(qtbot, panel, folder):
    with qtbot.waitSignal(panel.attention_ready, timeout=WAIT_MS) as blocker:
        panel.load_model(folder)
    return blocker.args[0]


def _modes(view):
    return [view.mode_combo.itemData(i) for i in range(view.mode_combo.count())]


def test_siglip_image_tab_without_a_class_token(qtbot, mouse, tmp_path):
    panel = _panel(qtbot)
    shown = _load(qtbot, panel, DATA / "tiny_siglip_vision")
    rgb = panel.outcome.rgb
    want = run_image(load_checkpoint(DATA / "tiny_siglip_vision"), rgb)
    np.testing.assert_array_equal(shown.attentions, want.attentions)
    vit = panel.vit
    assert panel.tabs.isTabEnabled(TAB_IMAGE) and vit.image_view.grid == (3, 5)
    assert _modes(vit) == ["patch", "received", "rollout"] and vit.mode_combo.currentData() == "received"
    assert "(no class token)" in vit.info.text() and "interpolated from 4x4" in vit.info.text()
    np.testing.assert_allclose(vit.overlay_map, received_attention_maps(want.attentions, -1, (3, 5), 0).mean(axis=0))
    assert "mean attention each patch receives over all 15 queries" in vit.legend.text()

    panel.tabs.setCurrentIndex(TAB_IMAGE)
    qtbot.wait(50)
    with qtbot.waitSignal(vit.overlay_changed, timeout=2000):
        vit.image_view.patch_clicked.emit(7)  # a click on patch (1, 2)
    assert vit.mode_combo.currentData() == "patch" and vit.spec().patch == 7
    np.testing.assert_allclose(vit.overlay_map, want.attentions[-1, :, 7].mean(axis=0).reshape(3, 5))
    assert vit.image_view.highlighted == 7 and "patch 1,2 → patches" in vit.legend.text()
    assert vit.layer_combo.isEnabled() and not vit.discard.isEnabled()

    vit.set_spec(OverlaySpec(mode="rollout", fusion="max", discard_ratio=0.3))
    roll = attention_rollout(want.attentions, head_fusion="max", discard_ratio=0.3, grid=(3, 5), n_extra=0)
    np.testing.assert_array_equal(vit.overlay_map, roll.patch_map)
    assert vit.overlay_levels == (0.0, 1.0) and vit.image_view.highlighted is None
    assert "mean over all 15 query rows (no class token)" in vit.legend.text()
    assert not vit.layer_combo.isEnabled() and vit.fusion_combo.isEnabled()
    with pytest.raises(ValueError, match="no class token"):
        vit.set_spec(OverlaySpec(mode="cls"))
    assert panel.grab().save(str(tmp_path / "siglip.png"))

    _load(qtbot, panel, DATA / "tiny_vit")  # a class token again: its view comes back, the choice kept
    assert _modes(vit) == ["cls", "patch", "received", "rollout"] and vit.mode_combo.currentData() == "rollout"
    vit.set_spec(OverlaySpec(mode="cls", layer=0, head=1))
    np.testing.assert_array_equal(vit.overlay_map, panel.outcome.result.attentions[0, 1, 0, 1:].reshape(3, 5))


def test_a_real_click_on_the_image_picks_the_query_patch(qtbot, mouse):
    panel = _panel(qtbot)
    shown = _load(qtbot, panel, DATA / "tiny_siglip")
    panel.tabs.setCurrentIndex(TAB_IMAGE)
    qtbot.wait(100)
    view = panel.vit.image_view
    with qtbot.waitSignal(panel.vit.overlay_changed, timeout=2000):
        mouse.click(view.graphics.viewport(), view.patch_center(9).toPoint())
    assert panel.vit.spec().patch == 9 and panel.vit.mode_combo.currentData() == "patch"
    np.testing.assert_allclose(panel.vit.overlay_map, shown.attentions[-1, :, 9].mean(axis=0).reshape(4, 4))
