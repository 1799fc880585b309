"""A cancelled computation leaves the view visibly stale: the heatmap's picture is the previous result
while the controls show the new value, so it stays veiled with "cancelled — showing the previous
result", and the status bar says so, until the next result arrives (it once came back at full
opacity with no word, when cancelled from the heatmap's own Cancel button)."""

from __future__ import annotations

import threading
import time

from attnviz.model.commands import set_model
from attnviz.model.compute import run
from attnviz.model.demos import build_demo
from attnviz.model.session import Session
from attnviz.ui.compute_controller import ComputeController
from attnviz.ui.context import AppContext
from attnviz.ui.widgets.busy_overlay import STALE_TEXT


def test_cancel_from_the_heatmap_leaves_it_visibly_stale_until_the_next_result(qtbot, make_window):
    release = threading.Event()

    def slow_run(req, progress=None, is_cancelled=None, on_preview=None):
        if req.request_id == 2:
            while not release.is_set() and not (is_cancelled is not None and is_cancelled()):
                time.sleep(0.01)
        return run(req, progress, is_cancelled)

    ctx = AppContext(Session(build_demo("river-bank")), compute_controller=ComputeController(compute=slow_run))
    w = make_window(ctx=ctx)
    panel = w.panel("heatmap")
    qtbot.waitUntil(lambda: ctx.response is not None and not ctx.compute.busy, timeout=10000)
    assert not panel.busy.isVisible()
    ctx.execute(set_model(seed=3))  # request 2: blocks on the worker
    qtbot.waitUntil(lambda: panel.busy.cancel_button.isVisibleTo(panel.busy) and panel.busy.isVisible(),
                    timeout=5000)
    panel.busy.cancel_button.click()  # the heatmap's own Cancel, not the status bar's
    assert not ctx.compute.busy
    qtbot.wait(300)
    assert panel.busy.isVisible() and panel.busy.text() == STALE_TEXT  # veiled, not at full opacity
    assert not panel.busy.cancel_button.isVisibleTo(panel.busy) and not panel.busy.bar.isVisibleTo(panel.busy)
    assert w.status.currentMessage() == STALE_TEXT
    qtbot.wait(5500)  # no timeout takes the word away while the picture is still the old one
    assert w.status.currentMessage() == STALE_TEXT and panel.busy.isVisible()
    release.set()
    ctx.execute(set_model(seed=4))  # the next run
    qtbot.waitUntil(lambda: ctx.response is not None and ctx.response.ok and not ctx.compute.busy
                    and ctx.session.state.model.seed == 4, timeout=10000)
    qtbot.waitUntil(lambda: not panel.busy.isVisible(), timeout=3000)
    assert w.status.currentMessage() != STALE_TEXT
