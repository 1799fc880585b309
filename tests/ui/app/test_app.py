"""The application entry point as a person starts it: ``python -m attnviz [FILE]`` in a fresh
process (offscreen), driven by a script through ``tests/app_driver.py``; the ``--smoke-test`` exit
code; a bad file argument that leaves the demo open with a message; crash and recovery."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from attnviz.model.demos import build_demo
from attnviz.persist import save_session
from attnviz.sources.image import bundled_image

DRIVER = Path(__file__).resolve().parents[2] / "app_driver.py"

REPORT = """
import json, os
resp = wait_response(120)
out = {"sources": [s.name for s in ctx.session.state.sources], "ok": resp.ok, "T": resp.Tq,
       "notice": window.notice.label.text() if window.notice.isVisible() else "",
       "status": window.status.currentMessage(), "title": window.windowTitle(),
       "path": window.files.path, "dirty": ctx.session.dirty,
       "recovery": window.files.recovery_box is not None}
with open(os.environ["REPORT_PATH"], "w") as fh:
    json.dump(out, fh)
"""


def _env(tmp_path: Path, **extra) -> dict:
    env = dict(os.environ)
    env.update(QT_QPA_PLATFORM="offscreen", XDG_CONFIG_HOME=str(tmp_path / "config"),
               XDG_DATA_HOME=str(tmp_path / "data"), REPORT_PATH=str(tmp_path / "report.json"))
    env.update(extra)
    return env


def _run(tmp_path: Path, args, script: str | None = None, timeout: int = 180, **env):
    command = [sys.executable, "-m", "attnviz"]
    if script is not None:
        path = tmp_path / "script.py"
        path.write_text(textwrap.dedent(script), encoding="utf-8")
        command = [sys.executable, str(DRIVER), str(path)]
    proc = subprocess.run([*command, *map(str, args)], env=_env(tmp_path, **env), capture_output=True, text=True,
                          timeout=timeout)
    report = None
    if (tmp_path / "report.json").exists():
        report = json.loads((tmp_path / "report.json").read_text())
        (tmp_path / "report.json").unlink()
    return proc, report


def test_smoke_test_opens_the_demo_computes_and_exits_zero(tmp_path):
    proc, _ = _run(tmp_path, ["--smoke-test"])
    assert proc.returncode == 0, proc.stderr
    assert "smoke test: ok (T = 4, engine:flash)" in proc.stdout
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "data" / "attnviz" / "running.json").exists()  # the smoke test leaves no trace


def test_no_argument_opens_river_bank_and_qt_options_are_not_files(tmp_path):
    proc, rep = _run(tmp_path, ["-platform", "offscreen"], REPORT + "quit(0)\n")
    assert proc.returncode == 0, proc.stderr
    assert rep["sources"] == ["by the river bank"] and rep["ok"] and rep["T"] == 4
    assert rep["title"].startswith("untitled") and rep["notice"] == ""


@pytest.mark.slow
def test_session_and_image_file_arguments_open(tmp_path):
    session = tmp_path / "mine.attnviz"
    save_session(session, build_demo("vla-mask"))
    proc, rep = _run(tmp_path, [session], REPORT + "quit(0)\n")
    assert proc.returncode == 0, proc.stderr
    assert rep["sources"][0] == "image" and rep["T"] == 44 and rep["path"] == str(session)
    proc, rep = _run(tmp_path, [bundled_image("river-scene.png")], REPORT + "quit(0)\n")
    assert proc.returncode == 0, proc.stderr
    assert rep["sources"] == ["river-scene"] and rep["ok"] and rep["T"] == 1 + 14 * 14


@pytest.mark.slow
def test_a_bad_file_argument_is_reported_and_the_demo_stays(tmp_path):
    bad = tmp_path / "broken.attnviz"
    bad.write_bytes(b"\x00" * 100)
    proc, rep = _run(tmp_path, [bad], REPORT + "quit(0)\n")
    assert proc.returncode == 0, proc.stderr
    assert rep["sources"] == ["by the river bank"] and rep["ok"]
    assert "cannot open the session" in rep["notice"] and "broken.attnviz" in rep["notice"]
    assert "Traceback" not in proc.stderr
    proc, rep = _run(tmp_path, [tmp_path / "nowhere.png"], REPORT + "quit(0)\n")
    assert proc.returncode == 0 and "no such file" in rep["notice"]


def test_bad_options_exit_with_usage(tmp_path):
    proc, _ = _run(tmp_path, ["--theme", "purple"])
    assert proc.returncode == 2 and "invalid choice" in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.slow
def test_after_a_crash_the_next_start_offers_recovery(tmp_path):
    crash = """
        from attnviz.model.commands import set_model
        import os
        wait_response(120)
        ctx.execute(set_model(drop_handset=True, seed=42))
        assert window.files.autosave_now()
        os._exit(9)  # killed: no clean exit recorded
    """
    proc, _ = _run(tmp_path, [], crash)
    assert proc.returncode == 9, proc.stderr
    check = REPORT + """
