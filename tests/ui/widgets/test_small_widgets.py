"""HeadGrid, PatchImageView and TokenChips: clicks and hovers report the right indices."""

import numpy as np
import pytest
from PySide6.QtCore import QPointF

from attnviz.model.display.pooling import pool_max
from attnviz.model.segments import Segment
from attnviz.ui.widgets.image_overlay import PatchImageView
from attnviz.ui.widgets.small_multiples import HeadGrid, build_mosaic, tile_shape
from attnviz.ui.widgets.token_chips import TokenChips, chip_text, flow_layout
from attnviz.ui import colormaps
import widget_samples


def test_head_grid_click_and_mosaic(qtbot, mouse):
    g = HeadGrid()
    qtbot.addWidget(g)
    g.resize(1000, 560)
    g.show()
    qtbot.waitExposed(g)
    maps = np.random.default_rng(0).random((6, 12, 128, 128)).astype(np.float32)  # (rows, cols, T, T)
    maps[2, 7, 100, 3] = 50.0
    g.set_matrices(maps, [f"L{i}" for i in range(6)], [f"h{j}" for j in range(12)], mask=np.tri(128, dtype=bool))
    qtbot.wait(30)
    assert g.grid_shape() == (6, 12)
    clicked, hovered = [], []
    g.head_clicked.connect(lambda r, c: clicked.append((r, c)))
    g.head_hovered.connect(lambda r, c: hovered.append((r, c)))
    vp = g.plot.viewport()
    for r, c in ((0, 0), (2, 7), (5, 11)):
        mouse.click(vp, g.tile_center(r, c))
    assert clicked == [(0, 0), (2, 7), (5, 11)] and hovered[-1] == (5, 11)
    rgba, (th, tw) = build_mosaic(maps[:1, :2], np.ones((1, 2, 128, 128), bool), 64, 4, colormaps.lut("gray"),
                                  "#ff0000", "#000000", shared_levels=True)
    assert rgba.shape == (64, 2 * 64 + 4, 4) and (th, tw) == (64, 64)
    assert (rgba[:, 64:68, :3] == 0).all()  # the gap is background
    with pytest.raises(ValueError, match="maps"):
        g.set_matrices(np.ones((3, 3)))


def test_patch_view_hover_click_highlight_overlay(qtbot, mouse):
    v = PatchImageView()
    qtbot.addWidget(v)
    v.resize(500, 560)
    v.show()
    qtbot.waitExposed(v)
    v.set_image(widget_samples.sample_image(120, 140), grid=(3, 4), patch=32, offset=(6, 12))
    qtbot.wait(30)
    hovered, clicked = [], []
    v.patch_hovered.connect(hovered.append)
    v.patch_clicked.connect(clicked.append)
    vp = v.graphics.viewport()
    mouse.move(vp, v.patch_center(6))
    assert hovered[-1] == 6 and "patch 6 (row 1, col 2)" in v.readout.text()
    mouse.click(vp, v.patch_center(11))
    assert clicked == [11]
    corner = v.graphics.mapFromScene(v.view.mapViewToScene(QPointF(2, 2)))  # inside the image, off the grid
    mouse.move(vp, QPointF(corner))
    assert hovered[-1] == -1
    v.set_highlight(5)
    assert v.highlight.isVisible() and v.highlight.rect().getRect() == (6 + 32, 12 + 32, 32, 32)
    w = np.zeros((3, 4))
    w[1, 2] = 1.0
    v.set_overlay(w)
    assert v.overlay.isVisible() and v.overlay.image.shape == (3, 4, 4)
    v.set_opacity(0.25)
    assert v.slider.value() == 25 and v.overlay.opacity() == pytest.approx(0.25)
    v.slider.setValue(80)
    assert v.opacity == pytest.approx(0.8)
    with pytest.raises(ValueError, match="patch grid"):
        v.set_overlay(np.zeros((4, 4)))
    with pytest.raises(ValueError, match="does not fit"):
        v.set_image(widget_samples.sample_image(64, 64), grid=(3, 3), patch=32)


def test_flow_layout_wraps_without_overflow():
    xs, rows = flow_layout([50, 60, 70, 40, 200, 10], 160, 4)
    assert rows == [0, 2, 4, 5]
    assert xs[:2] == [4, 58] and xs[2] == 4
    assert chip_text(" bank\n", 24) == "·bank↵" and chip_text("", 5) == "∅"


def test_token_chips_many_tokens_click_hover_select(qtbot, mouse):
    c = TokenChips()
    qtbot.addWidget(c)
    c.resize(500, 220)
    c.show()
    qtbot.waitExposed(c)
    n = 20000
    pieces = [f"tok{i % 97}" for i in range(n)]
    c.set_tokens(pieces, list(range(n)), [Segment("a", 0, 100, "#4c78a8"), Segment("b", 100, n, "#f58518")])
    assert c.count() == n and c.row_count() > 100
    vw = c.viewport().width()
    for i in (0, 1, 57, 300):
        r = c.chip_rect(i)
        assert r.left() >= 0 and r.right() < vw
        assert c.index_at(r.center().x(), r.center().y()) == i
    assert len(c.visible_rows()) < 15  # only the rows in view are painted
    clicked, hovered = [], []
    c.token_clicked.connect(clicked.append)
    c.token_hovered.connect(hovered.append)
    mouse.move(c.viewport(), QPointF(c.chip_rect(3).center()))
    mouse.click(c.viewport(), QPointF(c.chip_rect(5).center()))
    assert hovered[0] == 3 and clicked == [5]
    c.set_selected(19999)  # scrolls the last chip into view
    r = c.chip_rect(19999)
    assert 0 <= r.top() and r.bottom() <= c.viewport().height()
    with pytest.raises(ValueError):
        c.set_tokens(["a"], [1, 2])


