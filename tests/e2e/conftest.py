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
import tempfile
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# screenshots the real-window tests keep, outside the checkout (the suite writes nothing into it)
ARTIFACTS = Path(os.environ.get("ATTNVIZ_TEST_ARTIFACTS") or Path(tempfile.gettempdir()) / "attnviz-test-artifacts")
DRIVER = ROOT / "tests" / "app_driver.py"  # the application with a test script


def pytest_collection_modifyitems(items):
    """Under xdist (`--dist loadgroup`) the tests of the real window share one worker and one Xvfb."""
    for item in items:
        if "xvfb_display" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.xdist_group("xvfb"))


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
    X window, driven by ``script`` through tests/app_driver.py; the script may write a JSON
    report with ``report(dict)``."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)

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
        env.update(DISPLAY=xvfb_display, ARTIFACTS=str(ARTIFACTS),
                   XDG_CONFIG_HOME=str(tmp_path / "config"), XDG_DATA_HOME=str(tmp_path / "data"))
        proc = subprocess.run([sys.executable, str(DRIVER), str(path), *map(str, args)], env=env,
                              capture_output=True, text=True, timeout=timeout, cwd=str(ROOT))
        rep = json.loads(report_path.read_text()) if report_path.exists() else None
        return proc, rep

    return run


class AppRuns:
    """Several runs of the real application for one test, sharing one private home (settings, autosave,
    recent files) so a later run finds what an earlier one left behind. Each run has its own script
    and JSON report (``report(dict)`` in the script); ``start`` leaves the process running (to kill it)."""

    PRELUDE = textwrap.dedent("""
        import json as _json
        def report(d):
            _tmp = REPORT + ".part"
            with open(_tmp, "w") as _fh:
                _json.dump(d, _fh)
            import os as _os
            _os.replace(_tmp, REPORT)
    """)

    def __init__(self, display: str, root: Path):
        self.root = root
        self.procs: list[subprocess.Popen] = []
        home = root / "home"
        home.mkdir(parents=True, exist_ok=True)
        self.env = dict(os.environ)
        self.env.pop("QT_QPA_PLATFORM", None)
        from platformdirs import user_cache_dir

        from attnviz.engine.jitcache import source_digest

        # compiled kernels stay in the person's own cache (a cold one costs a minute of JIT compiling),
        # in the folder of this content of the engine's sources (attnviz.engine.jitcache)
        numba_cache = os.environ.get("NUMBA_CACHE_DIR") or os.path.join(
            user_cache_dir("attnviz", appauthor=False), "numba", f"engine-{source_digest()}")
        self.env.update(DISPLAY=display, HOME=str(home), XDG_CONFIG_HOME=str(home / ".config"),
                        XDG_DATA_HOME=str(home / ".local" / "share"), NUMBA_CACHE_DIR=numba_cache,
                        ARTIFACTS=str(ARTIFACTS))
        self.data_dir = home / ".local" / "share" / "attnviz"  # platformdirs.user_data_dir("attnviz")

    def _prepare(self, name: str, script: str) -> tuple[Path, Path]:
        report = self.root / f"{name}.report.json"
        if report.exists():
            report.unlink()
        path = self.root / f"{name}.script.py"
        path.write_text(f"REPORT = {str(report)!r}\n" + self.PRELUDE + textwrap.dedent(script), encoding="utf-8")
        return report, path

    @staticmethod
    def _read(report: Path):
        return json.loads(report.read_text()) if report.exists() else None

    def run(self, name: str, script: str, args=(), timeout: int = 120):
        """Run the application until it exits: (CompletedProcess, report dict or None)."""
        report, path = self._prepare(name, script)
        proc = subprocess.run([sys.executable, str(DRIVER), str(path), *map(str, args)], env=self.env,
                              capture_output=True, text=True, timeout=timeout, cwd=str(ROOT))
        return proc, self._read(report)

    def start(self, name: str, script: str, args=()):
        """Start the application and return (Popen, path of its report); the caller ends it."""
        report, path = self._prepare(name, script)
        proc = subprocess.Popen([sys.executable, str(DRIVER), str(path), *map(str, args)], env=self.env, cwd=str(ROOT),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.procs.append(proc)
        return proc, report

    def wait_report(self, proc: subprocess.Popen, report: Path, timeout: float = 90.0):
        """The report once the running application has written it (None if it exited or timed out)."""
        import time

        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if report.exists():
                return self._read(report)
            if proc.poll() is not None:
                return self._read(report)
            time.sleep(0.05)
        return None

    def close(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
            proc.communicate(timeout=30)


@pytest.fixture
def app_runs(xvfb_display, tmp_path):
    """:class:`AppRuns` in a fresh private home; processes still running at the end are killed."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    runs = AppRuns(xvfb_display, tmp_path)
    yield runs
    runs.close()
