"""AppContext, the undo adapter and the background compute controller, driven with real sessions."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

pytest.importorskip("PySide6")

from attnviz.model.commands import set_model, set_view  # noqa: E402
from attnviz.model.compute import ComputeResponse, run  # noqa: E402
from attnviz.model.demos import build_demo  # noqa: E402
from attnviz.model.session import Session  # noqa: E402
from attnviz.ui.compute_controller import ComputeController  # noqa: E402
from attnviz.ui.context import AppContext  # noqa: E402


def test_river_bank_response_arrives_and_undo_restores(qtbot):
    ctx = AppContext(Session(build_demo("river-bank")))
    with qtbot.waitSignal(ctx.response_changed, timeout=20000) as blocker:
        ctx.recompute(now=True)
    resp = blocker.args[0]
    assert resp.ok
    bank = resp.query_labels.index("bank")
    np.testing.assert_allclose(resp.weights[0, bank].round(2), [0.11, 0.07, 0.69, 0.14])

    before = ctx.session.state
    with qtbot.waitSignal(ctx.response_changed, timeout=20000):
        assert ctx.execute(set_model(drop_handset=True, seed=7))
    assert ctx.session.state != before and ctx.session.dirty
    ctx.undo_stack.undo()
    assert ctx.session.state == before
    ctx.undo_stack.redo()
    assert ctx.session.state != before


def test_rejected_edit_is_reported_not_raised(qtbot):
    ctx = AppContext(Session(build_demo("river-bank")))
    with qtbot.waitSignal(ctx.message, timeout=2000) as blocker:
        ok = ctx.execute(set_model(nh=3))  # d_model=4 is not divisible by 3
    assert not ok
    assert blocker.args[0] == "error" and "divisible" in blocker.args[1]
    assert ctx.undo_stack.count() == 0


def test_view_changes_do_not_recompute_or_enter_undo(qtbot):
    ctx = AppContext(Session(build_demo("river-bank")))
    rid = ctx.compute.latest_id
    ctx.set_view(query=2)
    assert ctx.session.state.view.query == 2
    assert ctx.compute.latest_id == rid
    assert ctx.undo_stack.count() == 0


def test_newest_request_wins_and_event_loop_keeps_turning(qtbot):
    """A slow computation runs on the worker; the GUI thread keeps processing timers; stale
    responses are dropped."""
    release = threading.Event()

    def slow_run(req, progress=None, is_cancelled=None, on_preview=None):
        if req.request_id == 1:
            while not release.is_set():
                time.sleep(0.01)
        return run(req, progress, is_cancelled)

    ctrl = ComputeController(compute=slow_run)
    state = build_demo("river-bank")
    got: list[ComputeResponse] = []
    ctrl.finished.connect(got.append)
    ctrl.submit_now(state)
    ticks = []
    from PySide6.QtCore import QTimer

    t = QTimer()
    t.timeout.connect(lambda: ticks.append(1))
    t.start(5)
    qtbot.wait(200)  # the first computation is blocked, yet the event loop turns
    assert len(ticks) >= 10
    ctrl.submit_now(build_demo("savings-bank"))  # newer request
    release.set()
    qtbot.waitUntil(lambda: len(got) >= 1, timeout=20000)
    qtbot.wait(100)
    t.stop()
    assert [r.request_id for r in got] == [2]
    assert "savings" in got[0].query_labels
    ctrl.shutdown()


def test_results_keep_arriving_during_a_stream_of_edits_and_never_go_back(qtbot):
    """Edits every 10 ms with computations of ~30 ms (a paint stroke): intermediate results are
    drawn while the stream goes on, in increasing request order, and the last edit is answered."""

    def slowish_run(req, progress=None, is_cancelled=None, on_preview=None):
        time.sleep(0.03)
        return run(req, progress, is_cancelled)

    ctrl = ComputeController(compute=slowish_run)
    state = build_demo("river-bank")
    got: list[int] = []
    ctrl.finished.connect(lambda r: got.append(r.request_id))
    for _ in range(30):
        ctrl.submit(state)
        qtbot.wait(10)
    last = ctrl.latest_id
    qtbot.waitUntil(lambda: got and got[-1] == last, timeout=20000)
    ctrl.shutdown()
    assert got == sorted(got) and len(set(got)) == len(got)
    assert len(got) >= 3  # results arrived during the stream, not only after it
    assert len(got) < 30  # bursts were coalesced


def test_a_failing_compute_is_reported_as_a_response_and_the_worker_goes_on(qtbot):
    def flaky_run(req, progress=None, is_cancelled=None, on_preview=None):
        if req.request_id == 1:
            raise MemoryError("too big")
        if req.request_id == 2:
            raise RuntimeError("a bug")
        return run(req, progress, is_cancelled)

    ctrl = ComputeController(compute=flaky_run)
    state = build_demo("river-bank")
    with qtbot.waitSignal(ctrl.finished, timeout=20000) as blocker:
        ctrl.submit_now(state)
    bad = blocker.args[0]
    assert bad.request_id == 1 and not bad.ok and bad.error == "not enough memory for this job"
    with qtbot.waitSignal(ctrl.finished, timeout=20000) as blocker:
        ctrl.submit_now(state)
    bug = blocker.args[0]
    assert bug.request_id == 2 and not bug.ok and bug.error == "internal error: RuntimeError: a bug"
    assert bug.messages == (bug.error,) and not ctrl.busy
    with qtbot.waitSignal(ctrl.finished, timeout=20000) as blocker:
        ctrl.submit_now(state)
    assert blocker.args[0].request_id == 3 and blocker.args[0].ok and not ctrl.busy
    ctrl.shutdown()


def test_the_compute_thread_runs_from_the_start_and_shutdown_ends_it(qtbot):
    ctrl = ComputeController(compute=run)
    thread = ctrl._job._thread
    assert thread is not None and thread.is_alive() and thread.name == "attnviz-compute"
    ctrl.shutdown(timeout=5)
    assert not thread.is_alive()
    with qtbot.assertNotEmitted(ctrl.finished, wait=200):
        ctrl.submit_now(build_demo("river-bank"))  # after shutdown nothing runs
    assert ctrl.wait_idle(1)
