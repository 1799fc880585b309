"""A map's or plot's title longer than the frame is wide wraps onto more lines instead of being cut with
"…" (the map below gets less height, the frame no more width), and a FitScroll gives a long word-wrapped
label the height its lines need at the width it has (it once counted one line, so the label was cut or
drawn over what follows)."""

from __future__ import annotations

import pyqtgraph as pg
import pytest
from PySide6.QtCore import QSize
from PySide6.QtWidgets import QGridLayout, QGroupBox, QHBoxLayout, QLabel, QVBoxLayout, QWidget

from attnviz.ui.widgets.fit_scroll import FitScroll, needed_height, shortfall
from attnviz.ui.widgets.matrix_frame import MatrixFrame, TitleLabel, wrap_plot_title

LONG = "attention weights of layer 3 head 7 under the causal sliding-window mask"


def shown(t) -> str:
    return t.item.toPlainText()


def lines(t) -> int:
    doc = t.item.document()
    return sum(doc.findBlockByNumber(i).layout().lineCount() for i in range(doc.blockCount()))


def whole(t) -> bool:
    """Every character drawn, inside the label's rectangle."""
    r, drawn = t.rect(), t.itemRect()
    return shown(t) == str(t.text) and drawn.width() <= r.width() + 1 and drawn.height() <= r.height() + 1


def _frame(qtbot, width, title=LONG):
    f = MatrixFrame()
    qtbot.addWidget(f)
    f.set_shape(6, 6)
    f.set_labels([f"t{i}" for i in range(6)], [f"t{i}" for i in range(6)])
    f.set_title(title)
    f.resize(width, 320)
    f.show()
    qtbot.wait(60)
    return f


@pytest.mark.parametrize("width", [90, 160, 260])
def test_a_long_map_title_wraps_whole_and_never_widens_the_frame(qtbot, width):
    f = _frame(qtbot, width)
    t = f.title
    assert shown(t) == LONG  # every character drawn, no "…"
    assert "…" not in shown(t)
    assert whole(t)
    assert lines(t) >= 2
    assert t.itemRect().width() <= t.rect().width() + 1  # no line wider than the label
    assert f.width() == width  # the title did not widen the frame
    assert f.view.geometry().top() >= t.geometry().bottom() - 1  # the map starts below the last line


def test_a_title_that_fits_stays_on_one_line_and_the_map_gets_the_height_back(qtbot):
    f = _frame(qtbot, 200)
    two_lines_top = f.view.geometry().top()
    f.resize(900, 320)
    qtbot.wait(60)
    assert lines(f.title) == 1 and whole(f.title)
    one_line_top = f.view.geometry().top()
    assert one_line_top < two_lines_top  # the title row shrank with its lines
    f.resize(200, 320)
    qtbot.wait(60)
    assert lines(f.title) >= 2 and whole(f.title)
    f.set_title("short")
    qtbot.wait(60)
    assert lines(f.title) == 1 and shown(f.title) == "short"


def test_a_word_wider_than_the_frame_breaks_inside_rather_than_running_past_it(qtbot):
    word = "unbreakable_token_name_far_wider_than_the_map"
    f = _frame(qtbot, 120, title=word)
    t = f.title
    assert shown(t) == word and whole(t)
    assert t.itemRect().width() <= t.rect().width() + 1


def test_is_whole_knows_a_cut_title(qtbot):
    f = _frame(qtbot, 700)
    t = f.title
    assert t.is_whole() and t.shown_text() == LONG and t.lines() == 1
    t.item.setPlainText(LONG[:20] + "…")  # what eliding drew
    assert not t.is_whole()


def test_a_plot_title_wraps_and_its_row_grows(qtbot):
    w = pg.PlotWidget()
    qtbot.addWidget(w)
    item = w.getPlotItem()
    wrap_plot_title(item)
    assert isinstance(item.titleLabel, TitleLabel)
    w.resize(220, 260)
    w.show()
    item.setTitle(LONG, size="9pt")
    qtbot.wait(80)
    t = item.titleLabel
    assert shown(t) == LONG and whole(t) and lines(t) >= 2
    assert t.geometry().height() > 30  # pyqtgraph fixes the title row at 30 px: one line
    assert item.vb.sceneBoundingRect().top() >= t.sceneBoundingRect().bottom() - 1
    assert w.width() == 220
    item.setTitle(None)
    qtbot.wait(40)
    assert not t.isVisible()


