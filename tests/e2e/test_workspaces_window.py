"""Every workspace of the real application in a real X window (Xvfb) at 1280 x 800 and at 1024 x 700, in
the light and the dark theme, on the vla-mask demo: the window keeps that size, no scroll area in view shows a horizontal scroll bar, nothing is cut off
(no visible widget reaches past its visible parent or the window, no plot's content is laid out wider
or taller than its view, which pyqtgraph does when a view is narrower than its axes, title and colour
bar need: the colour bar is then cut at the edge), and the mask painter's cells are square and at least
10 px; the same for every diagnostic tab, every tab of the Q/K/V matrices and of the pretrained panel.
A screenshot of each workspace is kept in the test artifacts folder (conftest.ARTIFACTS). Data tables (item views) are left out of the
scroll bar check: a row of 64 dimensions scrolls sideways by design; the content of a scroll area that
scrolls is left out of the cut-off check (what is past the edge is scrolled to)."""

from __future__ import annotations

import pytest

pytestmark = [pytest.mark.xvfb, pytest.mark.slow]

VISIT = """
import os, time
from attnviz.ui.theme import current_theme
SIZE = f"{window.width()}x{window.height()}"
THEME = current_theme().name
from PySide6.QtWidgets import QAbstractItemView, QAbstractScrollArea, QGraphicsView, QTabWidget
from attnviz.ui.latest_job import LatestJob
from attnviz.ui.workspaces import workspace_names

def settle(timeout=120.0):
    end = time.monotonic() + timeout
    quiet = None
    while time.monotonic() < end:
        wait(50)
        r = ctx.response
        busy = (r is None or r.request_id != ctx.compute.latest_id or ctx.compute.busy
                or any(j.busy for j in window.findChildren(LatestJob)))
        if busy:
            quiet = None
        elif quiet is None:
            quiet = time.monotonic()
        elif time.monotonic() - quiet > 0.6:
            return
    raise TimeoutError("the views did not settle")

def scroll_bars():
    out = []
    for area in window.findChildren(QAbstractScrollArea):
        if isinstance(area, (QAbstractItemView, QGraphicsView)) or not area.isVisible():
            continue
        if area.visibleRegion().isEmpty():
            continue
        if area.horizontalScrollBar().isVisible():
            out.append(f"{type(area).__name__} {area.objectName()} in {type(area.parent()).__name__}")
    return out

def where(w):
    parts = []
    while w is not None and w is not window:
        parts.append(f"{type(w).__name__}({w.objectName()})")
        w = w.parentWidget()
    return "/".join(reversed(parts[:4]))

def scrolls(area):
    return area.horizontalScrollBar().isVisible() or area.verticalScrollBar().isVisible()

def scrolled(w):
    # inside the content of a scroll area that scrolls, however deep (it may reach past the window)
    while w is not None and w is not window:
        p = w.parentWidget()
        if isinstance(p, QAbstractScrollArea) and w is p.viewport() and scrolls(p):
            return True
        w = p
    return False

def cut_off():
    # visible widgets reaching past their visible parent or the window, and plots whose content is
    # laid out larger than their view (pyqtgraph's layouts then run past the widget's edge)
    import pyqtgraph as pg
    from PySide6.QtCore import QPoint, QRect
    from PySide6.QtWidgets import QWidget
    out = []
    win = window.rect().adjusted(-1, -1, 1, 1)
    for w in window.findChildren(QWidget):
        p = w.parentWidget()
        if not w.isVisible() or w.isWindow() or p is None or not p.isVisible() or w.width() * w.height() == 0:
            continue  # an empty widget (a table's hidden corner button) shows nothing to cut
        area = p.parentWidget()
        if isinstance(area, QAbstractScrollArea) and p is area.viewport() and scrolls(area):
            continue  # a scroll area's content scrolls
        if not p.rect().adjusted(-1, -1, 1, 1).contains(w.geometry()):
            out.append(f"{where(w)} {w.geometry().getRect()} past its parent {p.rect().getRect()}")
        elif not scrolled(w) and not win.contains(QRect(w.mapTo(window, QPoint(0, 0)), w.rect().size())):
            out.append(f"{where(w)} past the window")
    for v in window.findChildren(pg.GraphicsView):
        content = v.centralWidget
        if not v.isVisible() or content is None:
            continue
        g, vp = content.geometry(), v.viewport().rect()
        if g.width() > vp.width() + 1 or g.height() > vp.height() + 1:
            out.append(f"plot {where(v)}: content {g.width():.0f}x{g.height():.0f} in a {vp.width()}x{vp.height()} view")
    return out

settle()
facts = {"size": [window.width(), window.height()], "workspaces": {}}
for name in workspace_names():
    window.show_workspace(name)
    settle()
    for pid in window.area.page(name).slots:
        window.panel(pid)
    settle()
    window.grab().save(os.path.join(os.environ["ARTIFACTS"], f"e2e_workspace_{name}_{SIZE}_{THEME}.png"))
    entry = {"size": [window.width(), window.height()], "scroll_bars": scroll_bars(), "cut_off": cut_off(),
             "shown": window.workspace}
    if name == "mask":
        designer = window.panel("mask_designer")
        designer.flush()
        wait(200)
        frame = designer.canvas.frame
        a, b = frame.cell_to_widget(-0.5, -0.5), frame.cell_to_widget(0.5, 0.5)  # corners of cell (0, 0)
        c = frame.cell_to_widget(ctx.response.Tq - 0.5, ctx.response.Tk - 0.5)  # bottom right of the last cell
        vp = frame.viewport().rect()
        n_rows, n_cols = ctx.response.Tq, ctx.response.Tk  # the cell size over the whole mask (widget pixels are whole)
        entry["cell"] = [(c.x() - a.x()) / n_cols, (c.y() - a.y()) / n_rows]
        entry["corners"] = [a.x(), a.y(), c.x(), c.y(), vp.width(), vp.height()]
        entry["whole_mask_in_view"] = a.x() >= -1 and a.y() >= -1 and c.x() <= vp.width() + 1 and c.y() <= vp.height() + 1
    facts["workspaces"][name] = entry
    if name == "pretrained" and window.panel("pretrained").outcome is not None:
        # every head summary: their titles differ in length ("attention to previous token · rows layers,
        # columns heads" once pushed the summary grid's last columns off the right edge)
        summary = window.panel("pretrained").summary
        for i in range(summary.metric_combo.count()):
            summary.set_metric(summary.metric_combo.itemData(i))
            settle()
            label = f"pretrained:summary {summary.metric_combo.itemData(i)}"
            facts["workspaces"][label] = {"size": [window.width(), window.height()], "scroll_bars": scroll_bars(),
                                          "cut_off": cut_off(), "shown": label}
        facts["summaries"] = summary.metric_combo.count()
    # the pages inside a workspace: every diagnostic tab, every tab of the Q/K/V matrices
    tabs = {"diagnostics": lambda: window.panel("diagnostics").tabs, "qkv": lambda: window.panel("inspector").matrices,
            "pretrained": lambda: window.panel("pretrained").tabs}
    if name in tabs:
        widget = tabs[name]()
        for i in range(widget.count()):
            if not widget.isTabEnabled(i):
                continue  # the pretrained panel's Image tab: a ViT model only
            widget.setCurrentIndex(i)
            settle()
            label = f"{name}:{widget.tabText(i)}"
            window.grab().save(os.path.join(os.environ["ARTIFACTS"], f"e2e_workspace_{name}_{i}_{SIZE}_{THEME}.png"))
            facts["workspaces"][label] = {"size": [window.width(), window.height()], "scroll_bars": scroll_bars(),
                                          "cut_off": cut_off(), "shown": label}
            for inner in [t for t in widget.currentWidget().findChildren(QTabWidget) if t.isVisible()]:
                for j in range(1, inner.count()):  # the pages behind the first (Positional encodings: RoPE)
                    inner.setCurrentIndex(j)
                    settle()
                    sub = f"{label}/{inner.tabText(j)}"
                    facts["workspaces"][sub] = {"size": [window.width(), window.height()],
                                                "scroll_bars": scroll_bars(), "cut_off": cut_off(), "shown": sub}
                inner.setCurrentIndex(0)
        widget.setCurrentIndex(0)
report(facts)
quit(0)
"""


