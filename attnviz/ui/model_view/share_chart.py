"""ShareChart: per layer of a vision-language model, how much of their attention the text tokens (a policy:
its action tokens) give to the image tokens, to the text, to the first token and to each other named
segment — one line with its own colour and marker per group, a legend, the layer on the x axis, in the
colours of the light or the dark theme; the legend is a line above the plot, so it never hides a point. What it draws is :func:`attnviz.checkpoints.study.share_curves`.
"""

from __future__ import annotations

import html

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel, QVBoxLayout, QWidget

from attnviz.ui.theme import Theme, current_theme

# line colours (Okabe-Ito, lightened for a dark background) and markers, so lines differ without colour too
LIGHT_COLOURS = ("#d55e00", "#0072b2", "#009e73", "#cc79a7", "#e69f00", "#56b4e9", "#000000")
DARK_COLOURS = ("#ff8c42", "#5cb8f0", "#3fd0a0", "#f08cc8", "#f0e442", "#a8d4ff", "#ffffff")
SYMBOLS = ("o", "s", "t", "d", "+", "x", "star")
GLYPHS = {"o": "●", "s": "■", "t": "▼", "d": "◆", "+": "✚", "x": "✖", "star": "★"}  # the markers in the legend


class ShareChart(QWidget):
    """Lines of per-layer attention shares with a legend."""

    def __init__(self, parent=None):
        super().__init__(parent)
        self.title = QLabel(" ", self)
        self.title.setWordWrap(True)
        self.title.setContentsMargins(6, 2, 6, 0)
        self.legend = QLabel(" ", self)  # beside the plot, never over a line
        self.legend.setWordWrap(True)
        self.legend.setContentsMargins(6, 0, 6, 0)
        self.legend.setTextFormat(Qt.TextFormat.RichText)
        self.plot = pg.PlotWidget(self)
        self.plot.setMenuEnabled(False)
        self.plot.hideButtons()
        self.plot.setMouseEnabled(False, False)
        self.plot.setMinimumHeight(120)
        pi = self.plot.getPlotItem()
        pi.setLabel("bottom", "layer")
        pi.setLabel("left", "share of attention")
        pi.showGrid(x=False, y=True, alpha=0.25)
        pi.getAxis("left").enableAutoSIPrefix(False)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(0)
        layout.addWidget(self.title)
        layout.addWidget(self.legend)
        layout.addWidget(self.plot, 1)
        self.shares = None
        self.labels: list[str] = []  # the lines' labels, in the legend's order
        self._theme = current_theme()
        self.on_theme_changed(self._theme)

    def set_shares(self, shares) -> None:
        """Draw ``shares`` (a study.Shares: ``what``, ``queries``, ``lines`` of (label, (L,) values)); None clears."""
        self.shares = shares
        self._draw()

    def points(self) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        """label -> (layers, shares) of every line drawn (tests, exports)."""
        out = {}
        for item in self.plot.getPlotItem().listDataItems():
            x, y = item.getData()
            out[item.name()] = (np.asarray(x), np.asarray(y))  # named by the key group
        return out

    def _draw(self) -> None:
        pi = self.plot.getPlotItem()
        pi.clear()
        sh = self.shares
        self.labels = []
        if sh is None or not sh.lines:
            self.title.setText("No image tokens in this run." if sh is not None else " ")
            self.legend.setText(" ")
            return
        theme = self._theme
        colours = DARK_COLOURS if theme.name == "dark" else LIGHT_COLOURS
        L = len(sh.lines[0][1])
        keys = []
        x = np.arange(L)
        top = 0.0
        for i, (label, values) in enumerate(sh.lines):
            c = colours[i % len(colours)]
            sym = SYMBOLS[i % len(SYMBOLS)]
            pi.plot(x, np.asarray(values, dtype=float), name=label, pen=pg.mkPen(c, width=2),
                    symbol=sym, symbolBrush=c, symbolPen=pg.mkPen(c), symbolSize=7)
            name = html.escape(f"to {label}").replace(" ", "&nbsp;")  # an entry never breaks across lines
            keys.append(f'<span style="color:{c}">{GLYPHS[sym]}&#8213;</span>&nbsp;{name}')
            self.labels.append(label)
            top = max(top, float(np.max(values)) if len(values) else 0.0)
        pi.setXRange(-0.3, max(L - 1, 0) + 0.3, padding=0)
        pi.setYRange(0.0, min(1.0, top * 1.12) if top > 0 else 1.0, padding=0.02)
        pi.getAxis("bottom").setTicks([[(i, str(i)) for i in range(L)]] if L <= 24 else None)
        self.legend.setText("&nbsp;&nbsp;&nbsp;".join(keys))
        n = len(sh.queries)
        self.title.setText(f"Share of attention per layer, mean over heads and the {n} {sh.what}")

    def on_theme_changed(self, theme: Theme) -> None:
        self._theme = theme
        self.plot.setBackground(theme.plot_background)
        pi = self.plot.getPlotItem()
        for name in ("bottom", "left"):
            axis = pi.getAxis(name)
            axis.setPen(theme.plot_foreground)
            axis.setTextPen(theme.plot_foreground)
        self._draw()
