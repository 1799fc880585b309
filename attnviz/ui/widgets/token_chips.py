"""TokenChips: a wrapping flow of chips, one per token, each showing the token's piece and its id,
tinted with its segment's colour. Virtualised: the flow is computed once per width (pure Python
over cached text widths, rows of equal height) and only the rows in view are painted, so tens of
thousands of tokens scroll without freezing."""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from typing import Optional, Sequence

from PySide6.QtCore import QRect, QRectF, Qt, Signal
from PySide6.QtGui import QColor, QFont, QFontMetrics, QPainter, QPen
from PySide6.QtWidgets import QAbstractScrollArea

from attnviz.model.segments import Segment
from attnviz.ui.theme import Theme, current_theme
from attnviz.ui.widgets.flow_layout import flow_lines


@dataclass(frozen=True)
class ChipStyle:
    """Chip geometry, in pixels."""

    pad_x: int = 5  # space between chip border and text
    pad_y: int = 2
    gap: int = 4  # space between chips and between rows
    max_chars: int = 24  # longer pieces are elided: one chip never fills a row


def chip_text(piece: str, max_chars: int) -> str:
    """A token piece made visible: spaces as a middle dot, line breaks and tabs as arrows."""
    s = str(piece).replace(" ", "·").replace("\n", "↵").replace("\r", "↵").replace("\t", "→")
    s = "".join(ch if ch.isprintable() else "·" for ch in s) or "∅"
    return s if len(s) <= max_chars else s[: max_chars - 1] + "…"


def flow_layout(widths: Sequence[int], available: int, gap: int) -> tuple[list[int], list[int]]:
    """Left-to-right wrapping flow with a ``gap`` margin on both sides: (x of each chip, index of the
    first chip of each row). The line breaking is :func:`~attnviz.ui.widgets.flow_layout.flow_lines`'s."""
    xs: list[int] = []
    row_starts: list[int] = []
    for line in flow_lines(list(widths), available - 2 * gap, gap):
        row_starts.append(line[0])
        x = gap
        for i in line:
            xs.append(x)
            x += widths[i] + gap
    return xs, row_starts


