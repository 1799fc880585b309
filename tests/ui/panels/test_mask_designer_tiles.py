"""Live consequences in the designer: flash tiles against a brute-force count, the sparsity label for
masks smaller than a tile, tile-size controls as session commands, fully masked rows flagged, counted
and reported once, and the flash timing running off the GUI thread."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("PySide6")

from PySide6.QtCore import Qt  # noqa: E402

from attnviz.model.display.mask_snapshot import Target  # noqa: E402
from attnviz.model.mask.commands import PaintLines  # noqa: E402
from mask_oracles import tile_states_bruteforce  # noqa: E402
from test_mask_designer_support import drag_cells, make_panel, percent_in  # noqa: E402


def test_sparsity_of_a_mask_smaller_than_one_tile_is_not_negative(qtbot):
    ctx, panel = make_panel(qtbot)
    assert ctx.session.state.kernel.block_m == 64 and ctx.response.Tq == 44  # one tile covers everything
    assert 0.0 <= percent_in(panel.tiles.tiles.text()) <= 100.0
    assert "0 empty · 1 partial · 0 full" in panel.tiles.tiles.text()
    panel.preset_bar.buttons["causal"].click()
    panel.flush()
    assert percent_in(panel.tiles.tiles.text()) == 0.0
    # a 4-token sequence under 64 x 64 tiles
    ctx2, panel2 = make_panel(qtbot, demo="river-bank")
    assert ctx2.response.Tq < 64
    assert 0.0 <= percent_in(panel2.tiles.tiles.text()) <= 100.0


def test_tile_size_controls_change_the_kernel_and_match_brute_force(qtbot):
    ctx, panel = make_panel(qtbot)
    panel.tiles.block_m.setValue(8)
    panel.tiles.block_n.setValue(8)
    assert (ctx.session.state.kernel.block_m, ctx.session.state.kernel.block_n) == (8, 8)
    panel.flush()
    snap = panel.snapshot
    brute = tile_states_bruteforce(snap.mask, 8, 8)
    assert np.array_equal(snap.tiles.tile_state, brute)
    assert np.array_equal(panel.canvas.tiles[0], brute[0])  # the overlay shows the same map
    n_empty = int((brute == 0).sum())
    assert f"{n_empty} empty" in panel.tiles.tiles.text()
    assert percent_in(panel.tiles.tiles.text()) == pytest.approx(100 * n_empty / brute.size, abs=0.05)
    assert n_empty > 0  # the VLA mask lets flash skip tiles at 8 x 8
    panel.tiles.overlay.setChecked(False)
    panel.flush()
    assert panel.canvas.tiles is None
    ctx.undo_stack.undo()
    ctx.undo_stack.undo()
    assert ctx.session.state.kernel.block_m == 64


def test_fully_masked_rows_are_flagged_counted_and_reported_once(qtbot):
    ctx, panel = make_panel(qtbot)
    reports = []
    ctx.message.connect(lambda level, text: reports.append((level, text)))
    panel.set_tool("row")
    drag_cells(qtbot, panel.canvas, [(30, 4), (31, 4), (32, 4)], button=Qt.MouseButton.RightButton)
    panel.flush()
    flags = panel.canvas.frame.row_flags
    assert flags is not None and np.flatnonzero(flags).tolist() == [30, 31, 32]
    assert np.flatnonzero(panel.snapshot.fully_masked).tolist() == [30, 31, 32]
    assert "3 fully masked rows" in panel.tiles.dead.text()
    assert len(reports) == 1 and reports[0][0] == "warning"
    assert "3 query rows are fully masked: 30" in reports[0][1]
    ctx.execute(Target().lift(PaintLines("row", (33,), 44, "deny")))  # one more: one more report
    panel.flush()
    panel.refresh()  # redrawing the same mask again does not repeat it
    assert len(reports) == 2 and "4 query rows" in reports[1][1]
    # the computed weights and outputs of those rows are zeros
    qtbot.waitUntil(lambda: ctx.response.request_id == ctx.compute.latest_id, timeout=30000)
    resp = ctx.response
    assert np.all(resp.weights[:, 30:34] == 0) and np.all(resp.output[:, 30:34] == 0)
    ctx.undo_stack.undo()
    ctx.undo_stack.undo()
    panel.flush()
    assert panel.tiles.dead.text() == "no fully masked rows"
    assert not panel.canvas.frame.row_flags.any()


def test_time_flash_runs_off_the_gui_thread_and_shows_a_speedup(qtbot):
    ctx, panel = make_panel(qtbot)
    panel.tiles.block_m.setValue(8)
    panel.tiles.block_n.setValue(8)
    qtbot.waitUntil(lambda: ctx.response.request_id == ctx.compute.latest_id, timeout=30000)
    with qtbot.waitSignal(panel.timing_job.done, timeout=120000) as blocker:
        job = panel.time_flash()
        assert job is not None
        assert not panel.tiles.time_button.isEnabled()  # busy while the worker measures
    result = blocker.args[1]
    assert result.masked_s > 0 and result.dense_s > 0 and result.repeats == 5
    assert (result.block_m, result.block_n) == (8, 8) and result.skipped > 0
    assert f"{result.speedup:.2f}x" in panel.tiles.timing.text()
    assert panel.tiles.time_button.isEnabled()
