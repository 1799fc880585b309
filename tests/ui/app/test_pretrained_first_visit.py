"""The Pretrained workspace's first visit keeps the window answering: its panel's module (which brings in
attnviz.checkpoints) is imported on a worker thread while the event loop runs on, the core's plots are made
on turns of their own after it, and the panel built last takes them; asked for at once meanwhile, the panel
is still built at once."""

from __future__ import annotations

import threading

import pytest

pytest.importorskip("PySide6")

from PySide6.QtCore import QTimer  # noqa: E402

from attnviz.ui.panels import LazyFactory  # noqa: E402
from attnviz.ui.workspaces.background import BackgroundImport  # noqa: E402


def _held_import(monkeypatch):
    """LazyFactory.load recording the thread the Pretrained panel's module is imported on; off the GUI thread
    it waits for the returned event first (so a test can look at the window while the import runs)."""
    gate, threads = threading.Event(), []
    load = LazyFactory.load

    def recorded(self):
        if self.module == "model_view_panel":
            threads.append(threading.current_thread())
            if threading.current_thread() is not threading.main_thread():
                gate.wait(60)
        return load(self)

    monkeypatch.setattr(LazyFactory, "load", recorded)
    return gate, threads


def test_the_panels_module_is_imported_on_a_worker_while_the_window_keeps_turning(make_window, qtbot, monkeypatch):
    w = make_window("river-bank", all_panels=True)
    w.release_panels()  # wanted panels build at once from here on
    gate, threads = _held_import(monkeypatch)
    try:
        w.show_workspace("pretrained")
        qtbot.waitUntil(lambda: bool(threads), timeout=10000)
        assert threads[0] is not threading.main_thread()  # the import runs on a thread of its own
        ticks = []
        ticker = QTimer()
        ticker.timeout.connect(lambda: ticks.append(1))
        ticker.start(1)
        qtbot.waitUntil(lambda: len(ticks) >= 5, timeout=10000)  # the event loop turns while it is held
        ticker.stop()
        assert "pretrained" not in w.panels  # built once the import is done, not before
    finally:
        gate.set()
    qtbot.waitUntil(lambda: "pretrained" in w.panels, timeout=30000)
    panel = w.panels["pretrained"]
    assert w.area.page("pretrained").slots["pretrained"].widget() is panel
    # the GUI thread asks for the class only to build the panel, once the worker has imported its module
    assert threading.main_thread() not in threads[:1] and threads[1:] == [threading.main_thread()]


def test_the_cores_plots_are_made_on_turns_before_the_panel_and_are_its_own(make_window, qtbot, monkeypatch):
    import attnviz.ui.model_view.panel as panel_module

    w = make_window("river-bank", all_panels=True)
    w.release_panels()
    events = []
    prepare = panel_module.ModelViewPanel.prepare_steps

    def recorded_steps():
        steps = prepare()

        def run(step):
            step()
            events.append(("made", dict(panel_module._AHEAD)))

        return [lambda s=step: run(s) for step in steps]

    init = panel_module.ModelViewPanel.__init__

    def recorded_init(self, *args, **kwargs):
        events.append(("built", None))
        init(self, *args, **kwargs)

    monkeypatch.setattr(panel_module.ModelViewPanel, "prepare_steps", staticmethod(recorded_steps))
    monkeypatch.setattr(panel_module.ModelViewPanel, "__init__", recorded_init)
    w.show_workspace("pretrained")
    qtbot.waitUntil(lambda: "pretrained" in w.panels, timeout=30000)
    panel = w.panels["pretrained"]
    kinds = [kind for kind, _ in events]
    assert kinds == ["made"] * len(panel_module.AHEAD_STEPS) + ["built"]  # each step before the panel
    made = events[len(panel_module.AHEAD_STEPS) - 1][1]
    assert {"vit", "grid", "detail", "summary"} <= set(made)
    assert (panel.vit, panel.grid, panel.detail, panel.summary) == tuple(made[k] for k in
                                                                        ("vit", "grid", "detail", "summary"))
    assert all(panel.isAncestorOf(made[k]) for k in ("vit", "grid", "detail", "summary"))
    assert panel.tabs.indexOf(panel.vit) == 1 and panel.side_splitter.indexOf(panel.summary) == 1
    assert not panel_module._AHEAD  # every one taken


def test_asked_for_at_once_while_its_module_is_imported_the_panel_is_built_at_once(make_window, qtbot,
                                                                                  monkeypatch):
    w = make_window("river-bank", all_panels=True)
    w.release_panels()
    gate, threads = _held_import(monkeypatch)
    w.show_workspace("pretrained")
    qtbot.waitUntil(lambda: bool(threads), timeout=10000)
    gate.set()  # the worker's import goes on; the GUI thread asks for the panel now
    panel = w.panel("pretrained")
    assert w.findChild(BackgroundImport) is not None  # built before the worker's import was seen to end
    assert panel is not None and hasattr(panel, "load_model")
    qtbot.waitUntil(lambda: w.findChild(BackgroundImport) is None, timeout=30000)  # the worker's import is done
    assert w.panels["pretrained"] is panel
    assert w.area.page("pretrained").slots["pretrained"].widget() is panel
