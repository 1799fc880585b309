"""LatestJob, the one newest-wins worker thread behind the computation, the heatmap overview, the head
grid, the flash timing, the diagnostics studies and the pretrained-model jobs: only the newest result
arrives (or, delivering overtaken jobs, never an older one after a newer), problems arrive as
messages, a cancelled job delivers nothing, and a shut-down worker delivers nothing and its thread
ends."""

import threading

import pytest
from PySide6.QtCore import QObject

from attnviz.ui.latest_job import Cancelled, LatestJob, run_job


def test_run_job_sorts_expected_problems_from_bugs():
    assert run_job(lambda: 7) == (7, None)
    assert run_job(lambda: int("x"), (ValueError,)) == (None, "invalid literal for int() with base 10: 'x'")
    _, error = run_job(lambda: {}["k"], (ValueError,))
    assert error == "internal error: KeyError: 'k'"
    _, error = run_job(lambda: [][0], (IndexError,))
    assert error == "list index out of range"

    def oom():
        raise MemoryError

    assert run_job(oom, memory_message="too big") == (None, "too big")


def test_a_job_overtaken_while_running_is_dropped(qtbot):
    job = LatestJob("test-job")
    gate, started = threading.Event(), threading.Event()
    got, busy = [], []
    job.done.connect(lambda jid, result: got.append((jid, result)))
    job.busy_changed.connect(busy.append)

    def slow():
        started.set()
        gate.wait(10)
        return "old"

    first = job.submit(slow)
    assert started.wait(5)
    second = job.submit(lambda a, b=0: a + b, 40, b=2)  # arguments are passed through
    gate.set()
    qtbot.waitUntil(lambda: len(got) > 0, timeout=5000)
    assert job.wait_idle(5)
    qtbot.wait(30)
    assert got == [(second, 42)] and first < second == job.latest_id
    assert busy == [True, False] and not job.busy and job.last_seconds >= 0.0
    job.shutdown()


def test_a_failure_arrives_as_a_message_and_the_worker_keeps_going(qtbot):
    job = LatestJob("test-job")
    with qtbot.waitSignal(job.failed, timeout=5000) as blocker:
        jid = job.submit(lambda: int("seven"))
    assert blocker.args == [jid, "invalid literal for int() with base 10: 'seven'"]
    with qtbot.waitSignal(job.done, timeout=5000) as blocker:
        jid = job.submit(lambda: 7)
    assert blocker.args == [jid, 7]
    job.shutdown()


def test_after_shutdown_nothing_runs_and_the_thread_ends(qtbot):
    job = LatestJob("test-job")
    with qtbot.waitSignal(job.done, timeout=5000):
        job.submit(lambda: 1)
    thread = job._thread
    job.shutdown()
    thread.join(5)
    assert not thread.is_alive() and job.stopped
    ran = []
    job.submit(lambda: ran.append(1))  # ignored, and not an exception in the caller's slot
    with qtbot.assertNotEmitted(job.done, wait=100):
        pass
    assert ran == [] and job.wait_idle(1)


def test_deleting_the_owner_stops_the_thread(qtbot):
    owner = QObject()
    job = LatestJob("test-diagnostic", owner)
    with qtbot.waitSignal(job.done, timeout=5000) as blocker:
        jid = job.submit(sum, [1, 2, 3])
    assert blocker.args == [jid, 6]
    thread = job._thread
    owner.deleteLater()
    qtbot.waitUntil(lambda: not thread.is_alive(), timeout=5000)
    assert not thread.is_alive()


def test_run_job_lets_cancelled_through():
    def give_up():
        raise Cancelled

    with pytest.raises(Cancelled):
        run_job(give_up)


def _blocking():
    """A job that tells when it starts and ends when released."""
    gate, started = threading.Event(), threading.Event()

    def slow():
        started.set()
        gate.wait(10)
        return "old"

    return slow, gate, started


