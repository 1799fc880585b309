"""Start-up in fresh processes: what is loaded and built when the window first paints (no numba,
engine or scipy; only the heatmap and left-column panels), the first computation only after that
paint, the first heatmap drawn, and a read-only package copy that starts with its numba cache in the
user cache directory and writes nothing into the package."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import pytest

import attnviz

PACKAGE = Path(attnviz.__file__).resolve().parent
HIDDEN_PANEL_MODULES = ("diagnostics_panel", "inspector_panel", "mask_designer_panel", "model_view_panel",
                        "image_panel")


def _env(tmp_path: Path, **extra) -> dict:
    env = dict(os.environ)
    env.pop("NUMBA_CACHE_DIR", None)
    env.update(QT_QPA_PLATFORM="offscreen", XDG_CONFIG_HOME=str(tmp_path / "config"),
               XDG_DATA_HOME=str(tmp_path / "data"), XDG_CACHE_HOME=str(tmp_path / "cache"))
    env.update(extra)
    return env


def _startup_report(tmp_path: Path, **extra) -> dict:
    proc = subprocess.run([sys.executable, "-m", "attnviz", "--startup-report"], env=_env(tmp_path, **extra),
                          capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    return json.loads(next(ln for ln in proc.stdout.splitlines() if ln.startswith("{")))


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    """One start of the application with the user's numba cache (whatever state it is in)."""
    home = tmp_path_factory.mktemp("startup")
    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
    return _startup_report(home, XDG_CACHE_HOME=str(cache))


def test_the_report_orders_window_paint_compute_and_heatmap(report):
    t = report["since_start"]
    assert set(t) >= {"main", "imported", "window", "shown", "compute", "response", "heatmap"}
    assert 0 < t["main"] <= t["imported"] <= t["window"] <= t["shown"] <= t["compute"] <= t["response"] <= t["heatmap"]
    assert report["T"] == 4
    # the engine's result: flash's own, or on a first start (no complete warm-up recorded) the naive kernel's
    assert report["path"] == "engine:flash" or (report["first_path"] == "numpy" and report["path"] == "engine:naive")
    assert report["heatmap_colours"] >= 8  # the drawn weights, not an empty plot


def test_the_window_s_objects_are_frozen_out_of_the_collector_s_full_passes(report):
    assert report["gc_frozen"] > 10_000  # attnviz.ui.collector: frozen at the first paint


def test_only_the_heatmap_and_left_column_are_built_when_the_window_first_paints(report):
    assert report["panels_at_show"] == ["heatmap", "inputs", "model"]
    loaded = set(report["modules_at_show"])
    for name in HIDDEN_PANEL_MODULES:
        assert f"attnviz.ui.panels.{name}" not in loaded
    assert not report["loaded_at_show"]["attnviz.checkpoints"]
    assert "attnviz-warmup" not in report["threads_at_show"]  # it starts after the first result
    assert "attnviz-compute" in report["threads_at_show"]


def test_the_window_paints_before_numba_the_engine_or_scipy_is_imported(report):
    loaded = report["loaded_at_show"]
    assert not loaded["numba"] and not loaded["attnviz.engine"] and not loaded["scipy"]
    assert not loaded["attnviz.model.compute"]
    assert loaded["pyqtgraph"]  # the heatmap itself is built before the first paint


def _read_only_copy(dest: Path) -> Path:
    """A copy of the package with its bytecode, every file and folder without write permission."""
    shutil.copytree(PACKAGE, dest / "attnviz")
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(dest / "attnviz")], check=True,
                   capture_output=True)
    for p in [dest, *dest.rglob("*")]:
        p.chmod(p.stat().st_mode & ~0o222)
    return dest


def _as_read_only(folder: Path, cmd: list[str]) -> list[str]:
    """Root ignores file modes: run ``cmd`` with ``folder`` bind-mounted read-only, where possible."""
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        return cmd
    with tempfile.TemporaryDirectory() as d:
        probe = subprocess.run(["unshare", "-m", "--", "sh", "-c",
                                f"mount --bind {d} {d} && mount -o remount,bind,ro {d} && ! touch {d}/x"],
                               capture_output=True)
    if probe.returncode != 0:
        return cmd
    script = 'mount --bind "$0" "$0" && mount -o remount,bind,ro "$0" && exec "$@"'
    return ["unshare", "-m", "--", "sh", "-c", script, str(folder), *cmd]


def _files(folder: Path) -> dict:
    return {str(p.relative_to(folder)): (p.stat().st_mtime_ns, p.stat().st_size) for p in folder.rglob("*")}


