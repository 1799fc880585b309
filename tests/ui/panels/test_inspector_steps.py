"""The Q/K/V inspector spreads its first visit over turns of the event loop: building the panel makes one
heatmap (the Q map), the K and V maps and the PCA's scatter are made on later turns, and the first draw of
a result already there draws one map a turn; the projections' tab, when it first comes forward, makes and
then draws its four maps one a turn. The panel's timer is replaced by a list of the calls it schedules, and
the test runs them one at a time: each call is one turn. What is drawn at the end is what one turn drew."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("PySide6")

from attnviz.model.session import Session  # noqa: E402
from attnviz.model.state import ModelConfig, SessionState, TextSource  # noqa: E402
from attnviz.ui.context import AppContext  # noqa: E402
from attnviz.ui.diagnostics.qk_scatter import QKScatter  # noqa: E402
from attnviz.ui.panels import inspector_panel  # noqa: E402
from attnviz.ui.panels.inspector_panel import InspectorPanel  # noqa: E402
from attnviz.ui.widgets.heatmap import AttentionHeatmap  # noqa: E402

TIMEOUT = 20000


class Turns:
    """Stands in for QTimer in the panel's module: the calls it schedules wait in ``due``."""

    def __init__(self):
        self.due = []

    def singleShot(self, _ms, *args):  # noqa: N802 - Qt's name
        self.due.append(args[-1])  # (ms, fn) or (ms, context, fn)


@pytest.fixture
def turns(monkeypatch):
    t = Turns()
    monkeypatch.setattr(inspector_panel, "QTimer", t)
    return t


@pytest.fixture
def work(monkeypatch):
    """What was made and drawn: ('make', 'heatmap' / 'scatter') and ('draw', heatmap) entries."""
    log = []
    make_map, draw, make_scatter = AttentionHeatmap.__init__, AttentionHeatmap.set_matrix, QKScatter.__init__

    def made_map(self, *a, **k):
        log.append(("make", "heatmap"))
        make_map(self, *a, **k)

    def drawn(self, *a, **k):
        log.append(("draw", self))
        draw(self, *a, **k)

    def made_scatter(self, *a, **k):
        log.append(("make", "scatter"))
        make_scatter(self, *a, **k)

    monkeypatch.setattr(AttentionHeatmap, "__init__", made_map)
    monkeypatch.setattr(AttentionHeatmap, "set_matrix", drawn)
    monkeypatch.setattr(QKScatter, "__init__", made_scatter)
    return log


def run_turns(turns, work, limit=50):
    """Run the scheduled calls one per turn; the work of each turn, in order."""
    each = []
    while turns.due and len(each) < limit:
        start = len(work)
        turns.due.pop(0)()
        each.append(work[start:])
    assert not turns.due, "the panel kept scheduling work"
    return each


@pytest.fixture
def ctx(qtbot):
    state = SessionState(sources=(TextSource("t", text="the cat sat on the mat by the door"),),
                         model=ModelConfig(d_model=8, nh=2))
    c = AppContext(Session(state))
    with qtbot.waitSignal(c.response_changed, timeout=TIMEOUT):
        c.recompute(now=True)
    yield c
    c.compute.shutdown()
    c.deleteLater()


