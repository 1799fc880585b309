"""Session files (.attnviz) and autosave. No Qt. Imports model (and below).

Public API
----------
``save_session(path, state)`` / ``load_session(path) -> SessionState``
    a session to and from a file; atomic save, hostile-file-safe load. ``read_session(path)``
    also returns the file's :class:`Payload` (schema and app version, arrays, blobs).
``save_payload(path, tree, arrays, blobs)`` / ``load_payload(path) -> Payload``
    the same container for any JSON tree + numpy arrays + byte blobs.
``check_save_target(path) -> Path``
    the real file a save to ``path`` writes (symlinks followed); refuses a directory, device node,
    FIFO or socket before any work. Every save calls it; a command may call it before building what
    it saves.
``SessionError``
    the one error every load (and save) failure raises, with a message a person can act on.
``SCHEMA_VERSION``
    the manifest schema this version writes; older files are migrated (``migrations.py``), newer
    ones refused.
``AutosaveStore``
    the autosave slot and crash-recovery marker (``autosave.py``).

Modules: ``container`` (zip, manifest, hashes, caps), ``manifest`` (its layout and checks),
``limits`` (caps and safe dtypes), ``migrations`` (schema chain), ``atomic`` (temp file, fsync,
replace), ``session`` (model state on top), ``autosave``, ``errors``.
"""

from attnviz.persist.errors import SessionError
from attnviz.persist.atomic import check_save_target
from attnviz.persist.migrations import SCHEMA_VERSION
from attnviz.persist.container import Payload, load_payload, save_payload
from attnviz.persist.limits import DEFAULT_LIMITS, Limits
from attnviz.persist.session import load_session, read_session, save_session
from attnviz.persist.autosave import AutosaveStore, RecoveryInfo

__all__ = [
    "SessionError", "check_save_target", "SCHEMA_VERSION", "Payload", "load_payload", "save_payload", "Limits",
    "DEFAULT_LIMITS", "load_session", "read_session", "save_session", "AutosaveStore", "RecoveryInfo",
]
