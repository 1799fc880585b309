"""The desktop application's start-up without Qt (attnviz.app_start): its command line, option checks and the
session a plain file becomes are read and run with PySide6 unimportable, and give what the window's
``attnviz`` gives."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

NO_QT = "import sys\nfor name in ('PySide6', 'shiboken6', 'pyqtgraph'):\n    sys.modules[name] = None\n"


def _run(code: str, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=120,
                          env=env)


def test_the_options_and_their_checks_need_no_qt(tmp_path):
    code = NO_QT + (
        "import json\n"
        "from attnviz.app_start import build_parser, check_options, no_display, session_for_file\n"
        "bad = [['--size', '10x10'], ['--screenshot', 'a.gif'], ['--target', 'x'], ['--model', sys.argv[1],"
        " '--option', 'x']]\n"
        "problems = [check_options(build_parser().parse_args(a)) for a in bad]\n"
        "args = build_parser().parse_args(['--size', '1024x700', '--screenshot', sys.argv[1] + '/a.png'])\n"
        "ok = check_options(args)\n"
        "state = session_for_file(sys.argv[2])\n"
        "print(json.dumps({'problems': problems, 'ok': ok, 'size': args.size, 'shot': args.screenshot,"
        " 'sources': [type(s).__name__ for s in state.sources], 'qt': 'PySide6.QtCore' in sys.modules}))\n")
    text = tmp_path / "note.txt"
    text.write_text("the river bank\n", encoding="utf-8")
    proc = _run(code, str(tmp_path), str(text))
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout)
    assert out["problems"][0].startswith("--size 10x10: the width must be 640")
    assert "ending in .png" in out["problems"][1]
    assert "go with --model" in out["problems"][2]
    assert "NAME=VALUE" in out["problems"][3]
    assert out["ok"] is None and out["size"] == [1024, 700] and out["shot"] == str(tmp_path / "a.png")
    assert out["sources"] == ["TextSource"] and out["qt"] is False


def test_the_help_without_qt_is_the_windows_help(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM")}
    env["COLUMNS"] = "100"
    alone = _run(NO_QT + "from attnviz.app_start import build_parser\nbuild_parser().print_help()\n", env=env)
    assert alone.returncode == 0, alone.stderr[-2000:]
    pytest.importorskip("PySide6")
    window = _run("import sys\nfrom attnviz.ui.app import main\nsys.exit(main())\n", "--help", env=env)
    assert window.returncode == 0, window.stderr[-2000:]
    assert alone.stdout == window.stdout and alone.stdout.startswith("usage: attnviz")
