"""The RGBA images drawn beside a matrix's values, without Qt: colours, the hatch of masked cells,
segment bands and the left strip of fully masked rows."""

from __future__ import annotations

import numpy as np
import pytest

from attnviz.model.display.overlays import (HATCH_BASE, HATCH_CLEAR, HATCH_STRIPE, band_rgba, code_lut, hatch_codes,
                                            hatch_lut, hex_rgba, overlay_factor, segment_at,
                                            segment_colors, strip_rgba, upsample)
from attnviz.model.segments import Segment


def test_hex_colours():
    assert hex_rgba("#102030") == (16, 32, 48, 255)
    assert hex_rgba("c0d0e0", 7) == (192, 208, 224, 7)
    for bad in ("#12345", "#12345g", "red"):
        with pytest.raises(ValueError, match="#rrggbb"):
            hex_rgba(bad)


def test_overlay_factor_fits_the_budget():
    assert overlay_factor((10, 20)) == 16  # small matrices: capped at MAX_FACTOR
    assert overlay_factor((200, 100)) == 7  # 1536 // 200
    assert overlay_factor((5000, 10)) == 1  # never below one sub-pixel per cell
    assert overlay_factor((0, 0)) == 16


def test_upsample_repeats_every_cell():
    a = np.arange(6).reshape(2, 3)
    up = upsample(a, 3)  # (6, 9)
    assert up.shape == (6, 9)
    np.testing.assert_array_equal(up[::3, ::3], a)
    np.testing.assert_array_equal(up[2::3, 1::3], a)
    same = upsample(a, 1)
    np.testing.assert_array_equal(same, a)
    assert same is not a


def test_hatch_codes_and_image():
    masked = np.array([[True, False], [False, True]])
    np.testing.assert_array_equal(hatch_codes(masked, 1), masked.astype(np.uint8))
    assert set(np.unique(hatch_codes(masked, 2))) == {HATCH_CLEAR, HATCH_BASE}  # too small for stripes
    codes = hatch_codes(masked, 4)  # (8, 8)
    assert codes.shape == (8, 8)
    assert (codes[:4, 4:] == HATCH_CLEAR).all() and (codes[4:, :4] == HATCH_CLEAR).all()
    for cell in (codes[:4, :4], codes[4:, 4:]):
        assert set(np.unique(cell)) == {HATCH_BASE, HATCH_STRIPE}
    rgba = hatch_lut("#102030", "#c0d0e0")[codes]  # (8, 8, 4): how the heatmap colours its hatch
    assert tuple(rgba[codes == HATCH_BASE][0]) == (16, 32, 48, 255)
    assert tuple(rgba[codes == HATCH_STRIPE][0]) == (192, 208, 224, 255)
    assert (rgba[codes == HATCH_CLEAR] == 0).all()


def test_code_lut_is_transparent_beyond_its_colours():
    table = code_lut([(1, 2, 3, 4), (5, 6, 7, 8)])
    assert table.shape == (256, 4) and table.dtype == np.uint8
    assert table[:2].tolist() == [[1, 2, 3, 4], [5, 6, 7, 8]] and not table[2:].any()


def test_segment_colours_bands_and_strip():
    segs = [Segment("a", 0, 4, "#ff0000"), Segment("b", 4, 6, "#00ff00")]
    colours = segment_colors(segs, 8, alpha=9)  # (8, 4)
    assert colours[0].tolist() == [255, 0, 0, 9] and colours[5].tolist() == [0, 255, 0, 9]
    assert not colours[6:].any()  # outside every segment
    with pytest.raises(ValueError, match="beyond the 5 tokens"):
        segment_colors(segs, 5)
    assert segment_at(segs, 4).name == "b" and segment_at(segs, 6) is None
    band = band_rgba(8, segs, max_len=4)  # (1, 4, 4): bins start at tokens 0, 2, 4, 6
    assert band.shape == (1, 4, 4) and band.flags.c_contiguous
    assert [tuple(c[:3]) for c in band[0]] == [(255, 0, 0), (255, 0, 0), (0, 255, 0), (0, 0, 0)]
    flagged = np.zeros(8, dtype=bool)
    flagged[3] = True
    strip = strip_rgba(8, segs, flagged, "#0000ff", max_len=4)  # (4, 2, 4)
    assert strip.shape == (4, 2, 4)
    assert [tuple(c) for c in strip[:, 0]] == [(0, 0, 0, 0), (0, 0, 255, 255), (0, 0, 0, 0), (0, 0, 0, 0)]
    np.testing.assert_array_equal(strip[:, 1], band[0])
    assert not strip_rgba(8, segs, None, "#0000ff")[:, 0].any()
    with pytest.raises(ValueError, match=r"row flags must have shape \(8,\)"):
        strip_rgba(8, segs, flagged[:5], "#0000ff")
