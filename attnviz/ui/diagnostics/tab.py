"""DiagnosticTab: the base of every tab of the Diagnostics panel.

A tab redraws from the newest compute response and the session state. Hidden tabs do no work: a
response that arrives while the tab is hidden marks it stale, and it redraws when shown. Subclasses
implement ``redraw(response, state)`` (the response is None before the first computation or when
it failed; ``self.status`` then says why).

A tab whose numbers take long on long inputs splits its redraw in two: ``compute(response, state)`` (no
Qt: the numbers) and ``present(numbers, response, state)`` (the widgets), and says how big the work is with
``work_size``. Up to ``SYNC_CELLS`` it computes on the GUI thread at once; beyond, on its own worker
(:class:`~attnviz.ui.latest_job.LatestJob`, the newest request wins), the last picture staying up with
"computing …" in the status line until the numbers arrive.
"""

from __future__ import annotations

from PySide6.QtWidgets import QLabel, QVBoxLayout, QWidget

from attnviz.ui.diagnostics.common import connect_event
from attnviz.ui.latest_job import LatestJob

#: what a tab's study reports when it runs out of memory (its worker is a LatestJob)
STUDY_MEMORY_MESSAGE = "not enough memory for this study: use fewer tokens or smaller sizes"
#: score cells (query rows x keys) a split tab still computes on the GUI thread (a few ms)
SYNC_CELLS = 1 << 16


class DiagnosticTab(QWidget):
    """A lazily refreshed view of one diagnostic."""

    title = "Diagnostic"  # tab text
    #: session fields whose change makes the tab redraw even before a new response arrives
    state_fields: tuple[str, ...] = ()

    def __init__(self, ctx, parent=None):
        super().__init__(parent)
        self.ctx = ctx
        self._stale = True
        self._numbers_job: LatestJob | None = None  # created on the first redraw too big for the GUI thread
        self.outer = QVBoxLayout(self)
        self.outer.setContentsMargins(6, 6, 6, 6)
        self.status = QLabel("", self)
        self.status.setWordWrap(True)
        self.status.setStyleSheet("color: palette(mid);")
        ctx.response_changed.connect(self._on_response_changed)
        for name in self.state_fields:
            connect_event(self, getattr(ctx.session.events, name), self._on_state_changed)

    # -- lazy refresh ------------------------------------------------------------------------
    def _on_response_changed(self, _response):
        self.invalidate()

    def _on_state_changed(self, *_):
        self.invalidate()

    def invalidate(self):
        """Redraw now when visible, else when next shown."""
        self._stale = True
        if self.isVisible():
            self.refresh()

    def showEvent(self, event):
        super().showEvent(event)
        if self._stale:
            self.refresh()

    def refresh(self):
        """Redraw from ``ctx.response`` and the session state."""
        self._stale = False
        resp = self.ctx.response
        if resp is not None and not resp.ok:
            self.status.setText(f"nothing to show: {resp.error or 'the computation did not finish'}")
            resp = None
        elif resp is None:
            self.status.setText("waiting for the first computation…")
        else:
            self.status.setText("")
        self.redraw(resp, self.ctx.session.state)

    def redraw(self, response, state):
        """Draw ``response``; a split tab computes its numbers here (small) or on its worker (large)."""
        if type(self).compute is DiagnosticTab.compute:  # pragma: no cover - every unsplit tab overrides redraw
            raise NotImplementedError
        if response is None or self.work_size(response, state) <= SYNC_CELLS:
            if self._numbers_job is not None:
                self._numbers_job.cancel()  # an older, larger request must not arrive after this one
            self.present(self.compute(response, state), response, state)
            return
        if self._numbers_job is None:
            self._numbers_job = LatestJob(f"attnviz-{type(self).__name__.lower()}", self,
                                          memory_message=STUDY_MEMORY_MESSAGE)
            self._numbers_job.done.connect(self._on_numbers)
            self._numbers_job.failed.connect(lambda _jid, msg: self.status.setText(f"could not compute: {msg}"))
        self.status.setText(f"computing for {response.Tq:,} x {response.Tk:,} tokens …")
        self._numbers_job.submit(lambda: (self.compute(response, state), response, state))

    def _on_numbers(self, _jid, result) -> None:
        numbers, response, state = result
        if response is not self.ctx.response:
            return  # a newer response is on its way (or drawn)
        self.status.setText("")
        self.present(numbers, response, state)

    @property
    def numbers_job(self) -> LatestJob | None:
        """The worker of a split tab's numbers (None until a redraw too big for the GUI thread)."""
        return self._numbers_job

    def computing(self) -> bool:
        """True while a split tab's numbers are computed on its worker."""
        return self._numbers_job is not None and self._numbers_job.busy

    def work_size(self, response, state) -> int:
        """Roughly how many score cells ``compute`` handles (split tabs)."""
        return 0

    def compute(self, response, state):
        """The tab's numbers for ``response`` (no Qt; may run on a worker thread)."""
        raise NotImplementedError

    def present(self, numbers, response, state) -> None:
        """Draw ``numbers`` (from ``compute``) on the GUI thread."""
        raise NotImplementedError
