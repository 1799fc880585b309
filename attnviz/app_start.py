"""What the ``attnviz`` desktop application does before and around its window that needs no Qt: the
command line (:func:`build_parser`, :func:`check_options`, the Pretrained workspace's ``--model``
options), ``--self-test`` (:func:`run_self_test`), the session a plain image or text file becomes
(:func:`session_for_file`), the start-up clock ``--startup-report`` prints (:class:`StartupClock`) and
the reason no window can open (:func:`no_display`). :mod:`attnviz.ui.app` runs the window with them;
everything here can be imported and tested without PySide6.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from pathlib import Path

DEFAULT_DEMO = "river-bank"
SMOKE_TIMEOUT_S = 180.0  # a cold numba cache compiles every kernel first: allow minutes, not seconds
REPORTED_MODULES = ("numba", "scipy", "attnviz.engine", "attnviz.model.compute", "attnviz.checkpoints",
                    "pyqtgraph", "tokenizers")  # heavy imports the start-up report says were loaded at show
AUTOSAVE_RANGE = (0.05, 86_400.0)  # seconds: from every edit to once a day
MIN_SIZE = (640, 480)  # smaller windows cannot lay out the sidebar and a workspace
MAX_SIZE = (7680, 4320)  # 8K
TARGET_FAMILIES = "encoder-decoders (MarianMT, BART, mBART, T5) and Whisper"
_IMPORTED_AT = time.time()  # fallback start time where the process start cannot be read


def process_start_time() -> float:
    """Wall-clock time (as ``time.time()``) this process started: from /proc on Linux (10 ms
    resolution), elsewhere the moment this module was imported."""
    try:
        with open("/proc/self/stat", encoding="ascii") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
        with open("/proc/uptime", encoding="ascii") as fh:
            uptime = float(fh.read().split()[0])
        started = float(fields[19]) / os.sysconf("SC_CLK_TCK")  # field 22: start time after boot, in ticks
        return time.time() - (uptime - started)
    except (OSError, ValueError, IndexError, AttributeError):
        return _IMPORTED_AT


class StartupClock:
    """Wall-clock marks of one start-up (``time.time()``), and the report ``--startup-report`` prints."""

    def __init__(self):
        self.start = process_start_time()
        self.marks: dict[str, float] = {}
        self.loaded_at_show: dict[str, bool] = {}
        self.panels_at_show: list[str] = []
        self.modules_at_show: list[str] = []  # every module imported when the window first painted
        self.threads_at_show: list[str] = []  # names of the threads running then

    def mark(self, name: str) -> None:
        self.marks.setdefault(name, time.time())

    def report(self, **extra) -> dict:
        return {"process_start": self.start, "marks": dict(self.marks),
                "since_start": {k: round(v - self.start, 4) for k, v in self.marks.items()},
                "loaded_at_show": dict(self.loaded_at_show), "panels_at_show": list(self.panels_at_show),
                "modules_at_show": list(self.modules_at_show), "threads_at_show": list(self.threads_at_show),
                **extra}


# --- the command line -----------------------------------------------------------------------------------


def autosave_seconds(text: str) -> float:
    """--autosave-interval: a finite number of seconds in AUTOSAVE_RANGE (1e308 overflowed the timer)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    lo, hi = AUTOSAVE_RANGE
    if not lo <= value <= hi:  # NaN fails both comparisons
        raise argparse.ArgumentTypeError(f"{text} seconds: give {lo:g} to {hi:g}")
    return value


def build_parser() -> argparse.ArgumentParser:
    from attnviz.model.demos import list_demos

    p = argparse.ArgumentParser(prog="attnviz", description="attnviz: a desktop laboratory for the attention "
                                                            "mechanism.")
    p.add_argument("file", nargs="?", help="a session (.attnviz), an image or a text file to open, or attention "
                                         "maps (.npz, .safetensors) to show in the Pretrained workspace")
    p.add_argument("--demo", choices=[n for n, _ in list_demos()], default=DEFAULT_DEMO,
                   help=f"bundled demo opened when no file is given (default {DEFAULT_DEMO})")
    p.add_argument("--workspace", metavar="NAME[/TAB]",
                   help="start on this workspace: attention, qkv, image, diagnostics, mask or pretrained; /TAB "
                        "brings one of its tabs forward (the tab's title in lower case, spaces as hyphens), "
                        "e.g. diagnostics/softmax-jacobian or pretrained/corpus")
    p.add_argument("--size", metavar="WxH", help="window size in pixels, e.g. 1280x800")
    p.add_argument("--screenshot", metavar="OUT.png",
                   help="write the window as a PNG once every view shows its final result, then exit")
    p.add_argument("--theme", choices=("light", "dark"), help="colour theme for this run (default: the saved one)")
    p.add_argument("--autosave-interval", type=autosave_seconds, default=30.0, metavar="SECONDS",
                   help=f"seconds between autosaves of an unsaved session, {AUTOSAVE_RANGE[0]:g} to "
                        f"{AUTOSAVE_RANGE[1]:g} (default 30)")
    p.add_argument("--smoke-test", action="store_true",
                   help="open the session, wait for the first computed result and exit (0 = it worked)")
    p.add_argument("--startup-report", action="store_true",
                   help="like --smoke-test, and print start-up times (first paint, first heatmap) as one JSON line")
    p.add_argument("--self-test", action="store_true",
                   help="open no window: check every engine kernel against the float64 reference, print the "
                        "result as one JSON line, exit 0 when all agree")
    add_model_arguments(p)  # --model, --image, --prompt, --option: a checkpoint in the Pretrained workspace
    return p


