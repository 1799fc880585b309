"""Autosave and crash recovery, without Qt: the application adds the timer and the dialog.

One slot per user (the last writer wins) in ``user_data_dir("attnviz")``: ``autosave.attnviz`` (an
ordinary session file), ``autosave.json`` (when, and for which file) and ``running.json``, a marker
removed by a clean exit; finding it at start-up means the previous run crashed, so
:meth:`AutosaveStore.recoverable` offers the autosave. A clean save or exit removes the autosave.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from attnviz.persist.atomic import atomic_write
from attnviz.persist.container import utc_now_iso
from attnviz.persist.errors import SessionError
from attnviz.persist.session import read_session, save_session

AUTOSAVE_NAME = "autosave.attnviz"
INFO_NAME = "autosave.json"
RUNNING_NAME = "running.json"


@dataclass(frozen=True)
class RecoveryInfo:
    """What the recovery offer tells a person about the autosave it found."""

    path: Path  # the autosave session file
    saved_at: str  # UTC ISO time of the last autosave ("" if unknown)
    source_path: str | None  # the session's own file when it had one, else None (untitled)
    size: int  # bytes of the autosave file


class AutosaveStore:
    """The autosave slot and the running marker in one directory."""

    def __init__(self, directory: str | os.PathLike | None = None):
        if directory is None:
            import platformdirs  # only the default location needs it

            directory = platformdirs.user_data_dir("attnviz")
        self.directory = Path(directory)
        self._previous_unclean: bool | None = None  # set by mark_running: the marker was already there
        self._last_written = None  # (state, maps) last autosaved by this store (for write_if_changed)

    # paths ------------------------------------------------------------------------------------
    @property
    def autosave_path(self) -> Path:
        return self.directory / AUTOSAVE_NAME

    @property
    def info_path(self) -> Path:
        return self.directory / INFO_NAME

    @property
    def running_path(self) -> Path:
        return self.directory / RUNNING_NAME

    def _mkdir(self) -> None:
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise SessionError(f"cannot create the autosave folder {self.directory}: "
                               f"{exc.strerror or exc}") from exc

    def _write_json(self, path: Path, obj: dict) -> None:
        data = json.dumps(obj, indent=1).encode("utf-8")
        try:
            atomic_write(path, lambda f: f.write(data))
        except OSError as exc:
            raise SessionError(f"cannot write {path}: {exc.strerror or exc}") from exc

    @staticmethod
    def _remove(path: Path) -> None:
        try:
            path.unlink()
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise SessionError(f"cannot remove {path}: {exc.strerror or exc}") from exc

    # lifecycle --------------------------------------------------------------------------------
    def mark_running(self) -> bool:
        """Record that an attnviz is running. Returns True when the previous run did not exit
        cleanly (its marker was still there)."""
        self._mkdir()
        self._previous_unclean = self.running_path.exists()
        self._write_json(self.running_path, {"pid": os.getpid(), "started": utc_now_iso()})
        return self._previous_unclean

    def mark_clean_exit(self) -> None:
        """Record a clean quit: remove the running marker and the autosave copy."""
        self.discard()
        self._remove(self.running_path)
        self._previous_unclean = None

    def _last_run_unclean(self) -> bool:
        if self._previous_unclean is not None:
            return self._previous_unclean
        return self.running_path.exists()  # asked before mark_running: a marker means a crash

    # autosave slot ----------------------------------------------------------------------------
    def write(self, state, source_path: str | os.PathLike | None = None, maps=None) -> Path:
        """Autosave ``state`` atomically (``source_path``: the session's own file, if any; ``maps``: the
        attention maps the window shows, a SessionMaps, or None)."""
        self._mkdir()
        path = save_session(self.autosave_path, state, maps=maps)
        self._write_json(self.info_path, {
            "saved_at": utc_now_iso(),
            "source_path": None if source_path is None else os.fspath(source_path),
        })
        self._last_written = (state, maps)
        return path

    def write_if_changed(self, state, source_path: str | os.PathLike | None = None, maps=None) -> bool:
        """Autosave ``state`` (and ``maps``) unless they are what this store wrote last; True if written."""
        last = self._last_written
        if last is not None and last[0] == state and last[1] is maps and self.autosave_path.exists():
            return False
        self.write(state, source_path, maps)
        return True

    def recoverable(self) -> RecoveryInfo | None:
        """The autosave to offer after a crash: one exists and the last run did not exit cleanly."""
        if not self._last_run_unclean():
            return None
        try:
            size = self.autosave_path.stat().st_size
        except OSError:
            return None
        saved_at, source = "", None
        try:
            info = json.loads(self.info_path.read_text(encoding="utf-8"))
            if isinstance(info, dict):
                saved_at = info.get("saved_at") if isinstance(info.get("saved_at"), str) else ""
                source = info.get("source_path") if isinstance(info.get("source_path"), str) else None
        except (OSError, ValueError):
            pass  # the session file itself is what matters; its details are optional
        return RecoveryInfo(self.autosave_path, saved_at, source, size)

    def load(self):
        """The autosaved ``SessionState``; SessionError when there is none or it is damaged."""
        return self.load_with_maps()[0]

    def load_with_maps(self):
        """(the autosaved ``SessionState``, the attention maps it carries or None); SessionError when there is
        none or it is damaged."""
        if not self.autosave_path.exists():
            raise SessionError(f"there is no autosaved session in {self.directory}")
        state, payload = read_session(self.autosave_path)
        return state, payload.maps

    def discard(self) -> None:
        """Remove the autosave copy (after recovery was declined, or the session was saved)."""
        self._remove(self.autosave_path)
        self._remove(self.info_path)
        self._last_written = None

    def save_clean(self, path: str | os.PathLike, state, maps=None) -> Path:
        """Save ``state`` (and ``maps``) to its real file, then drop the now redundant autosave copy."""
        written = save_session(path, state, maps=maps)
        self.discard()
        return written
