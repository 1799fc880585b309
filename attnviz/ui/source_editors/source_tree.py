"""The sources list: one row per token source; dragging a row asks for one move."""

from __future__ import annotations

from PySide6.QtCore import QPoint, Qt, QTimer, Signal
from PySide6.QtWidgets import QTreeWidget

from attnviz.model.source_list import drop_target


class SourceTree(QTreeWidget):
    """The sources list; dragging a row onto another place asks for one move (``source_dropped``) and
    leaves the rows to be rebuilt from the session."""

    source_dropped = Signal(str, int)  # (source name, its index after the move)

    def __init__(self, parent=None):
        super().__init__(parent)
        self.setDragEnabled(True)
        self.setAcceptDrops(True)
        self.setDropIndicatorShown(True)
        self.setDragDropMode(QTreeWidget.DragDropMode.InternalMove)
        self.setDefaultDropAction(Qt.DropAction.MoveAction)

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
