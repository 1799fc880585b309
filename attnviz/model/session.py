"""Session: the live holder of the current SessionState, with one change event per top-level field
(then ``events.state`` once per change, and ``events.dirty`` when the flag flips), so that a view
redraws only for what it draws. Every edit goes through ``session.execute(cmd)``, which returns the
inverse; the undo stack lives in the UI. A change of the view alone is saved with the session but
is not unsaved work.
"""

from __future__ import annotations

from psygnal import Signal, SignalGroup

from attnviz.model.state import FIELDS, SessionState

VIEW_ONLY = frozenset({"view"})  # fields whose change alone does not make the session dirty


class SessionEvents(SignalGroup):
    """One signal per SessionState field, plus ``state`` (any change) and ``dirty``."""

    sources = Signal(object)
    tokenizer = Signal(object)
    cross = Signal(object)
    model = Signal(object)
    positional = Signal(object)
    score_rule = Signal(object)
    kernel = Signal(object)
    mask = Signal(object)
    view = Signal(object)
    interventions = Signal(object)
    state = Signal(object)
    dirty = Signal(bool)


class Session:
    """Holds a SessionState; edits it through commands; tells subscribers what changed."""

    def __init__(self, state: SessionState | None = None):
        self._state = state if state is not None else SessionState()
        self._dirty = False
        self.events = SessionEvents()

    @property
    def state(self) -> SessionState:
        return self._state

    @property
    def dirty(self) -> bool:
        """True when the state changed since the last ``mark_clean`` / ``replace_state``."""
        return self._dirty

    def _set_dirty(self, value: bool) -> None:
        if value != self._dirty:
            self._dirty = value
            self.events.dirty.emit(value)

    def mark_clean(self) -> None:
        """Call after saving."""
        self._set_dirty(False)

    def mark_dirty(self) -> None:
        """Call when something the session file keeps beside the state changed (the maps file shown)."""
        self._set_dirty(True)

    def execute(self, cmd):
        """Apply ``cmd``; emit events for the changed fields; return the inverse command.

        A command that raises leaves the session untouched (nothing is emitted).
        """
        new, inverse = cmd.apply(self._state)
        if not isinstance(new, SessionState):
            raise TypeError(f"{type(cmd).__name__}.apply must return a SessionState")
        self._commit(new, mark_dirty=True)
        return inverse

    def replace_state(self, state: SessionState, dirty: bool = False) -> None:
        """Switch to another whole state (file opened, demo loaded): every field is emitted."""
        if not isinstance(state, SessionState):
            raise TypeError("replace_state needs a SessionState")
        self._state = state
        for name in FIELDS:
            getattr(self.events, name).emit(getattr(state, name))
        self.events.state.emit(state)
        self._set_dirty(dirty)

    def _commit(self, new: SessionState, mark_dirty: bool) -> None:
        old = self._state
        changed = [n for n in FIELDS if getattr(old, n) is not getattr(new, n) and getattr(old, n) != getattr(new, n)]
        self._state = new
        if not changed:
            return
        for name in changed:
            getattr(self.events, name).emit(getattr(new, name))
        self.events.state.emit(new)
        if mark_dirty and any(n not in VIEW_ONLY for n in changed):
            self._set_dirty(True)
