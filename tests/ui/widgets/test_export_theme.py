"""Export files are valid, colormaps are proper LUTs, themes set explicit palettes, and every widget
exports as a PNG in either theme."""

import csv
import xml.etree.ElementTree as ET

import numpy as np
import pytest
from PySide6.QtGui import QImage, QPalette

from attnviz.ui import colormaps
from attnviz.ui.export import ExportError, export_csv, export_npy, export_png, export_svg
from attnviz.ui.theme import apply_theme
from attnviz.ui.widgets.heatmap import AttentionHeatmap
from attnviz.ui.widgets.image_overlay import PatchImageView
from attnviz.ui.widgets.mask_canvas import ALLOW, DENY, MaskCanvas
from attnviz.ui.widgets.small_multiples import HeadGrid
from attnviz.ui.widgets.token_chips import TokenChips
import widget_samples


@pytest.fixture
def heatmap(qtbot):
    w = AttentionHeatmap()
    qtbot.addWidget(w)
    w.resize(500, 420)
    w.show()
    qtbot.waitExposed(w)
    ex = widget_samples.river_bank()
    w.set_matrix(ex.weights, mask=ex.mask, row_labels=ex.tokens, col_labels=ex.tokens, title="weights")
    return w


def test_png_and_svg_export(heatmap, tmp_path):
    png = export_png(heatmap, tmp_path / "h.png")
    img = QImage(str(png))
    assert not img.isNull() and (img.width(), img.height()) == (500, 420)
    svg = export_svg(heatmap, tmp_path / "h.svg")
    root = ET.parse(svg).getroot()
    assert root.tag.endswith("svg")
    tags = {el.tag.split("}")[-1] for el in root.iter()}
    assert "image" in tags  # the heatmap pixels
    assert tags & {"path", "polyline", "rect", "text"}  # axes, labels and bands drawn as vectors
    text = svg.read_text(encoding="utf-8")
    assert "bank" in text or "<img0>" in text or "&lt;img0&gt;" in text  # token labels are real text
    with pytest.raises(ExportError):
        export_png(heatmap, tmp_path / "missing" / "x.png")


def test_png_export_at_a_higher_resolution(heatmap, tmp_path):
    one = QImage(str(export_png(heatmap, tmp_path / "x1.png")))
    two = QImage(str(export_png(heatmap, tmp_path / "x2.png", 2)))
    assert (two.width(), two.height()) == (1000, 840)
    # the same picture, drawn at twice the pixels: a cell's colour lands at the doubled position
    p = heatmap.frame.cell_to_widget(3.5, 2.5).toPoint()  # the centre of cell (bank, river)
    p = heatmap.frame.mapTo(heatmap, p)
    assert one.pixelColor(p.x(), p.y()) == two.pixelColor(2 * p.x(), 2 * p.y())
    wide = QImage(str(export_png(heatmap, tmp_path / "w.png", 1600 / 500)))
    assert wide.width() == 1600 and wide.height() == round(420 * 3.2)
    with pytest.raises(ExportError, match="pixels per side"):
        export_png(heatmap, tmp_path / "huge.png", 40)
    with pytest.raises(ExportError, match="positive"):
        export_png(heatmap, tmp_path / "zero.png", 0)


def test_csv_and_npy_export(tmp_path):
    a = np.array([[0.1, 1 / 3], [np.float32(2.5), -np.inf]], dtype=np.float32)
    p = export_csv(a, tmp_path / "w.csv", ["by, the", 'say "hi"'], ["k0", "k1"])
    rows = list(csv.reader(p.open(encoding="utf-8")))
    assert rows[0] == ["query \\ key", "k0", "k1"]
    assert rows[1][0] == "by, the" and rows[2][0] == 'say "hi"'
    back = np.array([[float(x) for x in r[1:]] for r in rows[1:]], dtype=np.float32)
    np.testing.assert_array_equal(back, a)  # shortest round-trip text
    q = export_npy(a, tmp_path / "w.data")  # exactly this name, no .npy appended
    assert q.name == "w.data"
    np.testing.assert_array_equal(np.load(q), a)
    with pytest.raises(ValueError, match="labels"):
        export_csv(a, tmp_path / "x.csv", ["only one"])
    with pytest.raises(ValueError, match="2-D"):
        export_csv(np.zeros(3), tmp_path / "x.csv")


