"""Adapter from the model's pure commands to Qt's undo stack.

A model command ``apply(state) -> (state, inverse)`` is executed through ``Session.execute`` (which
returns the inverse). The adapter keeps, for one undo step, the forward commands in order and their
inverses; undo applies the inverses in reverse order and redo the forward commands again. Consecutive
commands with the same non-None ``merge_key`` (one drag stroke) merge into one step.
"""

from __future__ import annotations

import zlib

from PySide6.QtGui import QUndoCommand

from attnviz.model.command import merge_key


def _merge_id(key) -> int:
    """A stable positive int for QUndoCommand.id() derived from a command's merge key (-1: never merge)."""
    if key is None:
        return -1
    return 1 + (zlib.crc32(repr(key).encode("utf-8")) & 0x3FFFFFFF)


class CommandAdapter(QUndoCommand):
    """One undo step made of one or more model commands executed on a session."""

    def __init__(self, session, command, inverse):
        """``command`` has already been executed on ``session`` and returned ``inverse``: Qt's first
        ``redo`` (on push) therefore does nothing, and a command that fails never reaches the stack."""
        super().__init__(getattr(command, "label", type(command).__name__))
        self._session = session
        self._forward = [command]
        self._inverses: list = [inverse]
        self._key = merge_key(command)
        self._first_redo = True

    def id(self) -> int:  # noqa: A003 - Qt's name
        return _merge_id(self._key)

    def redo(self):
        if self._first_redo:
            self._first_redo = False
            return
        self._inverses = [self._session.execute(c) for c in self._forward]

    def undo(self):
        for inv in reversed(self._inverses):
            self._session.execute(inv)

    def mergeWith(self, other) -> bool:  # noqa: N802 - Qt's name
        if not isinstance(other, CommandAdapter) or other._key is None or other._key != self._key:
            return False
        self._forward.extend(other._forward)
        self._inverses.extend(other._inverses)
        return True
