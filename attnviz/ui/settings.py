"""Window settings that belong to the person, not to a session (geometry, workspace layout, theme, the
first-start hint, recent files), kept with QSettings in an INI file: the platform's location by
default, a given file with ``AppSettings(path)`` (tests, a portable install). Values read back are
checked, so a damaged or foreign settings file gives defaults, never an error.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass

from PySide6.QtCore import QByteArray, QSettings

THEMES = ("light", "dark")


@dataclass(frozen=True)
class SettingsConfig:
    """Limits of the stored values."""

    max_recent: int = 10  # entries in File > Open Recent: enough to find yesterday's files, short enough to scan
    layout_version: int = 2  # bump when the window's parts change: a layout saved by an older version is dropped


class AppSettings:
    """Typed access to the application's QSettings."""

    def __init__(self, path: str | os.PathLike | None = None, config: SettingsConfig = SettingsConfig()):
        self.config = config
        if path is None:
            self._qs = QSettings(QSettings.Format.IniFormat, QSettings.Scope.UserScope, "attnviz", "attnviz")
        else:
            self._qs = QSettings(os.fspath(path), QSettings.Format.IniFormat)

    @property
    def path(self) -> str:
        return self._qs.fileName()

    def sync(self) -> None:
        self._qs.sync()

    # ------------------------------------------------------------------ theme
    def theme(self) -> str:
        value = self._qs.value("ui/theme", "light")
        return value if value in THEMES else "light"

    def set_theme(self, name: str) -> None:
        if name not in THEMES:
            raise ValueError(f"unknown theme {name!r}; choose one of {', '.join(THEMES)}")
        self._qs.setValue("ui/theme", name)

    # ------------------------------------------------------------------ window
    def _bytes(self, key: str) -> QByteArray | None:
        value = self._qs.value(key)
        return value if isinstance(value, QByteArray) and not value.isEmpty() else None

    def geometry(self) -> QByteArray | None:
        return self._bytes("window/geometry")

    def layout(self) -> dict | None:
        """The saved workspace layout (a dict), or None when there is none for the current layout
        version or it cannot be read."""
        try:
            version = int(self._qs.value("window/layout_version", -1))
        except (TypeError, ValueError):
            return None
        if version != self.config.layout_version:
            return None
        value = self._qs.value("window/layout", "")
        try:
            layout = json.loads(value) if isinstance(value, str) and value else None
        except ValueError:
            return None
        return layout if isinstance(layout, dict) else None

    def save_window(self, geometry: QByteArray, layout: dict) -> None:
        self._qs.setValue("window/geometry", geometry)
        self._qs.setValue("window/layout", json.dumps(layout, sort_keys=True))
        self._qs.setValue("window/layout_version", self.config.layout_version)

    # ------------------------------------------------------------------ first start
    def hint_dismissed(self) -> bool:
        value = self._qs.value("ui/hint_dismissed", False)
        return value is True or (isinstance(value, str) and value.lower() == "true")

    def set_hint_dismissed(self, dismissed: bool = True) -> None:
        self._qs.setValue("ui/hint_dismissed", bool(dismissed))

    # ------------------------------------------------------------------ recent files
    def recent_files(self) -> list[str]:
        value = self._qs.value("files/recent", [])
        if isinstance(value, str):  # QSettings gives a lone string for a one-element list
            value = [value]
        if not isinstance(value, (list, tuple)):
            return []
        out: list[str] = []
        for v in value:
            if isinstance(v, str) and v and v not in out:
                out.append(v)
        return out[: self.config.max_recent]

    def add_recent(self, path: str | os.PathLike) -> list[str]:
        """Put ``path`` first in the recent list (once); returns the new list."""
        p = os.path.abspath(os.fspath(path))
        files = [p] + [f for f in self.recent_files() if f != p]
        files = files[: self.config.max_recent]
        self._qs.setValue("files/recent", files)
        return files

    def remove_recent(self, path: str | os.PathLike) -> list[str]:
        p = os.path.abspath(os.fspath(path))
        files = [f for f in self.recent_files() if f != p]
        self._qs.setValue("files/recent", files)
        return files

    def clear_recent(self) -> None:
        self._qs.setValue("files/recent", [])

    # ------------------------------------------------------------------ folders
    def last_folder(self) -> str:
        value = self._qs.value("files/last_folder", "")
        return value if isinstance(value, str) and os.path.isdir(value) else os.path.expanduser("~")

    def set_last_folder(self, path: str | os.PathLike) -> None:
        p = os.fspath(path)
        self._qs.setValue("files/last_folder", p if os.path.isdir(p) else os.path.dirname(p))
