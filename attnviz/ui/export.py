"""Export of what a widget shows (PNG by grabbing it, SVG by painting it into a QSvgGenerator —
pyqtgraph's own SVG exporter fails on PySide6 >= 6.11) and of the arrays behind it (CSV with token
labels, NPY). pyqtgraph's CSV exporter writes nothing for an image, so arrays are written directly."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Optional, Sequence

import numpy as np
from PySide6.QtCore import QPoint, QRect, QSize
from PySide6.QtGui import QImage, QPainter
from PySide6.QtSvg import QSvgGenerator
from PySide6.QtWidgets import QWidget


class ExportError(OSError):
    """A file could not be written."""


def _parent_ok(path: Path) -> None:
    if not path.parent.exists():
        raise ExportError(f"folder {path.parent} does not exist")


PNG_SCALES = (1, 2, 3, 4)  # resolutions offered, as multiples of the on-screen size
MAX_PNG_SIDE = 16384  # pixels per side at most (a larger image is refused, not half-written)


def png_size(widget: QWidget, scale: float) -> tuple[int, int]:
    """(width, height) in pixels of ``widget`` exported at ``scale`` times its on-screen size."""
    return max(1, round(widget.width() * scale)), max(1, round(widget.height() * scale))


def scale_for_width(widget: QWidget, width: int) -> float:
    """The scale that makes the exported image ``width`` pixels wide (the height follows)."""
    if widget.width() <= 0:
        raise ExportError("cannot export a widget with no size (show or resize it first)")
    return float(width) / widget.width()


def capture(widget: QWidget, scale: float = 1.0) -> QImage:
    """What ``widget`` shows, as a QImage of exactly :func:`png_size` pixels: the widget's own grab where that
    has the size (scale 1 on a screen of device pixel ratio 1), else the widget painted at that device pixel
    ratio, so text and lines are drawn sharp at the larger size and matrix cells stay crisp blocks. The one
    capture of the application: PNG export, ``--screenshot`` and the start-up check of a drawn heatmap."""
    w, h = png_size(widget, scale)
    if scale == 1.0:
        image = widget.grab().toImage()
        if (image.width(), image.height()) == (w, h):
            return image
    image = QImage(w, h, QImage.Format.Format_ARGB32_Premultiplied)
    image.setDevicePixelRatio(w / max(1, widget.width()))
    image.fill(widget.palette().window().color())
    painter = QPainter()
    if not painter.begin(image):
        raise ExportError(f"could not draw the {w} x {h} picture")
    try:
        painter.setRenderHint(QPainter.RenderHint.Antialiasing, True)
        painter.setRenderHint(QPainter.RenderHint.TextAntialiasing, True)
        widget.render(painter, QPoint(0, 0))
    finally:
        painter.end()
    image.setDevicePixelRatio(1.0)
    return image


def export_png(widget: QWidget, path, scale: float = 1.0) -> Path:
    """Save what ``widget`` shows as a PNG image at ``scale`` times its on-screen size: the widget
    paints itself at that device pixel ratio, so text and lines are drawn sharp at the larger size
    (as on a high-DPI screen) and matrix cells stay crisp blocks, never a blurred enlargement."""
    path = Path(path)
    _parent_ok(path)
    if not (isinstance(scale, (int, float)) and np.isfinite(scale) and scale > 0):
        raise ExportError(f"the PNG scale must be a positive number, got {scale!r}")
    if widget.width() <= 0 or widget.height() <= 0:
        raise ExportError("cannot export a widget with no size (show or resize it first)")
    w, h = png_size(widget, scale)
    if max(w, h) > MAX_PNG_SIDE:
        raise ExportError(f"a {w} x {h} picture is larger than {MAX_PNG_SIDE} pixels per side: choose a smaller "
                          "resolution")
    image = capture(widget, scale)
    if not image.save(str(path), "PNG"):
        raise ExportError(f"could not write PNG {path}")
    return path


def export_svg(widget: QWidget, path, title: str = "attnviz") -> Path:
    """Paint ``widget`` (and its children) into an SVG file."""
    path = Path(path)
    _parent_ok(path)
    size = widget.size()
    if size.width() <= 0 or size.height() <= 0:
        raise ExportError("cannot export a widget with no size (show or resize it first)")
    gen = QSvgGenerator()
    gen.setFileName(str(path))
    gen.setSize(QSize(size))
    gen.setViewBox(QRect(0, 0, size.width(), size.height()))
    gen.setTitle(title)
    gen.setDescription("exported by attnviz")
    painter = QPainter()
    if not painter.begin(gen):
        raise ExportError(f"could not write SVG {path}")
    try:
        widget.render(painter, QPoint(0, 0))  # the painter overload needs the offset
    finally:
        painter.end()
    if not path.exists() or path.stat().st_size == 0:
        raise ExportError(f"could not write SVG {path}")
    return path


def _fmt(v) -> str:
    return str(v.item() if isinstance(v, np.generic) and v.dtype == np.bool_ else v)


def export_csv(array, path, row_labels: Optional[Sequence[str]] = None,
               col_labels: Optional[Sequence[str]] = None) -> Path:
    """Write a 2-D array as CSV: a header row of column labels, each row led by its label (indices
    when labels are not given). Numbers are written in their shortest round-trip form."""
    a = np.asarray(array)
    if a.ndim != 2:
        raise ValueError(f"CSV export needs a 2-D array, got shape {a.shape}")
    n_rows, n_cols = a.shape
    rows = [str(i) for i in range(n_rows)] if row_labels is None else [str(s) for s in row_labels]
    cols = [str(j) for j in range(n_cols)] if col_labels is None else [str(s) for s in col_labels]
    if len(rows) != n_rows or len(cols) != n_cols:
        raise ValueError(f"{len(rows)} row / {len(cols)} column labels for a {n_rows}x{n_cols} array")
    path = Path(path)
    _parent_ok(path)
    try:
        with path.open("w", newline="", encoding="utf-8") as fh:
            w = csv.writer(fh)
            w.writerow(["query \\ key", *cols])
            for label, row in zip(rows, a):
                w.writerow([label, *(_fmt(v) for v in row)])
    except OSError as e:
        raise ExportError(f"could not write CSV {path}: {e}") from e
    return path


def export_npy(array, path) -> Path:
    """Write ``array`` to exactly ``path`` in NumPy's .npy format."""
    path = Path(path)
    _parent_ok(path)
    try:
        with path.open("wb") as fh:
            np.save(fh, np.asarray(array), allow_pickle=False)
    except OSError as e:
        raise ExportError(f"could not write NPY {path}: {e}") from e
    return path
