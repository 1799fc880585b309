"""The Diagnostics panel's tabs on real sessions: the normalisation selector, the Jacobian study's
shape, positional-encoding properties, permutation deviations, flash vs reference, seed 001's
alignment table and the score-rule selector."""

from __future__ import annotations

import re

import numpy as np
import pytest

pytest.importorskip("PySide6")

from attnviz.model.demos import build_demo  # noqa: E402
from attnviz.model.diagnostics.variants import RULE_FORMULAS  # noqa: E402
from attnviz.model.positional import PositionalConfig  # noqa: E402
from attnviz.model.session import Session  # noqa: E402
from attnviz.model.state import ModelConfig, SessionState, TextSource  # noqa: E402
from attnviz.ui.context import AppContext  # noqa: E402
from attnviz.ui.diagnostics.alignment import AlignmentTab  # noqa: E402
from attnviz.ui.diagnostics.common import fmt  # noqa: E402
from qt_tables import table_texts  # noqa: E402
from attnviz.ui.diagnostics.flash_check import FlashCheckTab, chart_height  # noqa: E402
from attnviz.ui.diagnostics.jacobian import JacobianTab  # noqa: E402
from attnviz.ui.diagnostics.normalisation import NormalisationTab  # noqa: E402
from attnviz.ui.diagnostics.permutation import PermutationTab  # noqa: E402
from attnviz.ui.diagnostics.positional import PositionalTab  # noqa: E402
from attnviz.ui.diagnostics.variants import VariantsTab  # noqa: E402
from attnviz.ui.panels.diagnostics_panel import DiagnosticsPanel  # noqa: E402

TIMEOUT = 30000
NUMBER = r"([-+]?\d+(?:\.\d+)?(?:e[-+]?\d+)?)"


def open_panel(qtbot, state):
    ctx = AppContext(Session(state))
    panel = DiagnosticsPanel(ctx)
    qtbot.addWidget(panel)
    panel.resize(1200, 760)
    panel.show()
    with qtbot.waitSignal(ctx.response_changed, timeout=TIMEOUT):
        ctx.recompute(now=True)
    return ctx, panel


def close(ctx, panel):
    ctx.compute.shutdown()
    panel.close()
    panel.deleteLater()
    ctx.deleteLater()


@pytest.fixture
def river(qtbot):
    ctx, panel = open_panel(qtbot, build_demo("river-bank"))
    yield ctx, panel
    close(ctx, panel)


@pytest.fixture
def translation(qtbot):
    ctx, panel = open_panel(qtbot, build_demo("translation"))
    yield ctx, panel
    close(ctx, panel)


def show(qtbot, panel, cls, wait_job=True):
    """Bring a tab to the front; wait for the background study it starts."""
    tab = panel.tab(cls)
    if wait_job and hasattr(tab, "job") and cls is not FlashCheckTab:
        with qtbot.waitSignal(tab.job.done, timeout=TIMEOUT):
            panel.show_tab(cls)
    else:
        panel.show_tab(cls)
    return tab


def number_in(text: str, after: str) -> float:
    m = re.search(re.escape(after) + r"\s*" + NUMBER, text)
    assert m, f"no number after {after!r} in {text!r}"
    return float(m.group(1))


def test_normalisation_selector_sets_the_view_and_the_entropies(qtbot, river):
    ctx, panel = river
    tab = show(qtbot, panel, NormalisationTab)
    assert tab.buttons["scaled"].isChecked()
    scaled = tab.entropies()
    assert scaled[3] == fmt(tab.modes["scaled"].entropy_nats[3], 3) == "0.957"  # bank's row
    tab.buttons["unscaled"].click()
    assert ctx.session.state.view.normalisation == "unscaled"
    unscaled = tab.entropies()
    assert float(unscaled[3]) < float(scaled[3])  # no sqrt(d_k): sharper row, lower entropy
    np.testing.assert_allclose(tab.heatmap.values[3].sum(), 1.0, atol=1e-6)
    tab.buttons["uniform"].click()
    assert ctx.session.state.view.normalisation == "uniform"
    assert tab.entropies() == [fmt(np.log(4), 3)] * 4  # every row is the uniform row: log 4
    np.testing.assert_allclose(tab.heatmap.values, 0.25)
    ctx.set_view(normalisation="scaled")  # from elsewhere: the selector follows
    assert tab.buttons["scaled"].isChecked() and tab.entropies() == scaled
    assert ctx.undo_stack.count() == 0


def test_jacobian_curves_fall_unscaled_and_stay_flat_scaled(qtbot, river):
    ctx, panel = river
    tab = show(qtbot, panel, JacobianTab)
    x, un = tab.unscaled_curve.xData, tab.unscaled_curve.yData  # the data, not its log10 display
    sc = tab.scaled_curve.yData
    assert x[0] == 1 and x[-1] == 1e4 and len(x) == 20
    assert un[-1] < un[0] / 5  # collapses as the softmax saturates
    assert np.argmax(un) < len(un) // 2 and un[-1] == un[np.argmax(un):].min()
    assert sc.max() / sc.min() < 1.05  # flat with the scale
    assert tab.study_plot.getPlotItem().ctrl.logXCheck.isChecked()
    assert tab.study_plot.getPlotItem().ctrl.logYCheck.isChecked()
    un_rows, sc_rows = tab.row_norms
    assert un_rows.shape == (4,) and sc_rows[3] > un_rows[3]  # bank's row is saturated without the scale
    with qtbot.waitSignal(tab.job.done, timeout=TIMEOUT):
        tab.samples.setValue(200)
        tab.run_study()
    assert tab.study.n_samples == 200


