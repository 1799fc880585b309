"""The frozen bundle ``dist/attnviz/attnviz`` (built by ``make package``, which runs these tests after
building): it starts offscreen, opens the bundled demo or a given session, computes, exits 0, and keeps
numba's compiled kernels in attnviz's user cache directory, never in the bundle or numba's own folder.

Without a bundle, or with one older than the sources, every test here skips, saying how to build one
(building takes minutes); right after ``packaging/build.sh`` built it, they always run.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from pkgpaths import BUNDLE, EXECUTABLE, ROOT, load_script

RUN_TIMEOUT_S = 420  # a cold numba cache compiles every kernel: minutes on a busy two-core machine
SESSION = ROOT / "tests" / "data" / "sessions" / "v1" / "vla-edited.attnviz"

package = pytest.mark.package


def _newest_source() -> tuple[float, str]:
    """The newest modification time among the files the bundle is built from, and that file."""
    files = [p for p in (ROOT / "attnviz").rglob("*.py")] + [p for p in (ROOT / "resources").rglob("*") if p.is_file()]
    files += [ROOT / "packaging" / n for n in ("attnviz.spec", "bundle_contents.py", "attnviz_launcher.py")]
    newest = max(files, key=lambda p: p.stat().st_mtime)
    return newest.stat().st_mtime, str(newest.relative_to(ROOT))


@pytest.fixture(scope="module")
def bundle() -> Path:
    if not EXECUTABLE.is_file():
        pytest.skip(f"{EXECUTABLE.relative_to(ROOT)} is not built: `make package` builds the bundle "
                    "(a few minutes) and then runs these tests")
    mtime, newest = _newest_source()
    just_built = os.environ.get("ATTNVIZ_PACKAGE_JUST_BUILT") == "1"  # set by packaging/build.sh
    if mtime > EXECUTABLE.stat().st_mtime and not just_built:
        pytest.skip(f"{EXECUTABLE.relative_to(ROOT)} is older than {newest}: `make package` rebuilds the "
                    "bundle and then runs these tests")
    return BUNDLE


def _user_dirs(tmp: Path) -> dict[str, Path]:
    return {name: tmp / name.lower() for name in
            ("HOME", "XDG_CACHE_HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_RUNTIME_DIR")}


def _run(args, tmp: Path, extra_env=None) -> subprocess.CompletedProcess:
    """Run the frozen app with a fresh home and user directories under ``tmp``, offscreen."""
    dirs = _user_dirs(tmp)
    for d in dirs.values():
        d.mkdir(parents=True, exist_ok=True, mode=0o700)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("NUMBA_", "XDG_", "PYTHON", "QT_")) and k not in ("VIRTUAL_ENV", "DISPLAY")}
    env.update({k: str(v) for k, v in dirs.items()}, QT_QPA_PLATFORM="offscreen", **(extra_env or {}))
    return subprocess.run([str(EXECUTABLE), *args], cwd=tmp, env=env, capture_output=True, text=True,
                          timeout=RUN_TIMEOUT_S)


def _files(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.rglob("*")} if root.exists() else set()


def _stamp(path: Path) -> tuple[int, bytes]:
    return path.stat().st_mtime_ns, path.read_bytes()


def _kernel_cache(tmp: Path) -> set[str]:
    """numba cache files (index and compiled code) under attnviz's user cache directory."""
    cache = _user_dirs(tmp)["XDG_CACHE_HOME"] / "attnviz" / "numba"
    return {f for f in _files(cache) if f.endswith((".nbi", ".nbc"))}


