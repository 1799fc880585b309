"""The error type of the sources layer, the small argument checks and the ``.npy`` reader every reader shares.

Every bad input in ``attnviz.sources`` (empty text, corrupt image, patch size that does not divide,
id out of range, a values file with NaN ...) raises :class:`SourceError` with a message that names
the problem and, where there is one, what to do about it.
"""

from __future__ import annotations

import math
import operator
from pathlib import Path


# Most tokens one source may give: the longest sequence the engine is built for. A larger count (a
# custom block of millions, an image cut into 1x1 patches) is a mistake or a hostile file, refused
# before any token vector is made.
MAX_SOURCE_TOKENS = 65_536


class SourceError(ValueError):
    """A token source could not be read or turned into tokens; the message says why."""


def _whole_number(name: str, value, minimum: int, bound: str) -> int:
    if isinstance(value, bool):
        raise SourceError(f"{name} must be a whole number {bound} (got {value!r})")
    try:
        value = operator.index(value)  # int and numpy integers; floats and strings refuse
    except TypeError:
        raise SourceError(f"{name} must be a whole number {bound} (got {value!r})") from None
    if value < minimum:
        raise SourceError(f"{name} must be {bound} (got {value})")
    return value


def positive_int(name: str, value) -> int:
    """Return ``value`` as an int if it is a whole number > 0, else raise SourceError naming ``name``."""
    return _whole_number(name, value, 1, "> 0")


def nonnegative_int(name: str, value) -> int:
    """Return ``value`` as an int if it is a whole number >= 0 (a seed, an index), else raise."""
    return _whole_number(name, value, 0, ">= 0")


def finite_nonnegative(name: str, value) -> float:
    """Return ``value`` as a float if it is finite and >= 0, else raise SourceError naming ``name``."""
    try:
        value = float(value)
    except (TypeError, ValueError):
        raise SourceError(f"{name} must be a number (got {value!r})") from None
    if not math.isfinite(value) or value < 0:
        raise SourceError(f"{name} must be finite and >= 0 (got {value})")
    return value


def read_npy(path: Path):
    """The one array of a ``.npy`` file, never unpickling; SourceError naming the file otherwise."""
    import numpy as np  # here: the error type and the checks stay importable without numpy

    try:
        a = np.load(path, allow_pickle=False)
    except ValueError as exc:
        if "pickle" in str(exc).lower():
            raise SourceError(
                f"{path.name} is not a plain numeric array: it holds Python objects (a pickled object array), "
                "which are not loaded for safety; save a plain numeric array with np.save"
            ) from None
        raise SourceError(f"{path.name} is not a valid .npy file ({exc})") from None
    except (OSError, EOFError) as exc:
        raise SourceError(f"{path.name} is not a valid .npy file ({exc})") from None
    if not isinstance(a, np.ndarray):  # an .npz archive renamed to .npy
        a.close()
        raise SourceError(f"{path.name} is not a single .npy array")
    return a
