"""The Normalisation and Softmax-Jacobian tabs on long inputs: ``compute`` (the worker) makes everything the
tab draws, ``present`` (the GUI thread) only hands it to the widgets, another rule of the same response is
drawn from the numbers held, and an edit updates the chart lines in place instead of making new items. Short
inputs look as they did."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("PySide6")

from attnviz.model.commands import set_model  # noqa: E402
from attnviz.model.demos import build_demo  # noqa: E402
from attnviz.model.diagnostics.normalisation import MODES, compare_modes  # noqa: E402
from attnviz.model.diagnostics.normalisation_display import (entropy_range, keys_drawn,  # noqa: E402
                                                             map_display, weight_levels)
from attnviz.model.session import Session  # noqa: E402
from attnviz.model.state import CustomSource, ModelConfig, SessionState  # noqa: E402
from attnviz.ui.context import AppContext  # noqa: E402
from attnviz.ui.diagnostics import normalisation as normalisation_view  # noqa: E402
from attnviz.ui.diagnostics.common import head_mask, selected_head  # noqa: E402
from attnviz.ui.diagnostics.jacobian import JacobianTab  # noqa: E402
from attnviz.ui.diagnostics.normalisation import MAX_ROWS, NormalisationTab, row_table  # noqa: E402
from attnviz.ui.diagnostics.tab import SYNC_CELLS  # noqa: E402

TIMEOUT = 60000
T_LONG = 600  # 512 rows x 600 keys x 3 rules: far past SYNC_CELLS, more keys than the map has pixels


def noise_state(T: int) -> SessionState:
    return SessionState(sources=(CustomSource("tokens", count=T, generator="noise", seed=1),),
                        model=ModelConfig(d_model=64, nh=2, seed=0))


@pytest.fixture
def opened(qtbot):
    """opened(state, *tab classes) -> (ctx, {class: tab}): each tab on its own, shown at 1024 x 700 (its
    place in the Diagnostics panel), the first response computed."""
    made = []

    def open_tabs(state, *classes):
        ctx = AppContext(Session(state))
        tabs = {}
        for cls in classes or (NormalisationTab,):
            tab = cls(ctx)
            qtbot.addWidget(tab)
            tab.resize(1024, 700)
            tab.show()
            tabs[cls] = tab
        with qtbot.waitSignal(ctx.response_changed, timeout=TIMEOUT):
            ctx.recompute(now=True)
        made.append((ctx, tabs))
        return ctx, tabs

    yield open_tabs
    for ctx, tabs in made:  # no worker may still run (and deliver) when the tabs go
        ctx.compute.shutdown()
        for tab in tabs.values():
            for job in (getattr(tab, "job", None), tab.numbers_job):
                if job is not None:
                    job.shutdown(timeout=10)
            tab.close()
            tab.deleteLater()
        ctx.deleteLater()


def drawn(qtbot, tab, ctx):
    """Wait until ``tab`` shows the newest response whole (numbers from the worker, table filled)."""
    qtbot.waitUntil(lambda: not tab.computing() and tab.drawn_last is not None and tab.drawn_last[0] is ctx.response
                    and tab.rows_filled == tab.rows_to_fill, timeout=TIMEOUT)


def test_compute_makes_every_rules_map_curves_and_table(opened, qtbot):
    ctx, tabs = opened(noise_state(T_LONG))
    tab = tabs[NormalisationTab]
    drawn(qtbot, tab, ctx)
    resp, state = ctx.response, ctx.session.state
    assert tab.work_size(resp, state) > SYNC_CELLS  # drawn from the worker's numbers
    numbers = tab.compute(resp, state)
    h, _ = selected_head(state, resp.q.shape[0])
    rows = min(resp.Tq, MAX_ROWS)
    mask = head_mask(resp, h, slice(0, rows))  # (rows, Tk)
    modes = compare_modes(resp.q[h, :rows] @ resp.k[h].T, mask, d_k=resp.q.shape[2])
    shown = numbers["map"]
    assert shown.cols == keys_drawn(mask) == T_LONG and shown.mask.shape == (rows, T_LONG)
    for m in MODES:
        picture = shown.maps[m]
        assert picture.values.dtype == np.float32 and picture.values.flags.c_contiguous  # as the heatmap holds it
        np.testing.assert_array_equal(picture.values, modes[m].weights.astype(np.float32))
        assert picture.levels == weight_levels(modes[m].weights, mask)
        assert numbers["tables"][m] == row_table(modes[m], resp.query_labels, resp.key_labels)
        np.testing.assert_array_equal(numbers["curves"].entropy[m], modes[m].entropy_nats)
    curves = numbers["curves"]
    assert not curves.bars and curves.y_range == entropy_range(modes, rows)
    np.testing.assert_array_equal(curves.x, np.arange(rows))
    assert numbers["tables"]["scaled"] != numbers["tables"]["unscaled"]  # three different tables, not one


def test_present_only_hands_ready_arrays_to_the_widgets(opened, qtbot, monkeypatch):
    ctx, tabs = opened(noise_state(T_LONG))
    tab = tabs[NormalisationTab]
    drawn(qtbot, tab, ctx)
    resp, state = ctx.response, ctx.session.state
    numbers = tab.compute(resp, state)

    def no_numbers(*_a, **_k):
        raise AssertionError("present computed numbers on the GUI thread")

    for name in ("compare_modes", "row_table", "map_display", "entropy_curves", "keys_drawn", "weight_levels",
                 "entropy_range"):
        monkeypatch.setattr(normalisation_view, name, no_numbers)
    tab.present(numbers, resp, state)
    qtbot.waitUntil(lambda: tab.rows_filled == tab.rows_to_fill, timeout=TIMEOUT)
    mode = state.view.normalisation
    assert tab.heatmap.values is numbers["map"].maps[mode].values  # the worker's array itself, not a copy
    assert tab.heatmap.levels() == numbers["map"].maps[mode].levels
    assert [tab.table.item(5, c).text() for c in range(5)] == list(numbers["tables"][mode][5])


def test_another_rule_of_a_long_input_is_drawn_without_computing_again(opened, qtbot, monkeypatch):
    ctx, tabs = opened(noise_state(T_LONG))
    tab = tabs[NormalisationTab]
    drawn(qtbot, tab, ctx)
    numbers = tab.drawn_last[2]

    def no_compute(*_a, **_k):
        raise AssertionError("computed again for a rule already computed")

    monkeypatch.setattr(tab, "compute", no_compute)
    tab.buttons["unscaled"].click()
    assert ctx.session.state.view.normalisation == "unscaled"
    assert not tab.computing() and tab.status.text() == ""
    assert tab.heatmap.values is numbers["map"].maps["unscaled"].values
    qtbot.waitUntil(lambda: tab.rows_filled == tab.rows_to_fill, timeout=TIMEOUT)
    assert tab.entropies() == [r[1] for r in numbers["tables"]["unscaled"]]
    assert tab.heatmap.title_text().startswith("weights under No √dₖ")  # whole, above the map
    lines = list(tab.entropy_items)
    assert tab.entropy_items[1].opts["pen"].width() == 2 and tab.entropy_items[0].opts["pen"].width() == 1
    assert tab.entropy_plot.legend_names() == ["Scaled", "No √dₖ (selected)", "Uniform"]  # a line above the plot
    qtbot.wait(200)
    in_place = grab_bytes(tab)  # lines restyled and table items given new text ...
    tab._drawn = tab._curve_layout = None  # the numbers and lines held forgotten: made anew (no public way)
    tab.table.clearContents()
    tab.present(numbers, ctx.response, ctx.session.state)  # ... look as lines and items made anew
    qtbot.waitUntil(lambda: tab.rows_filled == tab.rows_to_fill, timeout=TIMEOUT)
    qtbot.wait(200)
    assert tab.entropy_items != lines
    assert grab_bytes(tab) == in_place
    monkeypatch.undo()
    with qtbot.waitSignal(ctx.response_changed, timeout=TIMEOUT):
        ctx.execute(set_model(seed=5))
    drawn(qtbot, tab, ctx)  # a new response is computed (on the worker) as before
    assert tab.drawn_last[2] is not numbers


def test_an_edit_of_a_long_input_updates_the_lines_in_place(opened, qtbot):
    ctx, tabs = opened(noise_state(T_LONG), NormalisationTab, JacobianTab)
    tab, jac = tabs[NormalisationTab], tabs[JacobianTab]
    drawn(qtbot, tab, ctx)
    lines = list(tab.entropy_items)
    assert len(lines) == len(MODES)
    with qtbot.waitSignal(ctx.response_changed, timeout=TIMEOUT):
        ctx.execute(set_model(seed=21))
    drawn(qtbot, tab, ctx)
    assert tab.entropy_items == lines  # the same items: no curves or legend entries made again
    for item, m in zip(tab.entropy_items, MODES):
        np.testing.assert_array_equal(item.yData, tab.modes[m].entropy_nats)  # ... holding the new numbers
    assert len(tab.entropy_plot.legend_names()) == len(MODES)

    qtbot.waitUntil(lambda: not jac.computing() and jac.row_norms is not None, timeout=TIMEOUT)
    jac_lines = list(jac.row_items)
    assert len(jac_lines) == 2
    with qtbot.waitSignal(ctx.response_changed, timeout=TIMEOUT):
        ctx.execute(set_model(seed=22))
    before = jac.row_norms
    qtbot.waitUntil(lambda: not jac.computing() and jac.row_norms is not before, timeout=TIMEOUT)
    assert jac.row_items == jac_lines
    np.testing.assert_array_equal(jac.row_items[0].yData, jac.row_norms[0])
    np.testing.assert_array_equal(jac.row_items[1].yData, jac.row_norms[1])


def grab_bytes(tab) -> list[tuple]:
    """The pixels of what the tab draws from its numbers: map, table, summary, chart (not the rule buttons,
    whose focus ring follows the click)."""
    out = []
    for w in (tab.heatmap, tab.table, tab.summary, tab.entropy_plot):
        img = w.grab().toImage()  # held while its bits are copied
        out.append((img.width(), img.height(), bytes(img.constBits())))
    return out


def test_a_short_input_looks_the_same_from_the_numbers_held(opened, qtbot):
    ctx, tabs = opened(build_demo("river-bank"))
    tab = tabs[NormalisationTab]
    qtbot.wait(50)
    resp, state = ctx.response, ctx.session.state
    assert tab.work_size(resp, state) <= SYNC_CELLS  # drawn at once, as before
    cells = [[tab.table.item(r, c).text() for c in range(5)] for r in range(tab.table.rowCount())]
    values = tab.heatmap.values.copy()
    first = grab_bytes(tab)
    tab.buttons["uniform"].click()
    assert grab_bytes(tab) != first  # another rule: another picture
    tab.buttons["scaled"].click()  # back, drawn from the numbers held
    qtbot.wait(50)
    held = grab_bytes(tab)
    np.testing.assert_array_equal(tab.heatmap.values, values)
    assert [[tab.table.item(r, c).text() for c in range(5)] for r in range(tab.table.rowCount())] == cells
    assert tab.entropies()[3] == "0.957"  # the seed's river-bank row of "bank"
    assert type(tab.entropy_items[0]).__name__ == "BarGraphItem"  # few rows: grouped bars, made anew
    # the same two clicks with nothing held (each rule computed afresh) draw the same pixels: the colour
    # bar's axis keeps the width of the widest levels shown, so both sides take the same path
    tab._drawn = None  # nothing held: each rule computed afresh (no public way: the window never forgets them)
    tab.buttons["uniform"].click()
    tab._drawn = None
    tab.buttons["scaled"].click()
    qtbot.wait(50)
    assert grab_bytes(tab) == held


def test_a_long_input_drawn_from_the_worker_looks_as_drawn_at_once(opened, qtbot):
    ctx, tabs = opened(noise_state(T_LONG))
    tab = tabs[NormalisationTab]
    drawn(qtbot, tab, ctx)
    qtbot.wait(300)  # the heatmap's debounced pooling after the first layout
    from_worker = grab_bytes(tab)
    tab.present(tab.compute(ctx.response, ctx.session.state), ctx.response, ctx.session.state)
    qtbot.waitUntil(lambda: tab.rows_filled == tab.rows_to_fill, timeout=TIMEOUT)
    qtbot.wait(300)
    assert grab_bytes(tab) == from_worker


def test_map_display_cuts_to_the_keys_drawn():
    rng = np.random.default_rng(0)
    dots = rng.normal(size=(6, 10))
    mask = np.tril(np.ones((6, 10), dtype=bool))  # (6, 10) causal: keys 6..9 never allowed
    modes = compare_modes(dots, mask, d_k=4)
    shown = map_display(modes, mask)
    assert shown.cols == 6 and shown.mask.shape == (6, 6) and shown.mask.flags.c_contiguous
    for m in MODES:
        assert shown.maps[m].values.shape == (6, 6)
        assert shown.maps[m].levels == (0.0, float(modes[m].weights.max()))
    assert shown.maps["uniform"].values[0, 0] == 1.0 and shown.maps["uniform"].values[5, 0] == np.float32(1 / 6)


def test_a_long_input_draws_its_map_first_and_the_rest_on_the_next_turn(opened, qtbot):
    """The map is drawn as ``present`` returns; the table, the entropy chart and the summary follow on the next
    turn of the event loop (one turn for all of them and the map's first painting held the window up)."""
    ctx, tabs = opened(noise_state(T_LONG))
    tab = tabs[NormalisationTab]
    drawn(qtbot, tab, ctx)
    numbers, resp, state = tab.drawn_last[2], ctx.response, ctx.session.state
    tab.summary.setText("")
    tab.table.clearContents()
    before = tab.presented
    tab.present(numbers, resp, state)
    mode = state.view.normalisation
    assert tab.heatmap.values is numbers["map"].maps[mode].values  # the map: at once
    assert tab.presented == before + 1
    assert tab.rows_to_fill == numbers["rows"] and tab.rows_filled == 0  # the table: not yet a row
    assert tab.table.item(0, 0) is None and tab.summary.text() == ""
    qtbot.waitUntil(lambda: tab.rows_filled == tab.rows_to_fill, timeout=TIMEOUT)
    assert tab.summary.text().startswith("mean row entropy")
    assert tab.entropies() == [r[1] for r in numbers["tables"][mode]]
    # a second present before the first one's rest ran: only the newest rest is drawn
    tab.present(numbers, resp, state)
    tab.present(numbers, resp, state)
    assert tab.presented == before + 3
    qtbot.waitUntil(lambda: tab.rows_filled == tab.rows_to_fill, timeout=TIMEOUT)
    assert tab.entropies() == [r[1] for r in numbers["tables"][mode]]


def test_a_short_input_is_drawn_whole_as_present_returns(opened, qtbot):
    ctx, tabs = opened(build_demo("river-bank"))
    tab = tabs[NormalisationTab]
    qtbot.wait(50)
    numbers = tab.drawn_last[2]
    tab.summary.setText("")
    tab.present(numbers, ctx.response, ctx.session.state)
    assert tab.summary.text().startswith("mean row entropy") and tab.rows_filled == tab.rows_to_fill
