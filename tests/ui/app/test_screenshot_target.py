"""``attnviz --screenshot OUT.png`` onto something that is not a regular file (a FIFO, a folder, a link to a
FIFO) is refused in one line before any work, with the check a session save uses; it used to block on the
FIFO for ever once the picture was ready."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from attnviz.ui.app import main

ROOT = Path(__file__).resolve().parents[3]


def _target(tmp_path: Path, kind: str) -> tuple[Path, str]:
    out = tmp_path / "shot.png"
    if kind == "fifo":
        os.mkfifo(out)
        return out, "it is a named pipe (FIFO), not a regular file"
    if kind == "folder":
        out.mkdir()
        return out, "it is a directory, not a regular file"
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    link = tmp_path / "link.png"
    link.symlink_to(fifo)
    return link, f"it is a named pipe (FIFO) (the link points to {fifo}), not a regular file"


@pytest.mark.timeout(30)
@pytest.mark.parametrize("kind", ["fifo", "folder", "link_to_fifo"])
def test_a_screenshot_target_that_is_not_a_regular_file_is_refused_first(tmp_path, capsys, kind):
    out, expect = _target(tmp_path, kind)
    t = time.monotonic()
    assert main(["--screenshot", str(out)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"attnviz: --screenshot {out}: {expect}"), err
    assert time.monotonic() - t < 5
    assert os.path.lexists(out) and not out.is_file()  # left as it was


@pytest.mark.timeout(120)
def test_the_window_command_refuses_a_fifo_within_seconds(tmp_path):
    out, expect = _target(tmp_path, "fifo")
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen", PYTHONPATH=str(ROOT))
    t = time.monotonic()
    r = subprocess.run([sys.executable, "-m", "attnviz", "--workspace", "mask", "--screenshot", str(out)],
                       capture_output=True, text=True, timeout=100, env=env, cwd=tmp_path)
    assert r.returncode == 1 and f"--screenshot {out}: {expect}" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr and time.monotonic() - t < 30
    assert not out.is_file()


def test_a_regular_file_or_a_new_name_passes_the_check(tmp_path):
    from attnviz.app_start import check_screenshot_target

    (tmp_path / "old.png").write_bytes(b"x")
    check_screenshot_target(str(tmp_path / "old.png"))
    check_screenshot_target(str(tmp_path / "new.png"))
    (tmp_path / "dangling.png").symlink_to(tmp_path / "missing.png")
    check_screenshot_target(str(tmp_path / "dangling.png"))
