"""AppContext: what every panel of the window shares, so that no panel talks to another. A panel
reads ``ctx.session.state`` and subscribes to the session's per-field events, edits through
``ctx.execute`` (undoable) or ``ctx.set_view`` (selection and display settings: saved, not undoable),
draws ``ctx.response`` on ``response_changed`` (the newest request wins) and shows a problem a person
caused with ``ctx.report``. See docs/architecture.md.
"""

from __future__ import annotations

from PySide6.QtCore import QObject, Signal
from PySide6.QtGui import QUndoStack

from attnviz.model.commands import set_view
from attnviz.model.state import FIELDS
from attnviz.ui.compute_controller import ComputeController
from attnviz.ui.undo import CommandAdapter
from attnviz.ui.messages import Level


class AppContext(QObject):
    """Session + undo stack + background compute, shared by the window's panels."""

    response_changed = Signal(object)  # the newest ComputeResponse
    # HeadPreview of the newest request (a long run's first part), before its response; only the heatmap draws it
    preview_changed = Signal(object)
    message = Signal(object, str)  # (a messages.Level, text) for the status bar / dialogs
    # the read-only maps of a file the window shows (attnviz.ui.session_maps.ShownMaps) or None; saved with the session
    maps_changed = Signal(object)

    def __init__(self, session, parent=None, compute_controller: ComputeController | None = None):
        super().__init__(parent)
        self.session = session
        self.undo_stack = QUndoStack(self)
        self.compute = compute_controller or ComputeController(self)
        self.compute.finished.connect(self._on_compute_finished)
        self.compute.previewed.connect(self.preview_changed)
        self.response = None
        self.request_rows: tuple[int, ...] = ()
        self.maps = None  # ShownMaps: a maps file shown read-only (Pretrained and Attention workspaces), or None
        # "when-compiled": dot-product rules run on the float64 numpy path until the engine's kernels are
        # compiled (the application's first start); "naive-until-warm": on the engine, its naive kernel
        # standing in for flash on small inputs until the warm-up has compiled flash; "always": on the
        # engine (compiling on first use)
        self.engine_mode = "always"
        # everything but the view changes what is computed; selecting a head or token does not
        for name in FIELDS:
            if name != "view":
                getattr(session.events, name).connect(self._on_state_changed)

    # ------------------------------------------------------------------ edits
    def execute(self, command) -> bool:
        """Apply ``command`` as an undoable step; a rejected edit is reported, not raised."""
        try:
            inverse = self.session.execute(command)
        except ValueError as exc:
            self.report(Level.ERROR, str(exc))
            return False
        self.undo_stack.push(CommandAdapter(self.session, command, inverse))
        return True

    def set_view(self, **fields) -> None:
        """Change view fields (selection, colormap, ...) without an undo step."""
        try:
            self.session.execute(set_view(**fields))
        except ValueError as exc:
            self.report(Level.ERROR, str(exc))

    def set_maps(self, maps) -> None:
        """The maps file the window shows (a ShownMaps) or None; they are not state the compute reads, so this is
        no edit: File ▸ Save writes them beside the session."""
        if maps is self.maps:
            return
        self.maps = maps
        self.maps_changed.emit(maps)

    def report(self, level: Level, text: str) -> None:
        """Tell the person ``text`` at ``level`` (the window's status bar, and its notice for warnings and errors)."""
        self.message.emit(Level(level), text)

    # ------------------------------------------------------------------ compute
    def recompute(self, now: bool = False) -> int:
        """Ask for the current state to be computed (throttled unless ``now``)."""
        view = self.session.state.view
        rows = tuple(r for r in (getattr(view, "query", None),) if isinstance(r, int) and r >= 0)
        head = view.head if isinstance(view.head, int) and view.matrix in ("weights", "scores") else None
        submit = self.compute.submit_now if now else self.compute.submit
        return submit(self.session.state, rows=rows, preview_head=head, engine=self.engine_mode)

    def _on_state_changed(self, *_):
        self.recompute()

    def _on_compute_finished(self, response):
        self.response = response
        self.response_changed.emit(response)
        if not response.ok and response.error:
            self.report(Level.ERROR, response.error)
