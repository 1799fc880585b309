"""The command protocol: every edit is a small frozen, pure object whose ``apply(value) -> (new_value,
inverse)`` returns the edited value and the command that undoes it, so that undo is data and a UI undo
stack only adapts it. Session commands act on a ``SessionState``, mask-design commands on a
``MaskDesign`` (lifted into session commands by the session model). Consecutive commands with equal,
non-None ``merge_key`` (one drag stroke) may be merged into one undo step with ``merge``.
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
