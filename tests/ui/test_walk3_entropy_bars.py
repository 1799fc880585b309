"""The Normalisation tab's "row entropy under each rule" bars on an input of many queries (vla-mask, about
sixty rows of thin bars): every rule's bars are drawn in its legend's colour, in both themes. The selected
rule's bars once had a 2-pixel black outline that covered their fill, so the series named in blue was
drawn black (nearly invisible on the dark background)."""

from __future__ import annotations

import pytest
from PySide6.QtGui import QColor
from PySide6.QtWidgets import QApplication

from attnviz.model.demos import build_demo
from attnviz.model.session import Session
from attnviz.ui.context import AppContext
from attnviz.ui.diagnostics.normalisation import MODE_COLOURS, NormalisationTab
from attnviz.ui.panels.diagnostics_panel import DiagnosticsPanel
from attnviz.ui.theme import apply_theme

TIMEOUT = 30000


def _near(p: QColor, c: QColor, tol: int = 40) -> bool:
    return abs(p.red() - c.red()) + abs(p.green() - c.green()) + abs(p.blue() - c.blue()) < tol


def _count(img, rect, colour: str) -> int:
    c = QColor(colour)
    return sum(_near(img.pixelColor(x, y), c)
               for x in range(int(rect.left()) + 1, int(rect.right()) - 1, 1)
               for y in range(int(rect.top()) + 1, int(rect.bottom()) - 1, 2))


@pytest.fixture(params=["light", "dark"])
def theme(request):
    apply_theme(QApplication.instance(), request.param)
    yield request.param
    apply_theme(QApplication.instance(), "light")


def test_each_rules_entropy_bars_are_drawn_in_its_legend_colour(qtbot, theme):
    ctx = AppContext(Session(build_demo("vla-mask")))
    panel = DiagnosticsPanel(ctx)
    qtbot.addWidget(panel)
    panel.resize(1000, 640)
    panel.show()
    try:
        with qtbot.waitSignal(ctx.response_changed, timeout=TIMEOUT):
            ctx.recompute(now=True)
        tab = panel.tab(NormalisationTab)
        panel.show_tab(NormalisationTab)
        qtbot.waitUntil(lambda: tab.modes is not None, timeout=TIMEOUT)  # its study runs off the GUI thread
        qtbot.wait(200)
        selected = ctx.session.state.view.normalisation
        rows = len(tab.modes[selected].entropy_nats)
        assert 40 <= rows <= 64, rows  # thin grouped bars, not lines
        plot = tab.entropy_plot
        img = plot.grab().toImage()
        area = plot.view.getPlotItem().getViewBox().sceneBoundingRect()  # the plot area, in the widget's pixels
        area = area.translated(plot.view.mapTo(plot, plot.view.rect().topLeft()))
        counts = {m: _count(img, area, colour) for m, colour in MODE_COLOURS.items()}
        dark = _count(img, area, "#000000")
        # the selected rule's bars stand about as tall as the others': their colour covers as much of the plot
        assert counts[selected] > 0.3 * max(counts.values()), (theme, selected, counts, dark)
        assert counts[selected] > 3 * dark, (theme, selected, counts, dark)
    finally:
        ctx.compute.shutdown()
        panel.close()
        panel.deleteLater()
        ctx.deleteLater()
