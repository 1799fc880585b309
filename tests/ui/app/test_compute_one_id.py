"""The computation's request ids and busy state are its job's own: edits gathered while a run works
each get the next id, the run they overtook may still be shown, and busy holds, without a gap,
from the first edit to the newest edit's answer."""

from __future__ import annotations

import threading
from types import SimpleNamespace

from attnviz.ui.compute_controller import ComputeController


def test_edits_gathered_during_a_run_keep_one_busy_span_and_answer_with_the_newest_id(qtbot):
    gate, started, seen = threading.Event(), threading.Event(), []

    def compute(request, progress, is_cancelled, on_preview):
        seen.append(request.request_id)
        if request.request_id == 1:
            started.set()
            gate.wait(10)
        return SimpleNamespace(request_id=request.request_id, cancelled=False, ok=True)

    ctrl = ComputeController(compute=compute, throttle_ms=200, stale_grace_s=60.0)
    busy, answered = [], []
    ctrl.busy_changed.connect(busy.append)
    ctrl.finished.connect(lambda resp: answered.append((resp.request_id, ctrl.busy)))
    assert ctrl.submit_now("a") == 1
    assert started.wait(5)
    assert ctrl.submit("b") == 2 and ctrl.submit("c") == 3 and ctrl.latest_id == 3
    gate.set()  # the overtaken run answers while the newest edit waits in the throttle
    qtbot.waitUntil(lambda: answered == [(1, True)], timeout=5000)
    assert ctrl.busy
    qtbot.waitUntil(lambda: len(answered) == 2, timeout=5000)
    assert answered[1] == (3, False) and seen == [1, 3] and busy == [True, False]
    ctrl.shutdown()


def test_cancel_while_an_edit_waits_sends_nothing_and_ends_busy(qtbot):
    seen = []

    def compute(request, progress, is_cancelled, on_preview):
        seen.append(request.request_id)
        return SimpleNamespace(request_id=request.request_id, cancelled=False, ok=True)

    ctrl = ComputeController(compute=compute)
    busy, cancelled = [], []
    ctrl.busy_changed.connect(busy.append)
    ctrl.cancelled.connect(cancelled.append)
    rid = ctrl.submit("a")
    ctrl.cancel()
    qtbot.wait(100)
    assert seen == [] and not ctrl.busy and cancelled == [rid]
    with qtbot.waitSignal(ctrl.finished, timeout=5000) as blocker:
        ctrl.submit_now("b")
    assert blocker.args[0].request_id == rid + 1 and not ctrl.busy
    ctrl.shutdown()
