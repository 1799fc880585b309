"""Schema versions of the session manifest and the chain of migrations between them.

A migration is a pure function from a manifest at schema N to N + 1 that never touches member
bytes, so hashes stay valid. Schema 1 is the first release, so the chain is empty today. A new
version: bump ``SCHEMA_VERSION``, ``@register`` the step from the previous one, keep every earlier
fixture in ``tests/data/sessions`` loading, and regenerate the newest with ``tools/make_session_fixtures.py``.
"""

from __future__ import annotations

import copy
from typing import Callable

from attnviz.persist.errors import SessionError

SCHEMA_VERSION = 1
OLDEST_SCHEMA = 1  # the first schema version ever written; older numbers never existed

Migration = Callable[[dict], dict]

# from_version -> function turning a manifest at from_version into one at from_version + 1
MIGRATIONS: dict[int, Migration] = {}


def register(from_version: int, registry: dict[int, Migration] | None = None):
    """Decorator adding the step ``from_version -> from_version + 1`` to ``registry`` (default: the
    package's chain). Registering the same step twice is a programming error."""
    target = MIGRATIONS if registry is None else registry

    def deco(fn: Migration) -> Migration:
        if from_version in target:
            raise ValueError(f"a migration from schema {from_version} is already registered")
        target[from_version] = fn
        return fn

    return deco


def migrate(manifest: dict, *, current: int | None = None, oldest: int | None = None,
            registry: dict[int, Migration] | None = None) -> dict:
    """Return ``manifest`` brought up to schema ``current`` (the input is not modified).

    ``current``, ``oldest`` and ``registry`` default to this module's ``SCHEMA_VERSION``,
    ``OLDEST_SCHEMA`` and ``MIGRATIONS`` as they are at call time. Raises SessionError for a schema
    newer than ``current``, one older than ``oldest`` (never written by any attnviz), or a gap in
    the chain.
    """
    current = SCHEMA_VERSION if current is None else current
    oldest = OLDEST_SCHEMA if oldest is None else oldest
    chain = MIGRATIONS if registry is None else registry
    version = manifest.get("schema_version")
    if isinstance(version, bool) or not isinstance(version, int):
        raise SessionError(f"unknown schema version {version!r}; this version reads "
                           f"{oldest} up to {current}")
    if version > current:
        raise SessionError(f"written by a newer attnviz (schema {version}); this version reads up to "
                           f"{current}. Update attnviz to open it")
    if version < oldest:
        raise SessionError(f"unknown schema version {version}; no attnviz ever wrote it "
                           f"(known versions: {oldest} up to {current})")
    out = copy.deepcopy(manifest)
    while version < current:
        step = chain.get(version)
        if step is None:
            raise SessionError(f"no migration from schema {version} to {version + 1}; "
                               f"this version cannot read the file")
        try:
            out = step(out)
        except SessionError:
            raise
        except (KeyError, TypeError, ValueError, IndexError, AttributeError) as exc:
            raise SessionError(f"cannot migrate the session from schema {version} to {version + 1}: "
                               f"{type(exc).__name__}: {exc}") from exc
        if not isinstance(out, dict):
            raise SessionError(f"migration from schema {version} returned {type(out).__name__}, not a manifest")
        version += 1
        out["schema_version"] = version
    return out
