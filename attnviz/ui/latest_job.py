"""LatestJob: one background thread that runs the newest of a stream of jobs and hands its result back
on the GUI thread; a waiting job is replaced by a newer one, and a result that is no longer the newest
is dropped. A job is a plain function; whatever it raises comes back as a one-line message (the
person's problem, out of memory, or an internal error), never a traceback and never a dead worker.
:func:`run_job` is that rule on its own, testable without a thread.
"""

from __future__ import annotations

import threading
import time

from PySide6.QtCore import QObject, Signal

from attnviz.cancel import Cancelled  # noqa: F401 - a job raises it when no longer wanted; re-exported

MEMORY_MESSAGE = "not enough memory for this job"


def run_job(fn, expected: tuple[type[BaseException], ...] = (ValueError,),
            memory_message: str = MEMORY_MESSAGE) -> tuple[object, str | None]:
    """(result, None) or (None, message) of ``fn()``; what the worker thread does with a job.
    :class:`Cancelled` passes through."""
    try:
        return fn(), None
    except Cancelled:
        raise
    except MemoryError:
        return None, memory_message
    except expected as exc:
        return None, str(exc) or type(exc).__name__
    except Exception as exc:  # a bug must not kill the worker or reach the person as a traceback
        return None, f"internal error: {type(exc).__name__}: {exc}"


class _Queue:
    """The state the worker thread and the GUI thread share, guarded by one condition. A plain
    object, so the owner's ``destroyed`` signal can stop it without keeping the QObject alive."""

    def __init__(self):
        self.cond = threading.Condition()
        self.pending = None  # (id, fn) waiting to run
        self.running = False
        self.stopping = False

    def stop(self, *_args) -> None:
        with self.cond:
            self.stopping = True
            self.pending = None
            self.cond.notify_all()


