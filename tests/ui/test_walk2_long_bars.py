"""The Image workspace's bar chart on long inputs (no image: one query's weights over every key): on
3,000 keys every bar still shows, the first and last clear of the axes (2,954 bars once drew nothing:
rectangles narrower than a pixel with no outline), and its key labels never overlap."""

from __future__ import annotations

import numpy as np
import pytest
from PySide6.QtGui import QColor, QImage, QPainter

from attnviz.model.demos import build_demo
from attnviz.model.session import Session
from attnviz.ui.context import AppContext
from attnviz.ui.panels.image_panel import ImagePanel, QueryBars

BLUE, ORANGE = "#1f77b4", "#ff7f0e"


def _drawn_labels(plot_item) -> list[tuple[float, float, str]]:
    """(left, right, text) in pixels of every key label pyqtgraph draws under the plot."""
    axis = plot_item.getAxis("bottom")
    img = QImage(10, 10, QImage.Format.Format_ARGB32)
    p = QPainter(img)
    try:
        _axis, _ticks, texts = axis.generateDrawSpecs(p)
    finally:
        p.end()
    return sorted((r.left(), r.right(), text) for r, _flags, text in texts)


def _columns_of(img: QImage, colour: str, y0: int, y1: int) -> set[int]:
    """Pixel columns holding ``colour`` between rows y0 and y1."""
    c = QColor(colour)
    out = set()
    for x in range(img.width()):
        for y in range(y0, y1):
            p = img.pixelColor(x, y)
            if abs(p.red() - c.red()) + abs(p.green() - c.green()) + abs(p.blue() - c.blue()) < 60:
                out.add(x)
                break
    return out


def test_every_bar_of_3000_keys_shows_and_the_labels_never_overlap(qtbot):
    bars = QueryBars()
    qtbot.addWidget(bars)
    bars.resize(700, 450)
    bars.show()
    n = 3000
    w = np.zeros(n)
    w[[0, 1500, 2999]] = [0.5, 0.3, 0.2]  # the first key, one in the middle, the last
    colours = [BLUE] * 2000 + [ORANGE] * 1000
    labels = [f"␣word{j}" for j in range(n)]
    bars.set_row(w, np.ones(n, bool), labels, colours, "query 0 → weights over the 3,000 keys")
    qtbot.wait(100)
    assert sum(len(item.opts["x"]) for item in bars.bar_items) == n  # a bar per key
    img = bars.grab().toImage()
    plot = bars.plotItem.getViewBox().sceneBoundingRect()  # the plot area, in the widget's pixels
    top, floor, left, right = int(plot.top()), int(plot.bottom()), int(plot.left()), int(plot.right())
    blue = _columns_of(img, BLUE, top, floor - 6)  # above the baseline the zero-height bars draw
    orange = _columns_of(img, ORANGE, top, floor - 6)
    assert len({x // 4 for x in blue}) >= 2, sorted(blue)  # key 0 and key 1500 stand up
    assert min(blue) > left + 1  # key 0 is clear of the left axis
    assert orange and max(orange) < right  # the last key, inside the plot
    drawn = _drawn_labels(bars.plotItem)
    assert len(drawn) >= 5
    for (l0, r0, t0), (l1, r1, t1) in zip(drawn, drawn[1:]):
        assert r0 <= l1, f"{t0!r} and {t1!r} overlap: {r0} > {l1}"
    bars.plotItem.setXRange(1496.5, 1503.5, padding=0)  # zoomed in to 7 keys: every one named
    qtbot.wait(50)
    drawn = _drawn_labels(bars.plotItem)
    names = [t for _l, _r, t in drawn]
    assert {f"␣word{j}" for j in range(1498, 1503)} <= set(names), names
    for (l0, r0, t0), (l1, r1, t1) in zip(drawn, drawn[1:]):
        assert r0 <= l1, f"{t0!r} and {t1!r} overlap"


@pytest.fixture
def long_ctx(qtbot):
    c = AppContext(Session(build_demo("long-context")))
    yield c
    c.compute.shutdown(timeout=5)


def test_the_long_context_demo_draws_its_bars(qtbot, long_ctx):
    ctx = long_ctx
    panel = ImagePanel(ctx)
    qtbot.addWidget(panel)
    panel.resize(700, 560)
    panel.show()
    with qtbot.waitSignal(ctx.response_changed, timeout=60000) as blocker:
        ctx.recompute(now=True)
    resp = blocker.args[0]
    assert resp.Tk > 2800
    ctx.set_view(query=resp.Tq - 1)
    qtbot.wait(100)
    w = panel.bar_weights()
    assert w is not None and w.shape == (resp.Tk,) and abs(w.sum() - 1) < 1e-6
    assert sum(len(item.opts["x"]) for item in panel.bars.bar_items) == resp.Tk
    drawn = _drawn_labels(panel.bars.plotItem)
    assert drawn
    for (l0, r0, t0), (l1, r1, t1) in zip(drawn, drawn[1:]):
        assert r0 <= l1, f"{t0!r} and {t1!r} overlap"
