"""TitledView: a chart (a pyqtgraph plot or an :class:`~attnviz.ui.widgets.heatmap.AttentionHeatmap`) with
its title and its legend as Qt labels in a column above it.

Inside a chart a title gets only the plot area's width, so at 1024 x 700 long titles were cut with "…", and
a pyqtgraph legend is drawn over the plot area, where it hid lines and bars or ran past the right edge.
Here the title wraps to the chart's full width (always whole), and the legend is one wrapped line of
coloured marks and names between the title and the chart, so it never covers data. Neither label raises
the chart's minimum width. Everything else (``plot``, ``getPlotItem``, ``set_matrix``, ``frame`` …) is the
chart's own: the view's attributes are reached through the wrapper.
"""

from __future__ import annotations

import html

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel, QSizePolicy, QVBoxLayout, QWidget

#: marks a legend entry can use: a line, a dashed line, a bar, a dot
GLYPHS = {"line": "━━", "dash": "╍╍", "bar": "■", "dot": "●"}


def _label(parent, rich: bool) -> QLabel:
    lab = QLabel(" ", parent)
    lab.setWordWrap(True)
    lab.setAlignment(Qt.AlignmentFlag.AlignHCenter | Qt.AlignmentFlag.AlignTop)
    lab.setTextFormat(Qt.TextFormat.RichText if rich else Qt.TextFormat.PlainText)
    lab.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)  # never widens the chart
    lab.setMinimumWidth(1)
    lab.setContentsMargins(4, 1, 4, 1)
    return lab


def label_is_whole(label: QLabel) -> bool:
    """True when ``label`` shows all its text: it is wide enough for its longest word and tall enough for
    its lines at its width (a wrapped label cut at the bottom, or a word wider than it, is not whole)."""
    if not label.isVisible():
        return True
    fm = label.fontMetrics()
    m = label.contentsMargins()
    inner = label.width() - m.left() - m.right()
    words = label.text() if label.textFormat() != Qt.TextFormat.RichText else _plain(label.text())
    if any(fm.horizontalAdvance(w) > inner for w in words.split()):
        return False
    return label.heightForWidth(label.width()) <= label.height()


def _plain(rich: str) -> str:
    """The text of a small piece of rich text: tags dropped, entities and &nbsp; decoded."""
    out, inside = [], False
    for ch in rich:
        if ch == "<":
            inside = True
        elif ch == ">":
            inside = False
        elif not inside:
            out.append(ch)
    return html.unescape("".join(out)).replace("\xa0", "\u2060")  # no-break space: one word with its neighbour


class TitledView(QWidget):
    """A chart with its title and legend above it (see the module's docstring)."""

    def __init__(self, view: QWidget, title: str = "", parent=None):
        super().__init__(parent)
        self.view = view
        self.title = _label(self, rich=False)
        self.title.setObjectName("chart_title")
        self.legend = _label(self, rich=True)
        self.legend.setObjectName("chart_legend")
        self.legend.hide()
        self.legend_entries: list[tuple[str, str, str]] = []  # (colour, name, glyph) as shown
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.setSpacing(0)
        lay.addWidget(self.title)
        lay.addWidget(self.legend)
        lay.addWidget(view, 1)
        self.set_title(title)

    def __getattr__(self, name):  # only for names the wrapper itself lacks: they are the chart's
        view = self.__dict__.get("view")
        if view is None:
            raise AttributeError(name)
        return getattr(view, name)

    def set_title(self, text: str) -> None:
        """Show ``text`` whole above the chart (wrapped at the chart's width); "" leaves an empty line, so
        the chart does not move when a title comes."""
        text = str(text)
        if self.title.text() != (text or " "):
            self.title.setText(text or " ")
        if text and self.title.isHidden():
            self.title.show()

    def title_text(self) -> str:
        return self.title.text().strip()

    def set_legend(self, entries) -> None:
        """The legend: ``entries`` of (colour, name) or (colour, name, glyph) with glyph one of
        :data:`GLYPHS`' keys (default "line"); an entry stays on one line, the row wraps between entries."""
        rows = [(str(e[0]), str(e[1]), str(e[2]) if len(e) > 2 else "line") for e in entries]
        if rows == self.legend_entries:
            return
        self.legend_entries = rows
        parts = [f"<span style='color:{c}'>{GLYPHS.get(g, g)}</span>&nbsp;{html.escape(n).replace(' ', '&nbsp;')}"
                 for c, n, g in rows]
        self.legend.setText(" &nbsp; ".join(parts) if parts else " ")
        self.legend.setVisible(bool(parts))

    def legend_names(self) -> list[str]:
        return [n for _c, n, _g in self.legend_entries]

    # -- a heatmap's title goes to the label above it ------------------------------------------------
    def set_matrix(self, *args, title: str = "", **kwargs):
        """The heatmap's ``set_matrix`` with its ``title`` shown whole above it instead of cut inside it."""
        self.set_title(title)
        return self.view.set_matrix(*args, title="", **kwargs)
