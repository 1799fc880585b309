"""A look inside the frozen bundle: a probe script run by the bundle's own interpreter
(``ATTNVIZ_BUNDLE_PROBE``, see ``packaging/attnviz_launcher.py``) reports the panels found at run time,
the resources folder and the cache place of every engine kernel.

Without a bundle, or with one older than the sources, every test here skips (see ``conftest.py``).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from frozen import kernel_dir, run

package = pytest.mark.package

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
def test_the_bundle_finds_its_panels_resources_and_kernel_cache(bundle, tmp_path):
    """A probe run by the bundle's own interpreter (``ATTNVIZ_BUNDLE_PROBE``, see the launcher): the
    panels found at run time, the resources folder, and the cache place of every engine kernel. The
    probe imports the engine as the compute path does (the window imports it only after it is shown);
    numba then caches each kernel under attnviz's user cache folder, located through the kernel's
    source file (shipped as a .py file for this), never in numba's fallback folders. That kernels are
    really written and read there is checked by test_frozen_app's smoke test."""
    from attnviz.ui import panels

    script = tmp_path / "probe.py"
    report = tmp_path / "probe.json"
    script.write_text(f"REPORT = {str(report)!r}\n" + PROBE, encoding="utf-8")
    proc = run([], tmp_path, {"ATTNVIZ_BUNDLE_PROBE": str(script)})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    got = json.loads(report.read_text(encoding="utf-8"))
    assert got["frozen"]
    source_modules = sorted(p.stem for p in Path(panels.__file__).parent.glob("*.py") if p.stem != "__init__")
    assert got["modules"] == source_modules
    assert got["panels"] == sorted(s.id for s in panels.discover_panels())
    assert Path(got["resources"]) == Path(got["meipass"]) / "resources"

    user_cache = kernel_dir(tmp_path)
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
    proc = run([], tmp_path, {"ATTNVIZ_BUNDLE_PROBE": str(script)})
    assert proc.returncode == 1 and "probe failed on purpose" in proc.stderr, proc.stdout + proc.stderr


ENGINE_PROBE = """\
import json
import numpy as np
import numba
from attnviz.engine.api import attention
from attnviz.engine.warmup import warmup

warmup()  # every kernel, both dtypes, serial and parallel: what a first start compiles in the background
rng = np.random.default_rng(1)
q, k, v = (rng.standard_normal((2, 70, 16)) for _ in range(3))  # (nh, T, hs)
mask = np.tri(70, 70, dtype=bool)  # (Tq, Tk) causal
ref = attention(q, k, v, mask, kernel='reference').out
diffs = {kernel: float(np.abs(attention(q, k, v, mask, kernel=kernel, block_m=16, block_n=16).out - ref).max())
         for kernel in ('naive', 'flash')}
json.dump({'threading_layer': numba.threading_layer(), 'diffs': diffs}, open(REPORT, 'w'))
"""


@pytest.mark.slow
@package
def test_every_engine_kernel_compiles_and_agrees_with_the_reference_in_the_bundle(bundle, tmp_path):
    """The start-up warm-up compiles every kernel in the bundle (the parallel ones on numba's omp layer:
    the TBB layer is left out), and the naive and flash kernels match the float64 reference there."""
    script = tmp_path / "probe.py"
    report = tmp_path / "probe.json"
    script.write_text(f"REPORT = {str(report)!r}\n" + ENGINE_PROBE, encoding="utf-8")
    proc = run([], tmp_path, {"ATTNVIZ_BUNDLE_PROBE": str(script)})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    got = json.loads(report.read_text(encoding="utf-8"))
    assert got["threading_layer"] == "omp", got  # workqueue would abort two parallel kernels at once
    assert set(got["diffs"]) == {"naive", "flash"}
    for kernel, diff in got["diffs"].items():
        assert diff < 1e-12, (kernel, diff)  # float64 inputs
