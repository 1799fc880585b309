"""The frozen bundle ``dist/attnviz/attnviz`` (built by ``make package``, which runs these tests after
building): it starts offscreen and in a real X window, opens every bundled demo or a given session,
computes, exits 0, reads every image format the application accepts, and keeps numba's compiled kernels
in attnviz's user cache directory, never in the bundle or numba's own folder.

Without a bundle, or with one older than the sources, every test here skips (see ``conftest.py``).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

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


PROBE = """\
import importlib, io, json, pkgutil, sys
import attnviz.engine, numba
from numba.core.registry import CPUDispatcher
from PIL import Image
from attnviz.resources_path import resources_root
from attnviz.ui import panels
from attnviz.ui.file_actions import IMAGE_SUFFIXES

kernels = {}  # every engine kernel numba caches: where its cache goes, and how numba found that place
for info in pkgutil.iter_modules(attnviz.engine.__path__):
    module = importlib.import_module('attnviz.engine.' + info.name)
    for name, obj in vars(module).items():
        if isinstance(obj, CPUDispatcher) and obj.__module__ == module.__name__ and obj._cache.__class__.__name__ != 'NullCache':
            kernels[module.__name__ + '.' + name] = [obj._cache._cache_path, type(obj._cache._impl.locator).__name__]
Image.init()
images = {}  # every image suffix the application accepts: written and read back in memory
for suffix in IMAGE_SUFFIXES:
    try:
        fmt = Image.registered_extensions()[suffix]
        buf = io.BytesIO()
        Image.new('RGB', (8, 8), (200, 30, 30)).save(buf, format=fmt)
        buf.seek(0)
        with Image.open(buf) as im:
            im.load()
            images[suffix] = list(im.convert('RGB').getpixel((3, 3)))
    except Exception as exc:
        images[suffix] = repr(exc)
json.dump({
    'frozen': bool(getattr(sys, 'frozen', False)),
    'meipass': sys._MEIPASS,
    'modules': sorted(m.name for m in pkgutil.iter_modules(panels.__path__)),
    'panels': sorted(s.id for s in panels.discover_panels()),
    'resources': str(resources_root()),
    'numba_cache': numba.config.CACHE_DIR,
    'kernels': kernels,
    'images': images,
}, open(REPORT, 'w'))
quit(0)
"""


@pytest.mark.slow
@package
def test_frozen_app_finds_its_panels_resources_image_formats_and_kernel_cache(bundle, tmp_path):
    """Run inside the bundle's own interpreter: the panels found at run time, the resources folder, every
    image format the file dialog offers, and the cache place of every engine kernel. The window imports
    the engine only after it is shown, so the probe imports it as the compute path does; numba then
    caches each kernel under attnviz's user cache folder, located through the kernel's source file
    (shipped as a .py file for this), never in numba's fallback folders."""
    from attnviz.ui import panels
    from attnviz.ui.file_actions import IMAGE_SUFFIXES

    script = tmp_path / "probe.py"
    report = tmp_path / "probe.json"
    script.write_text(f"REPORT = {str(report)!r}\n" + PROBE, encoding="utf-8")
    proc = _run([], tmp_path, {"ATTNVIZ_TEST_SCRIPT": str(script)})
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

    assert sorted(got["images"]) == sorted(IMAGE_SUFFIXES)
    for suffix, pixel in got["images"].items():
        assert isinstance(pixel, list), f"{suffix}: {pixel}"
        assert max(abs(a - b) for a, b in zip(pixel, (200, 30, 30))) <= 8, (suffix, pixel)  # JPEG is lossy
