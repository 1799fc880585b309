"""The mask designer in a narrow dock: controls wrap instead of widening the panel, blocks stack above
cells, rule labels shorten to fit their cells, the legend drops to one column."""

from __future__ import annotations

import pytest

pytest.importorskip("PySide6")

from PySide6.QtCore import Qt  # noqa: E402
from PySide6.QtGui import QFontMetrics  # noqa: E402

from attnviz.ui.mask_designer.block_grid import fit_rule_label, rule_label_variants  # noqa: E402
from attnviz.ui.widgets.flow_layout import flow_lines  # noqa: E402
from attnviz.ui.mask_designer.legend import legend_columns  # noqa: E402
from attnviz.ui.panels.mask_designer_panel import splitter_orientation  # noqa: E402
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


def test_legend_columns_and_splitter_orientation():
    assert legend_columns(400, 180) == 2 and legend_columns(300, 180) == 1
    assert splitter_orientation(1200, 700) == Qt.Orientation.Horizontal
    assert splitter_orientation(460, 600) == Qt.Orientation.Vertical


def test_narrow_panel_wraps_its_controls_and_stacks_blocks_over_cells(qtbot):
    ctx, panel = make_panel(qtbot, "vla-mask", size=(440, 900))
    assert panel.minimumSizeHint().width() <= 360  # fits a dock of the window's right column
    assert panel.splitter.orientation() == Qt.Orientation.Vertical
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
    panel.resize(1300, 700)
    qtbot.waitUntil(lambda: panel.splitter.orientation() == Qt.Orientation.Horizontal, timeout=2000)
    ys = {bar.buttons[n].mapTo(bar, bar.buttons[n].rect().topLeft()).y() for n in bar.buttons}
    assert len(ys) == 1  # wide: one line of presets
