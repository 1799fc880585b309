"""The Q/K/V inspector on real sessions: seed 002's numbers in the breakdown, live q/k edits through
undoable commands, selection through the view and clicks, the normalisation it follows, other score
rules, and the Q-K scatter."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("PySide6")

from attnviz.model.commands import SetScoreRule, set_view  # noqa: E402
from attnviz.model.demos import build_demo  # noqa: E402
from attnviz.model.score_rules import ScoreRuleConfig  # noqa: E402
from attnviz.model.session import Session  # noqa: E402
from attnviz.model.state import ModelConfig, SessionState, TextSource  # noqa: E402
from attnviz.ui.context import AppContext  # noqa: E402
from qt_tables import table_texts  # noqa: E402
from attnviz.ui.panels import PANELS  # noqa: E402
from attnviz.ui.panels.inspector_panel import InspectorPanel  # noqa: E402

TIMEOUT = 20000


def close(ctx, panel):
    """Stop the compute thread and delete the Qt objects now, not at interpreter exit."""
    ctx.compute.shutdown()
    panel.close()
    panel.deleteLater()
    ctx.deleteLater()


def open_panel(qtbot, state):
    ctx = AppContext(Session(state))
    panel = InspectorPanel(ctx)
    qtbot.addWidget(panel)
    panel.resize(1300, 800)
    panel.show()
    with qtbot.waitSignal(ctx.response_changed, timeout=TIMEOUT):
        ctx.recompute(now=True)
    return ctx, panel


@pytest.fixture
def river(qtbot):
    ctx, panel = open_panel(qtbot, build_demo("river-bank"))
    yield ctx, panel
    close(ctx, panel)


def rows(table):
    return table_texts(table)


def test_river_bank_breakdown_shows_seed_002_numbers(river):
    ctx, panel = river
    bd = panel.breakdown
    assert panel.selection() == (0, 3, 2)  # bank's row; key defaults to its strongest key, river
    pair = rows(bd.pair_table)
    assert pair[0][:4] == ["2.3", "2.3", "0", "0"]  # bank's query
    assert pair[1][:4] == ["1", "1", "0", "0"]  # river's key
    assert pair[2] == ["2.3", "2.3", "0", "0", "4.6"]  # the products and their sum
    row = rows(bd.row_table)
    assert row[0] == ["0.92", "0", "4.6", "1.38"]  # q·k against by, the, river, bank
    assert row[1] == ["0.46", "0", "2.3", "0.69"]  # /sqrt(4)
    assert row[2] == ["0.11", "0.07", "0.69", "0.14"]  # softmax
    assert rows(bd.output_table)[2] == ["1.43", "0.06", "0.14", "0"]
    text = bd.formula.text()
    # each "=" closes one step: q·k = 4.6, then the score 4.6 × 1/√4 = 2.3 (never "4.6 × 1/√4 = 0.5")
    assert "q_3 · k_2 = Σ q⊙k = 4.6" in text and "score = 4.6 × 1/√4 = 2.3" in text, text
    assert "(1/√4 = 0.5" in text and "weight 0.69" in text, text
    assert "= Σ =" not in text and "4.6 × 1/√4 = 0.5" not in text.replace("   ", " "), text
    assert bd.which.isEnabled()  # a hand-set session: components are editable


def test_decimals_and_tooltips_carry_the_full_values(river):
    ctx, panel = river
    panel.decimals.setValue(3)
    assert rows(panel.breakdown.row_table)[2] == ["0.109", "0.069", "0.685", "0.137"]
    tip = panel.breakdown.row_table.item(2, 2).toolTip()
    np.testing.assert_allclose(float(tip), ctx.response.weights[0, 3, 2], rtol=0, atol=1e-12)


def test_editing_a_query_component_updates_weights_live_and_undoes(qtbot, river):
    ctx, panel = river
    before = ctx.response.weights[0, 3].copy()
    bd = panel.breakdown
    bd.which.setCurrentIndex(0)
    bd.dim.setValue(1)
    with qtbot.waitSignal(ctx.response_changed, timeout=TIMEOUT):
        bd.value.setValue(0.0)  # bank's query no longer asks for finance: [2.3, 0, 0, 0]
    after = ctx.response.weights[0, 3]
    assert not np.allclose(before, after)
    assert ctx.response.q[0, 3, 1] == 0.0
    assert rows(bd.pair_table)[0][:4] == ["2.3", "0", "0", "0"]
    assert rows(bd.row_table)[2] == [f"{w:.2f}".rstrip("0").rstrip(".") or "0" for w in after]
    assert bd.pair_table.item(0, 1).font().bold()  # the hand-set cell is marked
    assert ctx.undo_stack.count() == 1
    with qtbot.waitSignal(ctx.response_changed, timeout=TIMEOUT):
        ctx.undo_stack.undo()
    np.testing.assert_allclose(ctx.response.weights[0, 3], before, atol=1e-12)


def test_editing_a_key_cell_in_the_table(qtbot, river):
    ctx, panel = river
    item = panel.breakdown.pair_table.item(1, 0)  # river's key, dim 0
    with qtbot.waitSignal(ctx.response_changed, timeout=TIMEOUT):
        item.setText("3")
    assert ctx.response.k[0, 2, 0] == 3.0
    assert ctx.session.state.model.qk_overrides[0].key == ("k", 0, 2, 0)
    # a value that is not a number is refused and the cell shows the old number again
    n = ctx.undo_stack.count()
    panel.breakdown.pair_table.item(1, 1).setText("abc")
    assert ctx.undo_stack.count() == n
    assert panel.breakdown.pair_table.item(1, 1).text() == "1"


def test_selection_follows_view_and_clicks(qtbot, river):
    ctx, panel = river
    ctx.set_view(key=0)
    assert panel.selection() == (0, 3, 0)
    assert rows(panel.breakdown.pair_table)[1][:4] == ["0.2", "0.2", "1", "0"]  # by's key
    assert "0.46" in panel.breakdown.formula.text()  # bank -> by: 0.92 / 2
    panel.q_map.cell_clicked.emit(2, 1)
    assert ctx.session.state.view.query == 2
    assert panel.breakdown.current_component() == ("q", 1)
    panel.k_map.cell_clicked.emit(1, 0)
    assert ctx.session.state.view.key == 1
    panel.breakdown.key_clicked.emit(3)
    assert ctx.session.state.view.key == 3
    panel.scatter.point_clicked.emit("q", 0)
    assert ctx.session.state.view.query == 0
    panel.query.setCurrentIndex(3)
    assert ctx.session.state.view.query == 3
    assert ctx.undo_stack.count() == 0  # selecting is not an edit


def test_breakdown_follows_the_normalisation_selector(river):
    ctx, panel = river
    ctx.set_view(normalisation="uniform")
    assert rows(panel.breakdown.row_table)[2] == ["0.25"] * 4
    assert "uniform" in panel.breakdown.formula.text()
    assert "the session itself computes Scaled" in panel.note.text()
    ctx.set_view(normalisation="unscaled")
    w = np.array([float(x) for x in rows(panel.breakdown.row_table)[2]])
    assert w[2] > 0.69  # without the scale the softmax is sharper
    ctx.set_view(normalisation="scaled")
    assert rows(panel.breakdown.row_table)[2] == ["0.11", "0.07", "0.69", "0.14"]


def test_other_score_rule_shows_the_sessions_weights(qtbot, river):
    ctx, panel = river
    with qtbot.waitSignal(ctx.response_changed, timeout=TIMEOUT):
        ctx.execute(SetScoreRule(ScoreRuleConfig("additive")))
    shown = np.array([float(x) for x in rows(panel.breakdown.row_table)[2]])
    np.testing.assert_allclose(shown, ctx.response.weights[0, 3], atol=0.006)
    assert "additive" in panel.breakdown.formula.text()
    assert "additive" in panel.note.text()


def test_matrices_and_projections_are_drawn_for_the_head(river):
    ctx, panel = river
    np.testing.assert_array_equal(panel.q_map.values, ctx.response.q[0].astype(np.float32))
    np.testing.assert_array_equal(panel.v_map.values, ctx.response.v[0].astype(np.float32))
    assert panel.wq_map.values is None  # the projections wait for their tab
    panel.matrices.setCurrentWidget(panel.weights_page)
    np.testing.assert_array_equal(panel.wq_map.values, ctx.response.projections.W_q[0].astype(np.float32))
    np.testing.assert_array_equal(panel.wo_map.values, np.eye(4, dtype=np.float32))
    assert panel.q_map.readout_text(3, 0).startswith("q 3 'bank'")


def test_scatter_names_tokens_and_colours_by_side_or_segment(river):
    ctx, panel = river
    sc = panel.scatter
    panel.matrices.setCurrentWidget(sc)  # drawn once its tab is shown
    assert "query 3 'bank'" in sc.describe("q", 3)
    assert "[by the river bank]" in sc.describe("k", 2) and "'river'" in sc.describe("k", 2)
    assert set(sc.brushes("q")) != set(sc.brushes("k"))
    sc.colour_by.setCurrentIndex(1)  # by segment: one source, one colour for both sides
    assert set(sc.brushes("q")) == set(sc.brushes("k")) == {"#0072b2"}
    q_xy = sc.queries.getData()
    np.testing.assert_allclose(np.c_[q_xy[0], q_xy[1]], sc.embedding.q_xy)
    fills = list(sc.queries.data["brush"])  # the brush objects the item keeps per point
    assert len(fills) == 4 and len({id(b) for b in fills}) == 1  # one brush per colour


def test_scatter_makes_one_brush_per_colour_not_one_per_point(river, monkeypatch):
    from attnviz.ui.diagnostics import qk_scatter

    ctx, panel = river
    sc = panel.scatter
    panel.matrices.setCurrentWidget(sc)
    made = []
    real = qk_scatter.pg.mkBrush
    monkeypatch.setattr(qk_scatter.pg, "mkBrush", lambda *a, **k: made.append(a) or real(*a, **k))
    sc.colour_by.setCurrentIndex(1)  # restyled: 4 queries and 4 keys of one segment colour
    assert len(made) == 2  # one per side


@pytest.fixture
def text_session(qtbot):
    state = SessionState(sources=(TextSource("t", text="the cat sat on the mat"),),
                         model=ModelConfig(d_model=8, nh=2))
    ctx, panel = open_panel(qtbot, state)
    yield ctx, panel
    close(ctx, panel)


def test_learned_session_is_not_editable_and_heads_switch(text_session):
    ctx, panel = text_session
    bd = panel.breakdown
    assert not bd.which.isEnabled() and "toy" in bd.edit_hint.text()
    before = rows(bd.pair_table)
    panel.head.setValue(1)
    assert ctx.session.state.view.head == 1
    assert panel.selection()[0] == 1
    assert rows(bd.pair_table) != before
    np.testing.assert_array_equal(panel.q_map.values, ctx.response.q[1].astype(np.float32))
    ctx.session.execute(set_view(head="mean"))
    assert "head 0" in panel.note.text()


def test_panels_are_listed():
    ids = {p.id for p in PANELS}
    assert {"inspector", "diagnostics"} <= ids


def test_long_row_shows_a_window_around_the_key(qtbot):
    words = " ".join(f"w{n}" for n in range(200))
    ctx, panel = open_panel(qtbot, SessionState(sources=(TextSource("t", text=words),),
                                                model=ModelConfig(d_model=8, nh=1)))
    try:
        Tk = ctx.response.Tk
        assert Tk > 128
        panel.matrices.setCurrentWidget(panel.scatter)  # the PCA is drawn while its tab is shown
        ctx.set_view(query=0, key=Tk - 3)
        bd = panel.breakdown
        assert bd.row_table.columnCount() == 128
        assert f"keys {Tk - 128}–{Tk - 1} of {Tk}" in bd.row_caption.text()
        assert bd.row_table.horizontalHeaderItem(125).text().startswith(f"{Tk - 3} ")
        bd.row_table.cellClicked.emit(0, 0)  # the first shown column is key Tk - 128
        assert ctx.session.state.view.key == Tk - 128
        assert panel.scatter.selected.getData()[0].shape == (2,)  # the selected query and key outlined
    finally:
        close(ctx, panel)


def test_long_token_labels_never_widen_the_breakdown(qtbot):
    """The breakdown's boxes keep short titles: "row of query 0 'a long label': ... (keys 0–127 of 200)"
    as a group box title once made the Q · K · V workspace 779 px wide at least, too wide for 1024 x 700."""
    words = " ".join(f"extraordinarily_long_word_{n}" for n in range(200))
    ctx, panel = open_panel(qtbot, SessionState(sources=(TextSource("t", text=words),),
                                                model=ModelConfig(d_model=8, nh=1)))
    try:
        ctx.set_view(query=150, key=140)
        bd = panel.breakdown
        assert "of " in bd.row_caption.text() and "query 150" in bd.row_caption.text()
        assert bd.minimumSizeHint().width() <= 320, bd.minimumSizeHint()
        assert panel.minimumSizeHint().width() <= 660, panel.minimumSizeHint()  # beside a 330 px sidebar
    finally:
        close(ctx, panel)
