"""Make ``docs/images/whisper.png``: the Pretrained workspace's Audio tab on a Whisper checkpoint, from the real
panel.

    QT_QPA_PLATFORM=offscreen .venv/bin/python tools/screenshot_whisper.py [--out PNG] [--size WxH]
        [--theme light|dark] [--model FOLDER] [--clip AUDIO] [--target TEXT] [--token K]

The Pretrained panel (as the window builds it, with its further tabs) loads the model — by default the tiny
random Whisper of the tests, tests/data/checkpoints/tiny_whisper, so the picture needs no download — and its
Audio tab runs the clip (default: the bundled demo, resources/audio/chirps.wav) teacher-forced on the target
(an empty ``--target``: the model's own greedy transcript); once every worker is idle, written token K is
selected and the tab (its controls, the spectrogram with the frames and the token's cross-attention, the
tokens and the alignment heatmap) is written as PNG. Settings go to a temporary folder.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TINY_WHISPER = REPO / "tests" / "data" / "checkpoints" / "tiny_whisper"
TARGET = " a rising chirp, then the tone"
OUT = REPO / "docs" / "images" / "whisper.png"
TIMEOUT_S = 300


def shoot(out: Path, size: str = "1024x700", theme: str = "dark", folder: Path = TINY_WHISPER, clip: Path | None = None,
          target: str = TARGET, token: int = 3) -> int:
    """Render the Audio tab of a Pretrained panel of ``size`` on ``folder`` and write it to ``out``; 0 when done."""
    from PySide6.QtWidgets import QApplication

    app = QApplication.instance() or QApplication([])
    from attnviz.model.demos import build_demo
    from attnviz.model.session import Session
    from attnviz.ui.context import AppContext
    from attnviz.ui.latest_job import LatestJob
    from attnviz.ui.model_view.panel import ModelViewPanel
    from attnviz.ui.theme import apply_theme

    apply_theme(app, theme)
    w, h = (int(v) for v in size.lower().split("x"))
    panel = ModelViewPanel(AppContext(Session(build_demo("river-bank"))), auto_load=False)
    panel.resize(w, h)
    panel.show()
    view = panel.audio
    if clip is not None:
        view.add_clip(str(clip))
    view.target_edit.setText(target)
    failures: list[str] = []
    view.failed.connect(failures.append)
    panel.load_model(str(folder))
    start, idle = time.monotonic(), None
    while time.monotonic() - start < TIMEOUT_S:
        app.processEvents()
        time.sleep(0.02)
        if failures:
            sys.stderr.write(failures[0] + "\n")
            return 1
        busy = any(job.busy for job in panel.findChildren(LatestJob))
        if view.outcome is None or busy:
            idle = None
            continue
        idle = idle or time.monotonic()
        if time.monotonic() - idle > 0.6:
            break
    else:
        sys.stderr.write(f"no final picture within {TIMEOUT_S} s\n")
        return 1
    view.select_token(min(token, len(view.outcome.pieces) - 1))
    for _ in range(30):
        app.processEvents()
        time.sleep(0.01)
    out.parent.mkdir(parents=True, exist_ok=True)
    ok = panel.tabs.grab().save(str(out))
    view.shutdown()
    panel.shutdown()
    return 0 if ok else 1


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--size", default="1024x700", metavar="WxH", help="the panel's size (default 1024x700)")
    ap.add_argument("--theme", choices=("light", "dark"), default="dark")
    ap.add_argument("--model", type=Path, default=TINY_WHISPER, help="a Whisper checkpoint folder")
    ap.add_argument("--clip", type=Path, help="an audio file (default: the bundled demo clip)")
    ap.add_argument("--target", default=TARGET, help="empty: the model's own greedy transcript")
    ap.add_argument("--token", type=int, default=3, help="the written token whose cross-attention is drawn")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="attnviz-shot-") as home:
        os.environ.update(XDG_CONFIG_HOME=os.path.join(home, "config"), XDG_DATA_HOME=os.path.join(home, "data"))
        os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
        code = shoot(args.out, args.size, args.theme, args.model, args.clip, args.target, args.token)
    if code == 0:
        print(args.out)
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
