"""BackgroundJob: run a pure function on one worker thread so the GUI stays responsive; the newest
request wins.

``job.start(fn, *args)`` queues a call (replacing a queued one that has not started); when it ends
its result arrives on the GUI thread through ``finished(result)``, or a problem through
``failed(message)`` — but only if no newer call was started meanwhile. A ValueError is a problem a
person can fix and is passed on as its message; anything else is reported as an internal error
rather than killing the worker. The thread and the newest-wins rule are
:class:`~attnviz.ui.latest_job.LatestJob`'s; this class only keeps the diagnostics' signal shapes.
"""

from __future__ import annotations

from PySide6.QtCore import QObject, Signal

from attnviz.ui.latest_job import LatestJob

MEMORY_MESSAGE = "not enough memory for this study: use fewer tokens or smaller sizes"


class BackgroundJob(QObject):
    """One worker thread; ``start`` replaces any queued call; results of stale calls are dropped."""

    finished = Signal(object)  # the result of the newest call
    failed = Signal(str)  # the message of the newest call's error
    busy_changed = Signal(bool)

    def __init__(self, parent=None, name: str = "attnviz-diagnostic"):
        super().__init__(parent)
        self._job = LatestJob(name, self, expected=(ValueError,), memory_message=MEMORY_MESSAGE)
        self._job.done.connect(self._on_done)
        self._job.failed.connect(self._on_failed)
        self._job.busy_changed.connect(self.busy_changed)

    @property
    def busy(self) -> bool:
        return self._job.busy

    @property
    def last_seconds(self) -> float:
        """Wall time of the newest delivered call."""
        return self._job.last_seconds

    def start(self, fn, *args, **kwargs) -> int:
        """Queue ``fn(*args, **kwargs)``; returns its id."""
        return self._job.submit(fn, *args, **kwargs)

    def wait_idle(self, timeout: float = 30.0) -> bool:
        """Block (processing no events) until nothing is queued or running; for tests and scripts."""
        return self._job.wait_idle(timeout)

    def shutdown(self) -> None:
        """Stop the worker thread (also done when this object is destroyed)."""
        self._job.shutdown()

    def _on_done(self, _jid: int, result) -> None:
        self.finished.emit(result)

    def _on_failed(self, _jid: int, message: str) -> None:
        self.failed.emit(message)