@pytest.mark.parametrize("shared", [False, True])
def test_mosaic_colours_match_per_map_levels(shared):
    rng = np.random.default_rng(4)
    maps = rng.random((2, 3, 20, 20)).astype(np.float32) * np.arange(1, 7, dtype=np.float32).reshape(2, 3, 1, 1)
    mask = np.broadcast_to(np.tri(20, dtype=bool), maps.shape).copy()
    mask[1, 2] = False  # one map fully masked
    lut = colormaps.lut("gray")
    rgba, (th, tw) = build_mosaic(maps, mask, 10, 2, lut, "#ff0000", "#0000ff", shared_levels=shared)
    assert rgba.shape == (2 * 12 - 2, 3 * 12 - 2, 4) and (th, tw) == (10, 10)
    pooled, ok = pool_max(maps, mask, (10, 10))
    lo_all, hi_all = pooled[ok].min(), pooled[ok].max()
    for r in range(2):
        for c in range(3):
            tile = rgba[r * 12:r * 12 + 10, c * 12:c * 12 + 10]
            if not ok[r, c].any():
                assert (tile == (255, 0, 0, 255)).all()  # a fully masked map is all masked colour
                continue
            lo, hi = (lo_all, hi_all) if shared else (pooled[r, c][ok[r, c]].min(), pooled[r, c][ok[r, c]].max())
            want = colormaps.apply_lut(np.where(ok[r, c], pooled[r, c], lo), (lo, hi), lut)  # (10, 10, 4)
            want[~ok[r, c]] = (255, 0, 0, 255)
            assert np.abs(tile.astype(int) - want.astype(int)).max() <= 1  # float32 rounding at most one step
    assert (rgba[10:12, :, :3] == (0, 0, 255)).all() and (rgba[:, 10:12, :3] == (0, 0, 255)).all()  # gaps


def test_cross_attention_tiles_keep_their_aspect_ratio(qtbot):
    assert tile_shape(128, 128, 64) == (64, 64)
    assert tile_shape(100, 300, 64) == (21, 64)  # wide and flat, not squashed into a square
    assert tile_shape(300, 100, 64) == (64, 21)
    assert tile_shape(8, 20, 64) == (8, 20)  # small maps at full resolution
    assert tile_shape(2, 1000, 64) == (1, 64)  # never thinner than one pixel
    with pytest.raises(ValueError, match="positive"):
        tile_shape(0, 5, 64)
    maps = np.random.default_rng(0).random((1, 2, 30, 90)).astype(np.float32)  # (1, 2, Tq, Tk)
    rgba, (th, tw) = build_mosaic(maps, None, 60, 4, colormaps.lut("gray"), "#ff0000", "#000000", shared_levels=False)
    assert (th, tw) == (20, 60) and rgba.shape == (20, 2 * 60 + 4, 4)
    g = HeadGrid()
    qtbot.addWidget(g)
    g.set_matrices(maps[0])
    assert g._tile == (21, 64) and g.tile_at(100, 10) == (0, 1)  # default tile_px = 64


def test_busy_overlay_covers_its_view_after_a_delay_and_offers_cancel(qtbot):
    from PySide6.QtWidgets import QSplitter, QVBoxLayout, QWidget

    from attnviz.ui.widgets.busy_overlay import BusyOverlay

    host = QWidget()
    qtbot.addWidget(host)
    split = QSplitter(host)
    split.addWidget(QWidget())
    QVBoxLayout(host).addWidget(split)
    host.resize(400, 300)
    host.show()
    overlay = BusyOverlay(split, host, delay_ms=100)
    assert split.count() == 1  # the overlay is not taken as a pane of the splitter
    overlay.start("drawing the overview", cancellable=True)
    assert overlay.is_active() and not overlay.isVisible()  # quick work never shows it
    qtbot.waitUntil(overlay.isVisible, timeout=2000)
    assert overlay.geometry() == split.geometry() and overlay.text() == "drawing the overview"
    with qtbot.waitSignal(overlay.cancelled, timeout=1000):
        overlay.cancel_button.click()
    host.resize(500, 350)
    qtbot.waitUntil(lambda: overlay.geometry() == split.geometry(), timeout=2000)  # it follows the view
    overlay.stop()
    assert not overlay.is_active() and not overlay.isVisible()
    overlay.start("again", delay_ms=5000)
    overlay.stop()
    qtbot.wait(150)
    assert not overlay.isVisible()
