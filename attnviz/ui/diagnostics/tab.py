"""DiagnosticTab: the base of every tab of the Diagnostics panel.

A tab redraws from the newest compute response and the session state. Hidden tabs do no work: a
response that arrives while the tab is hidden marks it stale, and it redraws when shown. Subclasses
implement ``redraw(response, state)`` (the response is None before the first computation or when
it failed; ``self.status`` then says why).
"""

from __future__ import annotations

from PySide6.QtWidgets import QLabel, QVBoxLayout, QWidget

from attnviz.ui.diagnostics.common import connect_event

#: what a tab's study reports when it runs out of memory (its worker is a LatestJob)
STUDY_MEMORY_MESSAGE = "not enough memory for this study: use fewer tokens or smaller sizes"


class DiagnosticTab(QWidget):
    """A lazily refreshed view of one diagnostic."""

    title = "Diagnostic"  # tab text
    #: session fields whose change makes the tab redraw even before a new response arrives
    state_fields: tuple[str, ...] = ()

    def __init__(self, ctx, parent=None):
        super().__init__(parent)
        self.ctx = ctx
        self._stale = True
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

    def redraw(self, response, state):  # pragma: no cover - every tab overrides it
        raise NotImplementedError
