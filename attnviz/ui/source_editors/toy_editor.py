"""The editor of hand-set tokens: their embedding values in a table."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QHeaderView, QLabel, QTableWidget, QTableWidgetItem, QVBoxLayout, QWidget

from attnviz.model.state import ToySource


class ToyEditor(QWidget):
    """Read-only view of hand-set tokens: label and embedding row."""

    def __init__(self, panel):
        super().__init__(panel)
        self.table = QTableWidget(self)
        self.table.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
        self.table.setTabKeyNavigation(False)  # Tab leaves the table (it cycled its cells for ever)
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        note = QLabel("Hand-set tokens of a worked example: each row is the token's embedding.", self)
        note.setWordWrap(True)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(note)
        layout.addWidget(self.table, 1)

    def show_source(self, src: ToySource) -> None:
        emb = src.embeddings.array
        self.table.setRowCount(len(src.labels))
        self.table.setColumnCount(emb.shape[1])
        self.table.setHorizontalHeaderLabels([f"x{j}" for j in range(emb.shape[1])])
        self.table.setVerticalHeaderLabels(list(src.labels))
        for i in range(emb.shape[0]):
            for j in range(emb.shape[1]):
                item = QTableWidgetItem(f"{emb[i, j]:.4g}")
                item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
                self.table.setItem(i, j, item)