@pytest.mark.slow
def test_a_read_only_package_starts_with_the_numba_cache_in_the_user_cache_dir(tmp_path):
    site = _read_only_copy(tmp_path / "site")
    try:
        before = _files(site)
        env = _env(tmp_path, PYTHONPATH=str(site))
        probe = ("import json, os, attnviz, numba\n"
                 "from attnviz.engine import jitcache\n"
                 "print(json.dumps({'package': attnviz.__file__, 'cache': numba.config.CACHE_DIR,\n"
                 "                  'writable': os.access(os.path.dirname(attnviz.__file__), os.W_OK)}))\n")
        got = subprocess.run(_as_read_only(site, [sys.executable, "-c", probe]), env=env, capture_output=True,
                             text=True, timeout=120, cwd=tmp_path)
        assert got.returncode == 0, got.stderr
        where = json.loads(got.stdout)
        assert Path(where["package"]).is_relative_to(site)
        assert where["writable"] is False
        assert Path(where["cache"]).parent == tmp_path / "cache" / "attnviz" / "numba"
        assert Path(where["cache"]).name.startswith("engine-")  # one folder per content of the engine's sources
        proc = subprocess.run(_as_read_only(site, [sys.executable, "-m", "attnviz", "--smoke-test"]), env=env,
                              capture_output=True, text=True, timeout=300, cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        assert "smoke test: ok (T = 4, engine:flash)" in proc.stdout
        assert "Traceback" not in proc.stderr
        assert _files(site) == before  # nothing written into the package (no __pycache__, no numba cache)
        assert list((tmp_path / "cache" / "attnviz" / "numba").rglob("*.nbi"))  # the kernels were cached there
    finally:
        for p in [site, *site.rglob("*")]:
            p.chmod(p.stat().st_mode | 0o200)


def test_the_warmup_stops_between_dtypes_and_exit_waits_for_it(monkeypatch):
    import importlib

    from attnviz.ui.app import KernelWarmup

    engine_warmup = importlib.import_module("attnviz.engine.warmup")  # the module (the package exports the function)

    started, release = threading.Event(), threading.Event()
    calls = []

    def compile_one(dtypes):
        calls.append(tuple(dtypes))
        started.set()
        assert release.wait(30)

    monkeypatch.setattr(engine_warmup, "warmup", compile_one)
    warm = KernelWarmup()
    assert warm.stop(timeout=0)  # never started: nothing to wait for
    warm = KernelWarmup()
    warm.start()
    assert started.wait(30)
    assert not warm.stop(timeout=0)  # still compiling its first dtype
    release.set()
    assert warm.stop()
    assert calls == [("float64",)]  # the second dtype was never started


@pytest.mark.slow
def test_a_first_start_shows_the_numpy_result_then_the_engines(tmp_path):
    """No complete warm-up recorded in the kernel cache: the first heatmap comes from the float64 numpy
    path while the engine compiles, then the engine's result replaces it."""
    got = _startup_report(tmp_path, XDG_CACHE_HOME=str(tmp_path / "cold"))
    t = got["since_start"]
    assert got["first_path"] == "numpy" and got["path"] == "engine:naive"  # standing in while flash compiles
    assert t["heatmap"] <= t["response"] + 1 and t["heatmap"] < t["engine"] <= t["engine_heatmap"]
    assert got["heatmap_colours"] >= 8


@pytest.mark.slow
def test_a_start_after_a_complete_warm_up_goes_to_the_engine_at_once(tmp_path):
    cache = tmp_path / "warm"
    probe = "from attnviz.engine import jitcache; print(jitcache.warm_marker())"
    where = subprocess.run([sys.executable, "-c", probe], env=_env(tmp_path, XDG_CACHE_HOME=str(cache)),
                           capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert where.returncode == 0, where.stderr
    marker = Path(where.stdout.strip())
    assert marker.is_relative_to(cache)
    marker.touch()  # as KernelWarmup does when every kernel is compiled
    got = _startup_report(tmp_path, XDG_CACHE_HOME=str(cache))
    assert got["first_path"] == got["path"] == "engine:flash"  # the first result drawn came from the engine


def test_a_complete_warmup_is_recorded_and_a_stopped_one_is_not(monkeypatch, tmp_path):
    import importlib

    from attnviz.engine import jitcache
    from attnviz.ui.app import KernelWarmup

    engine_warmup = importlib.import_module("attnviz.engine.warmup")
    monkeypatch.setattr(engine_warmup, "warmup", lambda dtypes: None)
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path))
    monkeypatch.setitem(jitcache._warm, "known", False)
    warm = KernelWarmup()
    warm.stop(timeout=0)  # stopped before it starts: nothing compiled, nothing recorded
    warm.start()
    assert warm.stop()
    assert not jitcache.warm_marker().exists()
    warm = KernelWarmup()
    warm.start()
    assert warm.wait(30)
    assert jitcache.warm_marker().exists()


def test_a_first_start_goes_numpy_then_naive_then_flash_when_the_warm_up_has_compiled_float64(
        make_window, qtbot, monkeypatch):
    """The order of a first start's results, the warm-up replaced by one that only says what it compiled."""
    from PySide6.QtCore import QObject, Signal

    from attnviz.engine import jitcache
    from attnviz.ui.app import StartupClock, _schedule_first_work

    class FakeWarmup(QObject):
        compiled = Signal(str)
        started = first_view = False

        def start(self):
            self.started = True

        def start_first_view(self):
            self.first_view = True

    monkeypatch.setattr(jitcache, "is_warm", lambda: False)
    w = make_window("river-bank", compute=False)
    paths = []
    w.ctx.response_changed.connect(lambda r: paths.append((r.path, r.stand_in, r.kernel_stand_in)))
    w.ctx.engine_mode = "when-compiled"
    warm = FakeWarmup()
    _schedule_first_work(w, w.ctx, StartupClock(), warm)
    w.first_painted.emit()
    assert warm.first_view and not warm.started  # the naive kernel compiles while the numpy path computes
    qtbot.waitUntil(lambda: warm.started, timeout=60_000)  # after the engine's first result
    assert paths == [("numpy", True, ""), ("engine:naive", False, "flash")]
    assert w.status.kernel_label.text() == "kernel: naive · flash compiling…"
    warm.compiled.emit("float32")  # not the lab's dtype: nothing changes
    qtbot.wait(50)
    assert len(paths) == 2 and w.ctx.engine_mode == "naive-until-warm"
    warm.compiled.emit("float64")
    qtbot.waitUntil(lambda: len(paths) == 3, timeout=60_000)
    assert paths[2] == ("engine:flash", False, "") and w.ctx.engine_mode == "always"
    assert w.status.kernel_label.text() == "kernel: flash"
