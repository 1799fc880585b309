"""The files of the frozen bundle ``dist/attnviz/attnviz`` (built by ``make package``, which runs these
tests after building): what it must hold, what it leaves out, that every library a bundled file links
is there (or is one the system always provides), that the stripped libraries are stripped and nothing
else is, and that every warning of the PyInstaller build has its answer.

Without a bundle, or with one older than the sources, every test here skips (see ``conftest.py``).
"""

from __future__ import annotations

import ast
import hashlib
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from pkgpaths import APP_ID, ROOT, load_script

contents = load_script("bundle_contents")
package = pytest.mark.package
BUILD_LOG = ROOT / "build" / "pyinstaller" / "build.log"  # PyInstaller's warnings, kept by packaging/build.sh


def _internal(bundle: Path) -> Path:
    return bundle / "_internal"


def _files(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.rglob("*")} if root.exists() else set()


def _readelf() -> str:
    tool = shutil.which("readelf")
    if tool is None:
        pytest.fail("readelf is not installed (Debian package binutils; `make package` installs it)")
    return tool


def _elf_files(root: Path) -> list[Path]:
    out = []
    for p in sorted(root.rglob("*")):
        if p.is_file() and not p.is_symlink():
            with open(p, "rb") as fh:
                if fh.read(4) == b"\x7fELF":
                    out.append(p)
    return out


def _needed(path: Path) -> list[str]:
    out = subprocess.run([_readelf(), "-d", "-W", str(path)], capture_output=True, text=True, check=True).stdout
    return re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", out)


def _sections(path: Path) -> set[str]:
    out = subprocess.run([_readelf(), "-S", "-W", str(path)], capture_output=True, text=True, check=True).stdout
    return set(re.findall(r"\]\s+(\.\S+)", out))


@package
def test_bundle_holds_resources_icons_and_engine_sources_and_not_the_excluded_files(bundle):
    internal = _internal(bundle)
    for rel in _files(ROOT / "resources"):
        if (ROOT / "resources" / rel).is_file():
            assert (internal / "resources" / rel).is_file(), rel
    assert (internal / "icons" / f"{APP_ID}.png").is_file()
    assert (internal / "icons" / f"{APP_ID}.svg").is_file()
    # the engine ships as source files: numba's cache locates kernels through them
    for py in (ROOT / "attnviz" / "engine").glob("*.py"):
        assert (internal / "attnviz" / "engine" / py.name).is_file(), py.name

    dropped = sorted(f for f in _files(internal) if contents.is_excluded_file(f))
    assert not dropped, f"files the exclusion list drops are in the bundle: {dropped[:20]}"
    assert not (internal / "PySide6" / "Qt" / "translations").exists()
    assert (internal / "PySide6" / "Qt" / "plugins" / "platforms" / "libqxcb.so").is_file()
    assert (internal / "PySide6" / "Qt" / "plugins" / "platforms" / "libqoffscreen.so").is_file()


@package
def test_never_loaded_packages_and_codecs_are_left_out(bundle):
    internal = _internal(bundle)
    files = _files(internal)
    for package_dir in ("scipy/sparse", "scipy/fft", "dask", "distributed", "pyarrow"):
        assert not (internal / package_dir).exists(), package_dir
    leftovers = sorted(f for f in files if re.search(r"avif|tbbpool|libqgtk3|gtk-3|libcairo|libpango|libharfbuzz|"
                                                     r"libgdk_pixbuf|libatk|libgio-|libkrb5|libgssapi|libk5crypto",
                                                     f, re.IGNORECASE))
    assert not leftovers, leftovers


def _archived_modules() -> list[str]:
    """The Python modules of the bundle's archive (PyInstaller's record of the last build)."""
    toc = ROOT / "build" / "pyinstaller" / "attnviz" / "PYZ-00.toc"
    if not toc.is_file():
        pytest.skip(f"{toc.relative_to(ROOT)} is missing: packaging/build.sh writes it")
    return [name for name, _, _ in ast.literal_eval(toc.read_text(encoding="utf-8"))[1]]


@package
def test_no_excluded_module_is_bundled(bundle):
    """Every name of bundle_contents' module lists is really left out: neither in the archive nor on disk
    as a package folder or extension module (an optional extra installed in the build environment too)."""
    excluded = (*contents.EXCLUDED_PACKAGES, *contents.EXCLUDED_OPTIONAL_IMPORTS, *contents.EXCLUDED_EXTRAS,
                *contents.EXCLUDED_QT_MODULES)

    def is_excluded(name: str) -> bool:
        return any(name == e or name.startswith(e + ".") for e in excluded)

    archived = [m for m in _archived_modules() if is_excluded(m)]
    assert not archived, f"excluded modules in the archive: {archived[:20]}"
    internal = _internal(bundle)
    on_disk = [f for f in _files(internal) if f.endswith(".so") and ".cpython-" in f or f.endswith(".abi3.so")]
    on_disk = [f for f in on_disk if is_excluded(f.split(".")[0].replace("/", "."))]
    assert not on_disk, f"excluded extension modules on disk: {on_disk}"


