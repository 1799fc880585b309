"""Atomic replacement of a file: the previous version stays intact until the new one is complete.

The temporary file lives in the target's directory (same filesystem, so ``os.replace`` is atomic)
and is fsynced, then the directory is too, so the rename survives a power cut. Temporaries left by
killed saves are cleaned up by the next save of the same file (:func:`remove_stale_temporaries`).
"""

from __future__ import annotations

import os
import re
import stat
import tempfile
import time
from pathlib import Path
from typing import BinaryIO, Callable

from attnviz.persist.errors import SessionError

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None

STALE_AFTER_S = 60.0  # an unlocked temporary untouched this long is stale even if its PID runs again
LEGACY_STALE_AFTER_S = 3600.0  # temporaries of earlier versions carry no PID and were never locked

_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISFIFO, "a named pipe (FIFO)"), (stat.S_ISSOCK, "a socket"))


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


def check_save_target(path: str | os.PathLike) -> Path:
    """The real file a save to ``path`` writes (symlinks followed); SessionError when something that
    is not a regular file (directory, device, FIFO, socket) is there, or the link cannot be resolved."""
    given = os.fspath(path)
    try:
        target = Path(os.path.realpath(given, strict=False))
    except (OSError, ValueError) as exc:
        raise SessionError(f"{given}: the path cannot be resolved for saving ({exc})") from None
    try:
        st = os.stat(target)
    except FileNotFoundError:
        return target  # a new file (or a link to one not yet there)
    except OSError as exc:  # a symlink loop, a path through a file, permission on a folder
        raise SessionError(f"{given}: cannot save there ({exc.strerror or exc})") from None
    if not stat.S_ISREG(st.st_mode):
        kind = next((name for test, name in _KINDS if test(st.st_mode)), "not a regular file")
        via = f" (the link points to {target})" if os.path.islink(given) else ""
        raise SessionError(f"{given}: it is {kind}{via}, not a regular file; files are only saved as new or "
                           f"existing regular files, so it is left as it is")
    return target


def _pid_running(pid: int) -> bool:
    if os.name == "nt":  # os.kill(pid, 0) would terminate a process on Windows: assume it runs
        return True
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, OverflowError):
        return False
    except OSError:  # PermissionError: it exists and belongs to someone else
        return True
    return True


def _lock_free(path: Path) -> bool:
    """True when nobody holds ``path``'s flock (taken and released here); False when held or unreadable."""
    if fcntl is None:
        return True  # Windows: deleting an open file fails instead
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return False
    finally:
        os.close(fd)  # also releases the lock just taken
    return True


def remove_stale_temporaries(target: Path) -> list[Path]:
    """Remove the temporaries of killed saves of ``target``; returns those removed.

    ``.NAME.PID-XXXXXXXX.tmp`` is stale when its flock is free (dropped when the holder dies) and its PID
    is not running or it is older than :data:`STALE_AFTER_S` (a writer between creating and locking
    its file is never touched; a reused PID does not keep a file for ever). Without flock (Windows)
    only the age counts.
    """
    name = re.escape(target.name)
    current = re.compile(rf"\.{name}\.(\d{{1,10}})-[a-z0-9_]{{8}}\.tmp")
    legacy = re.compile(rf"\.{name}\.[a-z0-9_]{{8}}\.tmp")
    removed = []
    try:
        entries = list(os.scandir(target.parent))
    except OSError:
        return removed
    now = time.time()
    for entry in entries:
        m = current.fullmatch(entry.name)
        if m is None and not legacy.fullmatch(entry.name):
            continue
        try:
            st = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        if not stat.S_ISREG(st.st_mode):
            continue
        age = now - st.st_mtime
        if m is not None:
            stale = age > STALE_AFTER_S or not _pid_running(int(m.group(1)))
        else:  # .NAME.XXXXXXXX.tmp of earlier versions: no PID, never locked
            stale = age > LEGACY_STALE_AFTER_S
        path = Path(entry.path)
        if stale and _lock_free(path):
            try:
                path.unlink()
            except OSError:  # held open on Windows, or removed meanwhile by another save
                continue
            removed.append(path)
    return removed


def atomic_write(path: str | os.PathLike, write: Callable[[BinaryIO], None]) -> Path:
    """Call ``write(f)`` on a temporary file beside ``path`` and atomically move it to ``path``.

    Follows a symlink at ``path`` (the link's target is replaced, the link stays); refuses a target
    that is not a regular file (SessionError). Keeps the mode of an existing target. Removes stale
    temporaries of earlier killed saves of the same file first. Exceptions from ``write`` or the
    filesystem propagate after cleanup. Returns the real path written.
    """
    target = check_save_target(path)
    directory = target.parent
    try:
        mode = stat.S_IMODE(os.stat(target).st_mode)
    except FileNotFoundError:
        mode = _new_file_mode()
    remove_stale_temporaries(target)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.{os.getpid()}-", suffix=".tmp", dir=directory)
    tmp = Path(tmp_name)
    try:
        if fcntl is not None:
            fcntl.flock(fd, fcntl.LOCK_EX)  # held until the file is closed: "a live process writes this"
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
