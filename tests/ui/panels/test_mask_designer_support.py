"""Shared set-up of the mask designer tests (no tests here): a panel on a demo session after its first
computation, and real mouse events (press, moves, release) sent to the canvas's view."""

from __future__ import annotations

import re

import numpy as np
from PySide6.QtCore import QEvent, QPointF, Qt
from PySide6.QtGui import QMouseEvent
from PySide6.QtWidgets import QApplication

from attnviz.model.demos import build_demo
from attnviz.model.mask.presets import vla_roles
from attnviz.model.session import Session
from attnviz.ui.context import AppContext
from attnviz.ui.panels.mask_designer_panel import MaskDesignerPanel


def make_panel(qtbot, demo: str = "vla-mask", size=(1200, 800)):
    ctx = AppContext(Session(build_demo(demo)))
    with qtbot.waitSignal(ctx.response_changed, timeout=30000):
        ctx.recompute(now=True)
    panel = MaskDesignerPanel(ctx)
    # stop the worker threads before the widgets go, so no result is delivered to a deleted object
    qtbot.addWidget(panel, before_close_func=lambda _w: (panel.timing_job.shutdown(), ctx.compute.shutdown()))
    panel.resize(*size)
    panel.show()
    qtbot.waitExposed(panel)
    panel.flush()
    return ctx, panel


def wait_response(qtbot, ctx):
    """Wait until the newest request has been answered."""
    qtbot.waitUntil(lambda: ctx.response is not None and ctx.response.request_id == ctx.compute.latest_id,
                    timeout=30000)


def _send(view, kind, pos: QPointF, button, buttons):
    vp = view.viewport()
    ev = QMouseEvent(kind, pos, QPointF(vp.mapToGlobal(pos.toPoint())), button, buttons,
                     Qt.KeyboardModifier.NoModifier)
    QApplication.sendEvent(vp, ev)


def drag_cells(qtbot, canvas, cells, button=Qt.MouseButton.LeftButton):
    """Press on the first cell, move through the others (waiting out pyqtgraph's move-rate limit),
    release on the last one: a real drag on the canvas."""
    frame = canvas.frame
    pts = [frame.cell_to_widget(r, c) for r, c in cells]
    _send(frame, QEvent.Type.MouseButtonPress, pts[0], button, button)
    for p in pts[1:]:
        qtbot.wait(20)
        _send(frame, QEvent.Type.MouseMove, p, Qt.MouseButton.NoButton, button)
    qtbot.wait(20)
    _send(frame, QEvent.Type.MouseButtonRelease, pts[-1], button, Qt.MouseButton.NoButton)


def vla_bruteforce(segments, roles=None) -> np.ndarray:
    """Seed 000's block matrix, cell by cell: I and P see I and P; A sees I, P and earlier-or-same A;
    E sees I, P and E."""
    role_of = vla_roles(segments, roles)
    T = segments[-1].stop
    seg_of = [next(s for s in segments if s.start <= t < s.stop) for t in range(T)]
    m = np.zeros((T, T), dtype=bool)
    for i in range(T):
        for j in range(T):
            rq, rk = role_of[seg_of[i].name], role_of[seg_of[j].name]
            if rq in "IP":
                m[i, j] = rk in "IP"
            elif rq == "A":
                m[i, j] = rk in "IP" or (rk == "A" and j <= i)
            else:
                m[i, j] = rk in "IPE"
    return m


def percent_in(text: str) -> float:
    """The percentage in a tile summary line."""
    found = re.search(r"(-?\d+(?:\.\d+)?) % skipped", text)
    assert found, text
    return float(found.group(1))