def test_a_waiting_job_is_replaced_and_never_runs(qtbot):
    job = LatestJob("test-job")
    slow, gate, started = _blocking()
    ran, got = [], []
    job.done.connect(lambda jid, result: got.append((jid, result)))
    job.submit(slow)
    assert started.wait(5)
    job.submit(lambda: ran.append("middle"))  # waits behind the running job ...
    last = job.submit(lambda: "newest")  # ... and is replaced before it starts
    gate.set()
    qtbot.waitUntil(lambda: len(got) > 0, timeout=5000)
    assert job.wait_idle(5)
    qtbot.wait(30)
    assert ran == [] and got == [(last, "newest")]
    job.shutdown()


def test_delivering_overtaken_jobs_keeps_the_order_and_the_busy_state(qtbot):
    job = LatestJob("test-job", deliver_overtaken=True)
    slow, gate, started = _blocking()
    got, busy = [], []
    job.done.connect(lambda jid, result: got.append((jid, result, job.busy)))
    job.busy_changed.connect(busy.append)
    first = job.submit(slow)
    assert started.wait(5)
    second = job.submit(lambda: "new")
    gate.set()
    qtbot.waitUntil(lambda: len(got) == 2, timeout=5000)
    # the overtaken job still arrives, first and while the newest is on its way; then the newest
    assert got == [(first, "old", True), (second, "new", False)]
    assert busy == [True, False]
    job.shutdown()


def test_an_overtaken_result_is_dropped_when_a_newer_one_was_delivered_first(qtbot):
    job = LatestJob("test-job", deliver_overtaken=True)
    got = []
    job.done.connect(lambda jid, result: got.append(jid))
    first = job.submit(lambda: 1)
    assert job.wait_idle(5)  # its answer is queued, not yet delivered
    second = job.submit(lambda: 2)
    assert job.wait_idle(5)
    job._deliver.emit(first, 1, None, 0.0)  # an older answer arriving late (after both queued ones)
    qtbot.waitUntil(lambda: second in got, timeout=5000)
    qtbot.wait(30)
    assert got == [first, second]
    job.shutdown()


def test_a_job_that_raises_cancelled_delivers_nothing(qtbot):
    job = LatestJob("test-job", deliver_overtaken=True)

    def give_up():
        raise Cancelled

    with qtbot.assertNotEmitted(job.done, wait=200), qtbot.assertNotEmitted(job.failed, wait=200):
        job.submit(give_up)
        assert job.wait_idle(5)
    with qtbot.waitSignal(job.done, timeout=5000) as blocker:
        jid = job.submit(lambda: "after")
    assert blocker.args == [jid, "after"]
    job.shutdown()


def test_cancel_drops_the_waiting_job_and_the_running_ones_result(qtbot):
    job = LatestJob("test-job", deliver_overtaken=True)
    slow, gate, started = _blocking()
    ran, busy = [], []
    job.busy_changed.connect(busy.append)
    job.submit(slow)
    assert started.wait(5)
    job.submit(lambda: ran.append("waiting"))
    with qtbot.assertNotEmitted(job.done, wait=200):
        job.cancel()
        assert not job.busy and job.working  # the running job still runs
        gate.set()
        assert job.wait_idle(5)
    assert ran == [] and busy == [True, False] and not job.busy
    with qtbot.waitSignal(job.done, timeout=5000) as blocker:
        jid = job.submit(lambda: "again")
    assert blocker.args == [jid, "again"] and busy == [True, False, True, False]
    job.shutdown()


def test_start_runs_the_thread_before_any_job_and_shutdown_waits_for_it(qtbot):
    job = LatestJob("test-early")
    job.start()
    thread = job._thread
    assert thread.is_alive() and thread.name == "test-early"
    assert not job.working and job.wait_idle(1)
    job.shutdown(timeout=5)
    assert not thread.is_alive() and job.stopped
    job.start()  # a stopped job starts no new thread
    assert job._thread is thread
