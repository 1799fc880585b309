"""Render the application icon's PNG sizes from its SVG (the SVG is the source; the PNGs are committed).

The PNGs go into the freedesktop ``hicolor`` layout beside the SVG,
``packaging/linux/icons/hicolor/<n>x<n>/apps/<app id>.png``, so an installer can copy the tree as it
is. Rendering uses Qt's own SVG renderer offscreen, so no display and no other tool is needed:

    QT_QPA_PLATFORM=offscreen .venv/bin/python packaging/make_icons.py
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from PySide6.QtCore import QRectF, Qt  # noqa: E402
from PySide6.QtGui import QImage, QPainter  # noqa: E402
from PySide6.QtWidgets import QApplication  # noqa: E402
from PySide6.QtSvg import QSvgRenderer  # noqa: E402

APP_ID = "io.github.attnviz.attnviz"
SIZES = (16, 32, 48, 64, 128, 256)
HICOLOR = Path(__file__).resolve().parent / "linux" / "icons" / "hicolor"
SVG = HICOLOR / "scalable" / "apps" / f"{APP_ID}.svg"


def png_path(size: int, root: Path = HICOLOR) -> Path:
    """Where the PNG rendering of ``size`` pixels lives."""
    return root / f"{size}x{size}" / "apps" / f"{APP_ID}.png"


def render(svg: Path, size: int) -> QImage:
    """The SVG drawn into a transparent ``size`` x ``size`` image, antialiased."""
    renderer = QSvgRenderer(str(svg))
    if not renderer.isValid():
        raise ValueError(f"{svg} is not a valid SVG file")
    image = QImage(size, size, QImage.Format.Format_ARGB32_Premultiplied)
    image.fill(Qt.GlobalColor.transparent)
    painter = QPainter(image)
    painter.setRenderHint(QPainter.RenderHint.Antialiasing)
    painter.setRenderHint(QPainter.RenderHint.SmoothPixmapTransform)
    renderer.render(painter, QRectF(0, 0, size, size))
    painter.end()
    return image.convertToFormat(QImage.Format.Format_ARGB32)


def make_icons(svg: Path = SVG, root: Path = HICOLOR, sizes=SIZES) -> list[Path]:
    """Write one PNG per size; return their paths."""
    # a QApplication (not only QGuiApplication): the test-suite shares one process with widget tests
    app = QApplication.instance() or QApplication([])  # noqa: F841  QImage text/painting needs it
    written = []
    for size in sizes:
        out = png_path(size, root)
        out.parent.mkdir(parents=True, exist_ok=True)
        if not render(svg, size).save(str(out), "PNG"):
            raise OSError(f"could not write {out}")
        written.append(out)
    return written


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--svg", type=Path, default=SVG, help="the source SVG")
    parser.add_argument("--out", type=Path, default=HICOLOR, help="the hicolor folder to write into")
    args = parser.parse_args(argv)
    for path in make_icons(args.svg, args.out):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
