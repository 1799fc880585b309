"""The Pretrained panel's first build keeps the window answering: its core (model row, layers x heads,
Image, the selected map) is built at once, the vision-language page, the Corpus tab and the further tabs
(Intervene, Generate, Audio, Score terms, Experts and the vision-language page's) one step per later turn
of the event loop, and the hub cache's models are listed on a worker, so no single
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
    assert titles(panel.tabs) == ["Layers × heads", "Image"]  # the core only, so far
    assert panel.pages.count() == 1  # the vision-language page is a step of its own too
    assert not DEFERRED_VIEWS & set(vars(panel))  # not one of the further views built in the constructor
    qtbot.waitUntil(lambda: not panel.building(), timeout=20000)
    later = titles(panel.tabs)
    eager = make(qtbot)
    eager.finish_building()  # everything at once, as the constructor did before
    assert later == titles(eager.tabs) and len(later) > 3 and later[:3] == ["Layers × heads", "Image", "Corpus"]
    assert panel.pages.indexOf(panel.vlm) == 1 == eager.pages.indexOf(eager.vlm)
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


def test_the_hub_cache_is_listed_on_a_worker_and_its_models_join_the_combo_later(qtbot, monkeypatch):
    import threading

    import attnviz.checkpoints.study as study_module

    threads = []

    def cached(**_kw):
        threads.append(threading.current_thread())
        return [("acme/listed · Llama · 1 · f32", "/nowhere/acme-listed", "acme/listed")]

    monkeypatch.setattr(study_module, "cached_entries", cached)
    panel = make(qtbot)
    assert panel.model_combo.findData("/nowhere/acme-listed") < 0  # the constructor does not wait for the cache
    with qtbot.waitSignal(panel.models_listed, timeout=20000) as blocker:
        pass
    assert blocker.args == [1] and threads and threads[0] is not threading.main_thread()
    index = panel.model_combo.findData("/nowhere/acme-listed")
    assert index == panel.model_combo.count() - 2  # before "Open folder…"
    assert panel.model_combo.itemText(index) == "acme/listed · Llama · 1 · f32"


def test_the_intervene_views_plots_are_made_on_turns_before_their_view(qtbot):
    from attnviz.ui.model_view import intervene_view
    from attnviz.ui.model_view.more_views import PARTS

    assert all(n == len(intervene_view.PART_STEPS) for _host, n in PARTS.values())
    panel = make(qtbot)
    made = []
    real = intervene_view.make_parts

    def spy(p, host, step):
        real(p, host, step)
        made.append((host, step, "intervention" in vars(p)))

    intervene_view.make_parts = spy
    try:
        qtbot.waitUntil(lambda: not panel.building(), timeout=20000)
    finally:
        intervene_view.make_parts = real
    n = len(intervene_view.PART_STEPS)
    assert [(h, s) for h, s, _ in made] == [("panel", i) for i in range(n)] + [("vlm", i) for i in range(n)]
    assert not any(built for h, _s, built in made if h == "panel")  # each before its view, on a turn of its own
    for view in (panel.intervention, panel.vlm_intervention):  # the plots made ahead are the view's own
        assert len({id(m) for m in view.maps}) == 3  # before | after | difference, made over two steps
        for plot in (view.heads_map, *view.maps, view.importance_map, view.later, view.residual, *view.overlays,
                     view.vlm_overlay):
            assert plot.window() is panel.window() and view.isAncestorOf(plot)
    assert not panel.__dict__.get("_intervene_parts", {}).get("panel")  # every one taken


def test_the_vision_language_pages_grids_are_made_a_turn_before_the_page(qtbot):
    from attnviz.ui.model_view.vlm_view import PART_STEPS

    panel = make(qtbot)
    for names in PART_STEPS:  # the first steps: the page's grids alone, a few a step
        before = set(panel.__dict__.get("_vlm_parts", {}))
        panel._installs.pop(0)(panel)
        assert set(panel.__dict__["_vlm_parts"]) - before == set(names)
    made = dict(panel.__dict__["_vlm_parts"])
    assert "vlm" not in vars(panel) and set(made) == {"grid", "detail", "summary", "picture"} and len(PART_STEPS) > 1
    panel._installs.pop(0)(panel)  # the next: the page, with them
    page = panel.vlm
    assert (page.grid, page.detail, page.summary, page.picture) == tuple(made[k] for k in
                                                                       ("grid", "detail", "summary", "picture"))
    assert all(page.isAncestorOf(w) for w in made.values()) and page.tabs.indexOf(page.grid) == 0
    qtbot.waitUntil(lambda: not panel.building(), timeout=20000)


def test_the_score_terms_and_audio_plots_are_made_on_turns_before_their_views(qtbot):
    from attnviz.ui.model_view import score_terms_view
    from attnviz.ui.model_view.panel import TERM_MAP_STEPS

    assert TERM_MAP_STEPS == len(score_terms_view.MAP_STEPS)
    panel = make(qtbot)
    audio_heatmap, term_maps = None, []  # what the steps made, as seen before each view's own step
    while "score_terms" not in vars(panel):
        panel._installs.pop(0)(panel)
        if "audio" not in vars(panel) and "_audio_parts" in vars(panel):
            audio_heatmap = panel.__dict__["_audio_parts"]["heatmap"]
        made = list(panel.__dict__.get("_term_maps", []))
        if made:
            assert len(made) == len(term_maps) + 1  # one map a step
            term_maps = made
    assert audio_heatmap is not None and panel.audio.heatmap is audio_heatmap
    assert panel.audio.isAncestorOf(audio_heatmap)
    view = panel.score_terms
    assert len(term_maps) == 4 and view.maps == term_maps and all(view.isAncestorOf(m) for m in term_maps)
    assert "_term_maps" not in vars(panel)
    in_layout = [m.colorbar in [m.frame.ci.layout.itemAt(i) for i in range(m.frame.ci.layout.count())]
                 for m in view.maps]
    assert in_layout == [False, False, False, True]  # one colour scale: only the total keeps its bar
    qtbot.waitUntil(lambda: not panel.building(), timeout=20000)
