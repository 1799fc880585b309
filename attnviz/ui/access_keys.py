"""Access keys (the underlined letter of ``&Save``) in dialogs: the texts Qt's standard buttons get
here, since its own "OK", "Cancel", "Save" carry none, and :func:`missing_access_keys`, which lists the
buttons and labelled fields of a dialog that cannot be reached with Alt and a letter."""

from __future__ import annotations

import re

from PySide6.QtWidgets import QAbstractButton, QDialogButtonBox, QLabel, QMessageBox, QWidget

_SB = QDialogButtonBox.StandardButton
#: standard button -> its text with an access key
STANDARD_TEXT = {_SB.Ok: "&OK", _SB.Cancel: "&Cancel", _SB.Save: "&Save", _SB.Discard: "&Discard",
                 _SB.Close: "C&lose", _SB.Open: "&Open", _SB.Apply: "&Apply", _SB.Reset: "&Reset",
                 _SB.Yes: "&Yes", _SB.No: "&No", _SB.Help: "&Help"}
_MNEMONIC = re.compile(r"(?<!&)&(?!&)(\w)")  # "&S" but not the literal "&&"


def set_standard_keys(box: QDialogButtonBox | QMessageBox) -> None:
    """Give the standard buttons of ``box`` their texts with access keys."""
    for which, text in STANDARD_TEXT.items():
        button = box.button(QMessageBox.StandardButton(which.value) if isinstance(box, QMessageBox) else which)
        if button is not None:
            button.setText(text)


def access_key(text: str) -> str | None:
    """The access key of a widget text ("&Save…" -> "s"), or None."""
    m = _MNEMONIC.search(text.replace("&&", ""))
    return m.group(1).lower() if m else None


def missing_access_keys(dialog: QWidget) -> list[str]:
    """What in ``dialog`` has no access key, or shares one: each button with a text and each label
    that names a field (has a buddy) should have its own."""
    problems, seen = [], {}
    widgets = [w for w in dialog.findChildren(QAbstractButton) if w.text() and not w.isHidden()]
    widgets += [w for w in dialog.findChildren(QLabel) if w.buddy() is not None and not w.isHidden()]
    for w in widgets:
        key = access_key(w.text())
        if key is None:
            problems.append(f"{type(w).__name__} {w.text()!r} has no access key")
        elif key in seen:
            problems.append(f"{w.text()!r} and {seen[key]!r} share the access key Alt+{key.upper()}")
        else:
            seen[key] = w.text()
    return problems
