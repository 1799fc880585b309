"""A workspace's panel that is not built yet is imported on one turn of the event loop and built on a
later one: its module's import (the Pretrained panel's checkpoints) cost as much as building it, and
both in one turn held the window up twice as long on the workspace's first visit."""

from __future__ import annotations

import pytest

pytest.importorskip("PySide6")

from PySide6.QtCore import QTimer  # noqa: E402

from attnviz.ui.panels import LazyFactory  # noqa: E402


def test_a_panels_module_is_imported_a_turn_before_the_panel_is_built(make_window, qtbot, monkeypatch):
    w = make_window("river-bank", all_panels=True)
    w.release_panels()  # wanted panels build at once from here on
    turns = [0]
    ticker = QTimer()
    ticker.timeout.connect(lambda: turns.__setitem__(0, turns[0] + 1))
    ticker.start(0)  # counts turns of the event loop
    seen = []
    load, call = LazyFactory.load, LazyFactory.__call__

    def recorded_load(self):
        seen.append(("import", self.module, turns[0]))
        return load(self)

    def recorded_call(self, ctx):
        seen.append(("build", self.module, turns[0]))
        return call(self, ctx)

    monkeypatch.setattr(LazyFactory, "load", recorded_load)
    monkeypatch.setattr(LazyFactory, "__call__", recorded_call)
    try:
        assert "inspector" not in w.panels
        w.show_workspace("qkv")
        qtbot.waitUntil(lambda: "inspector" in w.panels, timeout=10000)
    finally:
        ticker.stop()
    mine = [(what, turn) for what, module, turn in seen if module == "inspector_panel"]
    built = [turn for what, turn in mine if what == "build"]
    assert mine[0][0] == "import" and len(built) == 1  # (building asks for the class again: imported by then)
    assert built[0] > mine[0][1]  # built on a later turn than its module's import