def test_the_first_visit_makes_and_draws_one_map_a_turn(qtbot, ctx, turns, work):
    panel = InspectorPanel(ctx)  # a result is already there: the workspace's first visit
    qtbot.addWidget(panel)
    assert work == [("make", "heatmap")]  # the Q map only
    assert not {"k_map", "v_map", "scatter"} & set(vars(panel))
    panel.resize(1300, 800)
    panel.show()
    each = run_turns(turns, work)
    assert len(each) >= 6
    assert all(len(w) <= 1 for w in each), each  # never two maps (or a map and the scatter) in one turn
    resp = ctx.response
    drawn = [w[0][1] for w in each if w and w[0][0] == "draw"]
    assert sorted(map(id, drawn)) == sorted(map(id, (panel.q_map, panel.k_map, panel.v_map)))  # each once
    for m, want in ((panel.q_map, resp.q[0]), (panel.k_map, resp.k[0]), (panel.v_map, resp.v[0])):
        np.testing.assert_array_equal(m.values, want.astype(np.float32))
    assert [panel.qkv_page.layout().itemAt(n).widget() for n in range(3)] == [panel.q_map, panel.k_map, panel.v_map]
    assert panel.q_map.frame.selected_row == panel.selection()[1]
    assert panel.k_map.frame.selected_row == panel.selection()[2]
    assert panel.breakdown.formula.text().strip()
    assert "scatter" in vars(panel) and not panel.drawing_in_steps
    # the scatter took the PCA tab's place: same text, tooltip and tab forward
    pca = panel.matrices.indexOf(panel.scatter)
    assert panel.matrices.tabText(pca) == "Q-K PCA" and panel.matrices.currentIndex() == 0
    assert panel.matrices.tabToolTip(pca) == "queries and keys in one PCA embedding"
    assert "wq_map" not in vars(panel)  # their tab was never shown


def test_the_projections_tab_makes_then_draws_one_map_a_turn(qtbot, ctx, turns, work):
    panel = InspectorPanel(ctx)
    qtbot.addWidget(panel)
    panel.resize(1300, 800)
    panel.show()
    run_turns(turns, work)
    del work[:]
    panel.matrices.setCurrentWidget(panel.weights_page)
    assert work == [("make", "heatmap")] and "wq_map" in vars(panel) and panel.weights_stale
    each = run_turns(turns, work)
    assert all(len(w) <= 1 for w in each), each
    assert [w[0][0] for w in each if w] == ["make"] * 3 + ["draw"] * 4
    assert not panel.weights_stale
    W = ctx.response.projections
    np.testing.assert_array_equal(panel.wq_map.values, W.W_q[0].astype(np.float32))
    np.testing.assert_array_equal(panel.wo_map.values, W.W_o[0:W.W_o.shape[0] // 2].astype(np.float32))
    assert [m.title_text() for m in (panel.wq_map, panel.wk_map, panel.wv_map, panel.wo_map)] == \
        ["W^Q, head 0", "W^K, head 0", "W^V, head 0", "W^O rows, head 0"]


def test_a_part_asked_for_before_its_turn_is_made_then_in_its_place(qtbot, ctx, turns, work):
    panel = InspectorPanel(ctx)
    qtbot.addWidget(panel)
    v = panel.v_map  # makes the K map first: they sit Q, K, V
    assert [panel.qkv_page.layout().itemAt(n).widget() for n in range(3)] == [panel.q_map, panel.k_map, v]
    panel.matrices.setCurrentWidget(panel.scatter)  # made and put in the PCA tab's place
    assert panel.matrices.currentWidget() is panel.scatter
    panel.resize(1300, 800)
    panel.show()
    run_turns(turns, work)
    assert work.count(("make", "heatmap")) == 3 and work.count(("make", "scatter")) == 1  # nothing made twice
    np.testing.assert_array_equal(panel.v_map.values, ctx.response.v[0].astype(np.float32))


def test_steps_left_when_another_workspace_comes_forward_wait_for_the_next_show(qtbot, ctx, turns, work):
    from PySide6.QtWidgets import QWidget

    window = QWidget()  # the window stays shown; the panel's workspace is left
    qtbot.addWidget(window)
    window.resize(1300, 800)
    window.show()
    panel = InspectorPanel(ctx)
    panel.setParent(window)
    panel.resize(1300, 800)
    panel.show()
    panel.hide()  # before any of its steps ran
    run_turns(turns, work)
    assert [w for w in work if w[0] == "draw"] == [] and panel.q_map.values is None
    panel.show()
    run_turns(turns, work)
    np.testing.assert_array_equal(panel.k_map.values, ctx.response.k[0].astype(np.float32))
    np.testing.assert_array_equal(panel.q_map.values, ctx.response.q[0].astype(np.float32))
