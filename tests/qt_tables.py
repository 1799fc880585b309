"""Reading a QTableWidget's texts in tests."""

from __future__ import annotations

from PySide6.QtWidgets import QTableWidget


def table_texts(table: QTableWidget) -> list[list[str]]:
    """All cell texts of a table, row by row ("" for an empty cell)."""
    out = []
    for r in range(table.rowCount()):
        row = []
        for c in range(table.columnCount()):
            it = table.item(r, c)
            row.append("" if it is None else it.text())
        out.append(row)
    return out
