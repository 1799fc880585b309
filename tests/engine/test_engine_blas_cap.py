"""The one BLAS cap (attnviz.engine.runtime): a block's cap nests and is restored by the last to leave, and no
module outside the engine caps BLAS threads itself."""

from __future__ import annotations

import re
from pathlib import Path

from threadpoolctl import threadpool_info

from attnviz.engine.runtime import blas_threads

PACKAGE = Path(__file__).resolve().parents[2] / "attnviz"


def _blas():
    return [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]


def test_blas_threads_are_restored():
    before = _blas()
    with blas_threads(1):
        with blas_threads(1):
            assert all(n == 1 for n in _blas())
        assert all(n == 1 for n in _blas())
    assert _blas() == before
    with blas_threads(None):
        assert _blas() == before


def test_only_the_engine_caps_blas_threads():
    found = [str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*.py")
             if not p.is_relative_to(PACKAGE / "engine")
             and re.search(r"threadpool_limits|ThreadpoolController\(", p.read_text(encoding="utf-8"))]
    assert found == [], found