class TokenChips(QAbstractScrollArea):
    """Chips for a token sequence; hover and click report token indices."""

    token_hovered = Signal(int)  # -1 when the mouse leaves the chips
    token_clicked = Signal(int)

    def __init__(self, parent=None, *, style: ChipStyle = ChipStyle()):
        super().__init__(parent)
        self.chip_style = style
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.viewport().setMouseTracking(True)
        self._piece_font = QFont(self.font())
        self._id_font = QFont(self.font())
        self._id_font.setPointSizeF(max(self.font().pointSizeF() * 0.75, 6.0))
        self._pieces: list[str] = []
        self._ids: list[str] = []
        self._widths: list[int] = []
        self._colours: list[Optional[QColor]] = []
        self._xs: list[int] = []
        self._row_starts: list[int] = []
        self._layout_width = -1
        self.selected: Optional[int] = None
        self.hovered: Optional[int] = None
        fm_p, fm_i = QFontMetrics(self._piece_font), QFontMetrics(self._id_font)
        self._line_p, self._line_i = fm_p.height(), fm_i.height()
        self._row_h = self._line_p + self._line_i + 2 * style.pad_y
        self._theme = current_theme()

    # -- public API ----------------------------------------------------------------------------
    def set_tokens(self, pieces: Sequence[str], ids: Sequence[int], segments: Sequence[Segment] = ()) -> None:
        """Show one chip per token: ``pieces`` and ``ids`` of equal length, chips tinted by the
        segment that contains them."""
        if len(pieces) != len(ids):
            raise ValueError(f"{len(pieces)} pieces but {len(ids)} ids")
        n = len(pieces)
        st = self.chip_style
        self._pieces = [chip_text(p, st.max_chars) for p in pieces]
        self._ids = [str(int(i)) for i in ids]
        fm_p, fm_i = QFontMetrics(self._piece_font), QFontMetrics(self._id_font)
        cache: dict[str, int] = {}
        widths = []
        for p, i in zip(self._pieces, self._ids):
            wp = cache.get(p)
            if wp is None:
                wp = cache[p] = fm_p.horizontalAdvance(p)
            widths.append(max(wp, fm_i.horizontalAdvance(i)) + 2 * st.pad_x)
        self._widths = widths
        colours: list[Optional[QColor]] = [None] * n
        for s in segments:
            if s.stop > n:
                raise ValueError(f"segment {s.name!r} ends at {s.stop}, beyond the {n} tokens")
            c = QColor(s.color)
            for t in range(s.start, s.stop):
                colours[t] = c
        self._colours = colours
        if self.selected is not None and self.selected >= n:
            self.selected = None
        self.hovered = None
        self._layout_width = -1
        self._relayout()
        self.viewport().update()

    def set_selected(self, index: Optional[int]) -> None:
        if index is not None and not 0 <= index < len(self._pieces):
            raise ValueError(f"token {index} outside 0..{len(self._pieces) - 1}")
        self.selected = index
        if index is not None:
            self.ensure_visible(index)
        self.viewport().update()

    def count(self) -> int:
        return len(self._pieces)

    def row_count(self) -> int:
        return len(self._row_starts)

    def chip_rect(self, index: int) -> QRect:
        """Rectangle of chip ``index`` in viewport coordinates (at the current scroll position)."""
        row = bisect.bisect_right(self._row_starts, index) - 1
        st = self.chip_style
        y = st.gap + row * (self._row_h + st.gap) - self.verticalScrollBar().value()
        return QRect(self._xs[index], y, self._widths[index], self._row_h)

    def index_at(self, x: float, y: float) -> Optional[int]:
        """Token under viewport point (x, y), or None."""
        if not self._pieces:
            return None
        st = self.chip_style
        yy = y + self.verticalScrollBar().value() - st.gap
        if yy < 0:
            return None
        row, within = divmod(int(yy), self._row_h + st.gap)
        if row >= len(self._row_starts) or within >= self._row_h:
            return None
        start = self._row_starts[row]
        stop = self._row_starts[row + 1] if row + 1 < len(self._row_starts) else len(self._pieces)
        i = bisect.bisect_right(self._xs, x, start, stop) - 1
        if i < start or x >= self._xs[i] + self._widths[i]:
            return None
        return i

    def ensure_visible(self, index: int) -> None:
        r = self.chip_rect(index)
        bar = self.verticalScrollBar()
        if r.top() < 0:
            bar.setValue(bar.value() + r.top() - self.chip_style.gap)
        elif r.bottom() > self.viewport().height():
            bar.setValue(bar.value() + r.bottom() - self.viewport().height() + self.chip_style.gap)

    # -- layout and painting ---------------------------------------------------------------------
    def _relayout(self) -> None:
        width = self.viewport().width()
        if width == self._layout_width:
            return
        self._layout_width = width
        self._xs, self._row_starts = flow_layout(self._widths, max(width, 1), self.chip_style.gap)
        st = self.chip_style
        total = st.gap + len(self._row_starts) * (self._row_h + st.gap)
        bar = self.verticalScrollBar()
        bar.setRange(0, max(0, total - self.viewport().height()))
        bar.setPageStep(self.viewport().height())
        bar.setSingleStep(self._row_h + st.gap)

    def resizeEvent(self, ev):
        super().resizeEvent(ev)
        self._relayout()
        st = self.chip_style
        total = st.gap + len(self._row_starts) * (self._row_h + st.gap)
        self.verticalScrollBar().setRange(0, max(0, total - self.viewport().height()))
        self.verticalScrollBar().setPageStep(self.viewport().height())

    def scrollContentsBy(self, dx, dy):
        self.viewport().update()

    def visible_rows(self) -> range:
        st = self.chip_style
        top = self.verticalScrollBar().value()
        first = max(0, (top - st.gap) // (self._row_h + st.gap))
        last = min(len(self._row_starts), (top + self.viewport().height()) // (self._row_h + st.gap) + 1)
        return range(first, last)

    def paintEvent(self, ev):
        self._relayout()
        p = QPainter(self.viewport())
        theme = self._theme
        p.fillRect(self.viewport().rect(), QColor(theme.base))
        st = self.chip_style
        base = QColor(theme.base)
        text = QColor(theme.text)
        muted = QColor(theme.muted_text)
        p.setRenderHint(QPainter.RenderHint.Antialiasing, True)
        for row in self.visible_rows():
            start = self._row_starts[row]
            stop = self._row_starts[row + 1] if row + 1 < len(self._row_starts) else len(self._pieces)
            for i in range(start, stop):
                r = QRectF(self.chip_rect(i)).adjusted(0.5, 0.5, -0.5, -0.5)
                seg = self._colours[i]
                border = seg if seg is not None else muted
                fill = _blend(base, seg, 0.28) if seg is not None else QColor(theme.alt_base)
                if i == self.hovered:
                    fill = _blend(base, border, 0.5)
                pen = QPen(QColor(theme.highlight) if i == self.selected else border)
                pen.setWidthF(2.5 if i == self.selected else 1.0)
                p.setPen(pen)
                p.setBrush(fill)
                p.drawRoundedRect(r, 4, 4)
                p.setPen(text)
                p.setFont(self._piece_font)
                tr = QRectF(r.left(), r.top() + st.pad_y, r.width(), self._line_p)
                p.drawText(tr, Qt.AlignmentFlag.AlignHCenter | Qt.AlignmentFlag.AlignVCenter, self._pieces[i])
                p.setPen(muted)
                p.setFont(self._id_font)
                ir = QRectF(r.left(), tr.bottom(), r.width(), self._line_i)
                p.drawText(ir, Qt.AlignmentFlag.AlignHCenter | Qt.AlignmentFlag.AlignVCenter, self._ids[i])
        p.end()

    # -- mouse -----------------------------------------------------------------------------------
    def mouseMoveEvent(self, ev):
        i = self.index_at(ev.position().x(), ev.position().y())
        if i != self.hovered:
            self.hovered = i
            self.viewport().update()
            self.token_hovered.emit(-1 if i is None else i)
        super().mouseMoveEvent(ev)

    def leaveEvent(self, ev):
        if self.hovered is not None:
            self.hovered = None
            self.viewport().update()
            self.token_hovered.emit(-1)
        super().leaveEvent(ev)

    def mousePressEvent(self, ev):
        if ev.button() == Qt.MouseButton.LeftButton:
            i = self.index_at(ev.position().x(), ev.position().y())
            if i is not None:
                self.token_clicked.emit(i)
                ev.accept()
                return
        super().mousePressEvent(ev)

    def on_theme_changed(self, theme: Theme) -> None:
        self._theme = theme
        self.viewport().update()


def _blend(a: QColor, b: QColor, t: float) -> QColor:
    return QColor(round(a.red() + (b.red() - a.red()) * t), round(a.green() + (b.green() - a.green()) * t),
                  round(a.blue() + (b.blue() - a.blue()) * t))
