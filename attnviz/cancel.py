"""The one exception every layer raises when a computation stops because its result is no longer wanted: a
newer edit overtook it, the person pressed Cancel or Stop, or the window is closing. Qt-free and dependency-
free, so the engine's callers, the model, the checkpoints and the window share it: a job that raises it
delivers nothing, and no layer translates one kind of cancellation into another."""

from __future__ import annotations


class Cancelled(Exception):
    """A computation stopped before it finished because nobody wants its result any more."""
