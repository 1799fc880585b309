"""The heatmap dock on real sessions: what it draws per head and matrix, the hover readout, row
clicks that select the query, the all-heads grid, and the overview of a sequence too long to hold."""

from __future__ import annotations

import numpy as np
import pytest
from PySide6.QtCore import Qt

from attnviz.model.commands import EditMask
from attnviz.model.display.head_grid import grid_columns
from attnviz.model.display.overview import overview_image
from attnviz.model.display.response_views import engine_scale, row_weights
from attnviz.model.mask.commands import PaintLines
from attnviz.ui.panels.heatmap_panel import HeatmapPanel


def _panel(qtbot, ctx):
    p = HeatmapPanel(ctx)
    qtbot.addWidget(p)
    p.resize(900, 650)
    p.show()
    return p


def test_shows_the_selected_heads_weights_and_reads_out_cells(qtbot, make_ctx, respond):
    ctx = make_ctx("river-bank")
    p = _panel(qtbot, ctx)
    with qtbot.waitSignal(p.rendered, timeout=30000):
        resp = respond(ctx)
    assert p.mode == "dense"
    values, rows, cols, name = p.current_matrix()
    np.testing.assert_allclose(values, resp.weights[0])
    assert rows == cols == ["by", "the", "river", "bank"] and name == "weights_head0"
    # seed 002: bank attends to river with weight 0.685 (score 2.3)
    text = p.heatmap.readout_text(3, 2)
    assert "'bank'" in text and "'river'" in text and "weight 0.685" in text and "score 2.3" in text
    assert p.heatmap.frame.selected_row == 3  # the demo selects bank


def test_clicking_a_row_selects_that_query(qtbot, make_ctx, respond):
    ctx = make_ctx("vla-mask")
    p = _panel(qtbot, ctx)
    with qtbot.waitSignal(p.rendered, timeout=30000):
        respond(ctx)
    qtbot.wait(50)
    pos = p.heatmap.frame.cell_to_widget(7, 3).toPoint()
    qtbot.mouseClick(p.heatmap.frame.viewport(), Qt.MouseButton.LeftButton, pos=pos)
    assert ctx.session.state.view.query == 7
    assert p.heatmap.frame.selected_row == 7
    assert ctx.undo_stack.count() == 0  # a selection is not an edit


def test_head_matrix_colormap_and_log_controls_set_the_view(qtbot, make_ctx, respond):
    ctx = make_ctx("vla-mask")
    p = _panel(qtbot, ctx)
    resp = respond(ctx)
    assert p.head_combo.count() == 1 + 4
    p.head_combo.activated.emit(3)  # "head 2"
    assert ctx.session.state.view.head == 2
    np.testing.assert_allclose(p.current_matrix()[0], resp.weights[2])
    p.head_combo.activated.emit(0)
    assert ctx.session.state.view.head == "mean"
    np.testing.assert_allclose(p.current_matrix()[0], resp.weights.mean(axis=0))
    p.matrix_combo.activated.emit(p.matrix_combo.findText("scores"))
    assert ctx.session.state.view.matrix == "scores"
    np.testing.assert_allclose(p.current_matrix()[0], resp.scores.mean(axis=0))
    p.matrix_combo.activated.emit(p.matrix_combo.findText("mask"))
    np.testing.assert_array_equal(p.current_matrix()[0].astype(bool), resp.mask)
    p.cmap_combo.activated.emit(p.cmap_combo.findText("magma"))
    assert ctx.session.state.view.colormap == "magma" and p.heatmap.colormap_name() == "magma"
    p.log_check.setChecked(True)
    assert ctx.session.state.view.log_scale
    array, name = p.current_stack()
    assert name == "mask" and array.shape == (4, resp.Tq, resp.Tk)


def test_masked_cells_and_fully_masked_rows_are_marked(qtbot, make_ctx, respond):
    ctx = make_ctx("vla-mask")
    p = _panel(qtbot, ctx)
    resp = respond(ctx)
    assert ctx.execute(EditMask(PaintLines("row", (5,), resp.Tk, "deny")))
    with qtbot.waitSignal(p.rendered, timeout=30000):
        resp = respond(ctx)
    flags = p.heatmap.frame.row_flags
    assert flags is not None and flags[5] and flags.sum() == 1
    text = p.heatmap.readout_text(5, 0)
    assert "masked" in text and "weight 0.685" not in text
    values = p.current_matrix()[0]
    assert np.all(values[5] == 0)


