"""BackgroundJob: run a pure function on one worker thread so the GUI stays responsive; the newest
request wins.

``job.start(fn, *args)`` queues a call (replacing a queued one that has not started); when it ends
its result arrives on the GUI thread through ``finished(result)``, or a problem through
``failed(message)`` — but only if no newer call was started meanwhile. A ValueError is a problem a
person can fix and is passed on as its message; anything else is reported as an internal error
rather than killing the worker.
"""

from __future__ import annotations

import threading
import time

from PySide6.QtCore import QObject, Signal


class BackgroundJob(QObject):
    """One worker thread; ``start`` replaces any queued call; results of stale calls are dropped."""

    finished = Signal(object)  # the result of the newest call
    failed = Signal(str)  # the message of the newest call's error
    busy_changed = Signal(bool)

    # emitted from the worker thread, delivered queued on the GUI thread
    _deliver = Signal(int, object, object, float)

    def __init__(self, parent=None, name: str = "attnviz-diagnostic"):
        super().__init__(parent)
        self._cond = threading.Condition()
        self._pending = None  # (id, fn, args, kwargs) waiting to run
        self._running = False
        self._latest = 0
        self._busy = False
        self._stopping = False
        self.last_seconds = 0.0  # wall time of the newest delivered call
        self._deliver.connect(self._on_deliver)
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self._thread.start()
        self.destroyed.connect(lambda *_: self._stop())

    @property
    def busy(self) -> bool:
        return self._busy

    def start(self, fn, *args, **kwargs) -> int:
        """Queue ``fn(*args, **kwargs)``; returns its id."""
        self._latest += 1
        with self._cond:
            self._pending = (self._latest, fn, args, kwargs)
            self._cond.notify_all()
        self._set_busy(True)
        return self._latest

    def wait_idle(self, timeout: float = 30.0) -> bool:
        """Block (processing no events) until nothing is queued or running; for tests and scripts."""
        end = time.monotonic() + timeout
        with self._cond:
            while (self._pending is not None or self._running) and time.monotonic() < end:
                self._cond.wait(0.05)
            return self._pending is None and not self._running

    def _stop(self):
        with self._cond:
            self._stopping = True
            self._pending = None
            self._cond.notify_all()

    def _set_busy(self, busy: bool):
        if busy != self._busy:
            self._busy = busy
            self.busy_changed.emit(busy)

    def _loop(self):
        while True:
            with self._cond:
                while self._pending is None and not self._stopping:
                    self._cond.wait()
                if self._stopping:
                    return
                (rid, fn, args, kwargs), self._pending = self._pending, None
                self._running = True
            t0 = time.perf_counter()
            result = error = None
            try:
                result = fn(*args, **kwargs)
            except ValueError as exc:
                error = str(exc)
            except MemoryError:
                error = "not enough memory for this study: use fewer tokens or smaller sizes"
            except Exception as exc:  # a bug must not kill the worker
                error = f"internal error: {exc!r}"
            elapsed = time.perf_counter() - t0
            with self._cond:
                self._running = False
                self._cond.notify_all()
                stopping = self._stopping
            if not stopping:
                try:
                    self._deliver.emit(rid, result, error, elapsed)
                except RuntimeError:  # the receiving object is gone
                    return

    def _on_deliver(self, rid: int, result, error, elapsed: float):
        if rid != self._latest:
            return
        self.last_seconds = elapsed
        self._set_busy(False)
        if error is not None:
            self.failed.emit(str(error))
        else:
            self.finished.emit(result)
