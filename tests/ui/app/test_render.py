"""``--screenshot``'s wait: what counts as still working (the computation, a numpy stand-in for the
engine, a panel's worker thread, a pending redraw), and the option checks."""

from __future__ import annotations

from dataclasses import replace

import pytest

from attnviz.app_start import check_output, parse_size
from attnviz.ui.render import busy_views, check_workspace


def test_a_stand_in_result_or_a_busy_worker_is_not_final(make_window, qtbot):
    w = make_window("river-bank")
    qtbot.waitUntil(lambda: busy_views(w) == [], timeout=30000)
    real = w.ctx.response
    w.ctx.response = replace(real, stand_in=True)  # the numpy path standing in while kernels compile
    assert busy_views(w) == ["engine result"]
    w.ctx.response = real
    from attnviz.ui.latest_job import LatestJob

    job = LatestJob("attnviz-study", w.panel("heatmap"))  # a panel's worker thread
    job.submit(lambda: __import__("time").sleep(0.3))
    assert busy_views(w) == ["attnviz-study"]
    qtbot.waitUntil(lambda: busy_views(w) == [], timeout=5000)
    job.shutdown()


def test_the_options_are_checked(tmp_path):
    assert parse_size("1280x800") == (1280, 800) and parse_size(" 3840 X 2160 ") == (3840, 2160)
    for bad in ("1280", "0x0", "100000x800", "640x100"):
        with pytest.raises(ValueError):
            parse_size(bad)
    assert check_workspace("mask") == "mask"
    with pytest.raises(ValueError, match="choose one of attention, qkv"):
        check_workspace("docks")
    assert check_output(str(tmp_path / "a.png")) == str(tmp_path / "a.png")
    with pytest.raises(ValueError, match="ending in .png"):
        check_output(str(tmp_path / "a.gif"))


def test_workspace_slash_tab_is_checked_by_its_workspace_name():
    assert check_workspace("diagnostics/softmax-jacobian") == "diagnostics/softmax-jacobian"
    with pytest.raises(ValueError, match="no such workspace"):
        check_workspace("diagnostic/softmax-jacobian")


@pytest.mark.slow
def test_workspace_slash_tab_brings_the_inner_tab_forward(make_window, qtbot):
    """``attnviz --workspace diagnostics/softmax-jacobian`` (and pretrained/corpus, the positional
    encodings' RoPE page) for --screenshot: the tab's title in lower case, spaces as hyphens."""
    from attnviz.ui.diagnostics.jacobian import JacobianTab
    from attnviz.ui.diagnostics.positional import PositionalTab
    from attnviz.ui.workspaces.tabs import split_target, tab_slug

    assert tab_slug("Softmax Jacobian") == "softmax-jacobian" and tab_slug("Q · K · V") == "q-k-v"
    assert split_target("Diagnostics/Flash vs reference") == ("diagnostics", "flash-vs-reference")
    w = make_window("river-bank", all_panels=True)
    w.show_workspace("diagnostics/softmax-jacobian")
    panel = w.panel("diagnostics")
    assert w.workspace == "diagnostics" and panel.current_tab() is panel.tab(JacobianTab)
    w.show_workspace("diagnostics/rope")  # a page inside the Positional encodings tab
    pos = panel.tab(PositionalTab)
    assert panel.current_tab() is pos and pos.pages.currentWidget() is pos.rope_page
    w.show_workspace("pretrained/corpus")
    tabs = w.panel("pretrained").tabs
    assert w.workspace == "pretrained" and tabs.tabText(tabs.currentIndex()).lower() == "corpus"
    with pytest.raises(ValueError, match="no tab 'nothing-here'; choose one of"):
        w.show_workspace("qkv/nothing-here")


def test_a_pretrained_tab_built_on_a_later_turn_is_found_by_name_at_once(make_window, qtbot):
    """The Pretrained panel builds its further tabs (Intervene, Generate, ...) over later turns of the event
    loop; ``--workspace pretrained/intervene`` right after start must still find its tab."""
    w = make_window("river-bank", all_panels=True)
    panel = w.panel("pretrained")
    assert panel.building() and panel.expects_model()  # the further tabs are still to come, and the first model
    w.show_workspace("pretrained/intervene")  # no event-loop turn in between: the tab is built on demand
    tabs = panel.tabs
    assert w.workspace == "pretrained"
    with qtbot.waitSignal(panel.model_loaded, timeout=120_000):  # the tab is enabled by the model loaded on show
        pass
    qtbot.waitUntil(lambda: tabs.tabText(tabs.currentIndex()).replace("&", "").lower() == "intervene", timeout=5000)
