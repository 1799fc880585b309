"""The main window's start-up order: it paints once before any hidden panel is built, docks shown at
start get their panels after the first computed result (or after a fallback delay without one),
docks behind tabs stay unbuilt, and ``window.panel(id)`` still builds any panel on demand."""

from __future__ import annotations

import pytest

from attnviz.ui import main_window

SHOWN_AT_START = ("pretrained", "diagnostics")  # raised first in their areas by the default layout
BEHIND_TABS = ("inspector", "mask_designer", "image")


def _painted(qtbot, w) -> list:
    emitted = []
    w.first_painted.connect(lambda: emitted.append(1))
    qtbot.waitUntil(lambda: bool(emitted), timeout=20000)
    return emitted


def test_shown_docks_are_built_after_the_first_result(make_window, qtbot, monkeypatch, respond):
    monkeypatch.setattr(main_window, "DOCKS_FALLBACK_MS", 600_000)
    w = make_window("vla-mask", compute=False, all_panels=True)
    _painted(qtbot, w)
    assert sorted(w.panels) == ["heatmap", "inputs", "model"]
    qtbot.wait(300)  # event-loop turns: still nothing computed, so still nothing built
    assert sorted(w.panels) == ["heatmap", "inputs", "model"]
    respond(w.ctx)
    qtbot.waitUntil(lambda: all(i in w.panels for i in SHOWN_AT_START), timeout=30000)
    assert not any(i in w.panels for i in BEHIND_TABS)


def test_without_a_result_shown_docks_are_built_after_the_fallback_delay(make_window, qtbot, monkeypatch):
    monkeypatch.setattr(main_window, "DOCKS_FALLBACK_MS", 0)
    w = make_window("vla-mask", compute=False, all_panels=True)
    _painted(qtbot, w)
    qtbot.waitUntil(lambda: all(i in w.panels for i in SHOWN_AT_START), timeout=30000)
    assert w.ctx.response is None
    assert not any(i in w.panels for i in BEHIND_TABS)


def test_a_panel_is_built_on_demand_before_the_docks_are_released(make_window, qtbot, monkeypatch):
    monkeypatch.setattr(main_window, "DOCKS_FALLBACK_MS", 600_000)
    w = make_window("vla-mask", compute=False, all_panels=True)
    _painted(qtbot, w)
    inspector = w.panel("inspector")
    assert inspector is not None and w.panels["inspector"] is inspector
    assert w.docks["inspector"].widget().widget() is inspector  # placed in its dock's scroll area
    assert "pretrained" not in w.panels


def test_first_painted_is_emitted_once(make_window, qtbot):
    w = make_window(compute=False)
    emitted = _painted(qtbot, w)
    w.hide()
    w.show()
    w.repaint()
    qtbot.wait(100)
    assert emitted == [1]


@pytest.mark.parametrize("panel_id", SHOWN_AT_START)
def test_a_queued_dock_builds_once_when_raised_and_released(make_window, qtbot, monkeypatch, panel_id):
    monkeypatch.setattr(main_window, "DOCKS_FALLBACK_MS", 600_000)
    w = make_window("vla-mask", compute=False, all_panels=True)
    _painted(qtbot, w)
    w.docks[panel_id].raise_()
    w.release_docks()
    qtbot.waitUntil(lambda: panel_id in w.panels, timeout=30000)
    first = w.panels[panel_id]
    w.release_docks()
    qtbot.wait(50)
    assert w.panels[panel_id] is first
