"""A private X server for the end-to-end tests: ``Xvfb`` on a display it picks itself (-displayfd),
so parallel runs and a person's own desktop never collide. The application under test is started as
a subprocess with DISPLAY pointing there and QT_QPA_PLATFORM unset, i.e. in a real X window."""

from __future__ import annotations

import json
import os
import select
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts"


@pytest.fixture(scope="session")
def xvfb_display():
    """``":N"`` of a running Xvfb (1600x1000, 24-bit); skipped only when Xvfb is not installed."""
    exe = shutil.which("Xvfb")
    if exe is None:
        pytest.skip("the Xvfb binary is not installed (Debian package xvfb; `make test` installs it)")
    r, w = os.pipe()
    proc = subprocess.Popen([exe, "-displayfd", str(w), "-screen", "0", "1600x1000x24", "-nolisten", "tcp"],
                            pass_fds=(w,), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    os.close(w)
    number = b""
    try:
        while not number.endswith(b"\n"):
            ready, _, _ = select.select([r], [], [], 20.0)
            if not ready:
                raise RuntimeError("Xvfb did not report its display within 20 s")
            chunk = os.read(r, 16)
            if not chunk:
                raise RuntimeError(f"Xvfb exited: {proc.stderr.read().decode(errors='replace')[-500:]}")
            number += chunk
    except BaseException:
        proc.kill()
        raise
    finally:
        os.close(r)
    yield f":{int(number.strip())}"
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()


@pytest.fixture
def run_app(xvfb_display, tmp_path):
    """run_app(args, script) -> (CompletedProcess, report dict or None): the real application in the
    X window, driven by ``script`` through the ATTNVIZ_TEST_SCRIPT hook; the script may write a JSON
    report with ``report(dict)``."""
    ARTIFACTS.mkdir(exist_ok=True)

    def run(args=(), script: str = "quit(0)\n", timeout: int = 240):
        report_path = tmp_path / "report.json"
        prelude = textwrap.dedent(f"""
            import json as _json
            def report(d):
                with open({str(report_path)!r}, "w") as _fh:
                    _json.dump(d, _fh)
        """)
        path = tmp_path / "script.py"
        path.write_text(prelude + textwrap.dedent(script), encoding="utf-8")
        env = dict(os.environ)
        env.pop("QT_QPA_PLATFORM", None)
        env.update(DISPLAY=xvfb_display, ATTNVIZ_TEST_SCRIPT=str(path), ARTIFACTS=str(ARTIFACTS),
                   XDG_CONFIG_HOME=str(tmp_path / "config"), XDG_DATA_HOME=str(tmp_path / "data"))
        proc = subprocess.run([sys.executable, "-m", "attnviz", *map(str, args)], env=env, capture_output=True,
                              text=True, timeout=timeout, cwd=str(ROOT))
        rep = json.loads(report_path.read_text()) if report_path.exists() else None
        return proc, rep

    return run
