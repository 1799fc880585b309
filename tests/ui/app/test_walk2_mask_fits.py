"""The mask workspace at 1024 x 700: the block rules are on screen whole, header names and all, in their
own tab beside the presets (one column of presets, grid and legend put the grid under the fold, its
rotated header cut by the column's edge), and the painter's status line is whole and keeps its height
while the mouse moves over the cells."""

from __future__ import annotations

import pytest
from PySide6.QtCore import QRect
from PySide6.QtGui import QFontMetrics

from attnviz.ui.mask_designer.block_grid import _head_text


def _settle(qtbot, designer):
    for _ in range(3):
        qtbot.wait(80)
        designer.flush()


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_the_block_rules_and_the_status_line_are_whole_at_1024_by_700(make_window, qtbot, mouse, theme):
    w = make_window("vla-mask", all_panels=True)
    w.set_theme(theme)
    w.resize(1024, 700)
    w.show_workspace("mask")
    md = w.panel("mask_designer")
    qtbot.waitUntil(md.isVisible, timeout=5000)
    _settle(qtbot, md)
    md.side_tabs.setCurrentWidget(md.blocks_scroll)
    _settle(qtbot, md)
    assert (w.width(), w.height()) == (1024, 700)
    grid = md.grid
    assert grid.isVisible() and md.blocks_scroll.verticalScrollBar().value() == 0
    g = grid.geometry_now()
    assert (g.n_rows, g.n_cols) == (5, 5)
    table = QRect(0, 0, g.left + g.n_cols * g.cell + 1, g.top + g.n_rows * g.cell + 1)  # headers and cells
    shown = grid.visibleRegion()
    assert shown.contains(table) or shown.boundingRect().contains(table), (shown.boundingRect().getRect(),
                                                                          table.getRect())
    fm = QFontMetrics(grid.font())
    for b in md.snapshot.k_blocks:  # rotated key names: whole within the header's height
        assert fm.horizontalAdvance(_head_text(b)) <= g.top - 14, _head_text(b)
    for b in md.snapshot.q_blocks:
        assert fm.horizontalAdvance(_head_text(b)) <= g.left - 16, _head_text(b)

    status = md.canvas.status
    assert status.isVisible() and status.text_fits(), (status.text(), status.width())
    height = status.height()
    vp = md.canvas.frame.viewport()
    mouse.move(vp, md.canvas.frame.cell_to_widget(40, 40))  # the hovered cell joins the line
    qtbot.wait(50)
    assert "q 40" in status.text() and status.text_fits(), status.text()
    assert status.height() == height  # the painter does not move under the mouse
    md.apply_preset("causal")
    _settle(qtbot, md)
    assert status.text_fits() and status.height() == height
    md.side_tabs.setCurrentWidget(md.controls)  # the presets' tab: every button inside the column
    _settle(qtbot, md)
    right = md.controls.viewport().width()
    for b in md.preset_bar.buttons.values():
        assert b.isVisible() and b.mapTo(md.controls.viewport(), b.rect().topRight()).x() <= right
    w.set_theme("light")
