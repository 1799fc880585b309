"""The main window's start-up order: it paints once before any panel outside the sidebar and the
attention workspace is built, a workspace shown before the first result gets its panels after that
result (or after a fallback delay without one), workspaces never shown stay unbuilt, and
``window.panel(id)`` still builds any panel on demand."""

from __future__ import annotations

import pytest

from attnviz.ui import main_window

LATER = ("inspector", "mask_designer", "image", "diagnostics", "pretrained")


def _painted(qtbot, w) -> list:
    emitted = []
    w.first_painted.connect(lambda: emitted.append(1))
    qtbot.waitUntil(lambda: bool(emitted), timeout=20000)
    return emitted


def test_a_workspace_shown_before_the_first_result_is_built_after_it(make_window, qtbot, monkeypatch, respond):
    monkeypatch.setattr(main_window, "PANELS_FALLBACK_MS", 600_000)
    w = make_window("vla-mask", compute=False, all_panels=True)
    _painted(qtbot, w)
    assert sorted(w.panels) == ["heatmap", "inputs", "model"] and w.workspace == "attention"
    w.show_workspace("diagnostics")
    qtbot.wait(300)  # event-loop turns: still nothing computed, so still nothing built
    assert sorted(w.panels) == ["heatmap", "inputs", "model"]
    respond(w.ctx)
    qtbot.waitUntil(lambda: "diagnostics" in w.panels, timeout=30000)
    assert not any(i in w.panels for i in LATER if i != "diagnostics")


def test_without_a_result_the_shown_workspace_is_built_after_the_fallback_delay(make_window, qtbot, monkeypatch):
    monkeypatch.setattr(main_window, "PANELS_FALLBACK_MS", 0)
    w = make_window("vla-mask", compute=False, all_panels=True)
    w.show_workspace("qkv")
    _painted(qtbot, w)
    qtbot.waitUntil(lambda: "inspector" in w.panels, timeout=30000)
    assert w.ctx.response is None
    assert not any(i in w.panels for i in LATER if i != "inspector")


def test_a_panel_is_built_on_demand_before_the_panels_are_released(make_window, qtbot, monkeypatch):
    monkeypatch.setattr(main_window, "PANELS_FALLBACK_MS", 600_000)
    w = make_window("vla-mask", compute=False, all_panels=True)
    _painted(qtbot, w)
    inspector = w.panel("inspector")
    assert inspector is not None and w.panels["inspector"] is inspector
    assert w.area.page("qkv").slots["inspector"].widget() is inspector  # placed in its workspace
    assert "pretrained" not in w.panels


def test_first_painted_is_emitted_once(make_window, qtbot):
    w = make_window(compute=False)
    emitted = _painted(qtbot, w)
    w.hide()
    w.show()
    w.repaint()
    qtbot.wait(100)
    assert emitted == [1]


@pytest.mark.parametrize("name, panel_id", [("diagnostics", "diagnostics"), ("pretrained", "pretrained")])
def test_a_queued_panel_builds_once_when_shown_and_released(make_window, qtbot, monkeypatch, name, panel_id):
    monkeypatch.setattr(main_window, "PANELS_FALLBACK_MS", 600_000)
    w = make_window("vla-mask", compute=False, all_panels=True)
    _painted(qtbot, w)
    w.show_workspace(name)
    w.release_panels()
    qtbot.waitUntil(lambda: panel_id in w.panels, timeout=30000)
    first = w.panels[panel_id]
    w.release_panels()
    w.show_workspace("attention")
    w.show_workspace(name)
    qtbot.wait(50)
    assert w.panels[panel_id] is first
