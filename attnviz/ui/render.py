"""``attnviz --screenshot OUT.png``: the window rendered to a PNG once every view shows its final result.

Final means: the session's newest request is answered and nothing is computing; that answer is the
engine's own (``response.stand_in`` is False: not the float64 numpy stand-in a first start shows while
the kernels compile, nor the naive kernel standing in for flash: ``kernel_stand_in``); no panel's worker thread (:class:`~attnviz.ui.latest_job.LatestJob`) is busy
and no redraw is pending; and all of it has stayed so for ``STABLE_MS`` (a job's result can start
another). Options are checked before the window opens: :func:`attnviz.app_start.check_options` and
:func:`check_workspace` give the message of the first bad one.
"""

from __future__ import annotations

import contextlib

import os
import time

from PySide6.QtCore import QObject, QTimer

STABLE_MS = 600  # every view idle this long before the picture is taken
POLL_MS = 50
TIMEOUT_S = 300.0  # a cold numba cache compiles every kernel it needs first


def check_workspace(name: str) -> str:
    """``NAME`` or ``NAME/TAB`` with a known workspace NAME (the tab is checked once its panel is built)."""
    from attnviz.ui.workspaces import workspace_names

    ws = name.partition("/")[0]
    if ws not in workspace_names():
        raise ValueError(f"--workspace {ws!r}: no such workspace; choose one of {', '.join(workspace_names())}")
    return name


def busy_views(window) -> list[str]:
    """What is still working: the computation, a stand-in result, panels' worker threads, redraws."""
    from attnviz.ui.latest_job import LatestJob

    ctx = window.ctx
    out = []
    resp = ctx.response
    if resp is None or ctx.compute.busy or resp.request_id != ctx.compute.latest_id:
        out.append("computation")
    elif resp.ok and resp.stand_in:
        out.append("engine result")
    elif resp.ok and getattr(resp, "kernel_stand_in", ""):
        out.append(f"{resp.kernel_stand_in} result")
    for job in window.findChildren(LatestJob):
        if job.busy:
            out.append(job.objectName() or getattr(job, "_name", "worker"))
    for panel in window.panels.values():
        timer = getattr(panel, "timer", None)  # a coalesced redraw waiting (the mask designer)
        if isinstance(timer, QTimer) and timer.isActive():
            out.append(type(panel).__name__)
    return out


class Renderer(QObject):
    """Waits for the final picture, writes it and ends the application with 0 (or 1 and a message)."""

    def __init__(self, app, window, out: str, size: tuple[int, int], timeout_s: float = TIMEOUT_S):
        super().__init__(window)
        self.app, self.window, self.out, self.size = app, window, out, size
        self.target = window  # what is drawn: the window, or a window of its own (a dialog) at this size
        self._deadline = time.monotonic() + timeout_s
        self._idle_since: float | None = None
        self._timer = QTimer(self)
        self._timer.setInterval(POLL_MS)
        self._timer.timeout.connect(self._poll)
        self.written = False

    def start(self, target=None) -> None:
        """Start waiting; ``target`` (a dialog the window opened) is drawn instead of the window, at
        the same size."""
        if target is not None:
            self.target = target
            target.resize(*self.size)
        self._timer.start()

    def _poll(self) -> None:
        busy = busy_views(self.window)
        now = time.monotonic()
        if busy:
            self._idle_since = None
            if now > self._deadline:
                self._fail(f"attnviz: no final picture within {TIMEOUT_S:.0f} s (still working: {', '.join(busy)})")
            return
        if self._idle_since is None:
            self._idle_since = now
            return
        if (now - self._idle_since) * 1000 >= STABLE_MS:
            self._timer.stop()
            self._write()

    def _write(self) -> None:
        w, h = self.size
        target = self.target
        if (target.width(), target.height()) != (w, h):
            need = target.minimumSizeHint()
            self._fail(f"attnviz: the window could not be made {w}x{h} (it is {target.width()}x"
                       f"{target.height()}; it needs at least {need.width()}x{need.height()})")
            return
        from attnviz.ui.export import capture

        if not self._save(capture(target)):  # (w, h) pixels whatever the screen's device pixel ratio
            return
        self.written = True
        print(f"wrote {self.out} ({w}x{h}, workspace {self.window.workspace})", flush=True)
        self.app.exit(0)

    def _save(self, image) -> bool:
        """Write the picture as a temporary beside ``out``, then put it in place: a FIFO or device made at ``out``
        while the window was drawing is refused, never written into (which could block for ever)."""
        import tempfile

        from attnviz.persist import SessionError, check_save_target

        try:
            target = check_save_target(self.out)
            fd, tmp = tempfile.mkstemp(prefix=".attnviz-shot-", suffix=".png", dir=os.path.dirname(target) or ".")
            os.close(fd)
        except (SessionError, OSError) as exc:
            self._fail(f"attnviz: could not write {self.out}: {exc}")
            return False
        try:
            if not image.save(tmp, "PNG"):
                raise OSError("the picture could not be encoded")
            os.replace(tmp, target)
        except OSError as exc:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            self._fail(f"attnviz: could not write {self.out}: {exc}")
            return False
        return True

    def _fail(self, text: str) -> None:
        import sys

        self._timer.stop()
        sys.stderr.write(text + "\n")
        self.app.exit(1)
