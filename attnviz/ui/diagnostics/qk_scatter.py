"""QKScatter: a head's queries and keys in one shared 2-D PCA frame (``attnviz.model.diagnostics.
qk_embedding``). Queries are circles, keys triangles; colour shows either the side (query vs key) or
the token's segment. Hovering a point names its token; clicking one reports it, so the owner can
select that query or key. The selected query and key are drawn larger with an outline.
"""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Signal
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLabel, QVBoxLayout, QWidget

from attnviz.ui.diagnostics.common import KEY_COLOUR, QUERY_COLOUR, make_plot
from attnviz.ui.theme import current_theme

LABELLED_POINTS = 32  # name points in the plot when a side has at most this many
COLOUR_MODES = (("query vs key", "side"), ("segment", "segment"))


def _segment_of(segments, t: int):
    for s in segments:
        if s.start <= t < s.stop:
            return s
    return None


class QKScatter(QWidget):
    """Joint PCA scatter of one head's q and k rows."""

    point_clicked = Signal(str, int)  # ("q" or "k", token index)

    def __init__(self, parent=None):
        super().__init__(parent)
        self.plot = make_plot("", "PC 1", "PC 2", inside_legend=True)
        item = self.plot.getPlotItem()
        item.setAspectLocked(True)  # distances in the picture are distances in head space
        item.getViewBox().setDefaultPadding(0.12)  # room for the point names
        for side in ("left", "bottom"):
            item.getAxis(side).enableAutoSIPrefix(False)
        self.queries = pg.ScatterPlotItem(symbol="o", size=11, hoverable=True, name="queries",
                                          brush=pg.mkBrush(QUERY_COLOUR), pen=pg.mkPen(QUERY_COLOUR))
        self.keys = pg.ScatterPlotItem(symbol="t", size=12, hoverable=True, name="keys",
                                       brush=pg.mkBrush(KEY_COLOUR), pen=pg.mkPen(KEY_COLOUR))
        self.selected = pg.ScatterPlotItem(size=18, pen=pg.mkPen(current_theme().plot_foreground, width=2.5),
                                           brush=None)
        self.selected.setAcceptHoverEvents(False)
        self.selected.setZValue(5)
        self._texts: list[pg.TextItem] = []
        for item, side in ((self.queries, "q"), (self.keys, "k")):
            self.plot.addItem(item)
            item.sigHovered.connect(lambda _it, pts, _ev, side=side: self._on_hover(side, pts))
            item.sigClicked.connect(lambda _it, pts, _ev, side=side: self._on_click(side, pts))
        self.plot.getPlotItem().addItem(self.selected, ignoreBounds=True)
        self.plot.getPlotItem().legend.removeItem(self.selected)
        self.colour_by = QComboBox(self)
        for text, key in COLOUR_MODES:
            self.colour_by.addItem(text, key)
        self.colour_by.currentIndexChanged.connect(lambda *_: self._restyle())
        self.hover = QLabel(" ", self)
        self.info = QLabel(" ", self)
        for label in (self.hover, self.info):  # a long line wraps instead of widening the workspace
            label.setWordWrap(True)
        self.info.setStyleSheet("color: palette(mid);")
        top = QHBoxLayout()
        top.addWidget(QLabel("colour by", self))
        top.addWidget(self.colour_by)
        top.addWidget(self.info, 1)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addLayout(top)
        lay.addWidget(self.plot, 1)
        lay.addWidget(self.hover)
        self._emb = None
        self._labels = {"q": (), "k": ()}
        self._segments = {"q": (), "k": ()}
        self._selected = {"q": None, "k": None}

    def set_embedding(self, emb, query_labels, key_labels, query_segments=(), key_segments=(),
                      selected_query=None, selected_key=None) -> None:
        """Draw a ``QKEmbedding`` with its token labels and segments."""
        self._emb = emb
        self._labels = {"q": tuple(query_labels), "k": tuple(key_labels)}
        self._segments = {"q": tuple(query_segments), "k": tuple(key_segments)}
        ev = emb.explained_variance
        self.info.setText(f"PC 1 explains {ev[0]:.0%}, PC 2 {ev[1]:.0%} of the joint variance")
        self._restyle()
        self._label_points()
        self.set_selection(selected_query, selected_key)
        self.plot.getPlotItem().enableAutoRange()

    @property
    def embedding(self):
        """The 2-D embedding drawn (``q_xy``, ``k_xy``), None while there is none (cleared, or computing)."""
        return self._emb

    def set_selection(self, query=None, key=None) -> None:
        """Outline the selected query and key (cheap: the other points are not redrawn)."""
        self._selected = {"q": query, "k": key}
        if self._emb is None:
            self.selected.clear()
            return
        xs, ys, symbols = [], [], []
        for side, xy, symbol in (("q", self._emb.q_xy, "o"), ("k", self._emb.k_xy, "t")):
            t = self._selected[side]
            if t is not None and 0 <= t < xy.shape[0]:
                xs.append(float(xy[t, 0]))
                ys.append(float(xy[t, 1]))
                symbols.append(symbol)
        self.selected.setData(x=xs, y=ys, symbol=symbols)

    def clear(self, message: str = " ") -> None:
        self._emb = None
        self._drop_texts()
        self.queries.clear()
        self.keys.clear()
        self.info.setText(message)

    def describe(self, side: str, index: int) -> str:
        """The hover text of a point: side, index, token and segment."""
        labels = self._labels[side]
        tok = labels[index] if index < len(labels) else "?"
        seg = _segment_of(self._segments[side], index)
        xy = (self._emb.q_xy if side == "q" else self._emb.k_xy)[index] if self._emb is not None else (0, 0)
        where = f" [{seg.name}]" if seg is not None else ""
        return (f"{'query' if side == 'q' else 'key'} {index} {tok!r}{where}  ·  "
                f"PC1 {xy[0]:.3g}, PC2 {xy[1]:.3g}")

    def brushes(self, side: str) -> list[str]:
        """Fill colour of every point of one side under the current colour mode."""
        n = len(self._labels[side])
        if self.colour_by.currentData() == "segment":
            out = []
            for t in range(n):
                seg = _segment_of(self._segments[side], t)
                out.append(seg.color if seg is not None else "#888888")
            return out
        return [QUERY_COLOUR if side == "q" else KEY_COLOUR] * n

    def _restyle(self):
        if self._emb is None:
            return
        for side, item, xy in (("q", self.queries, self._emb.q_xy), ("k", self.keys, self._emb.k_xy)):
            n = xy.shape[0]
            cache = {}  # one brush object per colour, so the symbol atlas renders each style once
            brushes = []
            for c in self.brushes(side):
                b = cache.get(c)
                if b is None:  # made once per colour (setdefault made a brush for every point)
                    b = cache[c] = pg.mkBrush(c)
                brushes.append(b)
            pen = pg.mkPen(QUERY_COLOUR if side == "q" else KEY_COLOUR, width=1.5)
            item.setData(x=xy[:, 0], y=xy[:, 1], data=np.arange(n), brush=brushes, pen=pen, tip=None)

    def _drop_texts(self):
        for t in self._texts:
            self.plot.removeItem(t)
        self._texts = []

    def _label_points(self):
        """Name the points next to them when there are few enough to read."""
        self._drop_texts()
        for side, xy, anchor in (("q", self._emb.q_xy, (0, 1)), ("k", self._emb.k_xy, (0, 0))):
            labels = self._labels[side]
            if len(labels) > LABELLED_POINTS:
                continue
            for t, (x, y) in enumerate(xy):
                item = pg.TextItem(f"{side} {labels[t]}", color=QUERY_COLOUR if side == "q" else KEY_COLOUR,
                                   anchor=anchor)
                item.setPos(float(x), float(y))
                self.plot.addItem(item)
                self._texts.append(item)

    def _on_hover(self, side, points):
        if len(points):
            self.hover.setText(self.describe(side, int(points[0].data())))

    def _on_click(self, side, points):
        if len(points):
            self.point_clicked.emit(side, int(points[0].data()))