@pytest.mark.slow
@package
def test_smoke_test_on_the_demo_exits_0_and_caches_kernels_in_the_user_cache(bundle, tmp_path):
    before = _files(bundle)
    proc = _run(["--smoke-test"], tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "smoke test: ok" in proc.stdout, proc.stdout + proc.stderr

    cache = _user_dirs(tmp_path)["XDG_CACHE_HOME"] / "attnviz" / "numba"
    cached = _kernel_cache(tmp_path)
    assert any(f.endswith(".nbi") for f in cached) and any(f.endswith(".nbc") for f in cached), cached
    kernel = re.search(r"engine:(naive|flash)", proc.stdout)  # the numba kernel the response came from
    if kernel:
        assert any(f"/{kernel.group(1)}." in f for f in cached), cached
    numba_default = _user_dirs(tmp_path)["XDG_CACHE_HOME"] / "numba"  # numba's own fallback folder
    assert not _files(numba_default), f"kernels went to {numba_default}: {_files(numba_default)}"
    assert _files(bundle) == before, f"the run wrote into the bundle: {sorted(_files(bundle) - before)}"

    # a second start loads the kernels compiled by the first from the cache: none is compiled and
    # written again (the start-up warm-up may still add signatures the first run had no time for)
    compiled = {f: _stamp(cache / f) for f in cached if f.endswith(".nbc")}
    again = _run(["--smoke-test"], tmp_path)
    assert again.returncode == 0, again.stdout + again.stderr
    assert {f: _stamp(cache / f) for f in compiled} == compiled


@pytest.mark.slow
@package
def test_smoke_test_opens_the_session_given(bundle, tmp_path):
    expected = json.loads(SESSION.with_name("vla-edited.expected.json").read_text(encoding="utf-8"))
    proc = _run(["--smoke-test", str(SESSION)], tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    match = re.search(r"T = (\d+)", proc.stdout)
    assert match, proc.stdout + proc.stderr
    assert int(match.group(1)) == len(expected["query_labels"])  # the session, not the default demo


@pytest.mark.slow
@package
def test_frozen_app_finds_every_panel_its_resources_and_the_cache_dir(bundle, tmp_path):
    from attnviz.ui import panels

    proc = _run(["--startup-report"], tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("{")), None)
    assert line is not None, proc.stdout + proc.stderr
    got = json.loads(line)["install"]
    got["modules"] = got["panel_modules"]
    assert got["frozen"]
    source_modules = sorted(p.stem for p in Path(panels.__file__).parent.glob("*.py") if p.stem != "__init__")
    assert got["modules"] == source_modules
    assert got["panels"] == sorted(s.id for s in panels.discover_panels())
    assert Path(got["resources"]) == Path(got["meipass"]) / "resources"
    assert Path(got["numba_cache"]) == _user_dirs(tmp_path)["XDG_CACHE_HOME"] / "attnviz" / "numba"


@package
def test_bundle_holds_resources_icons_and_engine_sources_and_not_the_excluded_files(bundle):
    internal = bundle / "_internal"
    for rel in _files(ROOT / "resources"):
        if (ROOT / "resources" / rel).is_file():
            assert (internal / "resources" / rel).is_file(), rel
    assert (internal / "icons" / "io.github.attnviz.Attnviz.png").is_file()
    assert (internal / "icons" / "io.github.attnviz.Attnviz.svg").is_file()
    # the engine ships as source files: numba's cache locates kernels through them
    for py in (ROOT / "attnviz" / "engine").glob("*.py"):
        assert (internal / "attnviz" / "engine" / py.name).is_file(), py.name

    contents = load_script("bundle_contents")
    dropped = sorted(f for f in _files(internal) if contents.is_excluded_file(f))
    assert not dropped, f"files the exclusion list drops are in the bundle: {dropped[:20]}"
    assert not (internal / "PySide6" / "Qt" / "translations").exists()
    assert (internal / "PySide6" / "Qt" / "plugins" / "platforms" / "libqxcb.so").is_file()


@package
def test_bundled_qt_plugins_resolve_their_qt_libraries(bundle):
    ldd = shutil.which("ldd")
    if ldd is None:
        pytest.skip("ldd is not available")
    qt = bundle / "_internal" / "PySide6"
    objects = sorted(qt.glob("*.abi3.so")) + sorted((qt / "Qt" / "plugins").rglob("*.so"))
    assert objects
    missing = []
    for obj in objects:
        out = subprocess.run([ldd, str(obj)], capture_output=True, text=True).stdout
        missing += [f"{obj.relative_to(bundle)}: {line.strip()}" for line in out.splitlines()
                    if "not found" in line and "libQt6" in line]
    assert not missing, "\n".join(missing)
