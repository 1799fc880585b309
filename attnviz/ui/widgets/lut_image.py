"""LutImageItem: a pyqtgraph ImageItem for single-channel images drawn through a colour table, converted
once per change, in numpy, into a premultiplied ARGB32 QImage. pyqtgraph hands such images to Qt as
Indexed8, which Qt's raster painter converts again on every paint (measured: ~4 ms for 622 x 744
against ~0.2 ms as ARGB32), and a heatmap repaints on every hover and zoom step. The data model and
the value -> entry rule stay pyqtgraph's; what the fast path does not cover (NaN, a callable LUT ...)
falls back to pyqtgraph's own conversion.
"""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtGui import QImage


def premultiplied_argb32(lut: np.ndarray) -> np.ndarray:
    """(n,) uint32 premultiplied ARGB32 pixels of an (n, 3|4) uint8 RGB(A) table."""
    t = np.asarray(lut, dtype=np.uint8)
    if t.ndim != 2 or t.shape[1] not in (3, 4):
        raise ValueError(f"colour table must be (n, 3) or (n, 4) uint8, got shape {t.shape}")
    a = t[:, 3].astype(np.uint32) if t.shape[1] == 4 else np.full(len(t), 255, dtype=np.uint32)  # (n,)
    rgb = (t[:, :3].astype(np.uint32) * a[:, None] + 127) // 255  # (n, 3) premultiplied
    return (a << 24) | (rgb[:, 0] << 16) | (rgb[:, 1] << 8) | rgb[:, 2]  # (n,)


#: table indices looked up per slice of rows (see ``table_pixels``)
TAKE_CHUNK = 1 << 15


def table_pixels(table: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """(H, W) ``table[idx]``, looked up a slice of rows at a time: ``take`` turns its indices into a
    temporary array of 8-byte integers, which for a large image (a hatched overlay of 1536 x 1116) is a
    fresh block of memory whose first touch cost twice as much as the look-up (37 ms against 19 ms)."""
    if idx.ndim != 2 or idx.size <= TAKE_CHUNK:
        return np.take(table, idx)  # take: twice as fast as [] here
    out = np.empty(idx.shape, dtype=table.dtype)  # (H, W)
    step = max(1, TAKE_CHUNK // max(idx.shape[1], 1))
    for y in range(0, idx.shape[0], step):
        np.take(table, idx[y:y + step], out=out[y:y + step])
    return out


class LutImageItem(pg.ImageItem):
    """Row-major ImageItem whose single-channel images are converted to ARGB32 in numpy."""

    def __init__(self, **kwargs):
        kwargs.setdefault("axisOrder", "row-major")
        super().__init__(**kwargs)
        self._argb: np.ndarray | None = None  # (H, W) uint32 buffer the QImage points into
        self._table_key: tuple | None = None
        self._table: np.ndarray | None = None

    def _argb_table(self, lut: np.ndarray) -> np.ndarray:
        key = (lut.shape, lut.tobytes())
        if key != self._table_key:
            self._table_key, self._table = key, premultiplied_argb32(lut)
        return self._table

    def _indices(self, image: np.ndarray, n: int) -> np.ndarray | None:
        """Table index per pixel, or None when pyqtgraph's conversion must be used instead."""
        levels = self.levels
        if image.dtype == np.uint8 and levels is None:
            return image if n == 256 else np.minimum(image, n - 1)
        if image.dtype.kind != "f" or levels is None:
            return None
        lv = np.asarray(levels, dtype=np.float64)
        if lv.shape != (2,) or not np.isfinite(lv).all():
            return None
        if np.isnan(image.min()):
            return None  # NaN pixels are drawn transparent by pyqtgraph's path
        lo, hi = float(lv[0]), float(lv[1])
        scale = n / (hi - lo) if hi != lo else float(n)
        s = np.subtract(image, np.float32(lo), dtype=np.float32)  # (H, W)
        s *= np.float32(scale)
        np.clip(s, 0, n - 1, out=s)
        return s.astype(np.uint8 if n <= 256 else np.uint16)

    def render(self):
        image, lut = self.image, self.lut
        if (image is None or image.size == 0 or image.ndim != 2 or self.autoDownsample
                or not isinstance(lut, np.ndarray) or lut.ndim != 2 or lut.shape[1] not in (3, 4)
                or lut.dtype != np.uint8):
            self._argb = None
            return super().render()
        idx = self._indices(image, len(lut))
        if idx is None:
            self._argb = None
            return super().render()
        argb = table_pixels(self._argb_table(lut), idx)  # (H, W) uint32
        H, W = argb.shape
        self._argb = argb  # the QImage does not own its pixels: keep them alive with the item
        self.qimage = QImage(argb.data, W, H, 4 * W, QImage.Format.Format_ARGB32_Premultiplied)
        self._renderRequired = False
        self._unrenderable = False
