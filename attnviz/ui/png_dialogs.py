"""The PNG export's two questions as dialogs with access keys: the resolution (1x to 4x the size on
screen, or a width in pixels) and that width. :class:`attnviz.ui.file_actions.Prompts` shows them."""

from __future__ import annotations

from PySide6.QtWidgets import QInputDialog, QWidget

from attnviz.ui.export import MAX_PNG_SIDE


def _labelled(d: QInputDialog, label: str) -> QInputDialog:
    """Title, field label and buttons, set once the input is (set earlier, a button text made the
    integer input's OK button stay disabled)."""
    d.setWindowTitle("Export PNG")
    d.setLabelText(label)
    d.setOkButtonText("&OK")
    d.setCancelButtonText("&Cancel")
    return d


def resolution_dialog(parent: QWidget | None, choices: list[str]) -> QInputDialog:
    """A choice among ``choices`` (the second, 2x, first when there are more than two)."""
    d = QInputDialog(parent)
    d.setComboBoxItems(choices)
    d.setComboBoxEditable(False)
    if choices:
        d.setTextValue(choices[1 if len(choices) > 2 else 0])
    return _labelled(d, "&Resolution:")


def width_dialog(parent: QWidget | None, initial: int) -> QInputDialog:
    """A width in pixels, 16 to MAX_PNG_SIDE, starting at ``initial``."""
    d = QInputDialog(parent)
    d.setInputMode(QInputDialog.InputMode.IntInput)
    d.setIntRange(16, MAX_PNG_SIDE)
    d.setIntValue(int(initial))
    return _labelled(d, "&Width in pixels (the height follows):")
