"""LutImageItem draws the same pixels as pyqtgraph's own conversion, in premultiplied ARGB32."""

import numpy as np
import pyqtgraph as pg
import pytest
from PySide6.QtGui import QImage

from attnviz.model.display.overlays import code_lut, hatch_codes, hatch_lut
from attnviz.ui import colormaps
from attnviz.ui.widgets.lut_image import LutImageItem, premultiplied_argb32


def _pixels(item) -> np.ndarray:
    """(H, W, 4) bytes of the item's rendered QImage as premultiplied ARGB32."""
    item.render()
    q = item.qimage.convertToFormat(QImage.Format.Format_ARGB32_Premultiplied)
    h, w = q.height(), q.width()
    buf = np.frombuffer(q.constBits(), dtype=np.uint8, count=q.sizeInBytes())
    return buf.reshape(h, q.bytesPerLine())[:, : 4 * w].reshape(h, w, 4).copy()


def _pair(image, **opts):
    ours, theirs = LutImageItem(), pg.ImageItem(axisOrder="row-major")
    for item in (ours, theirs):
        item.setImage(image, autoLevels=False, autoDownsample=False, **opts)
    return _pixels(ours), _pixels(theirs), ours


@pytest.mark.parametrize("cmap", ["viridis", "gray"])
def test_float_image_with_levels_and_lut_matches_pyqtgraph(qapp, cmap):
    rng = np.random.default_rng(0)
    v = rng.random((37, 53)).astype(np.float32) * 3.0 - 0.5  # values beyond both levels are clipped
    v[5, 7], v[6, 8] = 0.0, 2.0  # exactly at the levels
    ours, theirs, item = _pair(v, levels=(0.0, 2.0), lut=colormaps.lut(cmap))
    assert item.qimage.format() == QImage.Format.Format_ARGB32_Premultiplied
    assert ours.shape == (37, 53, 4)
    assert np.abs(ours.astype(int) - theirs.astype(int)).max() <= 1
    assert (ours != ours[0, 0]).any()  # not a flat image


def test_codes_through_a_table_match_pyqtgraph_including_transparency(qapp):
    masked = np.random.default_rng(1).random((9, 11)) < 0.4
    codes = hatch_codes(masked, 4)  # (36, 44) clear / base / stripe
    ours, theirs, _ = _pair(codes, lut=hatch_lut("#102030", "#c0d0e0"), levels=None)
    np.testing.assert_array_equal(ours, theirs)
    assert (ours[..., 3] == 0).any() and (ours[..., 3] == 255).any()
    wash = code_lut([(200, 100, 50, 150), (0, 0, 0, 0)])  # half-transparent entries are premultiplied
    states = (np.arange(12).reshape(3, 4) % 2).astype(np.uint8)
    ours, theirs, _ = _pair(states, lut=wash, levels=None)
    assert np.abs(ours.astype(int) - theirs.astype(int)).max() <= 1
    assert tuple(premultiplied_argb32(wash[:1])[:1].view(np.uint8)) == (29, 59, 118, 150)  # b, g, r, a bytes


def test_nan_pixels_fall_back_to_transparent(qapp):
    v = np.ones((4, 5), dtype=np.float32)
    v[1, 2] = np.nan
    ours, theirs, _ = _pair(v, levels=(0.0, 2.0), lut=colormaps.lut("viridis"))
    np.testing.assert_array_equal(ours, theirs)
    assert ours[1, 2, 3] == 0 and ours[0, 0, 3] == 255


def test_a_large_image_is_looked_up_a_slice_of_rows_at_a_time_with_the_same_pixels():
    from attnviz.ui.widgets.lut_image import TAKE_CHUNK, table_pixels

    rng = np.random.default_rng(3)
    table = rng.integers(0, 2**32, size=256, dtype=np.uint32)  # (256,)
    for shape in ((1537, 1115), (3, TAKE_CHUNK + 7), (TAKE_CHUNK + 5, 1)):  # rows left over, one wide row, one column
        idx = rng.integers(0, 256, size=shape).astype(np.uint8)
        out = table_pixels(table, idx)
        assert out.shape == shape and out.dtype == np.uint32
        np.testing.assert_array_equal(out, table[idx])
