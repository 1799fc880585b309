"""The status bar's compute time is never a compilation: on a first start (no warm kernel cache) the
first run of an engine kernel compiles it, and that run is shown as a compilation, not as a compute
time of many seconds; the next computation shows its own time."""

from __future__ import annotations

import time

import pytest

from attnviz.model.commands import set_model
from attnviz.model.compute import run
from attnviz.model.demos import build_demo
from attnviz.model.session import Session
from attnviz.ui.compute_controller import ComputeController
from attnviz.ui.context import AppContext
from attnviz.ui.status import StatusBar, time_text

COMPILE_S = 0.4  # what the first run of the engine spends compiling, in this test


@pytest.fixture
def compiling_ctx(qtbot):
    """A context whose first engine run takes COMPILE_S longer, as a first run that compiles does."""
    calls = []

    def first_run_compiles(req, progress=None, is_cancelled=None, on_preview=None):
        if not calls:
            time.sleep(COMPILE_S)
        calls.append(req.request_id)
        return run(req, progress, is_cancelled)

    ctx = AppContext(Session(build_demo("river-bank")), compute_controller=ComputeController(compute=first_run_compiles))
    yield ctx
    ctx.compute.shutdown(timeout=5)


def _respond(qtbot, ctx, edit=None):
    with qtbot.waitSignal(ctx.response_changed, timeout=30000) as blocker:
        if edit is None:
            ctx.recompute(now=True)
        else:
            ctx.execute(edit)
    return blocker.args[0]


def test_a_first_run_that_compiles_is_not_shown_as_compute_time(qtbot, compiling_ctx, monkeypatch):
    from attnviz.engine import jitcache

    monkeypatch.setattr(jitcache, "is_warm", lambda: False)  # a first start: nothing compiled yet
    bar = StatusBar(compiling_ctx)
    qtbot.addWidget(bar)
    resp = _respond(qtbot, compiling_ctx)
    assert resp.ok and resp.path == "engine:flash"
    text = bar.time_label.text()
    assert text.startswith("first run: kernels compiled in ") and text.endswith(" s"), text
    assert float(text.split(" in ")[1].split()[0]) >= COMPILE_S - 0.05
    assert "compil" in bar.time_label.toolTip()
    _respond(qtbot, compiling_ctx, set_model(seed=3))  # the next edit: the kernel is compiled now
    text = bar.time_label.text()
    assert text.startswith("computed in ") and text.endswith(" ms"), text
    assert float(text.split()[2].replace(",", "")) < 1000 * COMPILE_S
    assert "compil" not in bar.time_label.toolTip()


def test_with_a_warm_cache_the_first_run_is_a_compute_time(qtbot, compiling_ctx, monkeypatch):
    from attnviz.engine import jitcache

    monkeypatch.setattr(jitcache, "is_warm", lambda: True)  # kernels load from the cache: nothing compiles
    bar = StatusBar(compiling_ctx)
    qtbot.addWidget(bar)
    _respond(qtbot, compiling_ctx)
    assert bar.time_label.text().startswith("computed in ")


def test_time_text():
    assert time_text(0.0042) == "computed in 4.2 ms"
    assert time_text(1.5) == "computed in 1,500 ms"
    assert time_text(24.21, compiled=True) == "first run: kernels compiled in 24.2 s"
