"""Small shared pieces of the diagnostics views: how numbers are printed, which head is shown,
themed pyqtgraph plots, read-only table cells, and wiring a widget to a session event so that the
connection ends with the widget."""

from __future__ import annotations

import math

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtGui import QColor, QFont
from PySide6.QtWidgets import QTableWidget, QTableWidgetItem

from attnviz.model.display.response_views import mask_rows
from attnviz.ui.diagnostics.titled_view import TitledView
from attnviz.ui.theme import current_theme

#: colours of the two sides of attention wherever queries and keys are drawn together
QUERY_COLOUR = "#d55e00"
KEY_COLOUR = "#0072b2"


def fmt(x, decimals: int = 2) -> str:
    """``x`` rounded to ``decimals`` places with trailing zeros dropped, as seed 002 prints numbers:
    2.30 -> "2.3", 0.0 -> "0", -0.001 -> "0"; infinities as "−∞" / "∞"; NaN as "nan"."""
    x = float(x)
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "−∞" if x < 0 else "∞"
    s = f"{x:.{max(0, int(decimals))}f}"
    if "." in s:
        s = s.rstrip("0").rstrip(".")
    return "0" if s in ("-0", "") else s


def fmt_sci(x: float) -> str:
    """A small error or tolerance in scientific notation: 2.2e-16."""
    x = float(x)
    return "0" if x == 0 else f"{x:.2g}" if 1e-3 <= abs(x) < 1e4 else f"{x:.1e}"


def fmt_bytes(n: int) -> str:
    """Bytes as B / KB / MB / GB with three significant digits."""
    n = float(n)
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.3g} {unit}"
        n /= 1024.0
    return f"{n:.3g} GB"


def selected_head(state, nh: int) -> tuple[int, str]:
    """(head index to draw, note) from ``state.view.head``: "mean" and out-of-range heads fall back
    to head 0 with a note saying so."""
    h = state.view.head
    if h == "mean":
        return 0, "mean over heads selected: these views show head 0"
    if not 0 <= int(h) < nh:
        return 0, f"head {h} does not exist (nh = {nh}): showing head 0"
    return int(h), ""


def head_mask(response, h: int, rows=None):
    """The bool mask of head ``h`` from a response: (Tq, Tk), or (R, Tk) of query ``rows`` (a slice or
    indices); a long sequence's mask (held per tile, ``response.mask`` None) gives rows only."""
    m = response.mask
    if m is None and hasattr(getattr(response, "block_mask", None), "rows"):  # a TiledMask
        if rows is None:
            raise ValueError("a mask held per tile gives query rows, not the whole matrix")
        r = mask_rows(response, np.arange(response.Tq)[rows] if isinstance(rows, slice) else rows)  # (nh|1, R, Tk)
        return r[h] if r.shape[0] > 1 else r[0]
    if m is None:
        m = np.ones((response.Tq, response.Tk), dtype=bool)  # (Tq, Tk)
    m = np.asarray(m, dtype=bool)
    m = m[h] if m.ndim == 3 else m  # (Tq, Tk)
    return m if rows is None else m[rows]


def connect_event(widget, signal, slot) -> None:
    """Connect a psygnal ``signal`` to ``slot`` until ``widget`` is destroyed."""
    signal.connect(slot)
    widget.destroyed.connect(lambda *_: signal.disconnect(slot, missing_ok=True))


def make_plot(title: str = "", x_label: str = "", y_label: str = "", log_x: bool = False,
              log_y: bool = False, inside_legend: bool = False):
    """A themed PlotWidget (labels, a light grid) in a :class:`TitledView`: its title whole above the plot
    and its legend (``set_legend``) a line between them, never over the data. ``inside_legend`` keeps
    pyqtgraph's own legend in the plot instead (a scatter whose points leave a corner free)."""
    theme = current_theme()
    w = pg.PlotWidget(background=theme.plot_background)
    item = w.getPlotItem()
    for side, text in (("bottom", x_label), ("left", y_label)):
        ax = item.getAxis(side)
        ax.enableAutoSIPrefix(False)  # "x0.001" on an axis reads as a different quantity
        ax.setPen(theme.plot_foreground)
        ax.setTextPen(theme.plot_foreground)
        if text:
            ax.setLabel(text, color=theme.plot_foreground)
    item.setLogMode(x=log_x, y=log_y)
    item.showGrid(x=True, y=True, alpha=0.2)
    if inside_legend:
        item.addLegend(offset=(-10, 10), labelTextColor=theme.plot_foreground)
    w.setMinimumSize(220, 140)  # with its title line above, as tall as a 160-pixel plot with its title inside
    titled = TitledView(w, title)
    titled.title.setVisible(bool(title))
    return titled


def cell(text: str, tooltip: str = "", editable: bool = False, bold: bool = False,
         align=Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter) -> QTableWidgetItem:
    """A table cell: read-only unless ``editable``; numbers right-aligned."""
    it = QTableWidgetItem(text)
    flags = Qt.ItemFlag.ItemIsEnabled | Qt.ItemFlag.ItemIsSelectable
    if editable:
        flags |= Qt.ItemFlag.ItemIsEditable
    it.setFlags(flags)
    it.setTextAlignment(align)
    if tooltip:
        it.setToolTip(tooltip)
    if bold:
        f = QFont()
        f.setBold(True)
        it.setFont(f)
    return it


def shade(item: QTableWidgetItem, weight: float) -> None:
    """Grey-shade a weight cell as seed 001's alignment table: white at 0, black at 1."""
    w = min(max(float(weight), 0.0), 1.0)
    g = int(round(255 * (1.0 - w)))
    item.setBackground(QColor(g, g, g))
    item.setForeground(QColor("#ffffff") if w > 0.5 else QColor("#000000"))




def fit_height(table: QTableWidget, max_rows: int = 12) -> None:
    """Make a table exactly as tall as its header and rows (at most ``max_rows`` rows, then scroll), and its
    horizontal scroll bar when it may show one (always, under ScrollBarAlwaysOn: no row hides behind it)."""
    rows = min(table.rowCount(), max_rows)
    h = table.horizontalHeader().height() if table.horizontalHeader().isVisible() else 0
    h += sum(table.rowHeight(r) for r in range(rows)) + 2 * table.frameWidth()
    if (table.horizontalScrollBar().isVisible() or table.columnCount() > 12
            or table.horizontalScrollBarPolicy() == Qt.ScrollBarPolicy.ScrollBarAlwaysOn):
        h += table.horizontalScrollBar().sizeHint().height()
    table.setFixedHeight(h + 2)


def new_table(rows: int = 0, cols: int = 0) -> QTableWidget:
    """A compact read-only table whose size follows its contents."""
    t = QTableWidget(rows, cols)
    t.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
    t.setTabKeyNavigation(False)  # Tab moves on to the next control; arrows move between cells
    t.verticalHeader().setDefaultSectionSize(22)
    t.horizontalHeader().setDefaultSectionSize(62)
    t.setAlternatingRowColors(False)
    t.setWordWrap(False)
    return t
