"""AttentionHeatmap behaviour with real mouse events and grabbed pixels."""

import numpy as np
import pytest
from PySide6.QtCore import QPointF, Qt

from attnviz.model.display.pooling import pool_max
from attnviz.model.segments import Segment
from attnviz.ui import colormaps
from attnviz.ui.theme import apply_theme
from attnviz.ui.widgets.heatmap import AttentionHeatmap, HeatmapConfig
import widget_samples


@pytest.fixture
def heatmap(qtbot, qapp):
    apply_theme(qapp, "light")
    w = AttentionHeatmap()
    qtbot.addWidget(w)
    w.resize(700, 600)
    w.show()
    qtbot.waitExposed(w)
    return w


def _river(w):
    ex = widget_samples.river_bank()
    w.set_matrix(ex.weights, mask=ex.mask, row_labels=ex.tokens, col_labels=ex.tokens, row_segments=ex.segments,
                 col_segments=ex.segments, title="weights", value_label="weight")
    return ex


def _pixel(w, frame_pos: QPointF):
    img = w.frame.grab().toImage()
    c = img.pixelColor(int(frame_pos.x()), int(frame_pos.y()))
    return np.array([c.red(), c.green(), c.blue()])


def test_hover_reports_cell_and_readout(heatmap, mouse, qtbot):
    ex = _river(heatmap)
    heatmap.set_readout_provider(lambda i, j: f"score {ex.scores[i, j]:.3f}")
    seen = []
    heatmap.hovered.connect(lambda r, c: seen.append((r, c)))
    vp = heatmap.frame.viewport()
    mouse.move(vp, heatmap.frame.cell_to_widget(7, 6))
    assert seen[-1] == (7, 6)  # row = query (y), column = key (x)
    text = heatmap.readout.text()
    assert "' bank'" in text and "' river'" in text and f"{ex.weights[7, 6]:.4g}" in text
    assert f"score {ex.scores[7, 6]:.3f}" in text
    mouse.move(vp, heatmap.frame.cell_to_widget(2, 10))
    assert seen[-1] == (2, 10)
    assert "masked" in heatmap.readout.text()


def test_click_emits_row_and_cell(heatmap, mouse, qtbot):
    _river(heatmap)
    rows, cells = [], []
    heatmap.row_clicked.connect(rows.append)
    heatmap.cell_clicked.connect(lambda r, c: cells.append((r, c)))
    mouse.click(heatmap.frame.viewport(), heatmap.frame.cell_to_widget(3, 9))
    assert rows == [3] and cells == [(3, 9)]
    mouse.click(heatmap.frame.viewport(), heatmap.frame.cell_to_widget(10, 0))
    assert rows == [3, 10] and cells[-1] == (10, 0)


def test_masked_cells_drawn_differently_from_zero(heatmap, qtbot):
    v = np.full((6, 6), 0.5, dtype=np.float32)
    v[1, 1] = 0.0  # an allowed cell with zero weight
    v[0, 0] = 1.0
    mask = np.ones((6, 6), dtype=bool)
    mask[4, 4] = False  # a masked cell
    for cmap in ("viridis", "gray", "cividis"):
        heatmap.set_colormap(cmap)
        heatmap.set_matrix(v, mask=mask)
        qtbot.wait(20)
        zero = _pixel(heatmap, heatmap.frame.cell_to_widget(1, 1))
        masked = _pixel(heatmap, heatmap.frame.cell_to_widget(4, 4))
        masked2 = _pixel(heatmap, heatmap.frame.cell_to_widget(4.3, 4.1))
        lo = colormaps.lut(cmap)[0, :3].astype(int)
        assert np.abs(zero - lo).max() <= 3, cmap  # zero weight is the colormap's low end
        for m in (masked, masked2):
            assert np.abs(m - lo).max() > 60, cmap  # masked is not drawn as a zero
            assert np.abs(m - _pixel(heatmap, heatmap.frame.cell_to_widget(2, 2))).max() > 30, cmap


def test_fully_masked_row_is_marked(heatmap, qtbot):
    ex = _river(heatmap)
    flags = heatmap.frame.row_flags
    assert flags is not None and flags.tolist() == (~ex.mask.any(axis=1)).tolist() and flags[11]
    qtbot.wait(20)
    strip = heatmap.frame.left_strip
    img = heatmap.frame.grab().toImage()

    def at(row):
        p = heatmap.frame.mapFromScene(strip.mapViewToScene(QPointF(0.5, row + 0.5)))
        c = img.pixelColor(p.x(), p.y())
        return c.red(), c.green(), c.blue()

    r, g, b = at(11)
    assert r > 180 and g < 90 and b < 90  # red marker
    r, g, b = at(5)
    assert not (r > 180 and g < 90 and b < 90)