def test_colormaps_are_256_entry_luts():
    for name in colormaps.NAMES:
        t = colormaps.lut(name)
        assert t.shape == (256, 4) and t.dtype == np.uint8 and not t.flags.writeable
        assert (t[:, 3] == 255).all()
        lum = t[:, :3].astype(float) @ [0.299, 0.587, 0.114]
        assert lum[-1] > lum[0] + 100  # all shipped maps run dark to light
    with pytest.raises(ValueError, match="unknown colormap"):
        colormaps.lut("rainbow")
    rgba = colormaps.apply_lut(np.array([0.0, 0.5, 1.0, 7.0]), (0, 1), colormaps.lut("gray"))
    assert rgba[:, 0].tolist() == [0, 128, 255, 255]


def test_theme_palettes(qapp):
    try:
        dark = apply_theme(qapp, "dark")
        pal = qapp.palette()
        assert pal.color(QPalette.ColorRole.Window).lightness() < 60
        assert pal.color(QPalette.ColorRole.WindowText).lightness() > 180
        assert qapp.style().objectName().lower() == "fusion"
        import pyqtgraph as pg

        assert pg.getConfigOption("background") == dark.plot_background
        light = apply_theme(qapp, "light")
        assert qapp.palette().color(QPalette.ColorRole.Window).lightness() > 200
        assert light.name == "light"
        with pytest.raises(ValueError, match="theme"):
            apply_theme(qapp, "solarized")
    finally:
        apply_theme(qapp, "light")


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_every_widget_exports_a_png_in_either_theme(theme, qapp, qtbot, tmp_path):
    ex = widget_samples.river_bank()
    heatmap = AttentionHeatmap()
    heatmap.set_matrix(ex.weights, mask=ex.mask, row_labels=ex.tokens, col_labels=ex.tokens, row_segments=ex.segments,
                       col_segments=ex.segments, title="weights", value_label="weight")
    canvas = MaskCanvas()
    over = np.zeros(ex.mask.shape, dtype=np.int8)  # (T, T)
    over[4:8, 8:10] = ALLOW
    over[1, 0:3] = DENY
    canvas.set_mask(ex.mask, over, row_labels=ex.tokens, col_labels=ex.tokens, title="mask")
    canvas.set_tiles(np.array([[2, 1, 0], [1, 1, 0], [0, 1, 2]], dtype=np.int8), 4, 4)
    grid = HeadGrid()
    grid.set_matrices(np.stack([np.stack([widget_samples.peaked_matrix(64, seed=4 * r + c)[0] for c in range(4)])
                                for r in range(2)]), ["L0", "L1"], [f"h{c}" for c in range(4)])
    image = PatchImageView()
    image.set_image(widget_samples.sample_image(224, 224), grid=(14, 14), patch=16)
    chips = TokenChips()
    chips.set_tokens(ex.tokens, ex.ids, ex.segments)
    apply_theme(qapp, theme)
    try:
        for name, w in (("heatmap", heatmap), ("mask", canvas), ("grid", grid), ("image", image), ("chips", chips)):
            qtbot.addWidget(w)
            w.resize(640, 480)
            w.show()
            qtbot.waitExposed(w)
            qtbot.wait(20)
            img = QImage(str(export_png(w, tmp_path / f"{name}.png")))
            assert (img.width(), img.height()) == (w.width(), w.height()), name
            assert (img.pixelColor(2, 2).lightness() < 60) == (theme == "dark"), name
    finally:
        apply_theme(qapp, "light")


def test_one_capture_gives_the_exact_pixel_size_at_every_scale(heatmap, monkeypatch):
    """export.capture is the application's one picture of a widget (PNG export, --screenshot, the start-up check):
    exactly png_size pixels, also where the widget's own grab would have another size (a high-DPI screen)."""
    from PySide6.QtGui import QPixmap

    from attnviz.ui import export

    assert export.capture(heatmap).size().toTuple() == (500, 420)
    assert export.capture(heatmap, 2.0).size().toTuple() == (1000, 840)
    doubled = QPixmap(1000, 840)  # what grab() returns at a device pixel ratio of 2
    monkeypatch.setattr(type(heatmap), "grab", lambda self, *a: doubled)
    img = export.capture(heatmap)
    assert img.size().toTuple() == (500, 420)
    assert len({img.pixel(x, y) for x in range(0, 500, 25) for y in range(0, 420, 21)}) > 3  # painted, not blank


def test_capture_is_the_only_grab_in_the_application():
    import pathlib
    import re

    root = pathlib.Path(__file__).resolve().parents[3] / "attnviz"
    grabs = [str(p.relative_to(root)) for p in root.rglob("*.py") if re.search(r"\.grab\(\)", p.read_text())]
    assert grabs == ["ui/export.py"]
