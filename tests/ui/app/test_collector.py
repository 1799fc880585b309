"""The application freezes the window's long-lived objects out of the cyclic collector's full passes
(attnviz.ui.collector): when the window has first painted and after each panel is built; tests keep the
collector as it is unless they turn it on."""

from __future__ import annotations

import gc

from attnviz.ui import collector


def test_freezing_is_off_until_enabled_then_follows_every_panel_built(make_window, monkeypatch):
    w = make_window("river-bank", all_panels=True)
    monkeypatch.setitem(collector._state, "on", False)
    gc.unfreeze()
    try:
        w.panel("inspector")  # built while off: nothing frozen
        assert gc.get_freeze_count() == 0 and not collector.enabled()
        collector.enable()
        frozen = gc.get_freeze_count()
        assert frozen > 1000  # the window, its panels and everything else alive now
        assert w.panel("mask_designer") is not None
        assert gc.get_freeze_count() > frozen  # the new panel's objects joined them
    finally:
        gc.unfreeze()



def test_young_cyclic_garbage_is_collected_before_a_freeze_not_frozen_for_ever(monkeypatch):
    """A worker's cycles that no pass has reached yet would, frozen, never be freed."""
    freed = []

    class Cycle:
        def __init__(self):
            self.me = self

        def __del__(self):
            freed.append(1)

    monkeypatch.setitem(collector._state, "on", False)
    gc.unfreeze()
    was = gc.isenabled()
    gc.disable()  # as the application runs: collections only when asked for
    try:
        for _ in range(20):
            Cycle()
        assert freed == []  # unreachable, not yet freed
        collector.enable()
        assert len(freed) == 20
    finally:
        gc.unfreeze()
        if was:
            gc.enable()
