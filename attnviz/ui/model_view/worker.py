"""ModelJobs: loads checkpoints and runs forward passes on one background thread, newest job wins.

A job is a plain function (``load_checkpoint(folder)``, ``run_text(ckpt, text)`` ...). Its result
comes back on the GUI thread through a queued signal, and only if no newer job was submitted since;
a problem the person caused (bad folder, unsupported model, unreadable image) comes back as its
message, and an unexpected exception as a one-line "internal error" — never a traceback.
"""

from __future__ import annotations

import threading

from PySide6.QtCore import QObject, Signal

from attnviz.checkpoints import CheckpointError
from attnviz.sources.errors import SourceError


def run_job(fn) -> tuple[object, str | None]:
    """(result, None) or (None, message) of ``fn()``; what the worker thread does with a job."""
    try:
        return fn(), None
    except (CheckpointError, SourceError, ValueError, OSError) as exc:
        return None, str(exc) or type(exc).__name__
    except MemoryError:
        return None, "not enough memory for this model and input"
    except Exception as exc:  # a bug must not kill the worker or reach the person as a traceback
        return None, f"internal error: {type(exc).__name__}: {exc}"


class ModelJobs(QObject):
    """``submit(kind, fn) -> id``; ``finished(id, kind, result)`` / ``failed(id, kind, message)`` for the newest."""

    finished = Signal(int, str, object)
    failed = Signal(int, str, str)
    busy_changed = Signal(bool)
    _deliver = Signal(int, str, object, object)  # worker thread -> GUI thread (queued connection)

    def __init__(self, parent=None):
        super().__init__(parent)
        self._cond = threading.Condition()
        self._pending = None  # (id, kind, fn) waiting to run
        self._latest = 0
        self._running = False
        self._stopping = False
        self._thread: threading.Thread | None = None
        self.busy = False
        self._deliver.connect(self._on_deliver)

    @property
    def latest_id(self) -> int:
        return self._latest

    def submit(self, kind: str, fn) -> int:
        """Run ``fn()`` on the worker thread; a job still waiting is replaced. Returns the job's id."""
        with self._cond:
            if self._stopping:
                raise RuntimeError("the model worker was shut down")
            self._latest += 1
            self._pending = (self._latest, kind, fn)
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name="attnviz-pretrained", daemon=True)
                self._thread.start()
            self._cond.notify_all()
            jid = self._latest
        self._set_busy(True)
        return jid

    def wait_idle(self, timeout: float = 60.0) -> bool:
        """Block until nothing is waiting or running (tests, scripts); results still arrive queued."""
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
                (jid, kind, fn), self._pending = self._pending, None
                self._running = True
            result, error = run_job(fn)
            with self._cond:
                self._running = False
                self._cond.notify_all()
                stale = jid != self._latest or self._stopping
            if not stale:
                try:
                    self._deliver.emit(jid, kind, result, error)
                except RuntimeError:  # the Qt object was deleted while the job ran: nobody is waiting
                    return

    def _on_deliver(self, jid: int, kind: str, result, error) -> None:
        if jid != self._latest:
            return
        self._set_busy(False)
        if error is not None:
            self.failed.emit(jid, kind, error)
        else:
            self.finished.emit(jid, kind, result)

    def _set_busy(self, busy: bool) -> None:
        if busy != self.busy:
            self.busy = busy
            self.busy_changed.emit(busy)
