"""A long sequence's overview is progressive and cancellable: a coarse picture (a few sampled query
rows) is drawn first, unveiled, then the full-resolution one replaces it; a newer edit stops the old
job before its full picture and small maps, and only the newest edit's picture is drawn."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from attnviz.model import compute, compute_cache
from attnviz.model.commands import set_model
from attnviz.model.display.overview import overview_image
from attnviz.model.display.response_views import engine_scale
from attnviz.ui.panels import heatmap_panel
from attnviz.ui.panels.heatmap_panel import HeatmapPanel
from long_sessions import LOWERED, long_state


@pytest.fixture
def progressive(monkeypatch):
    """The 320-token session takes the long-sequence path and is drawn coarse first."""
    compute_cache.clear()
    monkeypatch.setattr(compute, "DENSE_MASK_CELLS", LOWERED)
    monkeypatch.setattr(heatmap_panel, "COARSE_CELLS", 0)
    yield
    compute_cache.clear()


def panel(qtbot, ctx) -> HeatmapPanel:
    p = HeatmapPanel(ctx)
    qtbot.addWidget(p)
    p.resize(800, 600)
    p.show()
    return p


def test_the_coarse_picture_comes_first_then_the_full_one(qtbot, make_ctx, progressive, monkeypatch):
    release = threading.Event()
    real = heatmap_panel.overview_image

    def held_overview(*args, **kwargs):  # the full overview waits until the coarse one is on screen
        release.wait(30)
        return real(*args, **kwargs)

    monkeypatch.setattr(heatmap_panel, "overview_image", held_overview)
    ctx = make_ctx(state=long_state())
    p = panel(qtbot, ctx)
    order = []
    p.coarse_rendered.connect(lambda: order.append(("coarse", p.heatmap.frame.title.text)))
    p.rendered.connect(lambda: order.append(("full", p.heatmap.frame.title.text)))
    with qtbot.waitSignal(p.coarse_rendered, timeout=60000):
        ctx.recompute(now=True)
    resp = ctx.response
    assert resp.weights is None and p.mode == "overview"
    assert [o[0] for o in order] == ["coarse"] and "coarse" in order[0][1]
    assert not p.busy.is_active()  # the coarse picture is not veiled
    coarse = p.heatmap.base.values
    assert coarse is not None and coarse.shape[0] < resp.Tq
    with qtbot.waitSignal(p.rendered, timeout=60000):
        release.set()
    assert [o[0] for o in order] == ["coarse", "full"] and "coarse" not in order[1][1]
    scale = engine_scale(ctx.session.state)
    shape = p.heatmap.base.values.shape
    want = overview_image(resp, 0, scale, "max", shape, (0, resp.Tq), (0, resp.Tk))
    np.testing.assert_array_equal(np.isnan(p.heatmap.base.values), np.isnan(want))
    ok = ~np.isnan(want)
    np.testing.assert_allclose(p.heatmap.base.values[ok], want[ok], rtol=1e-6)
    p.shutdown()


def test_a_newer_edit_stops_the_old_overview_job(qtbot, make_ctx, progressive, monkeypatch):
    release = threading.Event()
    real_image, real_grid = heatmap_panel.overview_image, heatmap_panel.overview_grid
    full_for, grid_for = [], []

    def held_overview(resp, *args, **kwargs):
        full_for.append(resp.request_id)
        if len(full_for) == 1:
            release.wait(30)  # the first edit's full picture takes long
        return real_image(resp, *args, **kwargs)

    def recorded_grid(resp, *args, **kwargs):
        grid_for.append(resp.request_id)
        return real_grid(resp, *args, **kwargs)

    monkeypatch.setattr(heatmap_panel, "overview_image", held_overview)
    monkeypatch.setattr(heatmap_panel, "overview_grid", recorded_grid)
    ctx = make_ctx(state=long_state())
    p = panel(qtbot, ctx)
    drawn = []
    p.rendered.connect(lambda: drawn.append(p.response.request_id))
    with qtbot.waitSignal(p.coarse_rendered, timeout=60000):
        ctx.recompute(now=True)
    first = ctx.response.request_id
    qtbot.waitUntil(lambda: full_for == [first], timeout=10000)  # its full picture is being computed
    with qtbot.waitSignal(ctx.response_changed, timeout=60000):
        ctx.execute(set_model(seed=12))
    second = ctx.response.request_id
    assert second != first
    release.set()  # the old job's full picture ends: the job stops there, its small maps are not made
    qtbot.waitUntil(lambda: bool(drawn) and drawn[-1] == second, timeout=60000)
    assert p.job.wait_idle(10)
    qtbot.wait(50)
    assert first not in grid_for and first not in drawn
    assert grid_for == [second] and p.drawn_request_id == second
    assert "coarse" not in p.heatmap.frame.title.text
    p.shutdown()
