"""A panel's or dialog's own message line: the label under its controls that says why something did not
happen (or what just did). One widget for all of them, so that saying and clearing a message is the same
call everywhere: ``line.say(level, text)``, and ``line.say(level, "")`` or :meth:`MessageLine.clear`
to take it away. How it looks stays the owner's choice: the style it always has, and optionally another
for errors."""

from __future__ import annotations

from PySide6.QtWidgets import QLabel, QWidget

from attnviz.ui.messages import Level

ERROR_STYLE = "color: #d0342c;"  # the red the mask designer and its dialogs give an error


class MessageLine(QLabel):
    """A word-wrapping label holding one message.

    ``style`` is the label's style sheet whatever the message; ``error_style``, when given, replaces it
    while the message is an error. ``hide_empty``: saying nothing hides the line (the layout closes up);
    without it an empty line keeps its place. Whether the line starts hidden is its owner's choice.
    ``level`` is the level of the message shown (None while there is none)."""

    def __init__(self, parent: QWidget | None = None, *, style: str = "", error_style: str | None = None,
                 hide_empty: bool = True, text: str = ""):
        super().__init__(text, parent)
        self.setWordWrap(True)
        self._style = style
        self._error_style = error_style
        self._hide_empty = hide_empty
        self._level: Level | None = None
        if style:
            self.setStyleSheet(style)

    @property
    def level(self) -> Level | None:
        return self._level

    def say(self, level: Level, text: str) -> None:
        """Show ``text`` at ``level``; an empty text clears the line."""
        self._level = Level(level) if text else None
        self.setText(text)
        if self._error_style is not None:
            self.setStyleSheet(self._error_style if self._level is Level.ERROR else self._style)
        if self._hide_empty:
            self.setVisible(bool(text))

    def clear(self) -> None:  # noqa: D102 - QLabel.clear, and the line hidden (when it hides empty)
        self.say(Level.INFO, "")
