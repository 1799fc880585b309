"""``--screenshot``'s wait: what counts as still working (the computation, a numpy stand-in for the
engine, a panel's worker thread, a pending redraw), and the option checks."""

from __future__ import annotations

from dataclasses import replace

import pytest

from attnviz.ui.render import busy_views, check_output, check_workspace, parse_size


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
