"""FitScroll: a frameless scroll area that gives its content the whole viewport when the content fits
and scrolls (either way) when it does not, while asking its parent for a small minimum of its own.
Every workspace panel and every Diagnostics tab sits in one, so a view that needs more room than
the window has scrolls inside its own area instead of raising the window's minimum size (a
QStackedWidget or QTabWidget otherwise takes the largest minimum of all its pages, shown or not).
"""

from __future__ import annotations

from PySide6.QtCore import QEvent, QSize, Qt
from PySide6.QtWidgets import QFrame, QScrollArea, QWidget

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
    def content_size(self, width: int, height: int) -> tuple[int, int, bool, bool]:
        """(content width, content height, horizontal bar, vertical bar) for a viewport of
        ``width`` x ``height`` without bars: the whole viewport, or the content's minimum where that
        is larger (a vertical bar's width taken off first when the content must scroll down)."""
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
            ch = max(vh, self._min_height(w, cw))
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
    def _min_height(w: QWidget, _width: int) -> int:
        # the content's minimum, as a window would enforce it: a layout's height-for-width is the
        # preferred height of its wrapped labels and plots, which would scroll what fits
        return max(w.minimumSizeHint().height(), w.minimumHeight(), 0)

    def fit(self) -> None:
        """Size the content to the viewport (or to its minimum, then scroll)."""
        w = self.widget()
        if w is None or self._fitting:
            return
        self._fitting = True
        try:
            room = self.maximumViewportSize()
            cw, ch, _h, _v = self.content_size(room.width(), room.height())
            if (w.width(), w.height()) != (cw, ch):
                w.resize(cw, ch)
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
