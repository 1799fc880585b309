"""The frozen bundle ``dist/attnviz/attnviz`` (built by ``make package``, which runs these tests after
building): it starts offscreen and in a real X window, opens every bundled demo, a given session or
a picture in every image format the application offers, computes, exits 0, and keeps numba's compiled
kernels in attnviz's user cache directory, never in the bundle or numba's own folder.

Without a bundle, or with one older than the sources, every test here skips (see ``conftest.py``).
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from frozen import files as _files
from frozen import kernel_cache as _kernel_cache
from frozen import kernel_dir as _kernel_dir
from frozen import no_load_errors as _no_load_errors
from frozen import run as _run
from frozen import stamp as _stamp
from frozen import user_dirs as _user_dirs
from pkgpaths import ROOT

SESSION = ROOT / "tests" / "data" / "sessions" / "v1" / "vla-edited.attnviz"

package = pytest.mark.package


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

    from attnviz.model.source_files import IMAGE_SUFFIXES

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
