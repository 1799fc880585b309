"""Is this installation's engine whole? Every kernel compiled (or loaded from the cache), the naive and
flash kernels checked against the float64 reference, and where numba keeps each compiled kernel.

``attnviz --self-test`` prints this as one JSON line; it is how a frozen bundle is checked from outside
(the bundle can only be run, not imported), and what a bug report can quote.
"""

from __future__ import annotations

import importlib
import pkgutil

import numba
import numpy as np
from numba.core.registry import CPUDispatcher

import attnviz.engine
from attnviz.engine.api import attention
from attnviz.engine.warmup import warmup

TOLERANCE = 1e-12  # float64 inputs: naive and flash agree with the reference to rounding


def kernel_cache_places() -> dict[str, dict[str, str]]:
    """Every cached engine kernel: the folder its compiled code goes to and how numba found that folder
    (a bundle must use the user cache directory through the kernel's source file)."""
    places = {}
    for info in pkgutil.iter_modules(attnviz.engine.__path__):
        module = importlib.import_module(f"attnviz.engine.{info.name}")
        for name, obj in vars(module).items():
            if not isinstance(obj, CPUDispatcher) or obj.__module__ != module.__name__:
                continue
            cache = obj._cache
            if type(cache).__name__ == "NullCache":
                continue
            places[f"{module.__name__}.{name}"] = {"path": cache._cache_path,
                                                   "locator": type(cache._impl.locator).__name__}
    return places


def self_check() -> dict:
    """Warm every kernel up, compare naive and flash with the reference on a causal problem, and report.
    ``ok`` is False when a kernel disagrees by more than TOLERANCE."""
    warmup()  # every kernel, both dtypes, serial and parallel: what a first start compiles
    rng = np.random.default_rng(1)
    q, k, v = (rng.standard_normal((2, 70, 16)) for _ in range(3))  # (nh, T, hs)
    mask = np.tri(70, 70, dtype=bool)  # (Tq, Tk) causal: empty, partial and full tiles of 16
    ref = attention(q, k, v, mask, kernel="reference").out
    diffs = {kernel: float(np.abs(attention(q, k, v, mask, kernel=kernel, block_m=16, block_n=16).out - ref).max())
             for kernel in ("naive", "flash")}
    return {"ok": all(d <= TOLERANCE for d in diffs.values()), "max_abs_diff": diffs, "tolerance": TOLERANCE,
            "threading_layer": numba.threading_layer(), "numba_cache": numba.config.CACHE_DIR,
            "kernels": kernel_cache_places()}
