"""The bundle's exclusion lists (``packaging/bundle_contents.py``) against the code, without building:
nothing the application imports is excluded, and no Qt plugin or module the bundle keeps links a Qt
library the bundle drops."""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pkgpaths import ROOT, load_script

contents = load_script("bundle_contents")

# The packages the desktop bundle is built from: every package of attnviz but the command-line tools and the
# benchmark harness they run (attnviz.bench, which compares with torch when torch is importable).
GUI_PACKAGES = tuple(sorted(p.name for p in (ROOT / "attnviz").iterdir()
                            if (p / "__init__.py").is_file() and p.name not in ("cli", "bench")))


def _is_excluded_module(name: str, optional: bool = False) -> bool:
    """Whether the bundle leaves ``name`` out (``optional``: also the guarded optional imports)."""
    excluded = (*contents.EXCLUDED_PACKAGES, *contents.EXCLUDED_QT_MODULES, *contents.EXCLUDED_EXTRAS)
    if optional:
        excluded += tuple(contents.EXCLUDED_OPTIONAL_IMPORTS)
    return any(name == e or name.startswith(e + ".") for e in excluded)


def _is_extra(name: str) -> bool:
    return any(name == e or name.startswith(e + ".") for e in contents.EXCLUDED_EXTRAS)


def _static_imports(packages=GUI_PACKAGES, root=ROOT / "attnviz"):
    """(file, module name) for every absolute import anywhere (also inside functions) in the bundled
    packages."""
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
            for node in ast.walk(tree):
                if isinstance(node, ast.Import):
                    for alias in node.names:
                        yield path, alias.name
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    yield path, node.module
                    for alias in node.names:  # `from PySide6 import QtSvg` imports a module
                        yield path, f"{node.module}.{alias.name}"


def test_the_exclusion_helpers_match_and_keep_as_intended():
    assert _is_excluded_module("PySide6.QtNetwork") and not _is_excluded_module("PySide6.QtWidgets")
    assert _is_excluded_module("numba.cuda.cudadrv") and not _is_excluded_module("numba.core")
    assert contents.is_excluded_file("PySide6/Qt/translations/qt_de.qm")
    assert not contents.is_excluded_file("PySide6/Qt/plugins/platforms/libqxcb.so")
    toc = [("PySide6/Qt/lib/libQt6Quick.so.6", "/x", "BINARY"), ("PySide6/Qt/lib/libQt6Gui.so.6", "/y", "BINARY")]
    assert contents.kept(toc) == toc[1:]
    assert _is_excluded_module("yaml.cyaml", optional=True) and not _is_excluded_module("yaml")
    assert all(reason for reason in contents.EXCLUDED_OPTIONAL_IMPORTS.values())


def test_no_module_the_code_imports_is_excluded():
    """The optional extras the bundle ships without (dask, pyarrow, ...) are the exception: code may
    import them where it uses them, and says what is missing when they are not there; importing the
    application must not load them (next test)."""
    bad = sorted({f"{p.relative_to(ROOT)}: {name}" for p, name in _static_imports()
                  if _is_excluded_module(name, optional=True) and not _is_extra(name)})
    assert not bad, "the bundle excludes modules the application imports:\n" + "\n".join(bad)


def test_the_bundled_packages_are_all_but_the_command_line():
    assert "cli" not in GUI_PACKAGES and "bench" not in GUI_PACKAGES
    assert {"ui", "engine", "model", "persist", "sources", "checkpoints"} <= set(GUI_PACKAGES)


def test_kept_drops_symlinks_to_dropped_files():
    toc = [("libQt6Network.so.6", "PySide6/Qt/lib/libQt6Network.so.6", "SYMLINK"),
           ("libQt6Gui.so.6", "PySide6/Qt/lib/libQt6Gui.so.6", "SYMLINK"),
           ("PySide6/Qt/lib/libQt6Network.so.6", "/x/libQt6Network.so.6", "BINARY")]
    assert contents.kept(toc) == [toc[1]]
    assert contents.symlink_target("a/b/libx.so", "../c/libx.so") == "a/c/libx.so"


def test_orphaned_finds_what_only_dropped_files_link():
    links = {"/s/plugin.so": ["libgtk.so", "libglib.so"], "/s/libgtk.so": ["libcairo.so", "libglib.so"],
             "/s/libcairo.so": ["libpng.so"], "/s/app.so": ["libglib.so", "libpng.so"],
             "/s/libglib.so": ["libpcre.so"], "/s/libpng.so": [], "/s/libpcre.so": [], "/s/dlopened.so": []}
    kept = [(name, f"/s/{name}", "BINARY") for name in
            ("libgtk.so", "libcairo.so", "app.so", "libglib.so", "libpng.so", "libpcre.so", "dlopened.so")]
    kept.append(("libgtk-link.so", "libgtk.so", "SYMLINK"))
    dropped = [("plugins/plugin.so", "/s/plugin.so", "BINARY")]
    orphans = contents.orphaned(kept, dropped, lambda src: links[src])
    # libpng stays: app.so links it too; glib and what glib links stay; a library nothing links stays
    assert orphans == {"libgtk.so", "libcairo.so"}


def test_importing_the_application_loads_no_excluded_module():
    """Imports made at run time by dependencies (pyqtgraph, numba, scipy) count too, except the guarded
    optional ones the exclusion list names with a reason."""
    code = (
        "import importlib, json, pkgutil, sys\n"
        "import attnviz\n"
        f"for pkg in {GUI_PACKAGES!r}:\n"
        "    mod = importlib.import_module('attnviz.' + pkg)\n"
        "    for info in pkgutil.walk_packages(mod.__path__, mod.__name__ + '.'):\n"
        "        importlib.import_module(info.name)\n"
        "import attnviz.ui.app, pyqtgraph\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, env=env,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    loaded = json.loads(proc.stdout.strip().splitlines()[-1])
    assert "attnviz.ui.panels" in loaded and "PySide6.QtWidgets" in loaded
    bad = [name for name in loaded if _is_excluded_module(name)]
    assert not bad, f"excluded from the bundle but imported by the application: {bad}"


def _needed_qt_libs(path: Path, readelf: str) -> set[str]:
    out = subprocess.run([readelf, "-d", str(path)], capture_output=True, text=True, check=True).stdout
    return set(re.findall(r"\[(libQt6[^\]]+)\]", out))


def test_kept_qt_plugins_and_modules_need_no_dropped_qt_library():
    readelf = shutil.which("readelf")
    if readelf is None:
        pytest.skip("readelf is not installed (Debian package binutils)")
    import PySide6

    pyside = Path(PySide6.__file__).parent
    candidates = [(p, p.relative_to(pyside.parent).as_posix()) for p in (pyside / "Qt" / "plugins").rglob("*.so")]
    for ext in pyside.glob("Qt*.abi3.so"):
        module = "PySide6." + ext.name.split(".")[0]
        if not _is_excluded_module(module):
            candidates.append((ext, f"PySide6/{ext.name}"))
    kept = [(p, rel) for p, rel in candidates if not contents.is_excluded_file(rel)]
    assert any(rel.endswith("platforms/libqxcb.so") for _, rel in kept)
    assert any(rel.endswith("platforms/libqoffscreen.so") for _, rel in kept)
    broken = []
    for path, rel in kept:
        for lib in sorted(_needed_qt_libs(path, readelf)):
            if contents.is_excluded_file(f"PySide6/Qt/lib/{lib}"):
                broken.append(f"{rel} needs {lib}")
    assert not broken, "kept Qt files that would fail to load:\n" + "\n".join(broken)
