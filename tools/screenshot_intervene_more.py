"""The Intervene tab on a translation model and on a vision-language model, taken through the application's own
``--screenshot`` option (as tools/make_screenshots.py takes the docs' pictures):

    QT_QPA_PLATFORM=offscreen .venv/bin/python tools/screenshot_intervene_more.py OUT_DIR [--theme light|dark]

writes ``intervention-seq2seq.png`` (tiny BART: heads 0.1 and 0.2 of the cross-attention zeroed, layer 1 head 0's
cross-attention before | after | difference) and ``intervention-vlm.png`` (tiny PaliGemma: heads 0.1 and 0.3
zeroed, the answering token's attention over the picture before | after in layer 1, head 2) at 1024 x 700. The
``prepare_*`` functions are the preparations make_screenshots.py runs once the window is shown.
"""

from __future__ import annotations

import os
import sys

from PySide6.QtCore import QTimer

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TINY_BART = os.path.join(REPO, "tests", "data", "tiny_bart")
TINY_PALIGEMMA = os.path.join(REPO, "tests", "data", "checkpoints", "tiny_paligemma")
SOURCE, TARGET = "the bank of the river", "die Bank"
VLM_PROMPT = "answer en what is in the picture?"


def prepare_intervention_seq2seq(window, ctx):
    """tiny BART teacher-forced on a target; its Intervene tab on the cross-attention, heads 0.1 and 0.2 zeroed."""
    from attnviz.model.state import Interventions

    panel = window.panel("pretrained")
    panel.auto_load = False
    view = panel.intervention
    steps = []

    def on_ready(*_a):
        steps.append(1)
        if len(steps) == 1:
            panel.tabs.setCurrentWidget(view)
            view.set_interventions(Interventions(stack="cross", heads=((0, 1), (0, 2))), "Ablate heads")
            view.set_selected(1, 0)

    def on_effects(_eff):
        if view.spec.heads:
            view.effects_ready.disconnect(on_effects)
            view.set_selected(1, 0)
            QTimer.singleShot(300, lambda: view.scroll.verticalScrollBar().setValue(view.maps_title.y() - 6))

    panel.side_splitter.set_shares([0.9, 0.1])  # the tab takes the panel's height and most of its width
    panel.body.set_shares([0.68, 0.32])
    panel.seq2seq_ready.connect(on_ready)
    view.effects_ready.connect(on_effects)
    panel.set_target(TARGET)
    panel.load_model(TINY_BART, prompt=SOURCE)


def prepare_intervention_vlm(window, ctx):
    """tiny PaliGemma on its picture; its page's Intervene tab, heads 0.1 and 0.3 zeroed, layer 1 head 2."""
    from attnviz.model.state import Interventions

    panel = window.panel("pretrained")
    panel.auto_load = False
    view = panel.vlm_intervention
    steps = []

    def on_ready(*_a):
        if panel.ckpt is None or panel.ckpt.kind != "vlm" or not view.ready():
            return
        steps.append(1)
        if len(steps) == 1:
            panel.vlm.tabs.setCurrentWidget(view)
            view.set_interventions(Interventions(heads=((0, 1), (0, 3))), "Ablate heads")

    def on_effects(_eff):
        if view.spec.heads:
            view.effects_ready.disconnect(on_effects)
            panel.select_head(1, 2)
            panel.vlm.body.set_shares([0.34, 0.66])  # the tab's share of the page, as Generate takes
            QTimer.singleShot(300, lambda: view.scroll.verticalScrollBar().setValue(view.vlm_overlay.y() - 6))

    panel.attention_ready.connect(on_ready)
    view.effects_ready.connect(on_effects)
    panel.set_image_file(os.path.join(TINY_PALIGEMMA, "image.png"))
    panel.load_model(TINY_PALIGEMMA, prompt=VLM_PROMPT)


def _shoot(name: str, out: str, theme: str) -> int:
    from attnviz.ui.app import main

    prepare = {"intervention-seq2seq": prepare_intervention_seq2seq, "intervention-vlm": prepare_intervention_vlm}[name]
    demo = "translation" if name.endswith("seq2seq") else "river-bank"

    def on_shown(app, window):
        window.files.prompts.save_changes = lambda *_a: "discard"
        return prepare(window, window.ctx)

    return main(["--demo", demo, "--workspace", "pretrained", "--size", "1024x700", "--screenshot", out,
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
             for n in ("intervention-seq2seq", "intervention-vlm")]
    sys.exit(max(codes))
