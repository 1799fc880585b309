"""Session files (.attnviz) and autosave. No Qt; imports model (and below). Public API::

    save_session(path, state) / load_session(path) / read_session(path)  # atomic save, hostile-file-safe load
    save_payload(path, tree, arrays, blobs) / load_payload(path) -> Payload  # the container, any JSON + arrays
    check_save_target(path) -> Path   # the real file a save writes; refuses dirs, devices, FIFOs, sockets
    SessionError                      # every load / save failure, with a message a person can act on
    SCHEMA_VERSION                    # written by this version; older files migrated, newer refused
    AutosaveStore                     # the autosave slot and crash-recovery marker
    SessionMaps                       # a maps file's attention maps carried by a session (save_session(maps=))
"""

from attnviz.persist.errors import SessionError
from attnviz.persist.atomic import check_save_target
from attnviz.persist.migrations import SCHEMA_VERSION
from attnviz.persist.container import Payload, load_payload, save_payload
from attnviz.persist.limits import DEFAULT_LIMITS, Limits
from attnviz.persist.session_maps import SessionMaps
from attnviz.persist.session import load_session, read_session, save_session
from attnviz.persist.autosave import AutosaveStore, RecoveryInfo

__all__ = [
    "SessionError", "check_save_target", "SCHEMA_VERSION", "Payload", "load_payload", "save_payload", "Limits",
    "DEFAULT_LIMITS", "load_session", "read_session", "save_session", "AutosaveStore", "RecoveryInfo",
    "SessionMaps",
]