def test_labels_thin_out_for_long_sequences(heatmap, qtbot):
    T = 512
    w, mask = widget_samples.peaked_matrix(T)
    labels = [f"tok{i}" for i in range(T)]
    heatmap.set_matrix(w, mask=mask, row_labels=labels, col_labels=labels)
    qtbot.wait(30)
    for axis in (heatmap.frame.left_axis, heatmap.frame.top_axis):
        shown = axis.shown_labels()
        cells = [c for c, _ in shown]
        assert 3 <= len(shown) < T / 5
        assert all(t == f"tok{c}" for c, t in shown)
        length = axis.geometry().height() if axis.orientation == "left" else axis.geometry().width()
        px_per_cell = length / T
        gaps = np.diff(cells) * px_per_cell
        assert gaps.min() >= axis.min_spacing  # no two labels overlap
    # zoomed into 12 rows every row gets its label
    heatmap.frame.view.setRange(yRange=(100, 112), padding=0)
    qtbot.wait(30)
    shown = [c for c, _ in heatmap.frame.left_axis.shown_labels()]
    assert shown == list(range(100, 112))


def test_large_matrix_is_max_pooled_and_refined_on_zoom(qtbot, qapp):
    w = AttentionHeatmap(config=HeatmapConfig(max_display=256, region_debounce_ms=10))
    qtbot.addWidget(w)
    w.resize(600, 600)
    w.show()
    T = 1024
    v = np.full((T, T), 1e-3, dtype=np.float32)
    v[700, 333] = 0.75
    w.set_matrix(v)
    assert w.base.values.shape == (256, 256)
    assert np.nanmax(w.base.values) == pytest.approx(0.75)  # the isolated peak survives pooling
    with qtbot.waitSignal(w.view_region_changed, timeout=2000) as sig:
        w.frame.view.setRange(xRange=(300, 400), yRange=(650, 750), padding=0)
    r0, r1, c0, c1 = sig.args
    assert r0 <= 700 < r1 and c0 <= 333 < c1 and r1 - r0 <= 101
    assert w.detail.extent == (r0, r1, c0, c1)
    assert w.detail.values.shape == (r1 - r0, c1 - c0)  # full resolution in the zoomed region
    assert "0.75" in w.readout_text(700, 333)


def test_overview_mode_emits_region_and_places_detail(qtbot):
    w = AttentionHeatmap(config=HeatmapConfig(region_debounce_ms=10))
    qtbot.addWidget(w)
    w.resize(600, 600)
    w.show()
    T = 65536
    overview = np.random.default_rng(0).random((512, 512)).astype(np.float32)
    overview[np.triu_indices(512, 1)] = np.nan  # causal: above the diagonal nothing is allowed
    w.set_overview(overview, (0, T, 0, T), T, T)
    assert w.frame.n_rows == T and w.base.extent == (0, T, 0, T)
    assert not w.base.allowed[0, 5] and w.base.allowed[5, 0]
    with qtbot.waitSignal(w.view_region_changed, timeout=2000) as sig:
        w.frame.view.setRange(xRange=(1000, 3000), yRange=(40000, 42000), padding=0)
    r0, r1, c0, c1 = sig.args
    assert (r0, c0) == (40000, 1000) and 2000 <= r1 - r0 <= 2001 and 2000 <= c1 - c0 <= 2001
    detail = np.full((r1 - r0, c1 - c0), 0.25, dtype=np.float32)
    w.set_overview(detail, (r0, r1, c0, c1), T, T)
    assert w.detail.extent == (r0, r1, c0, c1)
    assert w.base.extent == (0, T, 0, T)  # the overview stays underneath
    assert w.frame.visible_region() == (r0, r1, c0, c1)  # answering does not move the view
    assert "≈0.25" in w.readout_text(r0 + 5, c0 + 5)
    with pytest.raises(ValueError, match="extent"):
        w.set_overview(detail, (0, T + 1, 0, 10), T, T)


def test_selected_row_colormap_and_levels(heatmap):
    _river(heatmap)
    heatmap.set_selected_row(7)
    rect = heatmap.frame.selection.rect()
    assert heatmap.frame.selection.isVisible() and (rect.top(), rect.height(), rect.width()) == (7, 1, 12)
    heatmap.set_selected_row(None)
    assert not heatmap.frame.selection.isVisible()
    heatmap.set_colormap("magma")
    assert np.array_equal(heatmap.base.image.lut, colormaps.lut("magma"))
    with pytest.raises(ValueError, match="unknown colormap"):
        heatmap.set_colormap("jet")
    heatmap.set_matrix(np.array([[0.01, 1.0], [0.1, 0.001]]), log_scale=True)
    assert heatmap.levels() == pytest.approx((-3.0, 0.0))
    heatmap.set_matrix(np.array([[0.2, 0.8]]), levels=(0, 1))
    assert heatmap.levels() == (0.0, 1.0)