# -- FitScroll and wrapped labels ------------------------------------------------------------------


class _Plot(QWidget):
    """Stands for a chart: it prefers much more height than it needs."""

    def sizeHint(self):  # noqa: N802 - Qt's name
        return QSize(200, 300)

    def minimumSizeHint(self):  # noqa: N802 - Qt's name
        return QSize(80, 100)


def _content(kind):
    w = QWidget()
    lay = kind(w)
    box = QGroupBox("about")
    QVBoxLayout(box)
    lab = QLabel(" ".join(["a long explanation"] * 30))
    lab.setWordWrap(True)
    box.layout().addWidget(lab)
    row = QWidget()
    rl = QHBoxLayout(row)
    side = QLabel(" ".join(["another wrapped note"] * 12))
    side.setWordWrap(True)
    rl.addWidget(side)
    rl.addWidget(_Plot())
    widgets = (box, _Plot(), row)
    for n, x in enumerate(widgets):
        if kind is QGridLayout:
            lay.addWidget(x, n, 0)
        else:
            lay.addWidget(x)
    return w, lab, side


@pytest.mark.parametrize("kind", [QVBoxLayout, QGridLayout])
def test_fit_scroll_gives_a_long_wrapped_label_all_its_lines(qtbot, kind):
    content, lab, side = _content(kind)
    area = FitScroll()
    qtbot.addWidget(area)
    area.setWidget(content)
    area.resize(380, 300)
    area.show()
    qtbot.wait(80)
    assert lab.height() >= lab.heightForWidth(lab.width()) - 1, (lab.height(), lab.heightForWidth(lab.width()))
    assert side.height() >= side.heightForWidth(side.width()) - 1
    assert shortfall(content) == 0
    assert area.verticalScrollBar().isVisible()  # it scrolls instead of cutting the label
    assert not area.horizontalScrollBar().isVisible()
    # taller than the sum of the minimums, yet well short of every chart's preferred height
    assert needed_height(content, content.width()) <= content.height()
    assert content.height() < content.layout().totalHeightForWidth(content.width()) - 150
    # wide enough, the same labels take fewer lines and nothing scrolls
    area.resize(1400, 900)
    qtbot.wait(80)
    assert not area.verticalScrollBar().isVisible()
    assert content.height() == area.viewport().height()
    assert lab.height() >= lab.heightForWidth(lab.width()) - 1


def test_fit_scroll_counts_a_wrapped_label_at_its_width(qtbot):
    lab = QLabel(" ".join(["word"] * 200))
    lab.setWordWrap(True)
    area = FitScroll()
    qtbot.addWidget(area)
    area.setWidget(lab)
    area.resize(300, 120)
    area.show()
    qtbot.wait(60)
    assert lab.minimumSizeHint().height() < lab.heightForWidth(lab.width())  # one line is what Qt asks
    assert lab.height() >= lab.heightForWidth(lab.width())
    assert area.verticalScrollBar().isVisible()


def test_the_image_panels_bar_chart_wraps_a_long_title_instead_of_widening(qtbot):
    import numpy as np

    from attnviz.ui.panels.image_panel import QueryBars

    bars = QueryBars()
    qtbot.addWidget(bars)
    bars.resize(240, 260)
    bars.show()
    title = "query 41 'expert actions5' · head 0 · its weights over the 44 keys of every segment"
    bars.set_row(np.array([0.2, 0.3, 0.5]), np.array([True, True, False]), ["a", "b", "c"], ["#ff0000"] * 3, title)
    qtbot.wait(80)
    t = bars.getPlotItem().titleLabel
    assert shown(t) == title and whole(t) and lines(t) >= 2
    assert bars.getPlotItem().sceneBoundingRect().width() <= 240 + 1  # the plot is not wider than its widget
    assert bars.minimumSizeHint().width() < 240
