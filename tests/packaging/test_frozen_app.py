"""The frozen bundle ``dist/attnviz/attnviz`` (built by ``make package``, which runs these tests after
building): it starts offscreen and in a real X window, opens every bundled demo, a given session or
a picture in every image format the application offers, computes, exits 0, and keeps numba's compiled
kernels in attnviz's user cache directory, never in the bundle or numba's own folder.

Without a bundle, or with one older than the sources, every test here skips (see ``conftest.py``).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from pkgpaths import EXECUTABLE, ROOT

RUN_TIMEOUT_S = 420  # a cold numba cache compiles every kernel: minutes on a busy two-core machine
SESSION = ROOT / "tests" / "data" / "sessions" / "v1" / "vla-edited.attnviz"

package = pytest.mark.package


def _user_dirs(tmp: Path) -> dict[str, Path]:
    return {name: tmp / name.lower() for name in
            ("HOME", "XDG_CACHE_HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_RUNTIME_DIR")}


def _run(args, tmp: Path, extra_env=None, prefix=(), platform="offscreen") -> subprocess.CompletedProcess:
    """Run the frozen app with a fresh home and user directories under ``tmp``, offscreen (or on the Qt
    ``platform`` given, with ``prefix`` before the command, e.g. ``xvfb-run``)."""
    dirs = _user_dirs(tmp)
    for d in dirs.values():
        d.mkdir(parents=True, exist_ok=True, mode=0o700)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("NUMBA_", "XDG_", "PYTHON", "QT_", "LD_"))
           and k not in ("VIRTUAL_ENV", "DISPLAY", "WAYLAND_DISPLAY")}
    env.update({k: str(v) for k, v in dirs.items()}, QT_QPA_PLATFORM=platform, **(extra_env or {}))
    return subprocess.run([*prefix, str(EXECUTABLE), *args], cwd=tmp, env=env, capture_output=True, text=True,
                          timeout=RUN_TIMEOUT_S)


def _files(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.rglob("*")} if root.exists() else set()


def _stamp(path: Path) -> tuple[int, bytes]:
    return path.stat().st_mtime_ns, path.read_bytes()


def _kernel_dir(tmp: Path) -> Path:
    """attnviz's numba cache folder for a run under ``tmp``."""
    return _user_dirs(tmp)["XDG_CACHE_HOME"] / "attnviz" / "numba"


def _kernel_cache(tmp: Path) -> set[str]:
    """numba cache files (index and compiled code) under attnviz's user cache directory."""
    return {f for f in _files(_kernel_dir(tmp)) if f.endswith((".nbi", ".nbc"))}


def _no_load_errors(proc: subprocess.CompletedProcess) -> None:
    """Nothing the bundle lacks was looked for: no missing library, module or Qt plugin."""
    for pattern in ("cannot open shared object file", "ModuleNotFoundError", "ImportError", "Traceback",
                    "Could not load the Qt platform plugin", "Cannot load library"):
        assert pattern not in proc.stderr, proc.stderr


