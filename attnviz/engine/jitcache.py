"""Where numba keeps compiled kernels: a per-user cache directory, so ``cache=True`` works everywhere.

By default numba writes next to the source (``__pycache__``) and falls back to a user-wide directory
when the package folder is read-only. attnviz always uses its own user cache directory
(platformdirs), unless ``NUMBA_CACHE_DIR`` is already set. This module must be imported before numba
(the engine package imports it first); if numba was imported earlier, its config is updated directly.
"""

from __future__ import annotations

import os
import sys

from platformdirs import user_cache_dir


def cache_dir() -> str | None:
    """The directory numba's compiled-kernel cache uses for this process (None: numba's own choice)."""
    return os.environ.get("NUMBA_CACHE_DIR") or None


def _configure() -> None:
    if not os.environ.get("NUMBA_CACHE_DIR"):
        path = os.path.join(user_cache_dir("attnviz", appauthor=False), "numba")
        try:
            os.makedirs(path, exist_ok=True)
        except OSError:  # no writable home: numba falls back to its own locations
            return
        os.environ["NUMBA_CACHE_DIR"] = path
    if "numba" in sys.modules:  # imported before us: numba read its config already
        sys.modules["numba"].config.CACHE_DIR = os.environ["NUMBA_CACHE_DIR"]


_configure()
