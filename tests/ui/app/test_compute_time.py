"""The status bar's compute time is the computation's own: the first run's import of the compute path (the
engine with numba and scipy, seconds on a cold machine) is not counted as computing."""

from __future__ import annotations

import time

from attnviz.model.compute import run
from attnviz.model.demos import build_demo
from attnviz.ui.compute_controller import ComputeController


def test_time_excludes_what_happens_before_the_compute_call(qtbot, monkeypatch):
    import attnviz.ui.compute_controller as cc

    def slow_import():
        time.sleep(0.6)  # as importing the engine on a cold start
        return run

    monkeypatch.setattr(cc, "_default_compute", slow_import)
    ctrl = ComputeController()
    with qtbot.waitSignal(ctrl.finished, timeout=20000) as blocker:
        ctrl.submit_now(build_demo("river-bank"))
    assert blocker.args[0].ok
    assert 0.0 < ctrl.last_seconds < 0.5  # the river-bank run takes milliseconds; the import 0.6 s
    ctrl.shutdown()
