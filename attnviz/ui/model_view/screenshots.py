"""Screenshots of the "Pretrained model" panel for the documentation.

``python -m attnviz.ui.model_view.screenshots [OUT_DIR] [--tiny-vit FOLDER]`` (with
``QT_QPA_PLATFORM=offscreen``) writes into OUT_DIR (default ``docs/screenshots/model_view``):

* ``minilm_sentence.png`` — all-MiniLM-L6-v2 (when installed) on the default sentence, the head with
  the strongest previous-token attention selected;
* ``vit_cls_attention.png`` / ``vit_rollout.png`` — a ViT checkpoint folder (default: the test suite's
  tiny random ViT) on the bundled river-scene image: the class token's attention (mean over heads,
  last layer) and the attention rollout (mean fusion).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[3]
DEFAULT_OUT = REPO / "docs" / "screenshots" / "model_view"
DEFAULT_TINY_VIT = REPO / "tests" / "data" / "checkpoints" / "tiny_vit"


def _wait(app, panel, signal, timeout: float = 60.0):
    got = []
    signal.connect(lambda *a: got.append(a))
    t0 = time.monotonic()
    while not got and time.monotonic() - t0 < timeout:
        app.processEvents()
        time.sleep(0.01)
    if not got:
        raise RuntimeError(f"the panel did not answer within {timeout:.0f} s: {panel.message_text()}")
    return got[0]


def _settle(app, ms: int = 300) -> None:
    t0 = time.monotonic()
    while time.monotonic() - t0 < ms / 1000:
        app.processEvents()
        time.sleep(0.01)


def main(argv=None) -> int:
    from PySide6.QtWidgets import QApplication

    from attnviz.checkpoints import ready_models
    from attnviz.checkpoints.views import OverlaySpec
    from attnviz.model.demos import build_demo
    from attnviz.model.session import Session
    from attnviz.ui.context import AppContext
    from attnviz.ui.model_view.panel import ModelViewPanel
    from attnviz.ui.theme import apply_theme

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", nargs="?", type=Path, default=DEFAULT_OUT)
    ap.add_argument("--tiny-vit", type=Path, default=DEFAULT_TINY_VIT, help="ViT checkpoint folder to show")
    app = QApplication.instance() or QApplication(sys.argv)
    args = ap.parse_args(argv if argv is not None else app.arguments()[1:])
    apply_theme(app, "light")
    args.out.mkdir(parents=True, exist_ok=True)
    ctx = AppContext(Session(build_demo("river-bank")))
    panel = ModelViewPanel(ctx, auto_load=False)
    panel.resize(1300, 820)
    panel.show()

    models = dict(ready_models())
    if "all-MiniLM-L6-v2" in models:
        panel.load_model(models["all-MiniLM-L6-v2"])
        _wait(app, panel, panel.attention_ready)
        prev = panel.outcome.summaries.to_previous  # (L, nh)
        layer, head = (int(i) for i in np.unravel_index(np.argmax(prev), prev.shape))
        panel.summary.set_metric("previous")
        panel.select_head(layer, head)
        _settle(app)
        panel.grab().save(str(args.out / "minilm_sentence.png"))
        print(f"wrote {args.out / 'minilm_sentence.png'} (layer {layer}, head {head})")
    else:
        print("all-MiniLM-L6-v2 is not installed: no MiniLM screenshot")

    panel.load_model(args.tiny_vit)
    _wait(app, panel, panel.attention_ready)
    panel.vit.set_spec(OverlaySpec(mode="cls", layer=-1, head="mean"))
    _settle(app)
    panel.grab().save(str(args.out / "vit_cls_attention.png"))
    panel.vit.set_spec(OverlaySpec(mode="rollout", fusion="mean", discard_ratio=0.0))
    _settle(app)
    panel.grab().save(str(args.out / "vit_rollout.png"))
    print(f"wrote {args.out / 'vit_cls_attention.png'} and {args.out / 'vit_rollout.png'}")
    panel.jobs.shutdown()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
