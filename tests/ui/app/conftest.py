"""Fixtures of the application tests: a real MainWindow over a real session, with its settings,
autosave folder and dialogs kept inside the test's tmp_path."""

from __future__ import annotations

import pytest

pytest.importorskip("PySide6")

from attnviz.model.demos import build_demo  # noqa: E402
from attnviz.model.session import Session  # noqa: E402
from attnviz.persist import AutosaveStore  # noqa: E402
from attnviz.ui.context import AppContext  # noqa: E402
from attnviz.ui.file_actions import Prompts  # noqa: E402
from attnviz.ui.settings import AppSettings  # noqa: E402


OWN_PANELS = ("inputs", "model", "heatmap", "image")


class ScriptedPrompts(Prompts):
    """Answers the application's questions from lists the test fills; records what was asked."""

    def __init__(self):
        self.open_answers: list = []
        self.save_answers: list = []
        self.changes_answer = "discard"
        self.colour_answer = None
        self.png_answers: list = []  # index of the resolution chosen, then a width when the last one is
        self.asked: list[str] = []

    def open_file(self, parent, caption, filters, folder=""):
        self.asked.append(caption)
        return self.open_answers.pop(0) if self.open_answers else None

    def save_file(self, parent, caption, filters, suggested=""):
        self.asked.append(caption)
        return self.save_answers.pop(0) if self.save_answers else None

    def save_changes(self, parent, what):
        self.asked.append(f"save changes before {what}")
        return self.changes_answer

    def colour(self, parent, initial):
        self.asked.append("colour")
        return self.colour_answer

    def text(self, parent, caption, label, initial=""):
        self.asked.append(caption)
        return None

    def png_resolution(self, parent, choices):
        self.asked.append("png resolution: " + " | ".join(choices))
        return self.png_answers.pop(0) if self.png_answers else None

    def png_width(self, parent, initial):
        self.asked.append(f"png width {initial}")
        return self.png_answers.pop(0) if self.png_answers else None


def wait_response(qtbot, ctx, timeout: int = 30000):
    """Ask for the current state to be computed now and wait for its response."""
    with qtbot.waitSignal(ctx.response_changed, timeout=timeout) as blocker:
        ctx.recompute(now=True)
    return blocker.args[0]


@pytest.fixture
def make_ctx(qtbot):
    made = []

    def make(demo: str = "river-bank", state=None) -> AppContext:
        ctx = AppContext(Session(state if state is not None else build_demo(demo)))
        made.append(ctx)
        return ctx

    yield make
    for ctx in made:
        ctx.compute.shutdown(timeout=5)


@pytest.fixture
def make_window(qtbot, tmp_path, make_ctx):
    """make_window(demo) -> MainWindow, shown, first response computed."""
    from attnviz.ui.main_window import MainWindow

    windows = []

    def make(demo: str = "river-bank", state=None, compute=True, autosave_ms: int = 60_000, ctx=None,
             all_panels: bool = False, extra_panels=()):
        """all_panels=False builds the window with the application's own docks only (inputs, model,
        heatmap, image) to keep the tests fast; one test builds every panel. extra_panels: more PanelSpecs."""
        from attnviz.ui.panels import PANELS

        specs = list(PANELS)
        if not all_panels:
            specs = [s for s in specs if s.id in OWN_PANELS]
        specs += list(extra_panels)
        ctx = ctx or make_ctx(demo, state)
        prompts = ScriptedPrompts()
        store = AutosaveStore(tmp_path / "data")
        store.mark_running()
        w = MainWindow(ctx, settings=AppSettings(tmp_path / "settings.ini"), autosave=store, prompts=prompts,
                       autosave_interval_ms=autosave_ms, panels=specs)
        qtbot.addWidget(w)
        w.resize(1400, 900)
        w.show()
        windows.append(w)
        if compute:
            wait_response(qtbot, ctx)
        return w

    yield make
    for w in windows:
        w.files.prompts.changes_answer = "discard"
        w.close()


@pytest.fixture
def respond(qtbot):
    """respond(ctx, timeout=30000) -> the response to the current state (computed now)."""
    return lambda ctx, timeout=30000: wait_response(qtbot, ctx, timeout)