class LatestJob(QObject):
    """``submit(fn, *args, **kwargs) -> id``; ``done(id, result)`` or ``failed(id, message)`` for
    the newest id only. ``busy`` is True from a submit until the newest job's answer arrives.

    ``deliver_overtaken``: a job overtaken while it ran still delivers, unless a newer result was
    delivered first — so a stream of quick jobs keeps showing results (the job raises
    :class:`Cancelled` when it is not worth showing)."""

    done = Signal(int, object)
    failed = Signal(int, str)
    busy_changed = Signal(bool)
    _deliver = Signal(int, object, object, float)  # worker -> GUI thread (queued)

    def __init__(self, name: str = "attnviz-job", parent=None, *,
                 expected: tuple[type[BaseException], ...] = (ValueError,),
                 memory_message: str = MEMORY_MESSAGE, deliver_overtaken: bool = False):
        super().__init__(parent)
        self._queue = _Queue()
        self._latest = 0
        self._delivered = 0  # newest id delivered
        self._cancelled = 0  # ids up to this one deliver nothing (cancel)
        self._busy = False
        self._name = name
        self._expected = expected
        self._memory_message = memory_message
        self._deliver_overtaken = deliver_overtaken
        self._thread: threading.Thread | None = None
        self.last_seconds = 0.0  # wall time of the newest delivered job
        self._deliver.connect(self._on_deliver)
        self.destroyed.connect(self._queue.stop)

    @property
    def latest_id(self) -> int:
        return self._latest

    @property
    def busy(self) -> bool:
        return self._busy

    @property
    def working(self) -> bool:
        """A job is waiting or running (``busy`` also covers its answer on the way to the GUI thread)."""
        return self._queue.pending is not None or self._queue.running

    @property
    def stopped(self) -> bool:
        return self._queue.stopping

    def start(self) -> None:
        """Start the thread now instead of at the first submit (it is then ready at once)."""
        with self._queue.cond:
            self._start_thread()

    def submit(self, fn, *args, **kwargs) -> int:
        """Run ``fn(*args, **kwargs)`` on the worker; returns the job id its result will carry.
        After :meth:`shutdown` nothing runs and nothing is delivered."""
        return self._enqueue(fn, args, kwargs, new_id=True)

    def reserve(self) -> int:
        """A new newest id whose job is given later by :meth:`submit_reserved`: from now on older jobs are
        overtaken and ``busy`` is True until this id's answer (or :meth:`cancel`). A caller that gathers a
        burst of requests into one job reserves an id per request and submits the newest."""
        with self._queue.cond:
            self._latest += 1
            jid = self._latest
            if self._queue.stopping:
                return jid
        self._set_busy(True)
        return jid

    def submit_reserved(self, fn, *args, **kwargs) -> int:
        """Run ``fn(*args, **kwargs)`` as the job of the newest id (the last :meth:`reserve`d one), which
        it returns; a job of that id still waiting is replaced."""
        return self._enqueue(fn, args, kwargs, new_id=False)

    def wanted(self, jid: int) -> bool:
        """Whether a result of ``jid`` would still be delivered now (not cancelled, not shut down, not
        older than one delivered, and the newest unless overtaken jobs deliver)."""
        return self._wanted(jid)

    def _enqueue(self, fn, args, kwargs, new_id: bool) -> int:
        q = self._queue
        call = (lambda: fn(*args, **kwargs)) if args or kwargs else fn
        with q.cond:
            if new_id:
                self._latest += 1
            jid = self._latest
            if q.stopping or jid <= self._cancelled:  # (a reserved id cancelled before its job came)
                return jid
            q.pending = (jid, call)
            self._start_thread()
            q.cond.notify_all()
        self._set_busy(True)
        return jid

    def cancel(self) -> None:
        """Drop the waiting job and deliver nothing for any job submitted so far (a Cancel button)."""
        with self._queue.cond:
            self._queue.pending = None
            self._cancelled = self._latest
        self._set_busy(False)

    def wait_idle(self, timeout: float = 30.0) -> bool:
        """Block until nothing is pending or running (tests, benchmarks); results still arrive queued."""
        q = self._queue
        with q.cond:
            return q.cond.wait_for(lambda: q.pending is None and not q.running, timeout)

    def shutdown(self, timeout: float = 0.0) -> None:
        """Drop any waiting job and let the thread end after the running one; deliver nothing more.
        A ``timeout`` waits that long for the thread to end."""
        self._queue.stop()
        if timeout > 0 and self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout)

    def _start_thread(self) -> None:
        if self._thread is None and not self._queue.stopping:
            self._thread = threading.Thread(target=self._loop, name=self._name, daemon=True)
            self._thread.start()

    def _wanted(self, jid: int) -> bool:
        """Whether ``jid``'s result may still be shown; asked on the worker thread and again on the GUI thread."""
        if self._queue.stopping or jid <= self._cancelled or jid <= self._delivered:
            return False
        return jid == self._latest or self._deliver_overtaken

    def _loop(self) -> None:
        q = self._queue
        while True:
            with q.cond:
                q.cond.wait_for(lambda: q.pending is not None or q.stopping)
                if q.stopping:
                    return
                (jid, fn), q.pending = q.pending, None
                q.running = True
            t0 = time.perf_counter()
            try:
                result, error = run_job(fn, self._expected, self._memory_message)
                wanted = True
            except Cancelled:
                result, error, wanted = None, None, False
            elapsed = time.perf_counter() - t0
            with q.cond:
                q.running = False
                q.cond.notify_all()
                wanted = wanted and self._wanted(jid)
            if wanted:
                try:
                    self._deliver.emit(jid, result, error, elapsed)
                except RuntimeError:  # the Qt object was deleted while the job ran: nobody is waiting
                    return

    def _on_deliver(self, jid: int, result, error, elapsed: float) -> None:
        if not self._wanted(jid):
            return
        self._delivered = jid
        self.last_seconds = elapsed
        if jid == self._latest:
            self._set_busy(False)
        if error is not None:
            self.failed.emit(jid, error)
        else:
            self.done.emit(jid, result)

    def _set_busy(self, busy: bool) -> None:
        if busy != self._busy:
            self._busy = busy
            self.busy_changed.emit(busy)