@package
def test_no_broken_symbolic_links(bundle):
    broken = sorted(p.relative_to(bundle).as_posix() for p in bundle.rglob("*") if p.is_symlink() and not p.exists())
    assert not broken, f"symbolic links to files the bundle left out: {broken}"


@package
def test_every_library_a_bundled_file_links_is_bundled_or_left_to_the_system(bundle):
    """No library the bundle keeps links one it dropped (the GTK and Kerberos libraries were dropped
    because only dropped files link them). The ones not bundled are those PyInstaller always leaves to
    the system: the C library, the dynamic loader, OpenGL/EGL and the X11/Wayland client libraries."""
    pytest.importorskip("PyInstaller", reason="PyInstaller builds the bundle; `make package` installs it")
    from PyInstaller.depend import dylib

    internal = _internal(bundle)
    names = {p.name for p in internal.rglob("*")}
    missing = []
    for path in _elf_files(internal):
        for lib in _needed(path):
            if lib in names or lib.startswith("ld-linux") or not dylib.include_library(lib):
                continue
            missing.append(f"{path.relative_to(bundle)} needs {lib}")
    assert not missing, "\n".join(missing)


@package
def test_bundled_qt_plugins_resolve_their_qt_libraries(bundle):
    ldd = shutil.which("ldd")
    if ldd is None:
        pytest.skip("ldd is not available")
    qt = _internal(bundle) / "PySide6"
    objects = sorted(qt.glob("*.abi3.so")) + sorted((qt / "Qt" / "plugins").rglob("*.so"))
    assert objects
    missing = []
    for obj in objects:
        out = subprocess.run([ldd, str(obj)], capture_output=True, text=True).stdout
        missing += [f"{obj.relative_to(bundle)}: {line.strip()}" for line in out.splitlines()
                    if "not found" in line and "libQt6" in line]
    assert not missing, "\n".join(missing)


def _collected_from(bundle: Path) -> dict[str, Path]:
    """Each bundled file and the file it was copied from (PyInstaller's record of the last build)."""
    toc = ROOT / "build" / "pyinstaller" / "attnviz" / "COLLECT-00.toc"
    if not toc.is_file():
        pytest.skip(f"{toc.relative_to(ROOT)} is missing: packaging/build.sh writes it")
    entries = ast.literal_eval(toc.read_text(encoding="utf-8"))[0]
    return {dest.replace("\\", "/"): Path(src) for dest, src, typecode in entries if typecode in ("BINARY", "EXTENSION")}


def _sha1(path: Path) -> str:
    return hashlib.sha1(path.read_bytes()).hexdigest()


@package
def test_only_the_named_libraries_are_stripped(bundle):
    """The libraries named in STRIPPED_FILES have no symbol table or debug sections left (their dynamic
    symbols stay); every other library, numpy's and scipy's OpenBLAS among them, is byte for byte the
    installed file (a stripped OpenBLAS fails to load)."""
    internal = _internal(bundle)
    stripped = [p for p in _elf_files(internal) if contents.is_stripped_file(p.relative_to(internal).as_posix())]
    assert len(stripped) == len(contents.STRIPPED_FILES), [p.name for p in stripped]
    for path in stripped:
        sections = _sections(path)
        assert ".dynsym" in sections, path
        leftover = {s for s in sections if s == ".symtab" or s.startswith(".debug")}
        assert not leftover, (path.name, leftover)

    sources = _collected_from(bundle)
    blas = [rel for rel in sources if "openblas" in rel]
    assert len(blas) >= 2, "numpy's and scipy's OpenBLAS should both be bundled"
    changed = []
    for rel, src in sources.items():
        if contents.is_stripped_file(rel):
            continue
        if (internal / rel).is_file() and src.is_file() and _sha1(internal / rel) != _sha1(src):
            changed.append(rel)
    assert not changed, f"bundled libraries that differ from the installed ones: {changed}"


def _build_warnings() -> list[str]:
    if not BUILD_LOG.is_file():
        pytest.skip(f"{BUILD_LOG.relative_to(ROOT)} is missing: packaging/build.sh writes it")
    lines = BUILD_LOG.read_text(encoding="utf-8", errors="replace").splitlines()
    return [re.sub(r"^\d+ WARNING: ", "", line) for line in lines if re.match(r"^\d+ WARNING: ", line)]


@package
def test_every_pyinstaller_warning_has_its_answer(bundle):
    """Each warning of the last build matches an entry of ANSWERED_WARNINGS, which says why it is
    harmless; a new warning fails until someone reads it and answers it there (or fixes its cause)."""
    warnings = _build_warnings()
    unanswered = [w for w in warnings if not any(re.search(p, w) for p in contents.ANSWERED_WARNINGS)]
    assert not unanswered, "PyInstaller warnings without an answer in packaging/bundle_contents.py:\n" + \
        "\n".join(unanswered)
    stale = [p for p in contents.ANSWERED_WARNINGS if not any(re.search(p, w) for w in warnings)]
    assert not stale, f"answers to warnings the build no longer gives: {stale}"


def test_answered_warnings_each_give_a_reason():
    assert contents.ANSWERED_WARNINGS
    for pattern, answer in contents.ANSWERED_WARNINGS.items():
        re.compile(pattern)
        assert len(answer) > 20, pattern
