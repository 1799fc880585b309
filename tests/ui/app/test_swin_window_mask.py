"""In the real window: a Swin layer's window mask opened from the Pretrained workspace's Image tab as a session of
its patches in the Mask workspace, equal cell for cell to the mask each of that layer's maps is zero outside of."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("PySide6")

from PySide6.QtCore import Qt  # noqa: E402

from attnviz.checkpoints.swin_stages import layer_window_mask  # noqa: E402

SWIN = Path(__file__).resolve().parents[2] / "data" / "checkpoints" / "tiny_swin"


@pytest.mark.slow
def test_the_window_mask_of_a_shifted_layer_opens_in_the_mask_workspace(make_window, qtbot):
    w = make_window("river-bank", all_panels=True)
    ctx = w.ctx
    panel = w.panel("pretrained")
    panel.auto_load = False
    w.show_workspace("pretrained")
    with qtbot.waitSignal(panel.attention_ready, timeout=60000):
        panel.load_model(str(SWIN))
    vit, res = panel.vit, panel.outcome.result
    assert vit.window_button.isVisibleTo(vit)
    vit.layer_combo.setCurrentIndex(1)  # stage 0's second layer: shifted windows
    w.files.prompts.changes_answer = "discard"
    qtbot.mouseClick(vit.window_button, Qt.MouseButton.LeftButton)
    assert w.workspace == "mask"
    want = layer_window_mask(panel.study.ckpt.config, res.grid, 1)  # (T, T)
    assert want.sum() < want.size / 2 and not np.array_equal(want, layer_window_mask(panel.study.ckpt.config, res.grid, 0))
    # the maps are zero outside the windows; inside a window, keys of another region of the roll get Swin's -100
    # before the softmax: weights of e^-100, tiny but not zero
    np.testing.assert_array_equal(res.attentions[1].max(axis=0) > 1e-30, want)
    qtbot.waitUntil(lambda: ctx.response is not None and ctx.response.ok and ctx.response.Tq == want.shape[0],
                    timeout=30000)
    resp = ctx.response
    np.testing.assert_array_equal(ctx.session.state.mask.compile(list(resp.query_segments), None, resp.Tq), want)


def test_a_model_without_windows_offers_no_window_mask(make_window, qtbot):
    w = make_window("river-bank", all_panels=True)
    panel = w.panel("pretrained")
    panel.auto_load = False
    with qtbot.waitSignal(panel.attention_ready, timeout=60000):
        panel.load_model(str(SWIN.parent / "tiny_vit"))
    assert not panel.vit.window_button.isVisibleTo(panel.vit)
    assert not panel.open_window_mask(0)  # asked anyway: one message, nothing opened
    assert w.workspace != "mask"
