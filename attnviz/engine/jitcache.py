"""Where numba keeps compiled kernels: a per-user cache directory, so ``cache=True`` works everywhere.

By default numba writes next to the source (``__pycache__``) and falls back to a user-wide directory
when the package folder is read-only. attnviz always uses its own user cache directory
(platformdirs), unless ``NUMBA_CACHE_DIR`` is already set. This module must be imported before numba
(the engine package imports it first); if numba was imported earlier, its config is updated directly.
"""

from __future__ import annotations

import hashlib
import os
import platform
import sys
from pathlib import Path

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


def _fingerprint() -> str:
    """What the compiled kernels depend on: numba and Python versions, the machine, and the engine's
    source files (numba recompiles when a source file's time stamp or size changes)."""
    h = hashlib.sha1()
    import numba

    h.update(f"{numba.__version__}|{sys.version}|{platform.machine()}".encode())
    for f in sorted(Path(__file__).parent.glob("*.py")):
        st = f.stat()
        h.update(f"{f.name}|{st.st_size}|{st.st_mtime_ns}".encode())
    return h.hexdigest()[:16]


def warm_marker() -> Path | None:
    """The file that says every engine kernel of this installation is in the cache (None: no cache dir)."""
    d = cache_dir()
    return None if d is None else Path(d) / f"attnviz-warm-{_fingerprint()}"


_warm = {"known": False}


def is_warm() -> bool:
    """True when a complete warm-up (:func:`mark_warm`) ran for this installation and cache: the
    kernels load from the cache in well under a second instead of compiling for several."""
    if _warm["known"]:
        return True
    marker = warm_marker()
    _warm["known"] = marker is not None and marker.exists()
    return _warm["known"]


def mark_warm() -> None:
    """Record that every kernel is compiled and cached (after :func:`attnviz.engine.warmup` of every dtype)."""
    _warm["known"] = True
    marker = warm_marker()
    if marker is None:
        return
    try:
        marker.touch()
    except OSError:  # a read-only cache: the next start falls back to the numpy path again, no harm
        pass

