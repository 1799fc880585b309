"""LatestJob: one background thread that runs the newest of a stream of jobs (zoom, pan, head change)
and hands its result back on the GUI thread; a job submitted while another runs replaces any job
still waiting, and a result that is no longer the newest is dropped."""

from __future__ import annotations

import threading

from PySide6.QtCore import QObject, Signal


class LatestJob(QObject):
    """``submit(fn) -> id``; ``done(id, result)`` or ``failed(id, message)`` for the newest id only."""

    done = Signal(int, object)
    failed = Signal(int, str)
    _deliver = Signal(int, object, object)  # worker -> GUI thread (queued)

    def __init__(self, name: str = "attnviz-job", parent=None):
        super().__init__(parent)
        self._cond = threading.Condition()
        self._pending = None  # (id, fn)
        self._latest = 0
        self._running = False
        self._stopping = False
        self._name = name
        self._thread: threading.Thread | None = None
        self._deliver.connect(self._on_deliver)

    @property
    def latest_id(self) -> int:
        return self._latest

    def submit(self, fn) -> int:
        """Run ``fn()`` on the worker; returns the job id its result will carry."""
        with self._cond:
            self._latest += 1
            self._pending = (self._latest, fn)
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name=self._name, daemon=True)
                self._thread.start()
            self._cond.notify_all()
            return self._latest

    def wait_idle(self, timeout: float = 30.0) -> bool:
        """Block until nothing is pending or running (tests, benchmarks)."""
        with self._cond:
            return self._cond.wait_for(lambda: self._pending is None and not self._running, timeout)

    def shutdown(self) -> None:
        with self._cond:
            self._stopping = True
            self._pending = None
            self._cond.notify_all()

    def _loop(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._pending is not None or self._stopping)
                if self._stopping:
                    return
                (jid, fn), self._pending = self._pending, None
                self._running = True
            try:
                result, error = fn(), None
            except (ValueError, MemoryError) as exc:
                result, error = None, str(exc) or type(exc).__name__
            except Exception as exc:  # a bug must not kill the worker: report it
                result, error = None, f"internal error: {exc!r}"
            with self._cond:
                self._running = False
                self._cond.notify_all()
            if jid == self._latest and not self._stopping:
                self._deliver.emit(jid, result, error)

    def _on_deliver(self, jid: int, result, error) -> None:
        if jid != self._latest:
            return
        if error is not None:
            self.failed.emit(jid, error)
        else:
            self.done.emit(jid, result)