@pytest.mark.slow
@package
def test_smoke_test_on_the_demo_exits_0_and_caches_kernels_in_the_user_cache(bundle, tmp_path):
    before = _files(bundle)
    proc = _run(["--smoke-test"], tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "smoke test: ok" in proc.stdout, proc.stdout + proc.stderr

    _no_load_errors(proc)
    cache = _kernel_dir(tmp_path)
    cached = _kernel_cache(tmp_path)
    assert any(f.endswith(".nbi") for f in cached) and any(f.endswith(".nbc") for f in cached), cached
    kernel = re.search(r"engine:(naive|flash)", proc.stdout)  # the numba kernel the response came from
    if kernel:
        assert any(f"/{kernel.group(1)}." in f for f in cached), cached
    numba_default = _user_dirs(tmp_path)["XDG_CACHE_HOME"] / "numba"  # numba's own fallback folder
    assert not _files(numba_default), f"kernels went to {numba_default}: {_files(numba_default)}"
    stray = sorted(p for p in tmp_path.rglob("*.nb[ic]") if not p.is_relative_to(cache))  # home, cwd, ...
    assert not stray, f"kernels cached outside {cache}: {stray}"
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


@pytest.fixture(scope="module")
def warm_home(bundle, tmp_path_factory) -> Path:
    """A home whose kernel cache a first smoke test filled, shared by the runs that follow."""
    home = tmp_path_factory.mktemp("warm-home")
    proc = _run(["--smoke-test"], home)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return home


def _demos() -> list[str]:
    from attnviz.model.demos import list_demos

    return [name for name, _ in list_demos()]


@pytest.mark.slow
@package
@pytest.mark.parametrize("demo", _demos())
def test_every_demo_computes_in_the_bundle(bundle, warm_home, demo):
    """Each demo reaches its own parts of the code (images, tokenizer, long-sequence overviews): none
    needs a module or library the bundle leaves out."""
    proc = _run(["--smoke-test", "--demo", demo], warm_home)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "smoke test: ok" in proc.stdout, proc.stdout + proc.stderr
    _no_load_errors(proc)


@pytest.mark.slow
@package
def test_the_bundle_runs_in_an_x_window(bundle, warm_home):
    """The xcb platform plugin and the libraries it links (the GTK ones are gone) load under Xvfb."""
    xvfb_run = shutil.which("xvfb-run")
    if xvfb_run is None:
        pytest.skip("xvfb-run is not installed (Debian package xvfb; `make package` installs it)")
    proc = _run(["--smoke-test", "--demo", "vit-image"], warm_home,
                prefix=(xvfb_run, "-a", "-s", "-screen 0 1280x800x24"), platform="xcb")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "smoke test: ok" in proc.stdout, proc.stdout + proc.stderr
    _no_load_errors(proc)


def _image_files(folder: Path) -> dict[str, Path]:
    """A 96 x 64 picture saved in every image format the application opens (one file per format)."""
    from PIL import Image

    from attnviz.ui.file_actions import IMAGE_SUFFIXES

    yy, xx = np.mgrid[0:64, 0:96]  # (64, 96)
    rgb = np.stack([xx * 2, yy * 3, (xx + yy) % 256], axis=-1).astype(np.uint8)  # (64, 96, 3)
    picture = Image.fromarray(rgb, "RGB")
    files = {}
    for suffix in IMAGE_SUFFIXES:
        fmt = Image.registered_extensions()[suffix]
        if fmt in {Image.registered_extensions()[p.suffix] for p in files.values()}:
            continue  # .jpeg after .jpg, .tiff after .tif: the same reader
        files[suffix] = folder / f"picture{suffix}"
        picture.save(files[suffix], format=fmt)
    return files


@pytest.mark.slow
@package
def test_the_bundle_opens_every_image_format_the_application_offers(bundle, warm_home, tmp_path):
    """``attnviz --smoke-test PICTURE`` cuts the picture into patches and computes: each format gives the
    same token count as the PNG (a format the bundle cannot read would leave the demo open instead)."""
    files = _image_files(tmp_path)
    tokens = {}
    for suffix, path in files.items():
        proc = _run(["--smoke-test", str(path)], warm_home)
        assert proc.returncode == 0, (suffix, proc.stdout + proc.stderr)
        _no_load_errors(proc)
        match = re.search(r"T = (\d+)", proc.stdout)
        assert match, (suffix, proc.stdout + proc.stderr)
        tokens[suffix] = int(match.group(1))
    demo = _run(["--smoke-test"], warm_home)
    demo_tokens = int(re.search(r"T = (\d+)", demo.stdout).group(1))
    assert tokens[".png"] != demo_tokens, (tokens, demo_tokens)
    assert set(tokens.values()) == {tokens[".png"]}, tokens


PROBE = """\
import importlib, json, pkgutil, sys
import attnviz.engine, numba
from numba.core.registry import CPUDispatcher
from attnviz.resources_path import resources_root
from attnviz.ui import panels

kernels = {}  # every engine kernel numba caches: where its cache goes, and how numba found that place
for info in pkgutil.iter_modules(attnviz.engine.__path__):
    module = importlib.import_module('attnviz.engine.' + info.name)
    for name, obj in vars(module).items():
        if isinstance(obj, CPUDispatcher) and obj.__module__ == module.__name__ and obj._cache.__class__.__name__ != 'NullCache':
            kernels[module.__name__ + '.' + name] = [obj._cache._cache_path, type(obj._cache._impl.locator).__name__]
json.dump({
    'frozen': bool(getattr(sys, 'frozen', False)),
    'meipass': sys._MEIPASS,
    'modules': sorted(m.name for m in pkgutil.iter_modules(panels.__path__)),
    'panels': sorted(s.id for s in panels.discover_panels()),
    'resources': str(resources_root()),
    'numba_cache': numba.config.CACHE_DIR,
    'kernels': kernels,
}, open(REPORT, 'w'))
"""


@pytest.mark.slow
@package
def test_frozen_app_finds_every_panel_its_resources_and_the_cache_dir(bundle, tmp_path):
    """A probe run by the bundle's own interpreter (``ATTNVIZ_BUNDLE_PROBE``, see the launcher): the
    panels found at run time, the resources folder, and the cache place of every engine kernel. The
    probe imports the engine as the compute path does (the window imports it only after it is shown);
    numba then caches each kernel under attnviz's user cache folder, located through the kernel's
    source file (shipped as a .py file for this), never in numba's fallback folders. That kernels are
    really written and read there is checked by the smoke test above."""
    from attnviz.ui import panels

    script = tmp_path / "probe.py"
    report = tmp_path / "probe.json"
    script.write_text(f"REPORT = {str(report)!r}\n" + PROBE, encoding="utf-8")
    proc = _run([], tmp_path, {"ATTNVIZ_BUNDLE_PROBE": str(script)})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    got = json.loads(report.read_text(encoding="utf-8"))
    assert got["frozen"]
    source_modules = sorted(p.stem for p in Path(panels.__file__).parent.glob("*.py") if p.stem != "__init__")
    assert got["modules"] == source_modules
    assert got["panels"] == sorted(s.id for s in panels.discover_panels())
    assert Path(got["resources"]) == Path(got["meipass"]) / "resources"

    user_cache = _kernel_dir(tmp_path)
    assert Path(got["numba_cache"]) == user_cache
    assert got["kernels"], "no cached numba kernel found in the bundle's engine"
    for kernel, (path, locator) in got["kernels"].items():
        assert Path(path).is_relative_to(user_cache), (kernel, path)
        assert locator == "UserProvidedCacheLocator", (kernel, locator)


@pytest.mark.slow
@package
def test_a_failing_probe_fails_the_process(bundle, tmp_path):
    script = tmp_path / "probe.py"
    script.write_text("raise RuntimeError('probe failed on purpose')\n", encoding="utf-8")
    proc = _run([], tmp_path, {"ATTNVIZ_BUNDLE_PROBE": str(script)})
    assert proc.returncode == 1 and "probe failed on purpose" in proc.stderr, proc.stdout + proc.stderr