def test_positional_rotation_error_and_relative_dependence(qtbot, river):
    ctx, panel = river
    tab = show(qtbot, panel, PositionalTab)
    assert tab.d_model.value() == 4 and tab.base.value() == 10000.0  # the session's settings
    with qtbot.waitSignal(tab.job.done, timeout=TIMEOUT):
        tab.d_model.setValue(32)
    with qtbot.waitSignal(tab.job.done, timeout=TIMEOUT):
        tab.k.setValue(5)
    s = tab.sin
    assert s.pe.shape == (64, 32) and s.k == 5
    err = number_in(tab.sin_page.error.text(), "M_5 PE(pos)| =")
    assert err < 1e-9 and err == pytest.approx(s.rotation_error, rel=0.1, abs=1e-300)
    assert number_in(tab.sin_page.dependence.text(), "along a diagonal:") < 1e-9
    assert tab.rope is not None and tab.rope.rotation_error < 1e-9
    assert number_in(tab.rope_page.error.text(), "R_5 rope(q, pos)| =") < 1e-9
    np.testing.assert_allclose(tab.sin_page.gram.values, s.gram.astype(np.float32))
    # the session's settings come back when the session changes
    with qtbot.waitSignal(ctx.response_changed, timeout=TIMEOUT):
        ctx.execute(__import__("attnviz.model.commands", fromlist=["SetPositional"]).SetPositional(
            PositionalConfig("rope", base=500.0)))
    assert tab.base.value() == 500.0
    with qtbot.waitSignal(tab.job.done, timeout=TIMEOUT):
        tab.hs.setValue(3)  # odd: RoPE cannot rotate pairs
    assert tab.rope is None and "even" in tab.rope_page.error.text()


def test_permutation_deviation_without_and_with_positions(qtbot, river):
    ctx, panel = river
    tab = show(qtbot, panel, PermutationTab)
    p = tab.result["plain"]
    assert p.max_deviation <= 1e-9 and "equivariant" in tab.plain_label.text()
    assert number_in(tab.plain_label.text(), "max deviation") <= 1e-9
    assert number_in(tab.encoded_label.text(), "max deviation") > 1e-3
    assert "do not permute" in tab.encoded_label.text()
    with qtbot.waitSignal(tab.job.done, timeout=TIMEOUT):
        tab.shuffle.click()
    assert tab.seed == 1 and tab.result["plain"].max_deviation <= 1e-9
    shuffled = [ctx.response.query_labels[t] for t in tab.result["plain"].perm]
    assert tab.order.text().split("\n")[1] == "shuffled:  " + " ".join(shuffled)
    with qtbot.waitSignal(tab.job.done, timeout=TIMEOUT):
        tab.encoding.setCurrentText("rope")
    assert "rope" in tab.encoded_box.title() and tab.result["encoded"].max_deviation > 1e-3


def test_permutation_cross_attention_equivariant_and_invariant(qtbot, translation):
    ctx, panel = translation
    tab = show(qtbot, panel, PermutationTab)
    text = tab.plain_label.text()
    assert "equivariant" in text and "invariant" in text
    assert tab.result["plain"].query_deviation <= 1e-9 and tab.result["plain"].kv_deviation <= 1e-9
    assert "the outputs change" in tab.encoded_label.text()


def test_flash_check_runs_off_the_gui_thread(qtbot, river):
    ctx, panel = river
    tab = show(qtbot, panel, FlashCheckTab)
    with qtbot.waitSignal(tab.job.done, timeout=60000):
        assert tab.run() > 0
    texts = table_texts(tab.table)
    assert [r[0] for r in texts] == ["reference", "naive", "flash"]
    fc = tab.check
    assert fc.dtype == "float32" and fc.shape == (1, 4, 4, 4, 4)
    flash = fc.kernels[1]
    assert 0 < flash.max_error < 1e-5  # float32 against the float64 reference
    assert texts[2][1] == f"{flash.max_error:.1e}" and texts[2][4].endswith("ms")
    assert tab.heatmap.values.shape == (2, 1)
    assert "within the rule" in tab.verdict.text()
    # two kernels are two rows of a readable height, not stretched over the whole tab; every label shows
    qtbot.wait(50)
    assert tab.heatmap.height() == chart_height(2, tab.heatmap.fontMetrics().height()) < tab.height() / 2
    frame = tab.heatmap.frame
    label_px = tab.heatmap.fontMetrics().horizontalAdvance("flash")
    assert frame.left_axis.width() >= label_px  # the kernel names are not cut
    assert tab.heatmap.colorbar.getAxis("right").sceneBoundingRect().right() <= frame.width() + 1  # bar inside
    tab.precision.setCurrentText("float64")
    with qtbot.waitSignal(tab.job.done, timeout=60000):
        tab.run()
    assert tab.check.dtype == "float64" and tab.check.kernels[1].max_error < 1e-12


