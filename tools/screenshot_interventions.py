"""Make ``docs/images/intervention.png`` (an ablation in the Pretrained workspace's Intervene tab) and
``docs/images/importance.png`` (the head-importance grid of a sweep), from the real panel.

    QT_QPA_PLATFORM=offscreen .venv/bin/python tools/screenshot_interventions.py [--out-dir DIR]
        [--theme light|dark] [--model FOLDER] [--text TEXT] [--heads L.H,...]

The panel loads the model (by default the tiny random Llama of the tests, tests/data/checkpoints/tiny_llama_lm,
so the pictures need no download), runs it on the text, zero-ablates the heads through the session (as clicks
in the grid do), selects a head of the last layer, waits for the effects, runs the importance sweep, and
writes two pictures of the tab's content: the ablation (controls, heads grid, top-k and KL, the selected
head's maps before | after | difference, the residual change) and the importance grid with its ranking.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TINY = REPO / "tests" / "data" / "checkpoints" / "tiny_llama_lm"
TEXT = "the river bank flooded after the rain"
OUT_DIR = REPO / "docs" / "images"
WIDTH = 760  # the tab's width in the pictures (px)


def _wait(app, signal, timeout_s: float = 120.0):
    """Process events until ``signal`` fires; its arguments (RuntimeError on timeout)."""
    from PySide6.QtCore import QEventLoop, QTimer

    got = []
    loop = QEventLoop()

    def hit(*args):
        got.append(args)
        loop.quit()

    signal.connect(hit)
    QTimer.singleShot(int(timeout_s * 1000), loop.quit)
    loop.exec()
    signal.disconnect(hit)
    if not got:
        raise RuntimeError(f"no answer within {timeout_s:g} s")
    return got[0]


def screenshot_interventions(out_dir=OUT_DIR, theme: str = "dark", folder=TINY, text: str = TEXT,
                             heads=((0, 1), (0, 3)), select=(1, 0)) -> list[Path]:
    """Write intervention.png and importance.png into ``out_dir``; returns their paths."""
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from PySide6.QtCore import QRect
    from PySide6.QtWidgets import QApplication

    from attnviz.model.demos import build_demo
    from attnviz.model.session import Session
    from attnviz.model.state import Interventions
    from attnviz.ui.context import AppContext
    from attnviz.ui.model_view.panel import ModelViewPanel
    from attnviz.ui.theme import apply_theme

    app = QApplication.instance() or QApplication([])
    apply_theme(app, theme)
    ctx = AppContext(Session(build_demo("river-bank")))
    panel = ModelViewPanel(ctx, auto_load=False)
    view = panel.intervention
    panel.resize(1280, 800)
    panel.show()
    panel.set_text(text)
    panel.load_model(str(folder))
    _wait(app, view.effects_ready)
    panel.tabs.setCurrentWidget(view)
    view.token_a.setText("#5")
    view.token_b.setText("#9")
    view.set_interventions(Interventions(heads=tuple(heads)), "Ablate heads")
    _wait(app, view.effects_ready)
    panel.select_head(*select)
    view.metric_combo.setCurrentIndex(view.metric_combo.findData("kl"))
    view.run_sweep()
    _wait(app, view.sweep_ready)
    body = view.body
    body.resize(WIDTH, body.sizeHint().height())
    body.layout().activate()
    for _ in range(5):
        app.processEvents()
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    cut = view.residual.geometry().bottom() + 6  # the ablation: everything down to the residual chart
    sweep_top = view.sweep_title.geometry().top()  # the sweep: its title, buttons, grid and ranking
    sweep_bottom = max(view.importance_map.geometry().bottom(), view.ranking.geometry().bottom()) + 6
    paths = [out_dir / "intervention.png", out_dir / "importance.png"]
    body.grab(QRect(0, 0, body.width(), cut)).save(str(paths[0]))
    body.grab(QRect(0, sweep_top, body.width(), sweep_bottom - sweep_top)).save(str(paths[1]))
    view.shutdown()
    panel.shutdown()
    return paths


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out-dir", type=Path, default=OUT_DIR)
    ap.add_argument("--theme", choices=("light", "dark"), default="dark")
    ap.add_argument("--model", type=Path, default=TINY, help="a decoder LLM checkpoint folder")
    ap.add_argument("--text", default=TEXT)
    ap.add_argument("--heads", default="0.1,0.3", metavar="L.H,...", help="the heads zero-ablated")
    args = ap.parse_args(argv)
    heads = tuple(tuple(int(x) for x in part.split(".")) for part in args.heads.split(","))
    for p in screenshot_interventions(args.out_dir, args.theme, args.model, args.text, heads):
        print(p)
    sys.stdout.flush()
    os._exit(0)  # the worker threads are daemons; skip Qt's teardown of the offscreen platform


if __name__ == "__main__":
    raise SystemExit(main())
