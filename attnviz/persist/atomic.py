"""Atomic replacement of a file: the previous version stays intact until the new one is complete.

Protocol: create a temporary file in the target's own directory (same filesystem, so the rename is
atomic), write it, flush and fsync it, ``os.replace`` it over the target, then fsync the directory so
the rename itself survives a power cut. Any failure before the rename (disk full, permission, an
exception in the writer) removes the temporary file and leaves the target byte-identical; a kill
leaves the target intact and at most a stale ``.NAME.*.tmp`` beside it.
"""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path
from typing import BinaryIO, Callable


def _fsync_dir(directory: Path) -> None:
    """Make a rename in ``directory`` durable (a no-op where directories cannot be opened)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:  # Windows, or a directory we may write but not open
        return
    try:
        os.fsync(fd)
    except OSError:
        pass  # some filesystems refuse fsync on directories; the rename has still happened
    finally:
        os.close(fd)


def _new_file_mode() -> int:
    """The mode a plain ``open(path, "w")`` would give a new file under the current umask."""
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


def atomic_write(path: str | os.PathLike, write: Callable[[BinaryIO], None]) -> Path:
    """Call ``write(f)`` on a temporary file beside ``path`` and atomically move it to ``path``.

    Follows a symlink at ``path`` (the link's target is replaced, the link stays). Keeps the mode of
    an existing target. Exceptions from ``write`` or the filesystem propagate after cleanup.
    Returns the real path written.
    """
    target = Path(os.path.realpath(os.fspath(path)))
    directory = target.parent
    try:
        mode = stat.S_IMODE(os.stat(target).st_mode)
    except FileNotFoundError:
        mode = _new_file_mode()
    fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=directory)
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, target)
    except BaseException:
        try:
            tmp.unlink()
        except OSError:
            pass
        raise
    _fsync_dir(directory)
    return target