box = window.files.recovery_box
assert box is not None and box.isVisible()
window.files.recover_button.click()
wait(100)
assert ctx.session.state.model.seed == 42 and ctx.session.dirty
quit(0)
"""
    proc, rep = _run(tmp_path, [], check)
    assert proc.returncode == 0, proc.stderr
    assert rep["recovery"]
    # that run exited cleanly: nothing is offered the time after
    proc, rep = _run(tmp_path, [], REPORT + "quit(0)\n")
    assert proc.returncode == 0 and not rep["recovery"]


def test_a_failing_script_exits_3_with_its_traceback(tmp_path):
    proc, _ = _run(tmp_path, [], "raise RuntimeError('script failed on purpose')\n")
    assert proc.returncode == 3 and "script failed on purpose" in proc.stderr


@pytest.mark.slow
def test_screenshot_writes_the_workspace_at_exactly_the_size_given(tmp_path):
    from PySide6.QtGui import QImage

    out = tmp_path / "qkv.png"
    proc, _ = _run(tmp_path, ["--demo", "river-bank", "--workspace", "qkv", "--size", "1280x800", "--screenshot", out])
    assert proc.returncode == 0, proc.stderr
    assert f"wrote {out} (1280x800, workspace qkv)" in proc.stdout
    img = QImage(str(out))
    assert (img.width(), img.height()) == (1280, 800)
    colours = {img.pixel(x, y) for x in range(400, 1280, 9) for y in range(100, 700, 9)}
    assert len(colours) > 30  # the drawn maps and tables, not an empty window
    assert not (tmp_path / "config" / "attnviz").exists()  # a rendering writes no settings
    assert not (tmp_path / "data" / "attnviz" / "autosave.attnviz").exists()


def test_screenshot_refuses_a_bad_workspace_size_or_path_with_one_line(tmp_path):
    cases = [(["--workspace", "heatmap"], "--workspace 'heatmap': no such workspace"),
             (["--size", "12x5"], "--size 12x5: the width must be 640 to 7680"),
             (["--size", "wide"], "give the window size as WIDTHxHEIGHT"),
             (["--screenshot", str(tmp_path / "nowhere" / "x.png")], "does not exist"),
             (["--screenshot", str(tmp_path / "x.jpg")], "ending in .png")]
    for args, message in cases:
        if "--screenshot" not in args:
            args = args + ["--screenshot", str(tmp_path / "x.png")]
        proc, _ = _run(tmp_path, args)
        assert proc.returncode == 1, (args, proc.stderr)
        assert message in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1


def test_a_failing_preparation_of_a_screenshot_exits_1_without_a_picture(tmp_path):
    out = tmp_path / "x.png"
    code = (f"import sys\nfrom attnviz.ui.app import main\n"
            f"def prepare(app, window):\n    raise RuntimeError('preparation failed on purpose')\n"
            f"sys.exit(main(['--size', '1280x800', '--screenshot', {str(out)!r}], on_shown=prepare))\n")
    proc = subprocess.run([sys.executable, "-c", code], env=_env(tmp_path), capture_output=True, text=True,
                          timeout=180)
    assert proc.returncode == 1 and "preparation failed on purpose" in proc.stderr
    assert not out.exists()


def test_the_application_runs_no_code_named_by_an_environment_variable(tmp_path):
    marker = tmp_path / "ran"
    script = tmp_path / "script.py"
    script.write_text(f"open({str(marker)!r}, 'w').close()\n", encoding="utf-8")
    out = tmp_path / "shot.png"
    proc, _ = _run(tmp_path, ["--size", "1280x800", "--screenshot", out], ATTNVIZ_TEST_SCRIPT=str(script))
    assert proc.returncode == 0, proc.stderr
    assert out.exists() and not marker.exists()


def test_self_test_opens_no_window_and_prints_the_engine_check(tmp_path):
    proc, _ = _run(tmp_path, ["--self-test"], timeout=420,
                   QT_QPA_PLATFORM="no-such-platform")  # no window: no Qt platform needed
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert report["ok"] is True and set(report["max_abs_diff"]) == {"naive", "flash"}
    assert report["kernels"] and all(p["path"].startswith(report["numba_cache"]) for p in report["kernels"].values())


GC_SCRIPT = """
import gc, json, os, threading, weakref
enabled_while_running = gc.isenabled()
collected_on = []


