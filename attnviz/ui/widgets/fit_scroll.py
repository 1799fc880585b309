"""FitScroll: a frameless scroll area that gives its content the whole viewport when the content fits
and scrolls (either way) when it does not, while asking its parent for a small minimum of its own.
Every workspace panel and every Diagnostics tab sits in one, so a view that needs more room than
the window has scrolls inside its own area instead of raising the window's minimum size (a
QStackedWidget or QTabWidget otherwise takes the largest minimum of all its pages, shown or not).
"""

from __future__ import annotations

from PySide6.QtCore import QEvent, QSize, Qt
from PySide6.QtWidgets import (QAbstractScrollArea, QBoxLayout, QFrame, QGridLayout, QLabel, QLayout,
                               QLayoutItem, QScrollArea, QStyle, QWidget)

MINIMUM = QSize(160, 120)  # what a FitScroll asks of its parent, whatever its content needs


class FitScroll(QScrollArea):
    """Holds one widget; :meth:`put` moves a widget in from another FitScroll safely (a QScrollArea
    that still thinks it holds a widget would otherwise ignore it, or delete it later)."""

    def __init__(self, parent=None, minimum: QSize = MINIMUM):
        super().__init__(parent)
        self._minimum = QSize(minimum)
        self._fitting = False
        self.setWidgetResizable(False)  # sized here: the content's minimum, never its preferred height
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAsNeeded)
        self.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAsNeeded)
        self.setFocusPolicy(Qt.FocusPolicy.NoFocus)  # the content takes the focus, not the frame around it

    def put(self, widget: QWidget) -> None:
        """Show ``widget`` here, taking it out of the FitScroll that held it before."""
        if self.widget() is widget:
            return
        holder = holder_of(widget)
        if holder is not None and holder is not self:
            holder.takeWidget()
        if self.widget() is not None:
            self.takeWidget()  # never deleted: panels are owned by the window
        self.setWidget(widget)
        widget.show()

    def setWidget(self, widget: QWidget) -> None:  # noqa: N802 - Qt's name
        old = self.widget()
        if old is not None:
            old.removeEventFilter(self)
        super().setWidget(widget)
        widget.installEventFilter(self)
        self.fit()

    def takeWidget(self):  # noqa: N802 - Qt's name
        w = self.widget()
        if w is not None:
            w.removeEventFilter(self)
        return super().takeWidget()

    # -- sizing ------------------------------------------------------------------------------
    def content_size(self, width: int, height: int, floor: int = 0) -> tuple[int, int, bool, bool]:
        """(content width, content height, horizontal bar, vertical bar) for a viewport of
        ``width`` x ``height`` without bars: the whole viewport, or the content's minimum where that
        is larger (a vertical bar's width taken off first when the content must scroll down); the
        content is never given less height than ``floor``."""
        w = self.widget()
        if w is None:
            return width, height, False, False
        bar_w = self.verticalScrollBar().sizeHint().width()
        bar_h = self.horizontalScrollBar().sizeHint().height()
        vw, vh = width, height
        h_bar = v_bar = False
        cw = ch = 0
        for _ in range(3):  # a bar taken off may call for the other one
            cw = max(vw, self._min_width(w))
            ch = max(vh, self._min_height(w, cw), floor)
            h_bar, v_bar = cw > vw, ch > vh
            new_vw = width - (bar_w if v_bar else 0)
            new_vh = height - (bar_h if h_bar else 0)
            if (new_vw, new_vh) == (vw, vh):
                break
            vw, vh = new_vw, new_vh
        cw = min(cw, w.maximumWidth())
        ch = min(ch, w.maximumHeight())
        return cw, ch, h_bar, v_bar

    @staticmethod
    def _min_width(w: QWidget) -> int:
        return max(w.minimumSizeHint().width(), w.minimumWidth(), 0)

    @staticmethod
    def _min_height(w: QWidget, width: int) -> int:
        # the content's minimum, as a window would enforce it, raised where a word-wrapped label needs
        # more lines at the width it has than that minimum gives it (a layout's own height-for-width is
        # the preferred height of its labels and plots, which would scroll what fits)
        return max(w.minimumSizeHint().height(), w.minimumHeight(), needed_height(w, width), 0)

    def fit(self) -> None:
        """Size the content to the viewport (or to its minimum, then scroll)."""
        w = self.widget()
        if w is None or self._fitting:
            return
        self._fitting = True
        try:
            room = self.maximumViewportSize()
            floor, first, short_before = 0, None, None
            for _ in range(6):
                cw, ch, _h, _v = self.content_size(room.width(), room.height(), floor)
                if (w.width(), w.height()) != (cw, ch):
                    w.resize(cw, ch)  # laid out now: its labels have the widths they are measured at
                first = first or (cw, ch)
                short = shortfall(w)
                if short <= 0:
                    break
                if short_before is not None and short >= short_before:  # more height does not help
                    w.resize(*first)
                    break
                # Qt's layouts share a height out by preferred sizes too: a wrapped label can still be
                # short where the sum of the minimums fits; then the content gets what it lacks
                short_before, floor = short, w.height() + short
        finally:
            self._fitting = False

    def resizeEvent(self, ev):  # noqa: N802 - Qt's name
        super().resizeEvent(ev)
        self.fit()

    def eventFilter(self, obj, ev):  # noqa: N802 - Qt's name
        if obj is self.widget() and ev.type() in (QEvent.Type.LayoutRequest, QEvent.Type.Show):
            self.fit()
        return super().eventFilter(obj, ev)

    def minimumSizeHint(self) -> QSize:  # noqa: N802 - Qt's name
        return QSize(self._minimum)

    def sizeHint(self) -> QSize:  # noqa: N802 - Qt's name
        w = self.widget()
        return w.sizeHint() if w is not None else QSize(self._minimum)

    def scrolls(self) -> bool:
        """True when a scroll bar is shown (the content needs more room than the viewport)."""
        return self.horizontalScrollBar().isVisible() or self.verticalScrollBar().isVisible()


