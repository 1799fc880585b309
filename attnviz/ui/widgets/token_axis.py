"""An axis that labels matrix rows or columns with token text, placing one label at the centre of
every ``step``-th cell so that labels never overlap; the step follows the zoom."""

from __future__ import annotations

import math
from typing import Optional, Sequence

import pyqtgraph as pg
from PySide6.QtGui import QFont, QFontMetricsF

from attnviz.model.display.cell_geometry import AXIS_LABEL_CHARS, compact_label, label_step, labelled_cells

# widest label measured exactly; beyond this many labels the rest are estimated from character count
_MEASURE_LIMIT = 4096


def display_label(text: str, max_chars: int) -> str:
    """Token text made printable on one line and cut to ``max_chars`` characters in the middle, by
    the same rule as :func:`~attnviz.model.display.cell_geometry.compact_label` (a block's token index stays)."""
    s = str(text)
    if len(s) <= max_chars and s.isprintable():  # the common case: nothing to replace or cut
        return s
    s = s.replace("\r\n", "↵").replace("\n", "↵").replace("\r", "↵").replace("\t", "→")
    s = "".join(ch if ch.isprintable() else "·" for ch in s)
    return compact_label(s, max_chars)


class TokenAxis(pg.AxisItem):
    """``left`` or ``top`` axis of a cell matrix whose labels thin out when they would overlap."""

    def __init__(self, orientation: str, *, max_chars: int = AXIS_LABEL_CHARS, point_size: float = 8.0, max_width: int = 150):
        if orientation not in ("left", "top"):
            raise ValueError(f"token axis orientation must be 'left' or 'top', got {orientation!r}")
        super().__init__(orientation)
        self._max_chars = max_chars
        self._max_width = max_width
        font = QFont()
        font.setPointSizeF(point_size)
        self._metrics = QFontMetricsF(font)
        self.setStyle(tickFont=font, tickTextOffset=3, tickLength=3, autoExpandTextSpace=False,
                      autoReduceTextSpace=False, hideOverlappingLabels=False)
        self._n = -1  # no labels set yet (set_labels below makes it 0)
        self._texts: Optional[list[str]] = None
        self._given: Optional[list] = None  # the labels of the last set_labels, to skip a repeat
        self._widths: dict[str, float] = {}  # horizontal advance per shown text (fonts do not change)
        self._spacing = 10.0
        self.set_labels(None, 0)

    # -- data -------------------------------------------------------------------------------
    def set_labels(self, labels: Optional[Sequence[str]], n: int) -> None:
        """Label ``n`` cells with ``labels`` (or their indices when None)."""
        if labels is not None and len(labels) != n:
            raise ValueError(f"{len(labels)} labels given for {n} {'rows' if self.orientation == 'left' else 'columns'}")
        given = None if labels is None else list(labels)
        if int(n) == self._n and given == self._given and (given is None or self._texts is not None):
            return  # live updates pass the same labels again: keep the layout and the drawn axis
        self._n = int(n)
        self._given = given
        self._texts = None if given is None else [display_label(s, self._max_chars) for s in given]
        sample = self._texts[:_MEASURE_LIMIT] if self._texts is not None else [str(max(n - 1, 0))]
        widest = max((self._width(s) for s in set(sample)), default=0.0)
        if self._texts is not None and len(self._texts) > _MEASURE_LIMIT:
            longest = max(len(s) for s in self._texts)
            widest = max(widest, longest * self._metrics.averageCharWidth())
        if self.orientation == "left":
            self._spacing = self._metrics.height() + 2.0
            self.setWidth(int(min(widest + 12, self._max_width)))
        else:
            self._spacing = widest + 8.0
            self.setHeight(int(self._metrics.height() + 8))
        self.picture = None
        self.update()

    def _width(self, text: str) -> float:
        w = self._widths.get(text)
        if w is None:
            if len(self._widths) > 65536:
                self._widths.clear()
            w = self._widths[text] = self._metrics.horizontalAdvance(text)
        return w

    def text(self, index: int) -> str:
        if self._texts is None:
            return str(index)
        return self._texts[index]

    @property
    def min_spacing(self) -> float:
        """Pixels between neighbouring labels' centres needed for them not to overlap."""
        return self._spacing

    # -- pyqtgraph hooks --------------------------------------------------------------------------
    def tickValues(self, minVal, maxVal, size):
        if self._n == 0 or size <= 0:
            return []
        lo, hi = min(minVal, maxVal), max(minVal, maxVal)  # an inverted view gives them reversed
        step = label_step(hi - lo, size, self._spacing)
        cells = labelled_cells(lo, hi, step, self._n)
        return [(step, [c + 0.5 for c in cells])]

    def tickStrings(self, values, scale, spacing):
        return [self.text(min(max(int(math.floor(v)), 0), self._n - 1)) for v in values]

    def shown_labels(self) -> list[tuple[int, str]]:
        """(cell, text) of the labels drawn at the axis's current range and length."""
        length = self.geometry().height() if self.orientation == "left" else self.geometry().width()
        levels = self.tickValues(self.range[0], self.range[1], length)
        if not levels:
            return []
        cells = [int(math.floor(v)) for v in levels[0][1]]
        return [(c, self.text(c)) for c in cells]
