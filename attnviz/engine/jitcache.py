"""Where numba keeps compiled kernels (a per-user cache directory, so ``cache=True`` works everywhere),
and the vector width it compiles them for.

By default numba writes next to the source (``__pycache__``) and falls back to a user-wide directory
when the package folder is read-only. attnviz always uses its own user cache directory
(platformdirs), unless ``NUMBA_CACHE_DIR`` is already set. This module must be imported before numba
(the engine package imports it first); if numba was imported earlier, its config is updated directly.

numba checks only the time stamp of the file that defines a kernel, while the engine's kernels call
functions of its other files (the micro-kernel, the exponential): a checkout that changes one of those
alone would load stale machine code. So the directory is one per content of the engine's sources,
``<user cache>/numba/engine-<digest>``; the few most recently used are kept, older ones removed.
"""

from __future__ import annotations

import hashlib
import os
import platform
import shutil
import sys
from pathlib import Path

from platformdirs import user_cache_dir


def cache_dir() -> str | None:
    """The directory numba's compiled-kernel cache uses for this process (None: numba's own choice)."""
    return os.environ.get("NUMBA_CACHE_DIR") or None


KEEP_SOURCE_VERSIONS = 3  # cache directories of engine sources kept (the current one and the latest before)


def source_digest() -> str:
    """A digest of the contents of the engine's source files (what every compiled kernel depends on)."""
    h = hashlib.sha1()
    for f in sorted(Path(__file__).parent.glob("*.py")):
        h.update(f.name.encode() + b"\0")
        try:
            h.update(f.read_bytes())
        except OSError:
            h.update(b"?")
    return h.hexdigest()[:16]


def prune(root: Path, keep: str, n_keep: int = KEEP_SOURCE_VERSIONS) -> list[Path]:
    """Remove what is in root but the directory ``keep`` and the n_keep - 1 most recently used other
    ``engine-*`` directories (kernels of engine sources since replaced, and the flat layout of earlier
    versions); returns what it removed. Errors leave things in place."""

    def used(e: Path) -> float:
        try:
            return e.stat().st_mtime
        except OSError:  # removed meanwhile by another process starting on the same sources
            return 0.0

    try:
        entries = list(root.iterdir())
    except OSError:
        return []
    others = sorted((e for e in entries if e.is_dir() and e.name.startswith("engine-") and e.name != keep),
                    key=used, reverse=True)
    kept = {keep, *(e.name for e in others[:n_keep - 1])}
    removed = []
    for e in entries:
        if e.name in kept:
            continue
        try:
            shutil.rmtree(e) if e.is_dir() and not e.is_symlink() else e.unlink()
            removed.append(e)
        except OSError:  # in use, read-only, or gone already
            pass
    return removed


def _configure() -> None:
    if not os.environ.get("NUMBA_CACHE_DIR"):
        root = Path(user_cache_dir("attnviz", appauthor=False)) / "numba"
        name = f"engine-{source_digest()}"
        path = root / name
        try:
            fresh = not path.is_dir()
            path.mkdir(parents=True, exist_ok=True)
            os.utime(path)  # most recently used
        except OSError:  # no writable home: numba falls back to its own locations
            return
        if fresh:
            prune(root, name)
        os.environ["NUMBA_CACHE_DIR"] = str(path)
    if "numba" in sys.modules:  # imported before us: numba read its config already
        sys.modules["numba"].config.CACHE_DIR = os.environ["NUMBA_CACHE_DIR"]


_configure()

# AVX-512 CPUs that run 512-bit vectors at full speed (the avx512fp16 generation on: Sapphire Rapids
# and later Xeons). LLVM's tuning for them still prefers 256-bit vectors, as it does for older AVX-512
# CPUs that clock down for 512-bit code; on an AVX-512 Xeon of that generation 512-bit vectors made the
# softmax of a flash tile 15-25 % faster and a dense flash call about 6 % faster (benchmarks/README.md).
WIDE_VECTOR_FEATURES = ("avx512f", "avx512bw", "avx512vl", "avx512fp16")


def vector_features(host_name: str, host_features: dict) -> tuple[str, str] | None:
    """(CPU name, LLVM feature string) that let numba use 512-bit vectors on this host, or None to keep
    numba's own choice (a CPU without WIDE_VECTOR_FEATURES)."""
    if not all(host_features.get(f) for f in WIDE_VECTOR_FEATURES):
        return None
    flags = ",".join(("+" if on else "-") + name for name, on in sorted(host_features.items()))
    return host_name, flags + ",-prefer-256-bit"


def host_cpu_features() -> dict[str, bool]:
    """LLVM's names of this CPU's features, each on or off ({} when LLVM cannot describe the host)."""
    try:
        import llvmlite.binding as llvm

        return dict(llvm.get_host_cpu_features())
    except (RuntimeError, ImportError):
        return {}


def _configure_vectors() -> None:
    """Point numba at 512-bit vectors where :func:`vector_features` says so, unless NUMBA_CPU_NAME or
    NUMBA_CPU_FEATURES is set (the user's choice wins). Like the cache directory, this must happen
    before numba compiles anything; numba keeps separate cache entries per CPU name and features."""
    if os.environ.get("NUMBA_CPU_NAME") or os.environ.get("NUMBA_CPU_FEATURES"):
        return
    try:
        import llvmlite.binding as llvm

        name = llvm.get_host_cpu_name()
    except (RuntimeError, ImportError):  # a host LLVM cannot describe
        return
    chosen = vector_features(name, host_cpu_features())
    if chosen is None:
        return
    os.environ["NUMBA_CPU_NAME"], os.environ["NUMBA_CPU_FEATURES"] = chosen
    if "numba" in sys.modules:  # imported before us: numba read its config already
        sys.modules["numba"].config.CPU_NAME, sys.modules["numba"].config.CPU_FEATURES = chosen


_configure_vectors()


def _fingerprint() -> str:
    """What the compiled kernels depend on: numba and Python versions, the machine, and the engine's
    source files (numba recompiles when a source file's time stamp or size changes)."""
    h = hashlib.sha1()
    import numba

    h.update(f"{numba.__version__}|{sys.version}|{platform.machine()}|{numba.config.CPU_NAME}|"
             f"{numba.config.CPU_FEATURES}".encode())
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

