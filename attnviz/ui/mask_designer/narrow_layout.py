"""The mask designer in an area narrower than its two columns (a 640 x 480 window leaves it about 320 px
beside the sidebar): the side column (presets, blocks, legend) goes under the cells instead of beside them,
the cells keep the area's whole height with a canvas about as tall as it is wide, "Mask as code…" goes
under the tile controls, and the presets and the block rules (two tabs) scroll sideways in their own
pages when a wide block table needs it. Nothing is cut at the right of the designer and it scrolls up and
down only; a wider area brings the two columns back."""

from __future__ import annotations

from PySide6.QtCore import QEvent, QObject, Qt
from PySide6.QtWidgets import QBoxLayout, QWidget

NARROW_CONTROLS_WIDTH = 160  # what the presets and blocks ask for when stacked: they scroll sideways inside
CANVAS_HEIGHT = (120, 320)  # the cells' canvas when stacked: its width, within these bounds

from attnviz.ui.widgets.fit_scroll import holder_of


class NarrowLayout(QObject):
    """Watches the scroll area holding ``panel`` and stacks its two columns when they do not fit.

    ``left`` is the cells column (the first widget of ``panel.splitter``), ``below`` the row that holds the
    tile controls and the code button."""

    def __init__(self, panel: QWidget, left: QWidget, below: QBoxLayout):
        super().__init__(panel)
        self.panel, self.left, self.below = panel, left, below
        self.narrow = False
        self._wide_need = 0  # the panel's minimum width with its two columns side by side
        self._canvas_min = 0  # the canvas's own minimum height, given back in two columns
        self._watched: QWidget | None = None
        panel.installEventFilter(self)
        left.installEventFilter(self)  # its controls' needs change (wrapped text): its minimum follows

    def eventFilter(self, obj, ev):  # noqa: N802 - Qt's name
        kind = ev.type()
        if obj is self.panel and kind in (QEvent.Type.ParentChange, QEvent.Type.Show):
            self._watch()
        elif (obj is self._watched and kind == QEvent.Type.Resize) or (
                obj is self.left and kind == QEvent.Type.LayoutRequest and self.narrow):
            self.update()
        return False

    def _watch(self) -> None:
        holder = holder_of(self.panel)
        if holder is not self._watched:
            if self._watched is not None:
                self._watched.removeEventFilter(self)
            self._watched = holder
            if holder is not None:
                holder.installEventFilter(self)
        self.update()

    def update(self) -> None:
        """Two columns or one, for the room the holding scroll area has now."""
        holder = self._watched
        if holder is None:
            return
        room = holder.maximumViewportSize()  # without scroll bars
        if not self.narrow:
            self._wide_need = self.panel.minimumSizeHint().width()
        narrow = room.width() < self._wide_need
        if narrow != self.narrow:
            self._set(narrow)
        if narrow:  # the cells fill the first screen, the side column under them
            m = self.panel.layout().contentsMargins()
            low, high = CANVAS_HEIGHT
            self.panel.canvas.setMinimumHeight(min(high, max(low, room.width() - m.left() - m.right() - 40)))
            layout = self.left.layout()  # (never invalidated here: that would post the request watched above)
            need = layout.minimumSize().height()  # what its controls and the canvas take ...
            if layout.hasHeightForWidth():  # ... with the tile controls' wrapped lines at this width
                need = max(need, layout.heightForWidth(max(self.left.width(), layout.minimumSize().width())))
            self.left.setMinimumHeight(max(need, room.height() - m.top() - m.bottom()))
            self.panel.side_splitter.setMinimumHeight(room.height() - m.top() - m.bottom())  # the next screen

    def _set(self, narrow: bool) -> None:
        self.narrow = narrow
        split = self.panel.splitter
        code = self.panel.code_button
        self.below.setDirection(QBoxLayout.Direction.TopToBottom if narrow else QBoxLayout.Direction.LeftToRight)
        self.below.setAlignment(code, Qt.AlignmentFlag.AlignLeft if narrow else Qt.AlignmentFlag.AlignBottom)
        pages = (self.panel.controls, self.panel.blocks_scroll)  # the side column's two tab pages
        if narrow:
            self._canvas_min = self.panel.canvas.minimumHeight()
        else:
            self.left.setMinimumHeight(0)
            self.panel.side_splitter.setMinimumHeight(0)
            self.panel.canvas.setMinimumHeight(self._canvas_min)
        for page in pages:
            page.setMinimumWidth(NARROW_CONTROLS_WIDTH if narrow else 0)  # narrow: not its content's width
            page.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAsNeeded if narrow
                                              else Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        split.setOrientation(Qt.Orientation.Vertical if narrow else Qt.Orientation.Horizontal)
        shares = split.shares()
        split.set_shares(shares)  # the same shares along the new direction
