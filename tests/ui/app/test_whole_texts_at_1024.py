"""At 1024 x 700, in both themes, every workspace and every inner tab (Q·K·V's, the Diagnostics tabs and the
positional encodings' pages, the Pretrained tabs, the Mask's) shows every title, tab text and label whole:
a map's title wraps instead of being cut to "layer 0 · he…", a plot's title likewise, a wrapped label gets
the lines it needs, a one-line label is as wide as its text (the Corpus tab's file line was cut to "No",
the sidebar's "2,900 tokens · 13,772 characters · tokenizer: …" and a checkpoint's description at the
panel's edge), and no tab text is shortened (a tab bar with more tabs than room scrolls them)."""

from __future__ import annotations

import pyqtgraph as pg
import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication, QLabel, QTabBar, QTabWidget

from attnviz.ui.theme import apply_theme
from attnviz.ui.widgets.matrix_frame import TitleLabel
from attnviz.ui.workspaces import workspace_names
from attnviz.ui.workspaces.tabs import _tab_widgets

from test_chart_titles_whole import cut_texts

SMALL = (1024, 700)


def _drawn_whole(t) -> bool:
    """Every character of a title drawn, inside its label's rectangle."""
    if not str(t.text).strip():
        return True
    drawn, rect = t.itemRect(), t.rect()
    return (t.item.toPlainText() == str(t.text) and drawn.width() <= rect.width() + 1
            and drawn.height() <= rect.height() + 1)


def cut_titles(root) -> list[str]:
    """Map and plot titles under ``root`` not drawn whole inside their label."""
    out = []
    for view in root.findChildren(pg.GraphicsView):
        if not view.isVisible():
            continue
        for item in view.scene().items():
            if isinstance(item, TitleLabel) and item.isVisible() and item.rect().width() >= 1 \
                    and not _drawn_whole(item):  # (a frame not laid out yet has no width to show it in)
                out.append(f"title {str(item.text)!r} drawn as {item.item.toPlainText()!r} "
                           f"({item.itemRect().width():.0f} x {item.itemRect().height():.0f} px in "
                           f"{item.rect().width():.0f} x {item.rect().height():.0f})")
            elif isinstance(item, pg.PlotItem) and item.titleLabel.isVisible():
                t = item.titleLabel
                if str(t.text).strip() and t.item.boundingRect().width() > t.rect().width() + 1:
                    out.append(f"plot title {str(t.text)!r} wider than its plot")
    return out


def cut_labels(root) -> list[str]:
    """Shown text labels under ``root`` narrower than their one line, or shorter than their wrapped lines."""
    out = []
    for lab in root.findChildren(QLabel):
        if not lab.isVisible() or not lab.text().strip() or lab.pixmap() is not None and not lab.pixmap().isNull():
            continue
        if lab.objectName() in ("chart_title", "chart_legend"):
            continue  # checked by cut_texts
        if lab.wordWrap():
            need = lab.heightForWidth(lab.width())
            if need > lab.height() + 2:
                out.append(f"label {lab.text()[:50]!r}: {lab.height()} px for {need} px of lines")
        elif lab.sizeHint().width() > lab.width() + 1:
            out.append(f"label {lab.text()[:50]!r}: {lab.width()} px for {lab.sizeHint().width()} px of text")
    return out


def cut_tabs(root) -> list[str]:
    """Tab bars under ``root`` that shorten a tab's text, or hide the current tab."""
    out = []
    for bar in root.findChildren(QTabBar):
        if not bar.isVisible():
            continue
        if bar.elideMode() != Qt.TextElideMode.ElideNone:
            out.append(f"a tab bar eliding its texts ({bar.elideMode()})")
        fm = bar.fontMetrics()
        for i in range(bar.count()):
            if not bar.isTabVisible(i):
                continue
            text = bar.tabText(i).replace("&&", "\0").replace("&", "").replace("\0", "&")
            if bar.tabRect(i).width() < fm.horizontalAdvance(text) + 8:
                out.append(f"tab {text!r}: {bar.tabRect(i).width()} px for its text")
        cur = bar.tabRect(bar.currentIndex())
        if bar.currentIndex() >= 0 and (cur.left() < 0 or cur.right() > bar.width()):
            out.append(f"the current tab {bar.tabText(bar.currentIndex())!r} outside its bar")
    return out