def parse_size(text: str) -> tuple[int, int]:
    """``"1280x800"`` -> (1280, 800); ValueError naming the limits otherwise."""
    m = re.fullmatch(r"\s*(\d{1,5})\s*[xX×]\s*(\d{1,5})\s*", text or "")
    if m is None:
        raise ValueError(f"--size {text!r}: give the window size as WIDTHxHEIGHT in pixels, e.g. 1280x800")
    w, h = int(m.group(1)), int(m.group(2))
    if not (MIN_SIZE[0] <= w <= MAX_SIZE[0] and MIN_SIZE[1] <= h <= MAX_SIZE[1]):
        raise ValueError(f"--size {text}: the width must be {MIN_SIZE[0]} to {MAX_SIZE[0]} and the height "
                         f"{MIN_SIZE[1]} to {MAX_SIZE[1]} pixels")
    return w, h


def check_output(path: str) -> str:
    """The absolute path of a PNG that can be written; ValueError saying why not."""
    if not path.lower().endswith(".png"):
        raise ValueError(f"--screenshot {path}: the picture is written as PNG; give a file name ending in .png")
    full = os.path.abspath(path)
    folder = os.path.dirname(full)
    if not os.path.isdir(folder):
        raise ValueError(f"--screenshot {path}: the folder {folder} does not exist")
    if not os.access(folder, os.W_OK) or (os.path.exists(full) and not os.access(full, os.W_OK)):
        raise ValueError(f"--screenshot {path}: cannot write there (no permission)")
    return full


def check_screenshot_target(given: str) -> None:
    """ValueError when a FIFO, a device, a socket or a folder is at --screenshot's path (or where its link
    points): refused before any work, as a session save refuses it, instead of blocking on the FIFO."""
    from attnviz.persist import SessionError, check_save_target

    try:
        check_save_target(given)
    except SessionError as exc:
        raise ValueError(f"--screenshot {exc}") from None


def check_options(args) -> str | None:
    """The message of the first bad --size / --screenshot / --model value, else None (values set: the
    size as a pair, the screenshot as an absolute path). --workspace is checked by the window, which
    knows the workspaces, before these."""
    try:
        args.size = parse_size(args.size) if args.size is not None else None
        if args.screenshot is not None:
            given = args.screenshot
            args.screenshot = check_output(given)
            check_screenshot_target(given)
            if args.smoke_test or args.startup_report:
                raise ValueError("--screenshot cannot be combined with --smoke-test or --startup-report")
    except ValueError as exc:
        return str(exc)
    return check_model_options(args)


def no_display() -> str | None:
    """Why no window can open on this Linux session (no X11 or Wayland display and no Qt platform
    chosen), else None: Qt would abort with a page of plugin names."""
    if not sys.platform.startswith("linux") or os.environ.get("QT_QPA_PLATFORM"):
        return None
    if os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"):
        return None
    return ("no display to open the window on (neither DISPLAY nor WAYLAND_DISPLAY is set); run it in a desktop "
            "session, or with QT_QPA_PLATFORM=offscreen for --screenshot and --smoke-test")


# --- the Pretrained workspace's options -------------------------------------------------------------------
# --model DIR (a checkpoint folder, or an installed ready model's name; ``attnviz DIR`` with a checkpoint
# folder is the same), --image PATH (repeatable), --prompt/--text TEXT (``\n`` writes a line break),
# --target TEXT (an encoder-decoder teacher-forced on it, or Whisper's transcript) and --option NAME=VALUE
# (repeatable). attnviz.ui.model_view.cli_options.apply loads them in the window.


