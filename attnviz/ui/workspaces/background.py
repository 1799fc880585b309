"""A workspace's panel whose module is slow to import has it imported on a worker thread on the workspace's
first visit, and is built once the import is done: the Pretrained panel's module brings in
:mod:`attnviz.checkpoints` (a tenth of a second at rest, a quarter to half a second on a loaded machine), all
of which held the window on one turn of the event loop. Python hands its interpreter lock from thread to
thread every few milliseconds, so the GUI thread keeps answering while the worker imports.

Before the panel is built, its class may make parts of itself ahead: ``prepare_steps()`` on the class gives
callables, each run on a turn of its own (the plots its constructor would otherwise make all on one turn).

Only panels listed in :data:`BACKGROUND_IMPORTS` are imported so: their modules make no Qt object when
imported (a widget, a pixmap or a font made off the GUI thread is not allowed). A panel asked for at once
meanwhile (``MainWindow.panel``) is still built at once: its import then waits for the worker's to finish.
"""

from __future__ import annotations

import threading

from PySide6.QtCore import QObject, Qt, QTimer

BACKGROUND_IMPORTS = frozenset({"pretrained"})
POLL_MS = 10  # how often the GUI thread looks whether the import has finished


class BackgroundImport(QObject):
    """``load()`` (a panel factory's import, returning the panel's class) on a worker thread; then, on the GUI
    thread, the class's ``prepare_steps()`` one a turn, then ``then()``. ``then`` runs also when the import
    failed: building the panel reports the problem."""

    def __init__(self, load, then, parent=None):
        super().__init__(parent)
        self.loaded = None  # the class load() returned, once it has
        self.error: BaseException | None = None
        self._then = then
        self._steps: list = []
        self.thread = threading.Thread(target=self._run, args=(load,), name="attnviz-import", daemon=True)
        self._timer = QTimer(self)
        self._timer.setInterval(POLL_MS)
        self._timer.timeout.connect(self._poll)
        self.thread.start()
        self._timer.start()

    def _run(self, load) -> None:
        try:
            self.loaded = load()
        except BaseException as exc:  # noqa: BLE001 - building the panel on the GUI thread reports it
            self.error = exc

    @property
    def done(self) -> bool:
        return not self.thread.is_alive()

    def _poll(self) -> None:
        if self.thread.is_alive():
            return
        self._timer.stop()
        prepare = getattr(self.loaded, "prepare_steps", None)
        self._steps = list(prepare()) if callable(prepare) else []
        self._next()

    def _next(self) -> None:
        if self._steps:
            try:
                self._steps.pop(0)()
            except Exception:  # noqa: BLE001 - a part not made ahead is made by the constructor
                pass
            QTimer.singleShot(1, self, self._next)
            return
        then, self._then = self._then, None
        self.deleteLater()
        if then is not None:
            then()


def import_then(owner: QObject, panel_id: str, load, then) -> BackgroundImport:
    """Import the panel ``panel_id`` with ``load`` on a worker thread, then call ``then()`` on the GUI thread (see
    :class:`BackgroundImport`); asked again while that is under way, the import already started serves."""
    running = owner.findChild(BackgroundImport, f"import_{panel_id}", Qt.FindChildOption.FindDirectChildrenOnly)
    if running is not None and running._then is not None:
        return running
    job = BackgroundImport(load, then, owner)
    job.setObjectName(f"import_{panel_id}")
    return job
