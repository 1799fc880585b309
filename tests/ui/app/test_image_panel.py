"""The attention-over-the-image dock: the selected query's weights over the patches, per head or
averaged, the class token by default, patch clicks that select a query, and the opacity slider."""

from __future__ import annotations

import numpy as np
import pytest
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


def test_the_overlay_has_a_colour_scale(qtbot, make_ctx, respond):
    ctx = make_ctx("vit-image")
    ctx.set_view(query=None, colormap="magma")
    p = _panel(qtbot, ctx)
    respond(ctx)
    w = p.overlay_weights()
    assert p.view.colour_scale() == (0.0, pytest.approx(float(w.max())))  # the colours span 0 .. the largest
    assert p.view.colorbar.isVisible() and p.view.colorbar.getAxis("right").labelText == "weight"
    qtbot.wait(50)
    bar = p.view.colorbar.sceneBoundingRect()
    assert bar.right() <= p.view.graphics.width() + 1 and bar.height() > 100  # beside the image, inside the view
    p.view.set_overlay(None)
    assert p.view.colour_scale() is None  # no overlay, no scale


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
    ctx.response_changed.emit(thin)
    np.testing.assert_allclose(p.overlay_weights().ravel(), dense.weights[0, 30, 1:], atol=1e-12)


def test_no_image_source_shows_the_query_row_as_bars(qtbot, make_ctx, respond):
    ctx = make_ctx("river-bank")
    p = _panel(qtbot, ctx)
    assert p.stack.currentWidget() is p.placeholder  # nothing computed yet: a hint, not an empty chart
    assert "No image source" in p.placeholder.text()
    resp = respond(ctx)
    assert p.stack.currentWidget() is p.bars_page and not p.source_combo.isVisible()
    np.testing.assert_allclose(p.bar_weights(), resp.weights[0, 3], rtol=1e-12)  # bank's row
    np.testing.assert_allclose(p.bar_weights(), [0.109, 0.069, 0.685, 0.137], atol=6e-4)  # seed 002's numbers
    title = p.bars.plotItem.titleLabel.text
    assert "query 3 'bank'" in title and "4 keys" in title and "head 0" in title
    ticks = [t for _v, t in p.bars.plotItem.getAxis("bottom")._tickLevels[0]]
    assert ticks == ["by", "the", "river", "bank"]
    assert [v.toPlainText() for v in p.bars._values] == ["0.109", "0.069", "0.685", "0.137"]
    ctx.set_view(query=0)
    np.testing.assert_allclose(p.bar_weights(), resp.weights[0, 0], rtol=1e-12)
    assert "query 0 'by'" in p.bars.plotItem.titleLabel.text


def test_bars_mark_masked_keys_and_follow_cross_attention(qtbot, make_ctx, respond):
    ctx = make_ctx("translation")
    p = _panel(qtbot, ctx)
    resp = respond(ctx)
    np.testing.assert_allclose(p.bar_weights(), [0.94, 0.02, 0.04], atol=1e-9)  # je over I / love / you
    assert "3 keys" in p.bars.plotItem.titleLabel.text
    from attnviz.model.commands import RemoveSource
    from attnviz.model.demos import build_demo

    no_image, _ = RemoveSource("image").apply(build_demo("vla-mask"))  # the VLA mask hides actions from the prompt
    ctx = make_ctx(state=no_image)
    p = _panel(qtbot, ctx)
    resp = respond(ctx)
    ctx.set_view(query=0)
    w, allowed = p.bar_weights(), resp.mask[0] if resp.mask.ndim == 2 else resp.mask[0, 0]
    assert w.shape == (resp.Tk,) and np.all(w[~allowed] == 0)
    xs = p.bars.masked.getData()[0]
    assert sorted(int(x) for x in xs) == [int(j) for j in np.flatnonzero(~allowed)]


def test_the_panel_says_how_transparency_is_handled(qtbot, make_ctx, respond, tmp_path):
    ctx = make_ctx("vit-image")
    p = _panel(qtbot, ctx)
    respond(ctx)
    assert p.alpha_note.isVisible() and "over white" in p.alpha_note.text()
    assert 'convert("RGB")' in p.alpha_note.toolTip()
    p.grab().save(str(tmp_path / "image_panel.png"))


def test_without_an_image_source_no_image_view_is_made(qtbot, make_ctx, respond):
    """The bars need no image scene: the view is made when an image is first shown (or asked for), and then
    takes the session's opacity and sits between the placeholder and the bars as before."""
    ctx = make_ctx("river-bank")
    p = _panel(qtbot, ctx)
    respond(ctx)
    ctx.set_view(overlay_opacity=0.3, query=1)
    assert p.stack.currentWidget() is p.bars_page and not p.has_view()
    assert p.stack.count() == 2
    view = p.view  # asked for: made now
    assert p.has_view() and p.view is view and p.stack.indexOf(view) == 1 and p.stack.count() == 3
    assert p.stack.currentWidget() is p.bars_page  # still the bars in front
    assert view.slider.value() == 30
    ctx.set_view(overlay_opacity=0.6)
    assert view.slider.value() == 60  # follows the session from then on


def test_an_image_source_makes_the_view_at_once(qtbot, make_ctx, respond):
    ctx = make_ctx("vit-image")
    p = _panel(qtbot, ctx)
    assert p.has_view() and p.stack.currentWidget() is p.view
