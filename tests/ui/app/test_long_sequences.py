"""Sequences whose mask is kept per tile (a TiledMask, never dense): the heatmap's overview, the
hover readout, the mask view, the mask designer and the diagnostics. The dense-mask size is lowered
so a few hundred tokens take the long-sequence path."""

from __future__ import annotations


import numpy as np
import pytest

from attnviz.model import compute, compute_cache
from attnviz.model.commands import set_view
from attnviz.model.compute import run
from attnviz.model.display.response_views import cell_values, engine_scale, row_weights
from attnviz.ui.diagnostics.common import head_mask
from attnviz.ui.panels.heatmap_panel import HeatmapPanel
from long_sessions import LOWERED, T, long_state, pair


@pytest.fixture
def lowered(monkeypatch):
    """The dense-mask size lowered, for the computations and the panels alike."""
    compute_cache.clear()
    monkeypatch.setattr(compute, "DENSE_MASK_CELLS", LOWERED)
    yield
    compute_cache.clear()


def test_readout_and_rows_come_from_the_tiled_mask():
    st, tiled, dense = pair()
    scale = engine_scale(st)
    for row, col in [(9, 9), (50, 30), (50, 49), (300, 299), (300, 10)]:
        for head in (0, 1, "mean"):
            assert cell_values(tiled, row, col, head, scale)[2] == cell_values(dense, row, col, head, scale)[2]
            np.testing.assert_allclose(cell_values(tiled, row, col, head, scale)[:2],
                                       cell_values(dense, row, col, head, scale)[:2], rtol=1e-10)
    np.testing.assert_allclose(row_weights(tiled, 77, scale), row_weights(dense, 77, scale), rtol=1e-10, atol=1e-15)
    np.testing.assert_array_equal(head_mask(tiled, 1, slice(0, 64)), head_mask(dense, 1, slice(0, 64)))
    with pytest.raises(ValueError, match="rows"):
        head_mask(tiled, 0)


def test_the_heatmap_shows_the_overview_and_says_the_mask_is_kept_per_tile(qtbot, make_ctx, respond, lowered):
    ctx = make_ctx(state=long_state())
    p = HeatmapPanel(ctx)
    qtbot.addWidget(p)
    p.resize(800, 600)
    p.show()
    with qtbot.waitSignal(p.rendered, timeout=60000):
        resp = respond(ctx)
    assert resp.mask is None and p.mode == "overview"
    ctx.session.execute(set_view(matrix="mask"))
    assert p.mode == "message" and "held per flash tile" in p.note.text()
    with pytest.raises(ValueError, match="held per flash tile"):
        p.current_stack()


def test_the_heatmap_says_what_it_is_still_computing(qtbot, make_ctx, lowered, monkeypatch):
    import threading

    from attnviz.ui.panels import heatmap_panel

    release = threading.Event()
    real = heatmap_panel.overview_image

    def slow_overview(*args, **kwargs):  # the overview of a long sequence takes seconds
        release.wait(30)
        return real(*args, **kwargs)

    monkeypatch.setattr(heatmap_panel, "overview_image", slow_overview)
    ctx = make_ctx(state=long_state())
    p = HeatmapPanel(ctx)
    qtbot.addWidget(p)
    p.resize(800, 600)
    p.show()
    ctx.recompute(now=True)
    assert p.busy.is_active() and "computing the attention" in p.busy.text()  # before the response
    assert p.busy.cancel_button.isVisibleTo(p.busy)
    qtbot.waitUntil(lambda: ctx.response is not None, timeout=60000)
    # the response is in, the overview is not: the view says so instead of showing empty axes
    assert p.mode == "overview" and p.busy.is_active()
    assert f"overview of {T:,} × {T:,} weights" in p.busy.text()
    qtbot.waitUntil(p.busy.isVisible, timeout=5000)
    assert p.busy.geometry().contains(p.splitter.geometry())  # over the heatmap and the small maps
    with qtbot.waitSignal(p.rendered, timeout=60000):
        release.set()
    assert not p.busy.is_active() and not p.busy.isVisible()
    p.shutdown()


def test_the_mask_designer_does_not_draw_a_mask_kept_per_tile(qtbot, make_ctx, respond, lowered):
    from attnviz.ui.panels.mask_designer_panel import MaskDesignerPanel

    ctx = make_ctx(state=long_state())
    p = MaskDesignerPanel(ctx)
    qtbot.addWidget(p)
    p.show()
    respond(ctx)
    p.flush()
    assert "kept per flash tile" in p.message_text
    assert p.grid.snapshot is None and "not drawn cell by cell" in p.grid.placeholder
    assert p.time_flash() is None


def test_every_diagnostic_works_on_a_mask_kept_per_tile(qtbot, lowered):
    from attnviz.model.session import Session
    from attnviz.ui.context import AppContext
    from attnviz.ui.diagnostics.flash_check import FlashCheckTab
    from attnviz.ui.panels.diagnostics_panel import DiagnosticsPanel

    ctx = AppContext(Session(long_state()))
    panel = DiagnosticsPanel(ctx)
    qtbot.addWidget(panel)
    panel.resize(1200, 760)
    panel.show()
    errors = []
    ctx.message.connect(lambda level, text: errors.append(text) if level == "error" else None)
    with qtbot.waitSignal(ctx.response_changed, timeout=60000):
        ctx.recompute(now=True)
    assert ctx.response.mask is None
    for i in range(panel.tabs.count()):
        tab = panel.tab_at(i)
        panel.tabs.setCurrentIndex(i)
        job = getattr(tab, "job", None)
        if isinstance(tab, FlashCheckTab):
            with qtbot.waitSignal(tab.job.done, timeout=60000):
                assert tab.run() > 0
            assert tab.check is not None and tab.check.kernels[1].max_error < 1e-4
        elif job is not None:
            qtbot.wait(300)
            qtbot.waitUntil(lambda: not getattr(job, "busy", False), timeout=60000)
    qtbot.wait(200)
    assert errors == []
    ctx.compute.shutdown()
    panel.shutdown()
