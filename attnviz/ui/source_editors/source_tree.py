"""The sources list: one row per token source; dragging a row asks for one move."""

from __future__ import annotations

from PySide6.QtCore import QPoint, QRect, QSize, Qt, QTimer, Signal
from PySide6.QtWidgets import QStyle, QStyledItemDelegate, QStyleOptionViewItem, QTreeWidget

from attnviz.model.source_list import drop_target


NAME_LINES = 2  # a source's name wraps onto at most this many lines


class NameDelegate(QStyledItemDelegate):
    """The name column's rows as tall as the name wrapped at the column's width (Qt's own hint measures
    the text on one line, so a wrapped name showed only its first word)."""

    def name_room(self, option: QStyleOptionViewItem, index) -> int:
        """Pixels the name's text has in its column: the column less the swatch and the margins."""
        tree = self.parent()
        opt = QStyleOptionViewItem(option)
        self.initStyleOption(opt, index)
        style = tree.style()
        margin = style.pixelMetric(QStyle.PixelMetric.PM_FocusFrameHMargin, opt, tree) + 1
        icon = opt.decorationSize.width() + 2 * margin if not opt.icon.isNull() else 0
        return max(1, tree.header().sectionSize(0) - icon - 2 * margin)

    def sizeHint(self, option, index) -> QSize:  # noqa: N802 - Qt's name
        size = super().sizeHint(option, index)
        if index.column() != 0:
            return size
        fm = option.fontMetrics
        text = str(index.data() or "")
        wrapped = fm.boundingRect(QRect(0, 0, self.name_room(option, index), 10_000),
                                  int(Qt.TextFlag.TextWordWrap), text).height()
        lines = min(NAME_LINES, max(1, round(wrapped / fm.lineSpacing())))
        return QSize(size.width(), max(size.height(), lines * fm.lineSpacing() + 6))


class SourceTree(QTreeWidget):
    """The sources list; dragging a row onto another place asks for one move (``source_dropped``) and
    leaves the rows to be rebuilt from the session. Names too long for their column wrap (a row grows
    to two lines); a single word too long is elided in the middle."""

    source_dropped = Signal(str, int)  # (source name, its index after the move)

    def __init__(self, parent=None):
        super().__init__(parent)
        self.setDragEnabled(True)
        self.setAcceptDrops(True)
        self.setDropIndicatorShown(True)
        self.setDragDropMode(QTreeWidget.DragDropMode.InternalMove)
        self.setDefaultDropAction(Qt.DropAction.MoveAction)
        # a name wider than its column wraps onto a second line ("French / (decoder)": the role column of
        # cross-attention leaves the names about 100 px of a 310 px sidebar); one word too long for it
        # keeps its start and its end; each row's tooltip holds the whole name
        self.setUniformRowHeights(False)
        self.setWordWrap(True)
        self.setTextElideMode(Qt.TextElideMode.ElideMiddle)
        self.setItemDelegateForColumn(0, NameDelegate(self))
        self._relayout = QTimer(self)
        self._relayout.setSingleShot(True)
        self._relayout.setInterval(0)
        self._relayout.timeout.connect(self.doItemsLayout)  # row heights for the names' new width
        self.header().sectionResized.connect(lambda *_: self._relayout.start())

    def target_of(self, pos: QPoint) -> tuple[int | None, bool]:
        """(row under ``pos`` or None below the rows, True when in the row's lower half)."""
        item = self.itemAt(pos)
        if item is None:
            return None, True
        rect = self.visualItemRect(item)
        return self.indexOfTopLevelItem(item), pos.y() >= rect.center().y()

    def dropEvent(self, ev) -> None:  # noqa: N802 - Qt's name
        # InternalMove: Qt lets only drags that started in this list get this far (drag enter checks it)
        item = self.currentItem()
        if item is None:
            ev.ignore()
            return
        over, below = self.target_of(ev.position().toPoint())
        index = drop_target(self.indexOfTopLevelItem(item), over, below, self.topLevelItemCount())
        # not a MoveAction: the view must not remove the dragged row itself (the session's order is the
        # truth and the rows are rebuilt from it); a drop may only change to IgnoreAction or an offered one
        ev.setDropAction(Qt.DropAction.IgnoreAction)
        ev.accept()
        self.stopAutoScroll()
        self.setState(QTreeWidget.State.NoState)
        self.viewport().update()
        if index is not None:
            name = item.data(0, Qt.ItemDataRole.UserRole)
            QTimer.singleShot(0, lambda: self.source_dropped.emit(name, index))  # after the drag machinery
