"""At 1024 x 700, in both themes and on a short and a long input, every chart title of the Q·K·V workspace
and of the Normalisation, Softmax Jacobian, Positional encodings and Permutation tabs shows whole (they were
cut to "W^Q, he…", "weights under Scaled (head…", "old …", "PE[pos, dim] …"), every legend is a whole
line above its plot instead of a box drawn over the data or cut at the plot's right edge, and the (query,
key) breakdown's tables show every row (the last one once hid behind the sideways scroll bar)."""

from __future__ import annotations

import pyqtgraph as pg
import pytest
from PySide6.QtWidgets import QApplication, QLabel, QTableWidget

from attnviz.ui.diagnostics.jacobian import JacobianTab
from attnviz.ui.diagnostics.normalisation import NormalisationTab
from attnviz.ui.diagnostics.permutation import PermutationTab
from attnviz.ui.diagnostics.positional import PositionalTab
from attnviz.ui.diagnostics.qk_scatter import QKScatter
from attnviz.ui.diagnostics.titled_view import TitledView, label_is_whole
from attnviz.ui.theme import apply_theme
from attnviz.ui.widgets.matrix_frame import MatrixFrame

from test_window_fits import overlaps

SMALL = (1024, 700)


def cut_texts(root) -> list[str]:
    """Every chart title or legend under ``root`` (shown) that does not show its whole text."""
    out = []
    for tv in root.findChildren(TitledView):
        if not tv.isVisible():
            continue
        for lab in (tv.title, tv.legend):
            if not label_is_whole(lab):
                out.append(f"{lab.objectName()} {lab.text()[:50]!r}: {lab.width()} x {lab.height()} px")
    for frame in root.findChildren(MatrixFrame):  # a title still inside a map: shown as it is set
        t = frame.title
        if frame.isVisible() and str(t.text).strip() and t.item.toPlainText() != str(t.text):
            out.append(f"map title {str(t.text)!r} shown as {t.item.toPlainText()!r}")
    for view in root.findChildren(pg.PlotWidget):
        if not view.isVisible():
            continue
        item = view.getPlotItem()
        t = item.titleLabel
        if t.isVisible() and str(t.text).strip() and (t.item.toPlainText() != str(t.text)
                                                       or t.item.boundingRect().width() > t.rect().width() + 1):
            out.append(f"plot title {str(t.text)!r} shown as {t.item.toPlainText()!r}")
        scatter = any(isinstance(p, QKScatter) for p in _ancestors(view))
        if item.legend is not None and item.legend.isVisible() and item.legend.items and not scatter:
            out.append(f"a legend drawn inside the plot: {[lab.text for _s, lab in item.legend.items]}")
    return out


def hidden_rows(root) -> list[str]:
    """Tables under ``root`` that show fewer rows than they hold (at most 8 rows are expected whole)."""
    out = []
    for t in root.findChildren(QTableWidget):
        if not t.isVisible() or t.rowCount() == 0 or t.rowCount() > 8:
            continue
        need = sum(t.rowHeight(r) for r in range(t.rowCount()))
        if t.viewport().height() < need:
            out.append(f"{t.rowCount()} rows of {need} px in {t.viewport().height()} px")
    return out


def _ancestors(w):
    while w is not None:
        yield w
        w = w.parentWidget()


def settle(qtbot, tab=None, timeout=60000):
    """Wait until ``tab``'s studies and numbers are drawn, and the layout has settled."""
    def idle():
        job = getattr(tab, "job", None)
        return not tab.computing() and (job is None or not job.busy)

    qtbot.wait(150)
    if tab is not None:
        qtbot.waitUntil(idle, timeout=timeout)
    qtbot.wait(250)


@pytest.fixture(params=["light", "dark"])
def theme(request):
    apply_theme(QApplication.instance(), request.param)
    yield request.param
    apply_theme(QApplication.instance(), "light")


@pytest.mark.slow
@pytest.mark.parametrize("demo", ["river-bank", "long-context"])
def test_titles_and_legends_whole_at_1024_by_700(make_window, qtbot, demo, theme):
    w = make_window(demo, all_panels=True)
    w.resize(*SMALL)
    problems = []
    w.show_workspace("qkv")
    insp = w.panel("inspector")
    for i in range(insp.matrices.count()):
        insp.matrices.setCurrentIndex(i)
        settle(qtbot)
        here = f"qkv/{insp.matrices.tabText(i)}"
        problems += [f"{here}: {p}" for p in cut_texts(insp) + hidden_rows(insp.breakdown) + overlaps(insp)]
    w.show_workspace("diagnostics")
    panel = w.panel("diagnostics")
    for cls in (NormalisationTab, JacobianTab, PositionalTab, PermutationTab):
        tab = panel.show_tab(cls)
        settle(qtbot, tab)
        pages = tab.pages if cls is PositionalTab else None
        for n in range(pages.count() if pages is not None else 1):
            if pages is not None:
                pages.setCurrentIndex(n)
                settle(qtbot)
            problems += [f"{cls.title} {n}: {p}" for p in cut_texts(tab) + overlaps(tab)]
    assert (w.width(), w.height()) == SMALL and w.minimumSizeHint().width() <= SMALL[0]
    assert problems == []


def test_label_is_whole_knows_a_cut_label(qtbot):
    """The check itself: a wrapped label given one line for two, or a word wider than it, is not whole."""
    lab = QLabel("a title long enough to need two lines at this width")
    lab.setWordWrap(True)
    qtbot.addWidget(lab)
    lab.show()
    lab.setFixedSize(120, lab.fontMetrics().height() + 2)
    assert not label_is_whole(lab)
    lab.setFixedSize(120, lab.heightForWidth(120))
    assert label_is_whole(lab)
    lab.setText("unbreakable_word_far_wider_than_the_label")
    assert not label_is_whole(lab)


def test_a_titled_view_legend_sits_above_its_plot(qtbot):
    from attnviz.ui.diagnostics.common import make_plot

    plot = make_plot("a title", "x", "y")
    qtbot.addWidget(plot)
    plot.resize(260, 240)
    plot.show()
    plot.plot([0, 1, 2], [3, 1, 2], pen="r", name="line")
    plot.set_legend([("#ff0000", "line"), ("#0000ff", "other line", "dash")])
    qtbot.wait(50)
    assert plot.getPlotItem().legend is None  # nothing of it drawn over the data
    assert plot.legend_names() == ["line", "other line"]
    assert plot.legend.geometry().bottom() < plot.view.geometry().top()
    assert plot.title.geometry().bottom() < plot.legend.geometry().top()
    assert label_is_whole(plot.title) and label_is_whole(plot.legend)
