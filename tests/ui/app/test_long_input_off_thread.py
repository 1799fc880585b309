"""Long inputs keep the window answering: the numbers behind the Diagnostics tabs and the mask designer's
compiled design are computed on worker threads past a size, and the Attention workspace's heatmap draws
nothing while another workspace is shown. On the long-context demo (2,900 tokens) each of these once held
the event loop for 1-2.5 s after every edit."""

from __future__ import annotations

import threading

import numpy as np

from attnviz.model.commands import set_model
from attnviz.model.diagnostics.normalisation import compare_modes
from attnviz.model.display.mask_snapshot import build_snapshot
from attnviz.model.state import CustomSource, ModelConfig, SessionState
from attnviz.ui.diagnostics.common import head_mask, selected_head
from attnviz.ui.diagnostics.jacobian import JacobianTab
from attnviz.ui.diagnostics.normalisation import MAX_ROWS, NormalisationTab, row_table
from attnviz.ui.diagnostics.tab import SYNC_CELLS
from attnviz.ui.panels.mask_designer_panel import SYNC_SNAPSHOT_CELLS


def noise_state(T: int) -> SessionState:
    return SessionState(sources=(CustomSource("tokens", count=T, generator="noise", seed=1),),
                        model=ModelConfig(d_model=64, nh=2, seed=0))


def threads_of(obj, name: str) -> list[str]:
    """Wrap ``obj.name`` to record the thread each call runs on."""
    seen, real = [], getattr(obj, name)

    def wrapped(*args, **kwargs):
        seen.append(threading.current_thread().name)
        return real(*args, **kwargs)

    setattr(obj, name, wrapped)
    return seen


def test_a_long_normalisation_tab_computes_on_its_worker_and_draws_the_same_numbers(make_window, qtbot):
    T = 240
    assert min(T, MAX_ROWS) * T * 3 > SYNC_CELLS  # the size this test is about
    w = make_window(state=noise_state(T), all_panels=True)
    w.show_workspace("diagnostics")
    panel = w.panel("diagnostics")
    panel.show_tab(NormalisationTab)
    tab = panel.tab(NormalisationTab)
    seen = threads_of(tab, "compute")
    with qtbot.waitSignal(w.ctx.response_changed, timeout=30000):
        w.ctx.execute(set_model(seed=9))
    assert tab.computing() or seen  # handed to the worker, not done on the GUI thread
    qtbot.waitUntil(lambda: bool(seen) and not tab.computing() and tab.rows_filled == T,
                    timeout=30000)
    assert seen and all(name != threading.main_thread().name for name in seen)
    resp, state = w.ctx.response, w.ctx.session.state
    h, _ = selected_head(state, resp.q.shape[0])
    dots = resp.q[h] @ resp.k[h].T
    modes = compare_modes(dots, head_mask(resp, h, slice(0, T)), d_k=resp.q.shape[2])
    want = row_table(modes[state.view.normalisation], resp.query_labels, resp.key_labels)
    got = [tuple(tab.table.item(i, c).text() for c in range(5)) for i in range(T)]
    assert got == want
    assert tab.status.text() == ""


def test_a_short_input_still_draws_at_once(make_window, qtbot):
    w = make_window("river-bank", all_panels=True)
    w.show_workspace("diagnostics")
    panel = w.panel("diagnostics")
    panel.show_tab(JacobianTab)
    tab = panel.tab(JacobianTab)
    seen = threads_of(tab, "compute")
    with qtbot.waitSignal(w.ctx.response_changed, timeout=30000):
        w.ctx.execute(set_model(seed=3))
    assert seen == [threading.main_thread().name] and not tab.computing()
    assert tab.row_norms is not None and len(tab.row_norms[0]) == w.ctx.response.Tq


def test_a_long_mask_design_compiles_on_the_worker(make_window, qtbot):
    T = 560
    assert T * T > SYNC_SNAPSHOT_CELLS
    w = make_window(state=noise_state(T), all_panels=True)
    w.show_workspace("mask")
    designer = w.panel("mask_designer")
    designer.flush()
    assert designer.snapshot is not None
    seen = threads_of(designer.snapshot_job, "submit")
    with qtbot.waitSignal(w.ctx.response_changed, timeout=30000):
        w.ctx.execute(set_model(seed=4))
    qtbot.waitUntil(lambda: bool(seen), timeout=10000)  # the redraw went to the worker
    designer.flush()
    state = w.ctx.session.state
    want = build_snapshot(state.mask, designer.axes, designer.target, state.kernel.block_m, state.kernel.block_n,
                          state.model.nh)
    np.testing.assert_array_equal(designer.snapshot.layers.rules, want.layers.rules)
    assert designer.snapshot.fully_masked.sum() == want.fully_masked.sum()


def test_the_hidden_heatmap_draws_when_its_workspace_shows(make_window, qtbot):
    w = make_window(state=noise_state(64), all_panels=True)
    w.show_workspace("attention")
    heat = w.panel("heatmap")
    drawn = threads_of(heat.heatmap, "set_matrix")
    w.show_workspace("diagnostics")
    with qtbot.waitSignal(w.ctx.response_changed, timeout=30000):
        w.ctx.execute(set_model(seed=11))
    qtbot.wait(200)
    assert drawn == []  # nobody sees it
    w.show_workspace("attention")
    qtbot.waitUntil(lambda: drawn != [], timeout=5000)
    assert heat.drawn_request_id == w.ctx.response.request_id
