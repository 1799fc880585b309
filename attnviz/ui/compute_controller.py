"""Background computation: a :class:`~attnviz.ui.latest_job.LatestJob` runs ``attnviz.model.compute.run``
and the newest request wins. ``submit(state)`` is cheap enough for every edit: a burst of edits costs
one computation, and an older response is never drawn over a newer one. A run that is no longer the
newest is cancelled after ``stale_grace_s`` (so a short one, a paint stroke at moderate T, is still
drawn while the person keeps painting), or at once when it has shown its preview (the person is
scrubbing: the next preview matters more than this run's other heads).
"""

from __future__ import annotations

import threading
import time

from PySide6.QtCore import QObject, QTimer, Signal

from attnviz.ui.latest_job import Cancelled, LatestJob


def _default_compute():
    """``attnviz.model.compute.run``, imported on the worker thread at first use: the model's compute
    path imports the engine (numba, scipy), which the window must not wait for before it paints."""
    from attnviz.model.compute import run

    return run


class ComputeController(QObject):
    """Runs compute requests off the GUI thread; emits ``finished(response)`` for the newest only."""

    started = Signal(int)  # request id
    progress = Signal(float, str)  # fraction done, stage name
    finished = Signal(object)  # ComputeResponse of the newest request
    previewed = Signal(object)  # HeadPreview of the newest request, before its response
    busy_changed = Signal(bool)
    cancelled = Signal(int)  # request id the person cancelled: the views keep the previous result

    def __init__(self, parent=None, throttle_ms: int = 12, compute=None, stale_grace_s: float = 0.15):
        super().__init__(parent)
        # the pure function: compute(request, progress=, is_cancelled=, on_preview=) -> response (swappable in
        # tests); None: the model's run
        self._compute = compute
        self._throttle_ms = throttle_ms  # coalescing delay while a computation is running
        self._stale_grace_s = stale_grace_s  # a stale computation younger than this may finish
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.timeout.connect(self._dispatch)
        self._previewed_id = 0  # newest request whose preview was handed over
        self._preview_drawn = threading.Event()  # set once the GUI thread has handled the preview
        self._request_kwargs: dict = {}
        self._state = None
        # a request id is the job's id: every submit reserves one, so a burst of edits coalesced into one
        # computation overtakes the running one and keeps the job busy until the newest answers.
        # every exception is a bug of the compute path (bad input is a failed response, never raised): the job
        # turns it into a one-line message, delivered as a failed response of its request
        self._job = LatestJob("attnviz-compute", self, deliver_overtaken=True, expected=())
        self._job.done.connect(self._on_delivered)
        self._job.failed.connect(self._on_failed)
        self._job.busy_changed.connect(self.busy_changed)
        self._timed: tuple[int, float] = (0, 0.0)  # (request id, seconds of its compute call), set by the worker
        self._last_seconds = 0.0
        self._job.start()
        self._deliver_preview.connect(self._on_preview_delivered)

    #: longest the worker waits for the GUI thread to draw a preview before computing the rest
    PREVIEW_WAIT_S = 0.1

    # emitted from the worker thread; the connection is queued onto the GUI thread
    _deliver_preview = Signal(object)

    @property
    def latest_id(self) -> int:
        return self._job.latest_id

    @property
    def busy(self) -> bool:
        return self._job.busy

    @property
    def last_seconds(self) -> float:
        """Wall time of the newest delivered computation: the compute function's own, without the import of
        the compute path on the first run (the engine, numba, scipy: seconds the status bar must not call
        computing)."""
        return self._last_seconds

    def submit(self, state, **request_kwargs) -> int:
        """Ask for ``state`` to be computed; returns the request id that will answer."""
        working = self._job.working
        rid = self._job.reserve()
        self._state = state
        self._request_kwargs = request_kwargs
        if not self._timer.isActive():
            self._timer.start(self._throttle_ms if working else 0)
        return rid

    def submit_now(self, state, **request_kwargs) -> int:
        """Like submit, without the throttle delay."""
        rid = self.submit(state, **request_kwargs)
        self._timer.stop()
        self._dispatch()
        return rid

    def cancel(self):
        """Cancel the running computation (the person pressed Cancel); nothing is delivered for it."""
        self._timer.stop()  # an edit waiting to be sent is cancelled with the run
        self._job.cancel()
        self.cancelled.emit(self._job.latest_id)

    def shutdown(self, timeout: float = 5.0):
        self._job.shutdown(timeout)

    def wait_idle(self, timeout: float = 30.0) -> bool:
        """Block (processing no events) until no request is pending or running; for tests and scripts."""
        return self._job.wait_idle(timeout)

    # ------------------------------------------------------------------ internals
    def _dispatch(self):
        if self._state is None:
            return
        rid = self._job.latest_id
        self._job.submit_reserved(self._run, rid, self._state, dict(self._request_kwargs))
        self.started.emit(rid)

    def _run(self, rid: int, state, kwargs: dict):
        """One request, on the worker thread: its response, or :class:`Cancelled` when not worth showing."""
        t0 = time.perf_counter()

        def is_cancelled():
            if not self._job.wanted(rid):  # cancelled, shut down, or older than a result shown
                return True
            if rid == self._job.latest_id:
                return False
            return rid == self._previewed_id or time.perf_counter() - t0 > self._stale_grace_s

        def progress(frac, stage):
            if rid == self._job.latest_id:
                self.progress.emit(frac, stage)

        def on_preview(preview):
            if rid == self._job.latest_id and self._job.wanted(rid):
                self._previewed_id = rid
                self._preview_drawn.clear()
                self._deliver_preview.emit(preview)
                # the rest of the run keeps both cores busy: let the GUI thread draw the preview first
                self._preview_drawn.wait(self.PREVIEW_WAIT_S)

        from attnviz.model.compute import ComputeRequest

        if self._compute is None:
            self._compute = _default_compute()
        request = ComputeRequest(request_id=rid, state=state, **kwargs)
        t1 = time.perf_counter()
        resp = self._compute(request, progress=progress, is_cancelled=is_cancelled, on_preview=on_preview)
        self._timed = (rid, time.perf_counter() - t1)
        if is_cancelled() or getattr(resp, "cancelled", False):
            raise Cancelled
        return resp

    def _on_preview_delivered(self, preview):
        rid = preview.request_id
        try:
            if rid == self._job.latest_id and self._job.wanted(rid):
                self.previewed.emit(preview)  # direct connections: drawn when this returns
        finally:
            self._preview_drawn.set()

    def _on_failed(self, jid: int, message: str):
        from attnviz.model.compute import ComputeResponse  # imported already by the worker that failed

        if jid != self._job.latest_id:  # a newer request is on its way: its answer is the one to show
            return
        self._on_delivered(jid, ComputeResponse(jid, ok=False, error=message, messages=(message,)))

    def _on_delivered(self, jid: int, resp):
        rid, seconds = self._timed
        self._last_seconds = seconds if rid == resp.request_id else self._job.last_seconds
        self.finished.emit(resp)
