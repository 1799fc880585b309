"""LatestJob.reserve / submit_reserved: a caller that gathers a burst of requests into one job (the
computation's throttle) takes an id per request from the job itself, so the job's ids and its busy
state are the caller's: the reserved id overtakes the running job at once, busy holds until the
newest id answers, and a reserved id cancelled before its job comes runs nothing."""

import threading

from attnviz.ui.latest_job import LatestJob


def test_a_reserved_id_overtakes_the_running_job_and_keeps_busy_until_it_answers(qtbot):
    job = LatestJob("test-reserve")
    gate, started = threading.Event(), threading.Event()
    got, busy = [], []
    job.done.connect(lambda jid, result: got.append((jid, result)))
    job.busy_changed.connect(busy.append)

    def slow():
        started.set()
        gate.wait(10)
        return "old"

    assert job.submit(slow) == 1
    assert started.wait(5)
    assert job.reserve() == 2 and job.reserve() == 3  # two requests gathered, nothing queued yet
    assert job.latest_id == 3 and job.busy and not job.wanted(1) and job.wanted(3)
    gate.set()
    assert job.wait_idle(5)
    qtbot.wait(50)
    assert got == [] and job.busy  # the old result is dropped; the gathered requests still wait
    assert job.submit_reserved(lambda x: x * 2, 21) == 3
    qtbot.waitUntil(lambda: got == [(3, 42)], timeout=5000)
    assert not job.busy and busy == [True, False]
    job.shutdown(2)


def test_a_reserved_id_cancelled_before_its_job_runs_nothing(qtbot):
    job = LatestJob("test-reserve-cancel")
    ran, busy = [], []
    job.busy_changed.connect(busy.append)
    rid = job.reserve()
    job.cancel()
    assert job.submit_reserved(lambda: ran.append(1)) == rid
    assert job.wait_idle(5)
    qtbot.wait(50)
    assert ran == [] and not job.busy and busy == [True, False] and not job.wanted(rid)
    assert job.submit(lambda: ran.append(2)) == rid + 1  # a new id runs again
    qtbot.waitUntil(lambda: ran == [2] and not job.busy, timeout=5000)
    job.shutdown(2)


def test_reserve_after_shutdown_leaves_the_job_idle():
    job = LatestJob("test-reserve-stopped")
    job.shutdown()
    assert job.reserve() == 1 and not job.busy and not job.wanted(1)
