"""A workspace that is not shown does no drawing: after an edit, the mask designer's snapshot (a
compiled design for every cell) and the Q·K·V maps, breakdown and PCA wait until their workspace shows.
On the long-context demo (2,900 tokens) the hidden mask designer once compiled its snapshot on the
GUI thread after every edit and held the window up for 3-5 s behind the overview's kernel."""

from __future__ import annotations

import numpy as np

from attnviz.model.commands import set_model
from attnviz.ui.diagnostics.common import selected_head


def test_hidden_workspaces_draw_only_when_shown(make_window, qtbot):
    w = make_window("river-bank", all_panels=True)
    for name in ("qkv", "mask", "attention"):
        w.show_workspace(name)
        for pid in w.area.page(name).slots:
            w.panel(pid)
        qtbot.wait(100)
    designer, inspector = w.panel("mask_designer"), w.panel("inspector")
    refreshed, redrawn, scattered = [], [], []
    real_refresh, real_redraw, real_scatter = designer.refresh, inspector._redraw_matrices, inspector.scatter.set_embedding
    designer.refresh = lambda: (refreshed.append(1), real_refresh())
    inspector._redraw_matrices = lambda: (redrawn.append(1), real_redraw())
    inspector.scatter.set_embedding = lambda *a, **k: (scattered.append(1), real_scatter(*a, **k))

    with qtbot.waitSignal(w.ctx.response_changed, timeout=20000):
        w.ctx.execute(set_model(seed=5))
    qtbot.wait(300)
    assert w.workspace == "attention"
    assert refreshed == [] and redrawn == [] and scattered == []  # nobody sees them

    w.show_workspace("mask")
    qtbot.waitUntil(lambda: refreshed != [], timeout=3000)
    w.show_workspace("qkv")
    qtbot.waitUntil(lambda: redrawn != [], timeout=3000)
    resp = w.ctx.response
    h, _ = selected_head(w.ctx.session.state, resp.q.shape[0])
    np.testing.assert_array_equal(inspector.q_map.values, resp.q[h].astype(np.float32))  # the new result
    assert scattered == []  # the PCA tab is not the one shown
    inspector.matrices.setCurrentWidget(inspector.scatter)
    qtbot.waitUntil(lambda: scattered != [], timeout=3000)
