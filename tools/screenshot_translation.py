"""Make ``docs/images/translation-alignment.png``: the Diagnostics workspace's Alignment tab on a translation
model's cross-attention, from the real application.

    QT_QPA_PLATFORM=offscreen .venv/bin/python tools/screenshot_translation.py [--out PNG] [--size WxH]
        [--theme light|dark] [--model FOLDER] [--source TEXT] [--target TEXT]

The window opens on the translation demo, the Pretrained workspace loads the model (by default the tiny
random MarianMT of the tests, tests/data/tiny_marian, so the picture needs no download), runs it
teacher-forced on the target (an empty ``--target``: its own greedy translation), and its "Show alignment in
Diagnostics" brings the alignment forward; ``--screenshot`` writes the picture once every view is done. As
``tools/make_screenshots.py`` does, the run is a process of its own with settings and autosave in a temporary
folder.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TINY_MARIAN = REPO / "tests" / "data" / "tiny_marian"
SOURCE = "where is the station?"
TARGET = "où est la gare ?"
OUT = REPO / "docs" / "images" / "translation-alignment.png"


def prepare_translation(window, ctx, folder=TINY_MARIAN, source: str = SOURCE, target: str = TARGET) -> None:
    """Load ``folder`` in the Pretrained workspace on ``source`` / ``target`` and, once it has run, show its
    cross-attention in Diagnostics ▸ Alignment (the mean of every head)."""
    window.files.prompts.save_changes = lambda *_a: "discard"
    panel = window.panel("pretrained")
    panel.auto_load = False
    panel.set_target(target)

    def show(_outcome) -> None:
        panel.seq2seq_ready.disconnect(show)
        panel.show_alignment()

    panel.seq2seq_ready.connect(show)
    panel.load_model(str(folder), prompt=source)


def shoot(out, size: str = "1280x800", theme: str = "light", folder=TINY_MARIAN, source: str = SOURCE,
          target: str = TARGET) -> int:
    """In this process: run the application and write the picture to ``out``; returns its exit code."""
    from attnviz.ui.app import main

    return main(["--demo", "translation", "--workspace", "pretrained", "--size", size, "--screenshot", str(out),
                 "--theme", theme],
                on_shown=lambda app, window: prepare_translation(window, window.ctx, folder, source, target))


def launch(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--size", default="1280x800", metavar="WxH")
    ap.add_argument("--theme", choices=("light", "dark"), default="light")
    ap.add_argument("--model", type=Path, default=TINY_MARIAN, help="an encoder-decoder checkpoint folder")
    ap.add_argument("--source", default=SOURCE)
    ap.add_argument("--target", default=TARGET, help="empty: the model's own greedy translation")
    ap.add_argument("--here", action="store_true", help=argparse.SUPPRESS)  # the child process
    args = ap.parse_args(argv)
    if args.here:
        return shoot(args.out, args.size, args.theme, args.model, args.source, args.target)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="attnviz-shot-") as home:
        env = dict(os.environ, XDG_CONFIG_HOME=os.path.join(home, "config"), XDG_DATA_HOME=os.path.join(home, "data"),
                   PYTHONPATH=os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p))
        env.setdefault("QT_QPA_PLATFORM", "offscreen")
        cmd = [sys.executable, os.path.abspath(__file__), "--here", "--out", str(args.out.resolve()), "--size",
               args.size, "--theme", args.theme, "--model", str(args.model.resolve()), "--source", args.source,
               "--target", args.target]
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
    if proc.returncode != 0:
        sys.stderr.write(f"exit {proc.returncode}\n{proc.stderr[-2000:]}\n")
        return proc.returncode
    print(f"wrote {args.out} ({args.size})")
    return 0


if __name__ == "__main__":
    sys.exit(launch(sys.argv[1:]))
