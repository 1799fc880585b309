"""The mask designer's layout: the cells large and square on the left, the controls in a column on
the right whose buttons wrap instead of widening the panel, rule labels that shorten to fit their
cells, a legend that drops to one column."""

from __future__ import annotations

import pytest

pytest.importorskip("PySide6")

from PySide6.QtCore import Qt  # noqa: E402
from PySide6.QtGui import QFontMetrics  # noqa: E402

from attnviz.ui.mask_designer.block_grid import fit_rule_label, rule_label_variants  # noqa: E402
from attnviz.ui.widgets.flow_layout import flow_lines  # noqa: E402
from attnviz.ui.mask_designer.legend import legend_columns  # noqa: E402
from test_mask_designer_support import make_panel  # noqa: E402


def test_flow_lines_wrap_when_the_width_runs_out():
    assert flow_lines([50, 50, 50], 200, 4) == [[0, 1, 2]]
    assert flow_lines([50, 50, 50], 120, 4) == [[0, 1], [2]]
    assert flow_lines([50, 50, 50], 103, 4) == [[0], [1], [2]]  # 50 + 4 + 50 = 104 > 103
    assert flow_lines([50, 50, 50], 104, 4) == [[0, 1], [2]]
    assert flow_lines([300, 20], 100, 4) == [[0], [1]]  # an item wider than the line still gets one
    assert flow_lines([], 100, 4) == []


def test_rule_labels_shorten_to_fit_and_never_to_nothing():
    width = len  # one pixel per character (+6 padding in fit_rule_label)
    assert fit_rule_label("allow", 40, width) == "allow"
    assert fit_rule_label("allow", 10, width) == "✓"
    assert fit_rule_label("causal", 10, width) == "caus"
    assert fit_rule_label("causal", 2, width) == "◣"  # nothing fits: the shortest spelling
    assert fit_rule_label("window 3 (causal)", 12, width) == "w3c"
    assert rule_label_variants("window 3")[0] == "window 3"


def test_legend_columns():
    assert legend_columns(400, 180) == 2 and legend_columns(300, 180) == 1


def test_cells_left_and_large_controls_wrap_in_the_right_column(qtbot):
    ctx, panel = make_panel(qtbot, "vla-mask", size=(900, 700))
    assert panel.splitter.orientation() == Qt.Orientation.Horizontal
    assert panel.splitter.widget(0).isAncestorOf(panel.canvas)
    assert panel.side_splitter.isAncestorOf(panel.preset_bar) and panel.side_splitter.isAncestorOf(panel.grid)
    cells, side = panel.splitter.sizes()
    assert cells > 1.4 * side
    assert not panel.controls.horizontalScrollBar().isVisible()
    # square cells: one key column is as wide as one query row is tall
    a, b = panel.canvas.frame.cell_to_widget(0, 0), panel.canvas.frame.cell_to_widget(10, 10)
    assert abs((b.x() - a.x()) - (b.y() - a.y())) < 1.0 and (b.x() - a.x()) / 10 >= 8
    bar = panel.preset_bar
    ys = {bar.buttons[n].mapTo(bar, bar.buttons[n].rect().topLeft()).y() for n in bar.buttons}
    assert len(ys) > 1  # the preset buttons wrap onto several lines
    for b in bar.buttons.values():  # and every one is inside the panel
        right = b.mapTo(panel, b.rect().topRight()).x()
        assert right <= panel.width()
    # the rule texts fit their cells
    g = panel.grid.geometry_now()
    fm = QFontMetrics(panel.grid.font())
    for row in panel.snapshot.cells:
        for cell in row:
            text = fit_rule_label(cell.rule.label(), g.cell - 8, fm.horizontalAdvance)
            assert fm.horizontalAdvance(text) <= g.cell
    panel.resize(1700, 700)  # a wider window: both keep their share
    qtbot.wait(100)
    cells2, side2 = panel.splitter.sizes()
    assert cells2 > cells and side2 > side and abs(cells2 / (cells2 + side2) - cells / (cells + side)) < 0.02


def test_a_message_coming_or_going_never_moves_the_painters_buttons(qtbot):
    """A one-line message under the painter (a preset refused, a mask that cannot be shown) used to shrink
    the painter as it appeared, so 'Time flash' and 'Mask as code…' jumped under the mouse."""
    from attnviz.ui.messages import Level

    ctx, panel = make_panel(qtbot, "river-bank", size=(1024, 640))

    def where():
        qtbot.wait(30)
        return [b.mapTo(panel, b.rect().topLeft()) for b in (panel.code_button, panel.tiles.time_button)]

    before = where()
    panel.message.say(Level.ERROR, "not applied: the session is not shaped like a vision-language-action model")
    assert panel.message.isVisible()
    assert where() == before
    panel.message.clear()
    assert where() == before