def test_all_heads_grid_selects_a_head(qtbot, make_ctx, respond):
    ctx = make_ctx("vla-mask")
    p = _panel(qtbot, ctx)
    respond(ctx)
    qtbot.waitUntil(lambda: p.grid.grid_shape() == (2, 2), timeout=5000)
    p.grid.head_clicked.emit(1, 0)
    assert ctx.session.state.view.head == 2
    assert p.grid.selected == (1, 0)
    p.grid_check.setChecked(False)
    assert not p.grid.isVisible()


def test_show_mask_draws_the_mask_in_the_heatmap_and_every_small_map(qtbot, make_ctx, respond):
    ctx = make_ctx("vla-mask")
    errors = []
    ctx.message.connect(lambda level, text: errors.append(text) if level == "error" else None)
    p = _panel(qtbot, ctx)
    resp = respond(ctx)
    qtbot.waitUntil(lambda: p.grid.grid_shape() == (2, 2), timeout=5000)
    weights_maps = p.grid.maps.copy()
    ctx.set_view(matrix="mask")
    qtbot.waitUntil(lambda: not np.array_equal(p.grid.maps, weights_maps), timeout=5000)
    assert errors == []
    assert p.mode == "dense" and p.heatmap.levels() == (0.0, 1.0)
    # the small maps hold 1 on allowed cells and are masked elsewhere, like the head's mask
    mask = resp.mask if resp.mask.ndim == 3 else np.broadcast_to(resp.mask, (4,) + resp.mask.shape)
    for h in range(4):
        r, c = divmod(h, grid_columns(4))
        np.testing.assert_array_equal(np.broadcast_to(p.grid.allowed, p.grid.maps.shape)[r, c], mask[h])
        assert np.all(p.grid.maps[r, c][mask[h]] == 1.0)
    assert p.grid.levels == (0.0, 1.0)


def test_show_mask_in_cross_attention_draws_every_heads_map(qtbot, make_ctx, respond):
    from attnviz.model.commands import set_model

    ctx = make_ctx("translation")
    errors = []
    ctx.message.connect(lambda level, text: errors.append(text) if level == "error" else None)
    assert ctx.execute(set_model(drop_handset=True, nh=2))
    p = _panel(qtbot, ctx)
    ctx.set_view(matrix="mask")
    resp = respond(ctx)
    assert resp.cross and resp.weights.shape[0] == 2
    qtbot.waitUntil(lambda: p.grid.grid_shape() == (2, 1) and p.grid.levels == (0.0, 1.0), timeout=5000)
    assert errors == [] and p.mode == "dense"
    np.testing.assert_array_equal(p.current_matrix()[0].astype(bool), resp.mask)


@pytest.mark.slow
def test_long_sequence_shows_a_max_pooled_overview_and_refines_on_zoom(qtbot, make_ctx, respond):
    ctx = make_ctx("long-context")
    p = _panel(qtbot, ctx)
    with qtbot.waitSignal(p.rendered, timeout=60000):
        resp = respond(ctx, timeout=60000)
    assert resp.weights is None and p.mode == "overview"
    with pytest.raises(ValueError, match="dense limit"):
        p.current_matrix()
    scale = engine_scale(ctx.session.state)
    # one pixel of the overview is the max of the weights it covers (checked on a few rows)
    img = overview_image(resp, 0, scale, "max", (64, 64), (0, resp.Tq), (0, resp.Tk))
    edges = (np.arange(65) * resp.Tq) // 64
    rw = np.stack([row_weights(resp, r, scale)[0] for r in range(edges[10], edges[11])])  # (rows, Tk)
    for x in (5, 10, 11):
        c0, c1 = (x * resp.Tk) // 64, ((x + 1) * resp.Tk) // 64
        block_mask = resp.mask[edges[10]:edges[11], c0:c1]
        if block_mask.any():
            assert img[10, x] == pytest.approx(rw[:, c0:c1].max(), rel=1e-5)
        else:
            assert np.isnan(img[10, x])
    # zooming asks for the visible block at full resolution
    with qtbot.waitSignal(p.rendered, timeout=60000):
        p.heatmap.frame.view.setRange(xRange=(100, 164), yRange=(100, 164), padding=0)
    r0, r1, c0, c1 = p.heatmap.detail.extent
    assert r1 - r0 <= 70 and c1 - c0 <= 70 and r0 >= 95
    # mean pooling is selectable
    p.pool_combo.setCurrentIndex(1)
    with qtbot.waitSignal(p.rendered, timeout=60000):
        p.pool_combo.activated.emit(1)
    assert "mean" in p.heatmap.frame.title.text
