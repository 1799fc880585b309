"""Running the frozen bundle in the packaging tests: each run gets a fresh home and user directories
under a temporary folder, no variable of the calling environment that would steer numba, Qt or Python,
and the offscreen Qt platform unless told otherwise."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from pkgpaths import EXECUTABLE

RUN_TIMEOUT_S = 420  # a cold numba cache compiles every kernel: minutes on a busy two-core machine


def user_dirs(tmp: Path) -> dict[str, Path]:
    return {name: tmp / name.lower() for name in
            ("HOME", "XDG_CACHE_HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_RUNTIME_DIR")}


def run(args, tmp: Path, extra_env=None, prefix=(), platform="offscreen") -> subprocess.CompletedProcess:
    """Run the frozen app with a fresh home and user directories under ``tmp``, offscreen (or on the Qt
    ``platform`` given, with ``prefix`` before the command, e.g. ``xvfb-run``)."""
    dirs = user_dirs(tmp)
    for d in dirs.values():
        d.mkdir(parents=True, exist_ok=True, mode=0o700)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("NUMBA_", "XDG_", "PYTHON", "QT_", "LD_"))
           and k not in ("VIRTUAL_ENV", "DISPLAY", "WAYLAND_DISPLAY")}
    env.update({k: str(v) for k, v in dirs.items()}, QT_QPA_PLATFORM=platform, **(extra_env or {}))
    return subprocess.run([*prefix, str(EXECUTABLE), *args], cwd=tmp, env=env, capture_output=True, text=True,
                          timeout=RUN_TIMEOUT_S)


def files(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.rglob("*")} if root.exists() else set()


def stamp(path: Path) -> tuple[int, bytes]:
    return path.stat().st_mtime_ns, path.read_bytes()


def kernel_dir(tmp: Path) -> Path:
    """attnviz's numba cache folder for a run under ``tmp``."""
    return user_dirs(tmp)["XDG_CACHE_HOME"] / "attnviz" / "numba"


def kernel_cache(tmp: Path) -> set[str]:
    """numba cache files (index and compiled code) under attnviz's user cache directory."""
    return {f for f in files(kernel_dir(tmp)) if f.endswith((".nbi", ".nbc"))}


def no_load_errors(proc: subprocess.CompletedProcess) -> None:
    """Nothing the bundle lacks was looked for: no missing library, module or Qt plugin."""
    for pattern in ("cannot open shared object file", "ModuleNotFoundError", "ImportError", "Traceback",
                    "Could not load the Qt platform plugin", "Cannot load library"):
        assert pattern not in proc.stderr, proc.stderr
