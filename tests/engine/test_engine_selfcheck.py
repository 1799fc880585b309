"""The engine's self check (``attnviz --self-test``): kernels against the reference, and where numba
caches each kernel."""

from __future__ import annotations

from pathlib import Path

import numba
import numpy as np

from attnviz.engine import selfcheck


def test_self_check_reports_agreement_threading_and_cache_places():
    got = selfcheck.self_check()
    assert got["ok"] is True
    assert set(got["max_abs_diff"]) == {"naive", "flash"}
    assert all(0.0 <= d <= selfcheck.TOLERANCE for d in got["max_abs_diff"].values())
    assert got["threading_layer"] == numba.threading_layer()
    assert "attnviz.engine.flash.flash_kernel" in got["kernels"] or any(
        name.startswith("attnviz.engine.flash.") for name in got["kernels"])
    cache = Path(numba.config.CACHE_DIR)
    for name, place in got["kernels"].items():
        assert Path(place["path"]).is_relative_to(cache), (name, place)


def test_self_check_fails_when_a_kernel_disagrees(monkeypatch):
    real = selfcheck.attention

    def off_by_a_bit(q, k, v, mask, kernel="reference", **kw):
        res = real(q, k, v, mask, kernel=kernel, **kw)
        if kernel == "flash":
            res.out[...] += 1e-9
        return res

    monkeypatch.setattr(selfcheck, "attention", off_by_a_bit)
    got = selfcheck.self_check()
    assert got["ok"] is False
    assert got["max_abs_diff"]["flash"] > selfcheck.TOLERANCE >= got["max_abs_diff"]["naive"]
    np.testing.assert_allclose(got["max_abs_diff"]["flash"], 1e-9, rtol=1e-3)