def problems(w) -> list[str]:
    return cut_titles(w) + cut_texts(w) + cut_labels(w) + cut_tabs(w)


def settled_problems(qtbot, w, timeout=4000) -> list[str]:
    """What is still cut once the view has had ``timeout`` ms to compute and lay itself out."""
    try:
        qtbot.waitUntil(lambda: problems(w) == [], timeout=timeout)
    except Exception:  # noqa: BLE001 - pytest-qt's TimeoutError: what stays cut is the answer
        pass
    return problems(w)


@pytest.fixture
def theme(request):
    apply_theme(QApplication.instance(), request.param)
    yield request.param
    apply_theme(QApplication.instance(), "light")


def _shown_holders(tabs: QTabWidget, panel) -> None:
    holder = tabs.parentWidget()
    while holder is not None and holder is not panel.parentWidget():
        if isinstance(holder, QTabWidget):
            for j in range(holder.count()):
                if holder.widget(j).isAncestorOf(tabs):
                    holder.setCurrentIndex(j)
        holder = holder.parentWidget()


@pytest.mark.slow
@pytest.mark.parametrize("demo,theme", [("river-bank", "light"), ("river-bank", "dark"),
                                        ("long-context", "dark"), ("vit-image", "light")], indirect=["theme"])
def test_every_title_tab_and_label_is_whole_at_1024_by_700(make_window, qtbot, demo, theme):
    w = make_window(demo, all_panels=True)
    w.resize(*SMALL)
    qtbot.wait(100)
    found, visited = [], []
    for name in workspace_names():
        w.show_workspace(name)
        panels = [w.panel(pid) for pid in w.area.page(name).slots]
        if name == "qkv":  # its maps drawn (on a later turn after the first show) before its tabs are walked
            maps = w.panel("inspector").q_map.frame
            qtbot.waitUntil(lambda: maps.n_rows > 0, timeout=30000)
        found += [f"{name}: {p}" for p in settled_problems(qtbot, w)]
        visited.append(name)
        for panel in panels:
            for tabs in _tab_widgets(panel):
                for i in range(tabs.count()):
                    if not tabs.isTabEnabled(i) or not tabs.isTabVisible(i):
                        continue
                    _shown_holders(tabs, panel)
                    tabs.setCurrentIndex(i)
                    here = f"{name}/{tabs.tabText(i)}"
                    visited.append(here)
                    found += [f"{here}: {p}" for p in settled_problems(qtbot, w)]
    assert (w.width(), w.height()) == SMALL
    assert {"qkv/Q-K PCA", "diagnostics/Score rules", "diagnostics/RoPE", "pretrained/Corpus",
            "mask/Block rules"} <= set(visited)
    assert sorted(set(found)) == []


def test_the_checks_know_a_cut_label_and_an_eliding_tab_bar(qtbot):
    """The checks themselves: a one-line label narrower than its text, a wrapped one given one line
    for several, and a tab bar that elides, are each reported."""
    from PySide6.QtWidgets import QVBoxLayout, QWidget

    root = QWidget()
    qtbot.addWidget(root)
    lay = QVBoxLayout(root)
    one = QLabel("No corpus statistics open.")
    wrapped = QLabel(" ".join(["a wrapped label"] * 20))
    wrapped.setWordWrap(True)
    tabs = QTabWidget()
    for title in ("Normalisation", "Softmax Jacobian", "Positional encodings", "Permutation"):
        tabs.addTab(QWidget(), title)
    tabs.setElideMode(Qt.TextElideMode.ElideRight)
    for x in (one, wrapped, tabs):
        lay.addWidget(x)
    root.show()
    one.setFixedWidth(30)
    wrapped.setFixedSize(200, wrapped.fontMetrics().height() + 2)
    tabs.setFixedWidth(200)
    qtbot.wait(50)
    labels, bars = cut_labels(root), cut_tabs(root)
    assert any("No corpus" in p for p in labels) and any("a wrapped label" in p for p in labels)
    assert any("eliding" in p for p in bars) and any(p.startswith("tab ") for p in bars)
