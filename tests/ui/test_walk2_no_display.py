"""Without a display (over ssh), ``attnviz`` says in one line what is wrong — a bad option, a bad
value, or that there is no display at all — instead of aborting inside Qt with a page of plugin names."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="X11 / Wayland sessions")


def _run(tmp_path, *args):
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM")}
    env.update(XDG_CONFIG_HOME=str(tmp_path / "config"), XDG_DATA_HOME=str(tmp_path / "data"))
    return subprocess.run([sys.executable, "-m", "attnviz", *args], env=env, capture_output=True, text=True,
                          timeout=180)


def test_a_bad_option_is_said_without_a_display(tmp_path):
    proc = _run(tmp_path, "--bogus")
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip().splitlines()[-1] == "attnviz: error: unrecognized arguments: --bogus"
    assert "platform plugin" not in proc.stderr


@pytest.mark.parametrize("args, words", [(["--size", "10"], "--size '10'"),
                                         (["--workspace", "nowhere"], "no such workspace"),
                                         (["--smoke-test"], "no display to open the window on")])
def test_a_bad_value_or_no_display_is_one_line(tmp_path, args, words):
    proc = _run(tmp_path, *args)
    assert proc.returncode == 1, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("attnviz: ") and words in lines[0], proc.stderr
