"""Token labels under a bar chart never overlap, at any width or zoom, and all of them show where they
fit (the Diagnostics entropy and Jacobian charts once wrote 'up and the fast actions expert act' over
each other on a 44-token input)."""

from __future__ import annotations

import pyqtgraph as pg
from PySide6.QtGui import QFont, QFontMetricsF

from attnviz.ui.widgets.label_ticks import label_ticks

LABELS = [f"p{i}" for i in range(15)] + ["␣up", "␣red", "␣and", "␣it", "␣the", "ray"] + \
    [f"fast actions{i}" for i in range(8)] + ["state"] + [f"expert actions{i}" for i in range(8)] + \
    ["p1", "p2", "p3", "p4", "p5", "p6"]


def _overlaps(plot, keeper):
    vb = plot.getPlotItem().getViewBox()
    metrics = QFontMetricsF(keeper.axis.style.get("tickFont") or QFont())
    ticks = keeper.shown()
    out = []
    for (a, ta), (b, tb) in zip(ticks, ticks[1:]):
        pa, pb = vb.mapViewToScene(pg.Point(a, 0)).x(), vb.mapViewToScene(pg.Point(b, 0)).x()
        room = pb - pa
        need = (metrics.horizontalAdvance(ta) + metrics.horizontalAdvance(tb)) / 2
        if room < need:
            out.append((ta, tb, round(room), round(need)))
    return out


def test_labels_never_overlap_and_all_show_where_they_fit(qtbot):
    plot = pg.PlotWidget()
    qtbot.addWidget(plot)
    n = len(LABELS)
    plot.plot(list(range(n)), [1.0] * n)
    plot.resize(420, 240)
    plot.show()
    qtbot.waitExposed(plot)
    keeper = label_ticks(plot.getPlotItem(), LABELS)
    plot.getPlotItem().setXRange(-0.5, n - 0.5, padding=0)
    qtbot.wait(50)
    assert 2 <= len(keeper.shown()) < n and _overlaps(plot, keeper) == []
    plot.getPlotItem().setXRange(20, 23, padding=0)  # zoomed in: the labels of those bars, every one
    qtbot.wait(50)
    shown = {int(i) for i, _ in keeper.shown()}
    assert set(range(20, 24)) <= shown and _overlaps(plot, keeper) == []
    short = LABELS[:13]
    keeper = label_ticks(plot.getPlotItem(), short)
    plot.resize(1400, 240)
    plot.getPlotItem().setXRange(-0.5, 12.5, padding=0)
    qtbot.wait(50)
    assert [t for _, t in keeper.shown()] == short  # all 13 fit: all 13 shown
