"""The error type of the sources layer and the small argument checks every reader shares.

Every bad input in ``attnviz.sources`` (empty text, corrupt image, patch size that does not divide,
id out of range, a values file with NaN ...) raises :class:`SourceError` with a message that names
the problem and, where there is one, what to do about it.
"""

from __future__ import annotations

import math
import operator


class SourceError(ValueError):
    """A token source could not be read or turned into tokens; the message says why."""


def positive_int(name: str, value) -> int:
    """Return ``value`` as an int if it is a whole number > 0, else raise SourceError naming ``name``."""
    if isinstance(value, bool):
        raise SourceError(f"{name} must be a whole number > 0 (got {value!r})")
    try:
        value = operator.index(value)  # int and numpy integers; floats and strings refuse
    except TypeError:
        raise SourceError(f"{name} must be a whole number > 0 (got {value!r})") from None
    if value <= 0:
        raise SourceError(f"{name} must be > 0 (got {value})")
    return value


def nonnegative_int(name: str, value) -> int:
    """Return ``value`` as an int if it is a whole number >= 0 (a seed, an index), else raise."""
    if isinstance(value, bool):
        raise SourceError(f"{name} must be a whole number >= 0 (got {value!r})")
    try:
        value = operator.index(value)
    except TypeError:
        raise SourceError(f"{name} must be a whole number >= 0 (got {value!r})") from None
    if value < 0:
        raise SourceError(f"{name} must be >= 0 (got {value})")
    return value


def finite_nonnegative(name: str, value) -> float:
    """Return ``value`` as a float if it is finite and >= 0, else raise SourceError naming ``name``."""
    try:
        value = float(value)
    except (TypeError, ValueError):
        raise SourceError(f"{name} must be a number (got {value!r})") from None
    if not math.isfinite(value) or value < 0:
        raise SourceError(f"{name} must be finite and >= 0 (got {value})")
    return value
