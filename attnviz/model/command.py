"""The command protocol: every edit of a session is a small frozen object whose ``apply`` returns the
edited value and the command that undoes it.

Commands are pure: ``apply(value) -> (new_value, inverse)``. Session-level commands act on a
``SessionState``; mask-design commands act on a ``MaskDesign`` and are lifted into session commands by
the session model. A UI undo stack only adapts them. Consecutive commands with equal, non-None
``merge_key`` (one drag stroke) may be merged into one undo step with ``merge``.
"""

from __future__ import annotations

from typing import Any, Hashable, Protocol, runtime_checkable


@runtime_checkable
class Command(Protocol):
    """An edit with its own inverse."""

    label: str  # shown in the Edit menu: "Undo <label>"

    def apply(self, value: Any) -> tuple[Any, "Command"]:
        """Return the edited value and the command that restores ``value``."""
        ...


def merge_key(cmd: Command) -> Hashable | None:
    """The key under which consecutive commands merge into one undo step (None: never merge)."""
    return getattr(cmd, "merge_key", None)
