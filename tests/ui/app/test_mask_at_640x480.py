"""The mask workspace at 640 x 480, the smallest window: the designer's two columns do not fit the room
beside the sidebar, so the side column goes under the cells; no control is cut at the right, nothing
scrolls sideways, and a wider window brings the two columns back with their shares."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from PySide6.QtCore import QPoint, Qt
from PySide6.QtWidgets import QAbstractButton

from attnviz.ui.panels.mask_designer_panel import CELLS_SHARE
from attnviz.ui.widgets.fit_scroll import holder_of

ART = Path(os.environ.get("ATTNVIZ_TEST_ARTIFACTS")
           or Path(os.environ.get("TMPDIR", "/tmp")) / "attnviz-test-artifacts")


def _settle(qtbot, designer):
    for _ in range(3):
        qtbot.wait(80)
        designer.flush()


def _cut_at_the_right(designer) -> list[str]:
    """Visible buttons of the designer (and its presets-and-blocks area, which scrolls sideways by itself
    when its block table is wide) that reach past the right edge of the designer's scroll area's viewport."""
    viewport = holder_of(designer).viewport()
    right = viewport.width()
    inner = designer.controls
    out = []
    for b in [inner, *designer.findChildren(QAbstractButton)]:
        if b.isVisible() and b.window() is designer.window() and (b is inner or not inner.isAncestorOf(b)):
            x = b.mapTo(viewport, QPoint(0, 0)).x()
            if x + b.width() > right + 1:
                out.append(f"{b.text() or type(b).__name__}: {x}+{b.width()} > {right}")
    return out


@pytest.mark.slow
def test_the_mask_workspace_fits_640_by_480_in_one_column(make_window, qtbot):
    w = make_window("vla-mask", all_panels=True)
    w.resize(640, 480)
    w.show_workspace("mask")
    designer = w.panel("mask_designer")
    qtbot.waitUntil(designer.isVisible, timeout=5000)
    _settle(qtbot, designer)
    holder = holder_of(designer)
    ART.mkdir(parents=True, exist_ok=True)
    w.grab().save(str(ART / "mask_640x480.png"))
    designer.grab().save(str(ART / "mask_640x480_panel.png"))
    assert (w.width(), w.height()) == (640, 480)
    assert designer.narrow_layout.narrow
    assert designer.splitter.orientation() == Qt.Orientation.Vertical
    assert not holder.horizontalScrollBar().isVisible()  # nothing to scroll sideways to
    assert _cut_at_the_right(designer) == []
    left, side = designer.splitter.widget(0), designer.splitter.widget(1)
    assert side.geometry().top() >= left.geometry().bottom()  # the side column under the cells, reached by scrolling
    assert left.height() >= holder.viewport().height() - 12  # the cells keep the first screen
    assert designer.canvas.height() >= 200  # about as tall as it is wide (142 px in two columns)
    from test_window_fits import overlaps

    assert overlaps(designer) == []
    calls = []
    watcher = designer.narrow_layout
    update = watcher.update
    watcher.update = lambda: (calls.append(1), update())
    qtbot.wait(500)
    watcher.update = update
    assert len(calls) <= 2  # settled: its own minimum does not lay it out again and again

    w.resize(1280, 800)
    _settle(qtbot, designer)
    assert not designer.narrow_layout.narrow
    assert designer.splitter.orientation() == Qt.Orientation.Horizontal
    assert designer.narrow_layout.left.minimumHeight() == 0
    assert abs(designer.splitter.shares()[0] - CELLS_SHARE) < 0.02
    assert not holder.horizontalScrollBar().isVisible() and _cut_at_the_right(designer) == []
