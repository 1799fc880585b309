"""Session files: the model's ``SessionState`` saved to and loaded from an ``.attnviz`` file.

``save_session`` asks the model for its payload (``attnviz.model.serialize.dump_state``: a JSON tree,
arrays and raw input blobs) and writes it with :func:`attnviz.persist.container.save_payload`;
``load_session`` reads and verifies the payload and hands it to ``load_state``. Whatever the file
holds, a failure is a :class:`SessionError`.
"""

from __future__ import annotations

import os
from pathlib import Path

from attnviz.model import serialize
from attnviz.model.state import SessionState
from attnviz.persist.atomic import check_save_target
from attnviz.persist.container import Payload, load_payload, save_payload
from attnviz.persist.errors import SessionError
from attnviz.persist.limits import DEFAULT_LIMITS, Limits
from attnviz.persist.session_maps import SessionMaps


def save_session(path: str | os.PathLike, state, *, limits: Limits = DEFAULT_LIMITS,
                 created: str | None = None, maps: SessionMaps | None = None) -> Path:
    """Write ``state`` (a ``SessionState``) to ``path`` atomically, with ``maps`` (the read-only attention maps
    of a file the window shows, :mod:`attnviz.persist.session_maps`) when given; returns the path written.

    Raises SessionError when the state cannot be stored or the file cannot be written; the previous
    file at ``path`` is then unchanged.
    """
    if not isinstance(state, SessionState):
        raise SessionError(f"cannot save {path}: expected a SessionState, got {type(state).__name__}")
    check_save_target(path)  # before any work: a directory, device or FIFO is never replaced
    try:
        tree, arrays, blobs = serialize.dump_state(state)
    except (ValueError, TypeError) as exc:
        raise SessionError(f"cannot save {path}: the session cannot be serialised ({exc})") from exc
    return save_payload(path, tree, arrays, blobs, limits=limits, created=created, maps=maps)


def read_session(path: str | os.PathLike, *, limits: Limits = DEFAULT_LIMITS) -> tuple[SessionState, Payload]:
    """The ``SessionState`` at ``path`` and the payload it was built from (schema version, app
    version, creation time, arrays and blobs, and ``payload.maps``: the attention maps it carries, or None),
    for tools that describe a file and for the window, which shows the maps."""
    payload = load_payload(path, limits=limits)
    try:
        state = serialize.load_state(payload.tree, payload.arrays, payload.blobs)
    # The tree passed every structural check but its content is the model's to judge; a hostile
    # tree may trip more than the ValueError load_state promises, and all of it means "invalid".
    except (ValueError, KeyError, TypeError, IndexError, AttributeError, OverflowError,
            MemoryError, RecursionError) as exc:
        detail = str(exc) if isinstance(exc, ValueError) else f"{type(exc).__name__}: {exc}"
        raise SessionError(f"{path}: the session content is invalid: {detail}") from exc
    return state, payload


def load_session(path: str | os.PathLike, *, limits: Limits = DEFAULT_LIMITS) -> SessionState:
    """Read the session at ``path`` (any released schema) and return its ``SessionState``."""
    return read_session(path, limits=limits)[0]
