"""The selected head's preview in the window: the controller hands it over before the response, the
heatmap draws it, and a newer edit cancels the rest of a previewed run at once."""

from __future__ import annotations

import dataclasses
import threading
import time

import numpy as np

from attnviz.model.commands import set_model, set_view
from attnviz.model.compute import ComputeResponse, run
from attnviz.model.preview import HeadPreview
from attnviz.model.state import CustomSource, ModelConfig, SessionState
from attnviz.ui.compute_controller import ComputeController
from attnviz.ui.panels.heatmap_panel import HeatmapPanel


def big_state(seed=0, T=512) -> SessionState:
    return SessionState(sources=(CustomSource("tokens", count=T, generator="noise", seed=1),),
                        model=ModelConfig(d_model=64, nh=8, seed=seed))


def test_controller_emits_the_preview_before_the_response(qtbot):
    ctrl = ComputeController()
    events = []
    ctrl.previewed.connect(lambda p: events.append(("preview", p)))
    ctrl.finished.connect(lambda r: events.append(("response", r)))
    rid = ctrl.submit_now(big_state(), preview_head=2)
    qtbot.waitUntil(lambda: any(kind == "response" for kind, _ in events), timeout=60000)
    ctrl.shutdown()
    kinds = [kind for kind, _ in events]
    assert kinds == ["preview", "response"]
    p, r = events[0][1], events[1][1]
    assert isinstance(p, HeadPreview) and p.request_id == r.request_id == rid and p.head == 2
    np.testing.assert_allclose(p.weights, r.weights[2], rtol=2e-6, atol=1e-8)


def test_no_preview_without_a_head_or_for_a_stale_request(qtbot):
    ctrl = ComputeController()
    previews = []
    done = []
    ctrl.previewed.connect(previews.append)
    ctrl.finished.connect(done.append)
    ctrl.submit_now(big_state(seed=1))  # no preview_head
    qtbot.waitUntil(lambda: len(done) == 1, timeout=60000)
    assert previews == []
    ctrl.shutdown()


def test_a_newer_edit_cancels_a_previewed_run_at_once(qtbot):
    """After its preview a run is cancelled as soon as a newer request exists, even with a long grace."""
    started = threading.Event()
    seen_cancel = []

    def fake_run(req, progress=None, is_cancelled=None, on_preview=None):
        if req.request_id == 1:
            on_preview(HeadPreview(1, 0, 2, np.zeros((2, 2), np.float32), np.zeros((2, 2), np.float32),
                                   np.ones((2, 2), bool), ("a", "b"), ("a", "b"), (), (), False, 0.01))
            started.set()
            t0 = time.perf_counter()
            while not is_cancelled():
                if time.perf_counter() - t0 > 20:
                    break
                time.sleep(0.005)
            seen_cancel.append(time.perf_counter() - t0)
            return ComputeResponse(req.request_id, ok=False, cancelled=True)
        return ComputeResponse(req.request_id, ok=True)

    ctrl = ComputeController(compute=fake_run, stale_grace_s=30.0)
    got, previews = [], []
    ctrl.finished.connect(got.append)
    ctrl.previewed.connect(previews.append)
    ctrl.submit_now(big_state())
    qtbot.waitUntil(started.is_set, timeout=5000)
    qtbot.waitUntil(lambda: len(previews) == 1, timeout=5000)
    ctrl.submit_now(big_state(seed=5))
    qtbot.waitUntil(lambda: len(got) == 1, timeout=10000)
    ctrl.shutdown()
    assert [r.request_id for r in got] == [2]
    assert seen_cancel and seen_cancel[0] < 5  # not the 30 s grace
    assert [p.request_id for p in previews] == [1]


def test_heatmap_draws_the_preview_then_the_response(qtbot, make_ctx, respond):
    ctx = make_ctx(state=big_state())
    ctx.session.execute(set_view(head=3))
    p = HeatmapPanel(ctx)
    qtbot.addWidget(p)
    p.resize(900, 650)
    p.show()
    first = respond(ctx)
    assert p.drawn_request_id == first.request_id

    seen = {}

    def on_preview(prev):  # connected after the panel: runs once the panel has drawn it
        seen["preview"] = prev
        seen["drawn"] = p.drawn_request_id
        seen["values"] = np.array(p.heatmap.values)
        seen["resp_id"] = p.response.request_id
        seen["readout"] = p.heatmap.readout_text(5, 7)

    ctx.preview_changed.connect(on_preview)
    with qtbot.waitSignal(ctx.response_changed, timeout=60000):
        ctx.execute(set_model(seed=9))
    prev = seen["preview"]
    resp = ctx.response
    assert prev.head == 3 and prev.request_id == resp.request_id
    assert seen["drawn"] == prev.request_id and seen["resp_id"] == first.request_id  # drawn before the response
    np.testing.assert_array_equal(seen["values"], prev.weights)
    assert f"weight {float(prev.weights[5, 7]):.4g}" in seen["readout"]
    assert f"score {float(prev.scores[5, 7]):.4g}" in seen["readout"]  # from the preview, not the old response
    qtbot.waitUntil(lambda: p.drawn_request_id == resp.request_id and p.preview is None, timeout=10000)
    np.testing.assert_allclose(p.current_matrix()[0], resp.weights[3])


def test_heatmap_ignores_a_preview_of_another_head_or_matrix(qtbot, make_ctx, respond):
    ctx = make_ctx(state=big_state())
    p = HeatmapPanel(ctx)
    qtbot.addWidget(p)
    p.show()
    first = respond(ctx)
    fake = HeadPreview(first.request_id + 1, 5, 8, np.ones((512, 512), np.float32), np.ones((512, 512), np.float32),
                       np.ones((512, 512), bool), first.query_labels, first.key_labels, first.query_segments,
                       first.key_segments, False, 0.01)
    ctx.preview_changed.emit(fake)  # the view shows head 0
    assert p.drawn_request_id == first.request_id and p.preview is None
    ctx.session.execute(set_view(head=5, matrix="output"))
    ctx.preview_changed.emit(fake)
    assert p.drawn_request_id == first.request_id
    ctx.session.execute(set_view(matrix="scores"))
    ctx.preview_changed.emit(fake)
    assert p.drawn_request_id == fake.request_id
    old = dataclasses.replace(fake, request_id=first.request_id)
    assert p.response is first
    p.drawn_request_id = first.request_id
    ctx.preview_changed.emit(old)  # not newer than the response on show
    assert p.drawn_request_id == first.request_id