def test_normalisation_colours_follow_the_weights_and_the_legend_stays_clear(qtbot):
    ctx, panel = open_panel(qtbot, build_demo("vit-image"))  # 197 tokens: weights of about 0.005
    try:
        tab = show(qtbot, panel, NormalisationTab)
        qtbot.waitUntil(lambda: tab.modes is not None, timeout=TIMEOUT)  # drawn from the compute's response
        shown = tab.modes["scaled"].weights
        assert shown.max() < 0.05
        assert tab.heatmap.levels() == (0.0, pytest.approx(float(shown.max())))  # the data's range, not 0-1
        assert not tab.legend_overlaps_data()  # lines beyond 64 rows
    finally:
        close(ctx, panel)
    ctx, panel = open_panel(qtbot, build_demo("river-bank"))
    try:
        tab = show(qtbot, panel, NormalisationTab)
        qtbot.waitUntil(lambda: tab.modes is not None, timeout=TIMEOUT)
        qtbot.wait(50)
        assert not tab.legend_overlaps_data()  # grouped bars
        lo, hi = tab.entropy_plot.getPlotItem().getViewBox().viewRange()[1]
        assert lo == 0.0 and hi > max(float(tab.modes[m].entropy_nats.max()) for m in tab.modes) * 1.2
    finally:
        close(ctx, panel)


def test_alignment_table_reproduces_seed_001(qtbot, translation):
    ctx, panel = translation
    tab = show(qtbot, panel, AlignmentTab)
    t = tab.table
    assert [t.horizontalHeaderItem(c).text() for c in range(3)] == ["I", "love", "you"]
    assert [t.verticalHeaderItem(r).text() for r in range(3)] == ["je", "t'", "aime"]
    assert table_texts(t) == [["0.94", "0.02", "0.04"], ["0.11", "0.01", "0.88"], ["0.03", "0.95", "0.02"]]
    for r, c in ((0, 0), (1, 2), (2, 1)):
        it = t.item(r, c)
        assert it.font().bold() and it.background().color().lightness() < 40  # shaded dark
    assert t.item(0, 1).background().color().lightness() > 240
    assert tab.lines.text().splitlines() == ["je → I (94% of its attention)", "t' → you (88% of its attention)",
                                             "aime → love (95% of its attention)"]


def test_variant_formula_follows_the_rule(qtbot, river):
    ctx, panel = river
    tab = show(qtbot, panel, VariantsTab)
    assert tab.formula.text() == RULE_FORMULAS["scaled_dot"].unicode
    scaled_row = [r for r in table_texts(tab.table)][0]
    assert scaled_row == ["0.11", "0.07", "0.69", "0.14"]  # the comparison table agrees with the session
    with qtbot.waitSignal(ctx.response_changed, timeout=TIMEOUT):
        tab.rule.setCurrentIndex(tab.rule.findData("additive"))
    assert ctx.session.state.score_rule.name == "additive"
    assert tab.formula.text() == RULE_FORMULAS["additive"].unicode != RULE_FORMULAS["scaled_dot"].unicode
    additive_row = table_texts(tab.table)[3]
    np.testing.assert_allclose([float(x) for x in additive_row], ctx.response.weights[0, 3], atol=0.006)
    ctx.undo_stack.undo()
    assert tab.formula.text() == RULE_FORMULAS["scaled_dot"].unicode
    assert tab.rule.currentData() == "scaled_dot"


def test_tabs_handle_a_failed_computation(qtbot):
    state = SessionState(sources=(TextSource("t", text="a b c"),), model=ModelConfig(d_model=6, nh=2),
                         positional=PositionalConfig("rope"))  # hs = 3 is odd: RoPE refuses
    ctx, panel = open_panel(qtbot, state)
    try:
        assert not ctx.response.ok
        tab = show(qtbot, panel, NormalisationTab, wait_job=False)
        assert "nothing to show" in tab.status.text() and "even" in tab.status.text()
        tab = show(qtbot, panel, AlignmentTab, wait_job=False)
        assert tab.table.rowCount() == 0
    finally:
        close(ctx, panel)


def test_flash_check_limits_the_reference_to_the_first_query_rows():
    from attnviz.ui.diagnostics.flash_check import query_rows_within

    assert query_rows_within(4, 100, 100, limit=1 << 30) == 100
    rows = query_rows_within(4, 3000, 3000, limit=256 << 20)
    assert rows < 3000 and 3 * 4 * rows * 3000 * 8 <= 256 << 20 < 3 * 4 * (rows + 1) * 3000 * 8
    assert query_rows_within(64, 10, 10 ** 9, limit=1) == 1  # at least one row