def holder_of(widget: QWidget) -> FitScroll | None:
    """The FitScroll whose content ``widget`` is, else None."""
    viewport = widget.parentWidget()
    area = viewport.parentWidget() if viewport is not None else None
    if isinstance(area, FitScroll) and area.widget() is widget:
        return area
    return None


def needed_height(widget: QWidget, width: int) -> int:
    """The least height ``widget``, ``width`` pixels wide, lays out in without giving a word-wrapped label
    fewer lines than its text needs at the width the label has: box and grid layouts are summed row by
    row from their items' minimum heights, a wrapped label counting its height for its width. Scroll
    areas inside count their own minimum (they scroll what they hold)."""
    lay = widget.layout()
    if lay is None:
        if isinstance(widget, QLabel) and widget.wordWrap():
            return max(widget.minimumHeight(), widget.heightForWidth(width))
        return max(widget.minimumSizeHint().height(), widget.minimumHeight())
    m = widget.contentsMargins()
    return max(widget.minimumHeight(), _layout_height(lay) + m.top() + m.bottom())


def shortfall(widget: QWidget) -> int:
    """The most pixels a shown word-wrapped label under ``widget`` (outside scroll areas inside it) lacks
    for its lines at its width; 0 when every one shows its whole text."""
    worst = 0
    for lab in widget.findChildren(QLabel):
        if not lab.wordWrap() or not lab.isVisible() or not lab.text().strip() or lab.width() <= 1:
            continue
        need = lab.heightForWidth(lab.width())
        if need <= lab.height() + 1 or need > lab.maximumHeight():
            continue
        holder = lab.parentWidget()
        while holder is not None and holder is not widget and not isinstance(holder, QAbstractScrollArea):
            holder = holder.parentWidget()
        if holder is widget:
            worst = max(worst, need - lab.height())
    return worst


def _item_height(item: QLayoutItem) -> int:
    w = item.widget()
    if w is not None:
        lay = w.layout()
        wraps = isinstance(w, QLabel) and w.wordWrap() or lay is not None and lay.hasHeightForWidth()
        if isinstance(w, QAbstractScrollArea) or not wraps:
            return item.minimumSize().height()
        return max(item.minimumSize().height(), needed_height(w, w.width()))
    if item.layout() is not None:
        return _layout_height(item.layout())
    return item.minimumSize().height()  # a spacer


def _spacing(lay: QLayout, grid_vertical: bool = False) -> int:
    s = lay.verticalSpacing() if grid_vertical else lay.spacing()
    if s >= 0:
        return s
    parent = lay.parentWidget()
    style = parent.style() if parent is not None else None
    return max(0, style.pixelMetric(QStyle.PixelMetric.PM_LayoutVerticalSpacing)) if style is not None else 0


def _layout_height(lay: QLayout) -> int:
    """The height ``lay`` needs with its contents margins (see :func:`needed_height`)."""
    m = lay.contentsMargins()
    floor = lay.minimumSize().height()
    if not lay.hasHeightForWidth():
        return floor
    items = [lay.itemAt(i) for i in range(lay.count())]
    shown = [i for i, it in enumerate(items) if it is not None and not it.isEmpty()]
    if isinstance(lay, QBoxLayout):
        heights = [_item_height(items[i]) for i in shown]
        if lay.direction() in (QBoxLayout.Direction.TopToBottom, QBoxLayout.Direction.BottomToTop):
            inner = sum(heights) + _spacing(lay) * max(0, len(heights) - 1)
        else:
            inner = max(heights, default=0)
    elif isinstance(lay, QGridLayout):
        rows = [lay.rowMinimumHeight(r) for r in range(lay.rowCount())]
        used = [False] * lay.rowCount()
        spans = []
        for i in shown:
            r, _c, rs, _cs = lay.getItemPosition(i)
            h = _item_height(items[i])
            for k in range(r, r + max(1, rs)):
                used[k] = True
            if rs <= 1:
                rows[r] = max(rows[r], h)
            else:
                spans.append((r, rs, h))
        gap = _spacing(lay, grid_vertical=True)
        for r, rs, h in spans:  # what a spanning item needs beyond its rows goes to its last row
            have = sum(rows[r:r + rs]) + gap * (sum(used[r:r + rs]) - 1)
            if h > have:
                rows[r + rs - 1] += h - have
        n = sum(used)
        inner = sum(h for h, u in zip(rows, used) if u) + gap * max(0, n - 1)
    else:  # another layout (a flow of controls): its own height for the width it has
        inner = max(0, lay.minimumHeightForWidth(lay.geometry().width()) - m.top() - m.bottom()) \
            if lay.geometry().width() > 0 else floor - m.top() - m.bottom()
    return max(floor, inner + m.top() + m.bottom())
