"""The Pretrained panel on the committed tiny vision-language checkpoints (LLaVA, a SmolVLA policy): the run the
panel shows is the checkpoint's own on the same image and prompt, the overlay is its query row over the
patches, and the mask that opens is the model's."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("PySide6")

from attnviz.checkpoints import CheckpointError, load_checkpoint  # noqa: E402
from attnviz.checkpoints.study import VlmOutcome, default_prompt, patch_maps, query_values  # noqa: E402
from attnviz.model.demos import build_demo  # noqa: E402
from attnviz.model.mask_session import unique_names  # noqa: E402
from attnviz.model.sequence import assemble  # noqa: E402
from attnviz.model.session import Session  # noqa: E402
from attnviz.sources.image import load_image  # noqa: E402
from attnviz.ui.context import AppContext  # noqa: E402
from attnviz.ui.model_view.panel import PAGE_VLM, ModelViewPanel  # noqa: E402

DATA = Path(__file__).resolve().parents[2] / "data" / "checkpoints"
CASES = {"tiny_llava": (["image.png"], {}), "tiny_smolvla": (["camera0.png", "camera1.png"], {"state": "0.1,0.2,0.3,0.4"})}


def direct_run(folder, pictures, options):
    """The checkpoint's own run, or a skip while its family does not run in this tree."""
    try:
        ckpt = load_checkpoint(folder)
        opts = {"state": [float(v) for v in options["state"].split(",")]} if "state" in options else {}
        return ckpt, ckpt.run(pictures, default_prompt(ckpt), **opts)
    except (CheckpointError, AttributeError, ImportError) as exc:
        pytest.skip(f"{folder.name} does not run here: {exc}")


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_panel_shows_the_checkpoints_own_run(qtbot, name):
    files, options = CASES[name]
    folder = DATA / name
    pictures = [load_image(folder / f, alpha="drop") for f in files]
    ckpt, want = direct_run(folder, pictures, options)
    ctx = AppContext(Session(build_demo("river-bank")))
    panel = ModelViewPanel(ctx, auto_load=False)
    qtbot.addWidget(panel)
    panel.resize(1100, 720)
    panel.show()
    panel.set_images([(f, p) for f, p in zip(files, pictures)])
    with qtbot.waitSignal(panel.attention_ready, timeout=60000) as blocker:
        panel.load_model(folder, options=options)
    got = blocker.args[0]
    assert panel.inputs.currentIndex() == PAGE_VLM and not panel.message.isVisibleTo(panel)
    assert got.tokens == want.tokens and [s.name for s in got.segments] == [s.name for s in want.segments]
    np.testing.assert_allclose(got.attentions, want.attentions, rtol=1e-5, atol=1e-7)
    view = panel.vlm
    out = VlmOutcome(want)
    for g, m in zip(view.overlay_maps, patch_maps(want, query_values(out, view.query, "head", 0, 0))):
        np.testing.assert_allclose(g, m, rtol=1e-5, atol=1e-7)
    points = view.chart.points()
    assert points and all(len(x) == want.attentions.shape[0] for x, _y in points.values())  # one point per layer
    assert panel.open_model_mask()
    state = ctx.session.state
    seq, _ = assemble(state)
    assert [s.name for s in seq.segments] == unique_names(s.name for s in want.segments)
    np.testing.assert_array_equal(state.mask.compile(list(seq.segments), None, seq.T), want.mask)
