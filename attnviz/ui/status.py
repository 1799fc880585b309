"""The window's status bar: messages on the left; on the right the kernel that ran, the sequence
length T, the number of heads, the last compute time, a warning when query rows are fully masked,
and — while a computation runs — its progress with a Cancel button.

The compute time is never a compilation: the first run of an engine kernel in a process whose kernel
cache is not warm compiles it (seconds, once per installation), so that run's time is shown as
"first run: kernels compiled in X s" and the next computation shows the compute time again."""

from __future__ import annotations

import sys

import numpy as np
from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QLabel, QProgressBar, QStatusBar, QToolButton

from attnviz.ui.widgets.busy_overlay import STALE_TEXT

TIME_TIP = ("wall time of the last computation of the attention (tokens, Q, K, V, the kernel and the outputs), "
            "from the edit to its result")
COMPILE_TIP = ("the first computation on this engine kernel compiled it (once per installation: later starts "
               "load it from the cache); the time is that run's wall time, compiling included. The next "
               "computation shows the compute time alone.")


def kernels_may_compile() -> bool:
    """True when an engine kernel's first run may compile it: the engine is loaded (by the compute
    worker, before any result arrives) and no complete warm-up is recorded in its kernel cache."""
    jitcache = sys.modules.get("attnviz.engine.jitcache")  # not imported here: it loads numba
    return jitcache is not None and not jitcache.is_warm()


def time_text(seconds: float, compiled: bool = False) -> str:
    """The time label's text: "computed in 8.2 ms", or for a run that compiled its kernels
    "first run: kernels compiled in 24.2 s"."""
    if compiled:
        return f"first run: kernels compiled in {seconds:.1f} s"
    ms = 1000.0 * seconds
    return f"computed in {ms:,.0f} ms" if ms >= 10 else f"computed in {ms:.1f} ms"


class StatusBar(QStatusBar):
    """Shows the state of the shared AppContext's computation."""

    BUSY_DELAY_MS = 150  # progress shows only for computations longer than this: short ones would flicker

    def __init__(self, ctx, parent=None):
        super().__init__(parent)
        self.ctx = ctx
        self._compute_error = ""  # the message of the last failed computation, cleared once one succeeds
        self.kernel_label = self._label("kernel", "engine kernel or numpy path that computed the heatmaps")
        self.tokens_label = self._label("T", "number of query (and key) tokens")
        self.heads_label = self._label("heads", "number of attention heads")
        self.time_label = self._label("time", TIME_TIP)
        self._engine_paths: set[str] = set()  # engine kernels that have delivered a result in this process
        self.masked_label = self._label("", "query rows with no allowed key: weights and output are 0")
        self.masked_label.setStyleSheet("color: #d0202a; font-weight: bold;")
        self.masked_label.setVisible(False)
        self.progress = QProgressBar(self)
        self.progress.setRange(0, 100)
        self.progress.setMaximumWidth(160)
        self.progress.setTextVisible(True)
        self.cancel_button = QToolButton(self)
        self.cancel_button.setText("Cancel")
        self.cancel_button.setToolTip("stop the running computation")
        self.cancel_button.clicked.connect(self._on_cancel)
        for w in (self.masked_label, self.kernel_label, self.tokens_label, self.heads_label, self.time_label,
                  self.progress, self.cancel_button):
            self.addPermanentWidget(w)
        self._show_busy(False)
        self._busy_timer = QTimer(self)
        self._busy_timer.setSingleShot(True)
        self._busy_timer.setInterval(self.BUSY_DELAY_MS)
        self._busy_timer.timeout.connect(lambda: self._show_busy(self.ctx.compute.busy))
        ctx.compute.busy_changed.connect(self._on_busy_changed)
        ctx.compute.progress.connect(self._on_progress)
        ctx.compute.cancelled.connect(self._on_cancelled)
        ctx.response_changed.connect(self._on_response)
        ctx.session.events.kernel.connect(self._on_kernel_changed)
        self._on_kernel_changed(ctx.session.state.kernel)

    def _label(self, name: str, tip: str) -> QLabel:
        lab = QLabel(self)
        lab.setToolTip(tip)
        lab.setContentsMargins(6, 0, 6, 0)
        return lab

    # ------------------------------------------------------------------ handlers
    def _on_kernel_changed(self, kernel) -> None:
        if self.ctx.response is None:
            self.kernel_label.setText(f"kernel: {kernel.name}")

    def _on_busy_changed(self, busy: bool) -> None:
        if busy:
            self.progress.setValue(0)
            self.progress.setFormat("computing %p%")
            self._busy_timer.start()
        else:
            self._busy_timer.stop()
            self._show_busy(False)

    def _show_busy(self, busy: bool) -> None:
        self.progress.setVisible(busy)
        self.cancel_button.setVisible(busy)

    def _on_progress(self, fraction: float, stage: str) -> None:
        self.progress.setValue(int(round(100 * min(max(fraction, 0.0), 1.0))))
        self.progress.setFormat(f"{stage} %p%")

    def _on_cancel(self) -> None:
        self.ctx.compute.cancel()  # -> _on_cancelled

    def _on_cancelled(self, _rid: int) -> None:
        self.showMessage(STALE_TEXT)  # until the next result arrives

    def _on_response(self, resp) -> None:
        if self.currentMessage() == STALE_TEXT and not getattr(resp, "cancelled", False):
            self.clearMessage()  # the views show the result the controls ask for again
        if not resp.ok:
            self._compute_error = resp.error or ""
            return
        if self._compute_error and self.currentMessage() == self._compute_error:
            self.clearMessage()  # the last computation's problem is gone
        self._compute_error = ""
        path = resp.path.replace("engine:", "")
        stand_in = getattr(resp, "stand_in", False)
        waits_for = getattr(resp, "kernel_stand_in", "")
        if stand_in:
            text, tip = (f"kernel: {path} · engine compiling…", "the float64 numpy path stands in while the engine's "
                         "kernels compile (a first start); the engine's result follows")
        elif waits_for:
            text, tip = (f"kernel: {path} · {waits_for} compiling…", f"the engine's {path} kernel stands in while its "
                         f"{waits_for} kernel compiles (a first start: about 20 s); the {waits_for} result follows")
        else:
            text, tip = f"kernel: {path}", "engine kernel or numpy path that computed the heatmaps"
        self.kernel_label.setText(text)
        self.kernel_label.setToolTip(tip)
        self.tokens_label.setText(f"T = {resp.Tq:,}" if not resp.cross else f"Tq = {resp.Tq:,} · Tk = {resp.Tk:,}")
        self.heads_label.setText(f"heads: {0 if resp.q is None else resp.q.shape[0]}")
        compiled = False
        if resp.path.startswith("engine:") and not stand_in and resp.path not in self._engine_paths:
            self._engine_paths.add(resp.path)
            compiled = kernels_may_compile()
        self.time_label.setText(time_text(self.ctx.compute.last_seconds, compiled))
        self.time_label.setToolTip(COMPILE_TIP if compiled else TIME_TIP)
        n = 0 if resp.fully_masked is None else int(np.count_nonzero(resp.fully_masked))
        self.masked_label.setVisible(n > 0)
        where = "rows" if resp.fully_masked is None or resp.fully_masked.ndim == 1 else "(head, row) pairs"
        self.masked_label.setText(f"⚠ {n} fully masked {where}")
