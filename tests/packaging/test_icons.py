"""The application icon: an SVG source, and PNG renderings of it at every size the desktop entry and
the bundle use, each a real PNG of the right size that ``packaging/make_icons.py`` reproduces."""

from __future__ import annotations

import struct
import xml.etree.ElementTree as ET

import numpy as np
import pytest
from PIL import Image

from pkgpaths import APP_ID, ICON_SIZES, LINUX, load_script

HICOLOR = LINUX / "icons" / "hicolor"
SVG = HICOLOR / "scalable" / "apps" / f"{APP_ID}.svg"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _png(size: int):
    return HICOLOR / f"{size}x{size}" / "apps" / f"{APP_ID}.png"


def test_svg_is_a_square_svg_document():
    root = ET.parse(SVG).getroot()
    assert root.tag == "{http://www.w3.org/2000/svg}svg"
    x, y, w, h = (float(v) for v in root.get("viewBox").split())
    assert (x, y) == (0, 0) and w == h > 0


@pytest.mark.parametrize("size", ICON_SIZES)
def test_png_exists_with_the_right_header_and_size(size):
    data = _png(size).read_bytes()
    assert data[:8] == PNG_SIGNATURE
    assert data[12:16] == b"IHDR"
    width, height = struct.unpack(">II", data[16:24])
    assert (width, height) == (size, size)
    with Image.open(_png(size)) as im:
        assert im.format == "PNG" and im.mode == "RGBA" and im.size == (size, size)


@pytest.mark.parametrize("size", ICON_SIZES)
def test_png_has_transparent_corners_and_an_opaque_middle(size):
    with Image.open(_png(size)) as im:
        alpha = np.asarray(im)[:, :, 3]  # (size, size)
    assert alpha[0, 0] == 0 and alpha[-1, -1] == 0  # rounded background, no square box
    assert alpha[size // 2, size // 2] == 255


def test_make_icons_reproduces_the_committed_pngs(tmp_path):
    """The PNGs are renderings of the SVG, not hand-edited files: rendering again gives the same pixels."""
    make_icons = load_script("make_icons")
    sizes = (16, 64, 256)
    written = make_icons.make_icons(SVG, tmp_path, sizes=sizes)
    assert [p.relative_to(tmp_path).as_posix() for p in written] == [
        f"{s}x{s}/apps/{APP_ID}.png" for s in sizes]
    for size, path in zip(sizes, written):
        with Image.open(path) as fresh, Image.open(_png(size)) as committed:
            a = np.asarray(fresh, dtype=np.int16)  # (size, size, 4)
            b = np.asarray(committed, dtype=np.int16)  # (size, size, 4)
        assert a.shape == b.shape == (size, size, 4)
        assert np.abs(a - b).max() <= 2, f"{size}px icon differs from a fresh rendering of the SVG"


def test_make_icons_refuses_a_broken_svg(tmp_path):
    make_icons = load_script("make_icons")
    broken = tmp_path / "broken.svg"
    broken.write_text("<svg", encoding="utf-8")
    with pytest.raises(ValueError, match="not a valid SVG"):
        make_icons.render(broken, 16)