class Cycle:
    def __init__(self):
        self.me = self  # only the cyclic collector frees it

    def __del__(self):
        collected_on.append(threading.current_thread().name)


def make_garbage():
    for _ in range(50):
        Cycle()
    for _ in range(20000):  # allocations that would start a collection on this thread
        [[] for _ in range(5)]


worker = threading.Thread(target=make_garbage, name="worker")
worker.start()
worker.join()
wait(1500)  # the collector's timer runs on the GUI thread
with open(os.environ["REPORT_PATH"], "w") as fh:
    json.dump({"enabled": enabled_while_running, "threads": sorted(set(collected_on)),
               "n": len(collected_on)}, fh)
quit(0)
"""


def test_garbage_is_collected_on_the_gui_thread_only(tmp_path):
    """A worker thread's allocations never start Python's cyclic collector (which could destroy a Qt
    object off the GUI thread): the application collects on a GUI-thread timer instead."""
    proc, rep = _run(tmp_path, ["--demo", "river-bank"], GC_SCRIPT)
    assert proc.returncode == 0, proc.stderr
    assert rep["enabled"] is False
    assert rep["n"] == 50 and rep["threads"] == ["MainThread"]


@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_help_needs_no_display(flag, tmp_path):
    """``attnviz --help`` over ssh, with no display: the help, exit status 0 (it once aborted inside Qt,
    which found no display to open)."""
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")}
    env["QT_QPA_PLATFORM"] = "xcb"  # a real window system, and none to connect to
    env["XDG_RUNTIME_DIR"] = str(tmp_path)
    proc = subprocess.run([sys.executable, "-c", "import sys; from attnviz.ui.app import main; sys.exit(main())",
                           flag], env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.startswith("usage: attnviz") and "--workspace NAME[/TAB]" in proc.stdout
    assert "--screenshot" in proc.stdout


def test_a_screenshot_of_a_file_that_cannot_be_opened_exits_1_without_a_picture(tmp_path):
    """The README promises exit 1: a missing path, a folder, a FIFO or random bytes are one line naming
    why, and no picture of the fallback demo is written."""
    (tmp_path / "folder").mkdir()
    os.mkfifo(tmp_path / "pipe.attnviz")
    (tmp_path / "noise.attnviz").write_bytes(bytes(range(256)) * 8)
    cases = [(tmp_path / "missing.attnviz", "no such file"), (tmp_path / "folder", "not a regular file"),
             (tmp_path / "pipe.attnviz", "not a regular file"), (tmp_path / "noise.attnviz", "not an attnviz session")]
    for path, message in cases:
        out = tmp_path / "x.png"
        proc, _ = _run(tmp_path, [path, "--screenshot", out], timeout=120)
        assert proc.returncode == 1, (path, proc.stderr)
        assert message in proc.stderr and "Traceback" not in proc.stderr and not out.exists(), proc.stderr
