"""ModelJobs: loads checkpoints and runs forward passes on one background thread, newest job wins.

A job is a plain function (``load_checkpoint(folder)``, ``run_text(ckpt, text)`` ...). Its result
comes back on the GUI thread through a queued signal, and only if no newer job was submitted since;
a problem the person caused (bad folder, unsupported model, unreadable image) comes back as its
message, and an unexpected exception as a one-line "internal error" — never a traceback.
"""

from __future__ import annotations

from PySide6.QtCore import QObject, Signal

from attnviz.checkpoints import CheckpointError
from attnviz.sources.errors import SourceError
from attnviz.ui import latest_job

# problems a person can cause with a checkpoint or an input: passed on as their message
EXPECTED = (CheckpointError, SourceError, ValueError, OSError)
MEMORY_MESSAGE = "not enough memory for this model and input"


def run_job(fn) -> tuple[object, str | None]:
    """(result, None) or (None, message) of ``fn()``; what the worker thread does with a job."""
    return latest_job.run_job(fn, EXPECTED, MEMORY_MESSAGE)


class ModelJobs(QObject):
    """``submit(kind, fn) -> id``; ``finished(id, kind, result)`` / ``failed(id, kind, message)`` for
    the newest. A :class:`~attnviz.ui.latest_job.LatestJob` that also names what kind of job answered."""

    finished = Signal(int, str, object)
    failed = Signal(int, str, str)
    busy_changed = Signal(bool)

    def __init__(self, parent=None):
        super().__init__(parent)
        self._job = latest_job.LatestJob("attnviz-pretrained", self, expected=EXPECTED,
                                         memory_message=MEMORY_MESSAGE)
        self._kind = ""  # kind of the newest job: only the newest one is ever delivered
        self._job.done.connect(self._on_done)
        self._job.failed.connect(self._on_failed)
        self._job.busy_changed.connect(self.busy_changed)

    @property
    def latest_id(self) -> int:
        return self._job.latest_id

    @property
    def busy(self) -> bool:
        return self._job.busy

    def submit(self, kind: str, fn) -> int:
        """Run ``fn()`` on the worker thread; a job still waiting is replaced. Returns the job's id."""
        self._kind = kind
        return self._job.submit(fn)

    def wait_idle(self, timeout: float = 60.0) -> bool:
        """Block until nothing is waiting or running (tests, scripts); results still arrive queued."""
        return self._job.wait_idle(timeout)

    def shutdown(self) -> None:
        self._job.shutdown()

    def _on_done(self, jid: int, result) -> None:
        self.finished.emit(jid, self._kind, result)

    def _on_failed(self, jid: int, message: str) -> None:
        self.failed.emit(jid, self._kind, message)
