"""Make docs/images/generation.png: the Pretrained workspace's Generate tab while a tiny decoder writes.

    QT_QPA_PLATFORM=offscreen .venv/bin/python tools/screenshot_generation.py [--out PNG] [--size WxH]
                                                                              [--theme light|dark]

It opens the application as tools/make_screenshots.py does (``attnviz.ui.app.main`` with ``--screenshot``,
settings and autosave in a temporary folder), loads tests/data/checkpoints/tiny_llama_lm (random weights:
the words it writes mean nothing, the views are what the picture shows), generates 16 tokens greedily
after the panel's sentence, selects the sixth generated token and layer 1, head 2, and writes the picture
once every worker is idle.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MODEL = REPO / "tests" / "data" / "checkpoints" / "tiny_llama_lm"
PROMPT = "The river bank was steep after the rain."
NEW_TOKENS, STEP, HEAD = 16, 5, (1, 2)


def prepare_generation(window) -> None:
    """Load the tiny decoder, open the Generate tab, write, then pick a step and a head."""
    panel = window.panel("pretrained")
    panel.auto_load = False
    view = panel.generation
    panel.side_splitter.set_shares([0.86, 0.14])  # the tab large, the head summaries a strip under it
    panel.body.set_shares([0.66, 0.34])

    def on_ready(*_args) -> None:
        panel.attention_ready.disconnect(on_ready)
        panel.tabs.setCurrentIndex(panel.tabs.indexOf(view))
        view.set_prompt(PROMPT)
        view.max_new.setValue(NEW_TOKENS)
        view.generate()

    def on_finished(_how: str) -> None:
        panel.select_head(*HEAD)
        view.show_step(STEP)

    panel.attention_ready.connect(on_ready)
    view.finished.connect(on_finished)
    panel.set_text(PROMPT)
    panel.load_model(MODEL)


def screenshot_generation(out: Path, size: str = "1280x900", theme: str = "light") -> int:
    """Write the picture to ``out`` from a child process with its own settings folder; returns its exit status."""
    with tempfile.TemporaryDirectory(prefix="attnviz-shot-") as home:
        env = dict(os.environ, XDG_CONFIG_HOME=os.path.join(home, "config"), XDG_DATA_HOME=os.path.join(home, "data"),
                   PYTHONPATH=os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p))
        env.setdefault("QT_QPA_PLATFORM", "offscreen")
        proc = subprocess.run([sys.executable, os.path.abspath(__file__), "--shoot", str(Path(out).resolve()),
                               "--size", size, "--theme", theme], env=env, timeout=900)
    return proc.returncode


def _shoot(out: str, size: str, theme: str) -> int:
    from attnviz.ui.app import main

    def on_shown(_app, window):
        window.files.prompts.save_changes = lambda *_a: "discard"
        prepare_generation(window)

    return main(["--demo", "river-bank", "--workspace", "pretrained", "--size", size, "--screenshot", out,
                 "--theme", theme], on_shown=on_shown)


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=REPO / "docs" / "images" / "generation.png")
    ap.add_argument("--size", default="1280x900", metavar="WxH")
    ap.add_argument("--theme", default="light", choices=("light", "dark"))
    ap.add_argument("--shoot", metavar="OUT", help=argparse.SUPPRESS)  # inside the child process
    args = ap.parse_args(argv)
    if args.shoot:
        return _shoot(args.shoot, args.size, args.theme)
    code = screenshot_generation(args.out, args.size, args.theme)
    if code == 0:
        print(f"wrote {args.out} ({args.size}, {args.theme})")
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
