"""The Intervene tab on a SmolVLA robot policy and on Swin, taken through the application's own ``--screenshot``
option (as tools/make_screenshots.py takes the docs' pictures):

    QT_QPA_PLATFORM=offscreen .venv/bin/python tools/screenshot_intervene_policies.py OUT_DIR [--theme light|dark]

writes ``intervention-vla.png`` (tiny SmolVLA on its two cameras: the action expert's heads 1.2 and 3.0 zeroed,
the action chunk's change, an expert head's action rows before | after | difference) and ``intervention-swin.png``
(tiny Swin with a classifier on the demo picture: heads 4.1 and 5.2 of its last stages zeroed, the pooled output's
cosine and the classes before and after) at 1024 x 700. The ``prepare_*`` functions are the preparations
make_screenshots.py runs once the window is shown.
"""

from __future__ import annotations

import os
import sys

from PySide6.QtCore import QTimer

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TINY_SMOLVLA = os.path.join(REPO, "tests", "data", "checkpoints", "tiny_smolvla")
TINY_SWIN = os.path.join(REPO, "tests", "data", "checkpoints", "tiny_swin_cls")
STATE = "0.1,0.2,0.3,0.4"


def prepare_intervention_vla(window, ctx):
    """tiny SmolVLA on its cameras; its page's Intervene tab on the action expert, heads 1.2 and 3.0 zeroed."""
    from attnviz.model.state import Interventions
    from attnviz.sources.image import load_image

    panel = window.panel("pretrained")
    panel.auto_load = False
    view = panel.vlm_intervention
    steps = []

    def on_ready(*_a):
        if panel.ckpt is None or getattr(panel.ckpt, "family", None) != "smolvla" or not view.ready():
            return
        steps.append(1)
        if len(steps) == 1:
            panel.vlm.tabs.setCurrentWidget(view)
            view.set_interventions(Interventions(stack="expert", heads=((1, 2), (3, 0))), "Ablate heads")

    def on_effects(_eff):
        if view.spec.heads:
            view.effects_ready.disconnect(on_effects)
            view.set_selected(3, 1)
            panel.vlm.body.set_shares([0.30, 0.70])
            QTimer.singleShot(300, lambda: view.scroll.verticalScrollBar().setValue(view.results.y() - 40))

    panel.attention_ready.connect(on_ready)
    view.effects_ready.connect(on_effects)
    files = ["camera0.png", "camera1.png"]
    panel.set_images([(f, load_image(os.path.join(TINY_SMOLVLA, f), alpha="drop")) for f in files])
    panel.load_model(TINY_SMOLVLA, options={"state": STATE})


def prepare_intervention_swin(window, ctx):
    """tiny Swin with a classifier on the demo picture; its Intervene tab, heads 4.1 and 5.2 zeroed."""
    from attnviz.model.state import Interventions

    panel = window.panel("pretrained")
    panel.auto_load = False
    view = panel.intervention
    steps = []

    def on_ready(*_a):
        steps.append(1)
        if len(steps) == 1:
            panel.tabs.setCurrentWidget(view)
            view.set_interventions(Interventions(heads=((4, 1), (5, 2))), "Ablate heads")

    def on_effects(_eff):
        if view.spec.heads:
            view.effects_ready.disconnect(on_effects)
            view.set_selected(5, 0)

    panel.side_splitter.set_shares([0.9, 0.1])
    panel.body.set_shares([0.68, 0.32])
    panel.attention_ready.connect(on_ready)
    view.effects_ready.connect(on_effects)
    panel.load_model(TINY_SWIN)


def _shoot(name: str, out: str, theme: str) -> int:
    from attnviz.ui.app import main

    prepare = {"intervention-vla": prepare_intervention_vla, "intervention-swin": prepare_intervention_swin}[name]

    def on_shown(app, window):
        window.files.prompts.save_changes = lambda *_a: "discard"
        return prepare(window, window.ctx)

    return main(["--demo", "river-bank", "--workspace", "pretrained", "--size", "1024x700", "--screenshot", out,
                 "--theme", theme], on_shown=on_shown)


if __name__ == "__main__":
    import argparse
    import subprocess

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out_dir")
    ap.add_argument("--theme", choices=("light", "dark"), default="light")
    ap.add_argument("--one", nargs=2, help=argparse.SUPPRESS)  # one picture, in this process
    a = ap.parse_args()
    if a.one:
        sys.exit(_shoot(a.one[0], a.one[1], a.theme))
    os.makedirs(a.out_dir, exist_ok=True)
    env = dict(os.environ, QT_QPA_PLATFORM=os.environ.get("QT_QPA_PLATFORM", "offscreen"))
    codes = [subprocess.call([sys.executable, __file__, a.out_dir, "--theme", a.theme, "--one", n,
                              os.path.join(a.out_dir, f"{n}.png")], env=env)
             for n in ("intervention-vla", "intervention-swin")]
    sys.exit(max(codes))