def _visit(run_app, demo: str, size=(1280, 800), theme: str = "light") -> dict:
    w, h = size
    proc, rep = run_app(["--demo", demo, "--size", f"{w}x{h}", "--theme", theme], VISIT, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert rep is not None, proc.stderr[-3000:]
    assert rep["size"] == [w, h]
    names = [n for n in rep["workspaces"] if ":" not in n]
    assert names == ["attention", "qkv", "image", "diagnostics", "mask", "pretrained"]
    assert len(rep["workspaces"]) >= len(names) + 7 + 3 + 2  # the diagnostic, Q/K/V and pretrained tabs
    for name, entry in rep["workspaces"].items():
        assert entry["shown"] == name
        assert entry["size"] == [w, h], (name, entry["size"])  # no workspace forces the window larger
        assert entry["scroll_bars"] == [], (name, entry["scroll_bars"])
        assert entry["cut_off"] == [], (name, entry["cut_off"])
    from attnviz.checkpoints import ready_models
    if ready_models():  # a ready model loads by itself: every head summary was looked at
        assert rep.get("summaries", 0) >= 4, rep.get("summaries")
    cw, ch = rep["workspaces"]["mask"]["cell"]
    assert abs(cw - ch) < 0.1, (cw, ch)
    assert rep["workspaces"]["mask"]["whole_mask_in_view"], rep["workspaces"]["mask"]["corners"]
    return rep


def test_every_workspace_fits_1280_by_800_without_sideways_scrolling(run_app):
    rep = _visit(run_app, "vla-mask")
    w, _h = rep["workspaces"]["mask"]["cell"]
    assert w >= 10, w  # 44 x 44 cells, each at least 10 px


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_every_workspace_and_tab_fits_1024_by_700(run_app, theme):
    """The smallest window attnviz is made for: every workspace, every Diagnostics, Q/K/V and pretrained
    tab, in both themes (a tab that needed more once raised the window's minimum to 1191 x 762)."""
    rep = _visit(run_app, "vla-mask", (1024, 700), theme)
    w, _h = rep["workspaces"]["mask"]["cell"]
    assert w >= 5, w  # 44 x 44 cells in what the side column leaves


@pytest.mark.parametrize("demo", ["vit-image", "long-context"])
def test_every_workspace_fits_1024_by_700_with_many_tokens(run_app, demo):
    """A ViT's 197 tokens and a 2,900-token text: one-line result texts (the PCA tab's explanation, the
    permutation study's timing) once widened the window to 1288 and 1349 px."""
    _visit(run_app, demo, (1024, 700))
