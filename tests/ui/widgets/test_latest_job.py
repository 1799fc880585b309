"""LatestJob, the one newest-wins worker thread behind the heatmap overview, the head grid, the flash
timing, the diagnostics studies and the pretrained-model jobs: only the newest result arrives,
problems arrive as messages, and a shut-down worker delivers nothing and its thread ends."""

import threading

from attnviz.ui.diagnostics.worker import BackgroundJob
from attnviz.ui.latest_job import LatestJob, run_job


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
    job = BackgroundJob(name="test-diagnostic")
    with qtbot.waitSignal(job.finished, timeout=5000) as blocker:
        job.start(sum, [1, 2, 3])
    assert blocker.args == [6]
    thread = job._job._thread
    job.deleteLater()
    qtbot.waitUntil(lambda: not thread.is_alive(), timeout=5000)
    assert not thread.is_alive()