def test_bad_input_is_rejected(heatmap):
    with pytest.raises(ValueError, match="NaN"):
        heatmap.set_matrix(np.array([[np.nan, 1.0]]))
    with pytest.raises(ValueError, match="mask"):
        heatmap.set_matrix(np.ones((2, 2)), mask=np.ones((2, 3), bool))
    with pytest.raises(ValueError, match="labels"):
        heatmap.set_matrix(np.ones((2, 2)), row_labels=["a"])
    with pytest.raises(ValueError, match="segment"):
        heatmap.set_matrix(np.ones((2, 2)), row_segments=[Segment("x", 0, 3)])
    with pytest.raises(ValueError, match="levels"):
        heatmap.set_matrix(np.ones((2, 2)), levels=(1, 0))


def test_scores_with_minus_inf_are_masked(heatmap):
    s = np.array([[0.5, -np.inf], [-np.inf, -np.inf]], dtype=np.float32)
    heatmap.set_matrix(s)
    assert heatmap.base.allowed.tolist() == [[True, False], [False, False]]
    assert heatmap.frame.row_flags.tolist() == [False, True]


def test_dark_theme_really_is_dark(heatmap, qapp, qtbot):
    _river(heatmap)
    apply_theme(qapp, "dark")
    try:
        qtbot.wait(20)
        img = heatmap.grab().toImage()
        corner = img.pixelColor(3, 3)
        label = img.pixelColor(3, img.height() - 3)
        assert max(corner.red(), corner.green(), corner.blue()) < 60
        assert max(label.red(), label.green(), label.blue()) < 80
        assert heatmap.palette().window().color().lightness() < 80
    finally:
        apply_theme(qapp, "light")
    assert heatmap.grab().toImage().pixelColor(3, 3).lightness() > 200


def test_pooled_image_follows_the_view_size(qtbot):
    w = AttentionHeatmap(config=HeatmapConfig(region_debounce_ms=10))
    qtbot.addWidget(w)
    w.resize(300, 300)
    w.show()
    qtbot.waitExposed(w)
    v, mask = widget_samples.peaked_matrix(2048)
    w.set_matrix(v, mask=mask)
    small = w.base.values.shape
    assert max(small) <= 300  # no more image pixels than screen pixels: the painter drops none
    w.resize(900, 900)
    qtbot.waitUntil(lambda: w.base.values.shape[0] > small[0] + 200, timeout=3000)
    assert np.nanmax(w.base.values) == pytest.approx(float(v.max()))


def test_live_updates_keep_what_did_not_change_and_follow_what_did(heatmap, qtbot):
    T = 1000  # pooled: more cells than the view has pixels
    v, mask = widget_samples.peaked_matrix(T)
    labels = [f"t{i}" for i in range(T)]
    segs = (Segment("a", 0, 400, "#ff0000"), Segment("b", 400, T, "#00ff00"))

    def show(values, m, rows=labels, row_segs=segs):
        heatmap.set_matrix(values, mask=m, row_labels=list(rows), col_labels=list(labels), row_segments=row_segs,
                           col_segments=segs, title="weights")

    show(v, mask)
    axis, frame = heatmap.frame.left_axis, heatmap.frame
    texts, band, item = axis._texts, frame.band_image.image, heatmap.base.image
    edited = mask.copy()
    edited[700, :] = False  # an edit masks a whole row
    show(v * 0.5, edited)
    assert axis._texts is texts and frame.band_image.image is band  # equal labels and segments: not redone
    assert heatmap.base.image is item  # the image item is reused
    assert frame.row_flags[700] and frame.row_flags.sum() == 1
    pooled, ok = pool_max(v * 0.5, edited, heatmap.base.values.shape)
    np.testing.assert_array_equal(heatmap.base.values, pooled)  # what a pixel shows is the max under it
    np.testing.assert_array_equal(heatmap.base.allowed, ok)
    assert heatmap.levels() == pytest.approx((float((v * 0.5)[edited].min()), float((v * 0.5)[edited].max())))
    show(v, mask, rows=[f"u\t{i}" for i in range(T)], row_segs=segs[:1])
    assert axis.text(5) == "u→5" and frame.row_segments == segs[:1]
    assert not frame.row_flags.any()
    assert "masked" not in heatmap.readout_text(700, 3) and "masked" in heatmap.readout_text(3, 700)
