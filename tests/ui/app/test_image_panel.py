"""The attention-over-the-image dock: the selected query's weights over the patches, per head or
averaged, the class token by default, patch clicks that select a query, and the opacity slider."""

from __future__ import annotations

import numpy as np
from PySide6.QtCore import Qt

from attnviz.ui.panels.image_panel import ImagePanel


def _panel(qtbot, ctx):
    p = ImagePanel(ctx)
    qtbot.addWidget(p)
    p.resize(520, 560)
    p.show()
    return p


def test_class_token_weights_are_drawn_over_the_patches(qtbot, make_ctx, respond):
    ctx = make_ctx("vit-image")
    ctx.set_view(query=None)
    p = _panel(qtbot, ctx)
    resp = respond(ctx)
    assert p.shown_query() == 0  # the class token
    np.testing.assert_allclose(p.overlay_weights().ravel(), resp.weights[0, 0, 1:], rtol=1e-6)
    p.head_combo.setCurrentIndex(p.head_combo.findText("mean"))
    p.head_combo.activated.emit(p.head_combo.currentIndex())
    np.testing.assert_allclose(p.overlay_weights().ravel(), resp.weights[:, 0, 1:].mean(axis=0), rtol=1e-6)
    p.head_combo.setCurrentIndex(p.head_combo.findText("head 3"))
    p.head_combo.activated.emit(p.head_combo.currentIndex())
    np.testing.assert_allclose(p.overlay_weights().ravel(), resp.weights[3, 0, 1:], rtol=1e-6)
    assert "'[CLS]'" in p.query_label.text() and "head 3" in p.query_label.text()


def test_selected_head_follows_the_heatmap_and_query_follows_the_selection(qtbot, make_ctx, respond):
    ctx = make_ctx("vit-image")
    p = _panel(qtbot, ctx)
    resp = respond(ctx)
    ctx.set_view(head=2, query=40)
    np.testing.assert_allclose(p.overlay_weights().ravel(), resp.weights[2, 40, 1:], rtol=1e-6)
    assert p.view.highlighted == 39  # token 40 is patch 39


def test_clicking_a_patch_selects_its_token(qtbot, make_ctx, respond):
    ctx = make_ctx("vit-image")
    p = _panel(qtbot, ctx)
    respond(ctx)
    qtbot.wait(50)
    c = p.view.patch_center(20)
    qtbot.mouseClick(p.view.graphics.viewport(), Qt.MouseButton.LeftButton, pos=c.toPoint())
    assert ctx.session.state.view.query == 21


def test_opacity_slider_is_saved_in_the_view(qtbot, make_ctx, respond):
    ctx = make_ctx("vit-image")
    p = _panel(qtbot, ctx)
    respond(ctx)
    p.view.slider.setValue(25)
    assert ctx.session.state.view.overlay_opacity == 0.25
    ctx.set_view(overlay_opacity=0.9)
    assert p.view.slider.value() == 90 and p.view.overlay.opacity() == 0.9


def test_long_sequence_row_is_recomputed(qtbot, make_ctx, respond):
    """A session past the dense limit still shows one row over the image (from q, k and lse)."""
    from attnviz.model.compute import ComputeRequest, run

    ctx = make_ctx("vit-image")
    p = _panel(qtbot, ctx)
    dense = respond(ctx)
    thin = run(ComputeRequest(99, ctx.session.state, dense_limit=16))
    assert thin.weights is None
    ctx.set_view(query=30)
    p._on_response(thin)
    np.testing.assert_allclose(p.overlay_weights().ravel(), dense.weights[0, 30, 1:], atol=1e-12)


def test_no_image_source_shows_a_hint(qtbot, make_ctx, respond):
    ctx = make_ctx("river-bank")
    p = _panel(qtbot, ctx)
    respond(ctx)
    assert p.stack.currentWidget() is p.placeholder
    assert "No image source" in p.placeholder.text()
