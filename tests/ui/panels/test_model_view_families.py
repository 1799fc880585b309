"""The "Pretrained model" panel on the encoder and vision families: RoBERTa text, DINOv2 with its
position table interpolated to the processor's grid, and a whole CLIP checkpoint's vision tower
with its centre crop drawn from the original image."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("PySide6")

from attnviz.checkpoints import load_checkpoint, run_image, run_text  # noqa: E402
from attnviz.checkpoints.views import DEFAULT_SENTENCE  # noqa: E402
from attnviz.model.demos import build_demo  # noqa: E402
from attnviz.model.session import Session  # noqa: E402
from attnviz.ui.context import AppContext  # noqa: E402
from attnviz.ui.model_view.panel import TAB_HEADS, TAB_IMAGE, ModelViewPanel  # noqa: E402

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


def _image(qtbot, panel, rgb, name):
    with qtbot.waitSignal(panel.attention_ready, timeout=WAIT_MS) as blocker:
        panel.set_image(rgb, name=name, run=True)
    return blocker.args[0]


def test_roberta_runs_on_the_sentence(qtbot):
    panel = _panel(qtbot)
    shown = _load(qtbot, panel, DATA / "tiny_roberta")
    want = run_text(load_checkpoint(DATA / "tiny_roberta"), DEFAULT_SENTENCE)
    np.testing.assert_array_equal(shown.attentions, want.attentions)
    assert panel.describe.text().startswith("tiny_roberta: roberta, 2 layers x 2 heads")
    assert panel.tabs.currentIndex() == TAB_HEADS and panel.grid.grid_shape() == (2, 2)


def test_dinov2_says_its_position_table_is_interpolated(qtbot, tmp_path):
    panel = _panel(qtbot)
    _load(qtbot, panel, DATA / "tiny_dinov2")
    rgb = np.zeros((30, 52, 3), dtype=np.uint8)
    rgb[:, 26:] = 255  # right half white
    shown = _image(qtbot, panel, rgb, "half white")
    want = run_image(load_checkpoint(DATA / "tiny_dinov2"), rgb)
    np.testing.assert_array_equal(shown.attentions, want.attentions)
    assert panel.tabs.isTabEnabled(TAB_IMAGE) and panel.vit.image_view.grid == (3, 5)
    info = panel.vit.info.text()
    assert "centre-cropped" in info and "interpolated from 4x4" in info
    assert panel.grab().save(str(tmp_path / "dinov2.png"))


def test_clip_draws_the_centre_crop_of_the_original(qtbot, tmp_path):
    panel = _panel(qtbot)
    _load(qtbot, panel, DATA / "tiny_clip")
    rgb = np.zeros((32, 96, 3), dtype=np.uint8)  # wide: the crop keeps the middle third
    rgb[:, 32:64] = 255  # the middle third white, the sides black
    shown = _image(qtbot, panel, rgb, "white middle")
    np.testing.assert_array_equal(shown.attentions, run_image(load_checkpoint(DATA / "tiny_clip"), rgb).attentions)
    assert "interpolated" not in panel.vit.info.text() and panel.vit.image_view.grid == (4, 4)
    img = panel.vit.image_view.image.image
    assert img[8:-8, 8:-8].min() > 200  # only the white middle, not the black sides (edges blend a little)
    panel.vit.model_pixels.setChecked(True)
    img = panel.vit.image_view.image.image
    assert img.min() > 200
    assert panel.grab().save(str(tmp_path / "clip.png"))
