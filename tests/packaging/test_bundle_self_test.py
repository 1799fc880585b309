"""A look inside the frozen bundle through its own options: ``--startup-report`` says where the bundle
found its panels and resources, ``--self-test`` compiles every engine kernel, checks naive and flash
against the float64 reference and says where numba caches each kernel.

Without a bundle, or with one older than the sources, every test here skips (see ``conftest.py``).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from frozen import kernel_dir, run

package = pytest.mark.package


def _json_line(proc) -> dict:
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("{")), None)
    assert line is not None, proc.stdout + proc.stderr
    return json.loads(line)


@pytest.mark.slow
@package
def test_the_bundle_finds_its_panels_and_resources(bundle, tmp_path):
    from attnviz.ui import panels

    proc = run(["--startup-report"], tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    got = _json_line(proc)["install"]
    assert got["frozen"]
    source_modules = sorted(p.stem for p in Path(panels.__file__).parent.glob("*.py") if p.stem != "__init__")
    assert got["panel_modules"] == source_modules
    assert got["panels"] == sorted(s.id for s in panels.PANELS)
    assert Path(got["resources"]) == Path(got["meipass"]) / "resources"


@pytest.mark.slow
@package
def test_every_engine_kernel_compiles_agrees_with_the_reference_and_caches_in_the_user_folder(bundle, tmp_path):
    """``--self-test`` in the bundle: every kernel compiles (the parallel ones on numba's omp layer: the
    TBB layer is left out), naive and flash match the float64 reference, and numba caches each kernel
    under attnviz's user cache folder, located through the kernel's source file (shipped as a .py file
    for this), never in numba's fallback folders."""
    proc = run(["--self-test"], tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    got = _json_line(proc)
    assert got["ok"] is True
    assert got["threading_layer"] == "omp", got  # workqueue would abort two parallel kernels at once
    assert set(got["max_abs_diff"]) == {"naive", "flash"}
    for kernel, diff in got["max_abs_diff"].items():
        assert diff < 1e-12, (kernel, diff)  # float64 inputs

    user_cache = kernel_dir(tmp_path)
    assert Path(got["numba_cache"]).parent == user_cache  # one folder per content of the engine's sources
    assert Path(got["numba_cache"]).name.startswith("engine-")
    assert got["kernels"], "no cached numba kernel found in the bundle's engine"
    for kernel, place in got["kernels"].items():
        assert Path(place["path"]).is_relative_to(user_cache), (kernel, place)
        assert place["locator"] == "UserProvidedCacheLocator", (kernel, place)
    written = {p.name for p in user_cache.rglob("*.nbi")}
    assert written, "the self test compiled kernels but cached none"