def add_model_arguments(parser) -> None:
    g = parser.add_argument_group("Pretrained workspace")
    g.add_argument("--model", metavar="DIR", help="load this checkpoint folder (or ready model) in the Pretrained "
                                                  "workspace and run it (the workspace is shown unless --workspace "
                                                  "names another); a checkpoint folder given as FILE is the same")
    g.add_argument("--image", metavar="PATH", action="append", default=None,
                   help="with --model: an image it sees (repeat for a model that reads several)")
    g.add_argument("--prompt", "--text", dest="prompt", metavar="TEXT",
                   help="with --model: the text it reads (an encoder-decoder's source), or a vision-language model's "
                        "prompt (\\n writes a line break)")
    g.add_argument("--target", metavar="TEXT", help="with --model: the target an encoder-decoder is teacher-forced on "
                                                    "(Whisper: the transcript), instead of its own greedy output")
    g.add_argument("--option", metavar="NAME=VALUE", action="append", default=None,
                   help="with --model: an option of a vision-language model's run (suffix=..., state=x,y,..., "
                        "noise_seed=N, time=t)")


def model_folder(name: str) -> str:
    """The folder of ``--model NAME``: a folder as given, else the installed ready model of that name."""
    if os.path.isdir(name):
        return name
    from attnviz.checkpoints import ready_models

    return str(dict(ready_models()).get(name, name))


def is_checkpoint_folder(path: str) -> bool:
    """True for a folder holding a config.json (what ``attnviz DIR`` opens in the Pretrained workspace)."""
    return os.path.isdir(path) and os.path.isfile(os.path.join(path, "config.json"))


def model_type(folder: str) -> str | None:
    """config.json's model_type (a policy's type) of a checkpoint folder; None when it cannot be read."""
    from attnviz.checkpoints import CheckpointError
    from attnviz.checkpoints.config import read_json

    try:
        raw = read_json(Path(folder) / "config.json", "the model config")
    except CheckpointError:
        return None
    kind = raw.get("model_type", raw.get("type"))
    return kind if isinstance(kind, str) else None


def takes_target(kind: str) -> bool:
    from attnviz.checkpoints.seq2seq_config import SEQ2SEQ_TYPES

    return kind in SEQ2SEQ_TYPES or kind == "whisper"


def check_model_options(args) -> str | None:
    """The message of the first bad --model option, else None. ``attnviz DIR`` with a checkpoint folder
    becomes ``--model DIR`` here."""
    if getattr(args, "file", None) and is_checkpoint_folder(args.file):
        if args.model is not None:
            return f"{args.file} is a checkpoint folder and --model {args.model} names another: give one model"
        args.model, args.file = args.file, None
    if args.model is None:
        if args.image or args.prompt is not None or args.option or getattr(args, "target", None) is not None:
            return "--image, --prompt (--text), --target and --option go with --model (or a checkpoint folder)"
        return None
    if getattr(args, "target", None) is not None:
        folder = model_folder(args.model)
        kind = model_type(folder) if os.path.isdir(folder) else None
        if kind is not None and not takes_target(kind):
            return (f"--target: {os.path.basename(os.path.normpath(folder))} is a {kind} model, which reads no "
                    f"target; --target is for {TARGET_FAMILIES}")
    for opt in args.option or ():
        name, eq, _value = opt.partition("=")
        if not eq or not name.strip():
            return f"--option {opt!r}: write it NAME=VALUE, e.g. suffix=a cup or state=0,0,0,0"
    for path in args.image or ():
        if not os.path.isfile(path):
            return f"--image {path}: no such file"
    return None


# --- what runs instead of, or before, the window --------------------------------------------------------


def run_self_test() -> int:
    """--self-test: the engine's self check as one JSON line; 0 when every kernel agrees."""
    from attnviz.engine.selfcheck import self_check

    report = self_check()
    print(json.dumps(report), flush=True)
    return 0 if report["ok"] else 1


def session_for_file(path: str):
    """A new SessionState built around an image or text file (sessions are opened, not built)."""
    from attnviz.model.positional import PositionalConfig
    from attnviz.model.source_files import classify, image_source_from_file, text_source_from_file
    from attnviz.model.state import ModelConfig, SessionState

    kind = classify(path)
    base = SessionState(model=ModelConfig(d_model=64, nh=4), positional=PositionalConfig("learned"))
    if kind == "image":
        return SessionState(sources=(image_source_from_file(base, path),), model=base.model,
                            positional=base.positional)
    if kind == "text":
        return SessionState(sources=(text_source_from_file(base, path),), model=base.model,
                            positional=PositionalConfig("sinusoidal"))
    raise ValueError(f"{os.path.basename(path)} is not a session, image or text file")
