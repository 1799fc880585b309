"""The Pretrained panel's first build keeps the window answering: its core (model row, layers x heads,
Image, Corpus, the selected map) is built at once, the further tabs (Intervene, Generate, Audio, Score
terms, Experts and the vision-language page's) one step per later turn of the event loop, so no single
turn holds the GUI thread for all two dozen plots. What needs a further tab sooner builds them all at
once: asking for its view, or a model's result arriving."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("PySide6")

from attnviz.model.demos import build_demo  # noqa: E402
from attnviz.model.session import Session  # noqa: E402
from attnviz.ui.context import AppContext  # noqa: E402
from attnviz.ui.model_view.panel import DEFERRED_VIEWS, ModelViewPanel  # noqa: E402

DATA = Path(__file__).resolve().parents[2] / "data" / "checkpoints"


def make(qtbot) -> ModelViewPanel:
    panel = ModelViewPanel(AppContext(Session(build_demo("river-bank"))), auto_load=False)
    qtbot.addWidget(panel)
    panel.resize(1100, 700)
    return panel


def titles(tabs) -> list[str]:
    return [tabs.tabText(i) for i in range(tabs.count())]


def test_the_further_tabs_come_on_later_turns_in_the_same_order(qtbot):
    panel = make(qtbot)
    assert panel.building()
    assert titles(panel.tabs) == ["Layers × heads", "Image", "Corpus"]  # the core only, so far
    assert not DEFERRED_VIEWS & set(vars(panel))  # not one of the further views built in the constructor
    qtbot.waitUntil(lambda: not panel.building(), timeout=20000)
    later = titles(panel.tabs)
    eager = make(qtbot)
    eager.finish_building()  # everything at once, as the constructor did before
    assert later == titles(eager.tabs) and len(later) > 3
    assert "Intervene" in later and "Generate" in later
    assert titles(panel.vlm.tabs) == titles(eager.vlm.tabs)
    assert DEFERRED_VIEWS <= set(vars(panel))


def test_asking_for_a_view_builds_the_rest_at_once(qtbot):
    panel = make(qtbot)
    assert panel.building()
    view = panel.intervention
    assert not panel.building()  # no turn of the event loop has run: built on demand
    assert panel.tabs.tabText(panel.tabs.indexOf(view)) == "Intervene"
    assert panel.router is not None and panel.score_terms is not None
    with pytest.raises(AttributeError):
        panel.no_such_view


def test_a_model_loaded_before_the_turns_came_still_reaches_every_tab(qtbot):
    panel = make(qtbot)
    with qtbot.waitSignal(panel.attention_ready, timeout=30000):
        panel.load_model(DATA / "tiny_gpt2")  # its result may come before the further tabs' turns
    assert not panel.building()
    index = panel.tabs.indexOf(panel.intervention)
    assert panel.tabs.isTabEnabled(index) and panel.intervention.ready()
    generate = panel.tabs.indexOf(panel.generation)  # not for GPT-2 without its LM head: it says why
    assert not panel.tabs.isTabEnabled(generate) and panel.tabs.tabToolTip(generate)


def test_a_result_that_comes_while_tabs_are_built_waits_for_them_instead_of_building_them_all_at_once(qtbot):
    panel = make(qtbot)
    shown = []
    panel.attention_ready.connect(shown.append)
    panel.load_model(DATA / "tiny_gpt2")
    assert panel.jobs.wait_idle(60)  # loaded, and no turn of the event loop has run: no further tab is built
    with qtbot.waitSignal(panel.jobs.done, timeout=30000):
        pass  # the answer reaches the GUI thread while the further tabs are still to come
    assert panel.building() and not shown  # held: the rest is not built in this turn
    assert panel.jobs.busy  # and the panel's job still counts as running until it is shown
    with qtbot.waitSignal(panel.attention_ready, timeout=30000):
        pass
    assert not panel.building()
    assert panel.ckpt is not None and panel.intervention.ready()  # the held answer reached every tab


def test_the_modules_loaded_a_turn_ahead_are_those_the_views_import():
    import subprocess
    import sys

    from attnviz.ui.model_view.more_views import PRELOAD, VIEWS

    assert set(PRELOAD) <= dict(VIEWS).keys()
    views = {"intervention": "attnviz.ui.model_view.intervene_view", "audio": "attnviz.ui.model_view.audio_view"}
    for attribute, modules in PRELOAD.items():
        code = (f"import sys; import {views[attribute]}; "
                f"print([m for m in {list(modules)!r} if m not in sys.modules])")
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr[-2000:]
        assert done.stdout.strip() == "[]", (attribute, done.stdout)  # each one the view imports anyway
