"""Runtime behaviour: the JIT cache directory (also for a read-only package), warm-up, thread cap,
concurrent callers."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import numpy as np
import pytest

import attnviz.engine as engine
from attnviz.engine import attention, get_num_threads, set_num_threads, warmup
from engine_helpers import qkv

ENGINE_DIR = Path(engine.__file__).resolve().parent


def _run(code: str, env: dict, cwd: Path) -> str:
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env, capture_output=True,
                          text=True, timeout=300, cwd=cwd)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


@pytest.mark.slow
def test_read_only_package_uses_the_user_cache(tmp_path):
    pkg = tmp_path / "pkg" / "attnviz"
    shutil.copytree(ENGINE_DIR, pkg / "engine", ignore=shutil.ignore_patterns("__pycache__"))
    (pkg / "__init__.py").write_text('"""attnviz stand-in holding only the engine."""\n')
    for p in sorted(pkg.rglob("*"), reverse=True) + [pkg]:
        p.chmod(0o555 if p.is_dir() else 0o444)
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
    env.update(PYTHONPATH=str(tmp_path / "pkg"), XDG_CACHE_HOME=str(tmp_path / "cache"), PYTHONDONTWRITEBYTECODE="1")
    code = """
        import numpy as np
        import attnviz.engine as e
        from attnviz.engine.naive import naive_kernel
        q = np.ones((1, 3, 2))
        e.attention(q, q, q, kernel="naive")
        print(e.__file__, naive_kernel.stats.cache_hits and sum(naive_kernel.stats.cache_hits.values()))
    """
    first = _run(code, env, tmp_path)
    second = _run(code, env, tmp_path)
    assert first.startswith(str(pkg))
    assert second.endswith(" 1")  # loaded from the cache, not compiled again
    cache = tmp_path / "cache" / "attnviz" / "numba"
    assert any(cache.rglob("*.nbi")) and any(cache.rglob("*.nbc"))
    assert not [p for p in pkg.rglob("*") if p.suffix in (".nbi", ".nbc")]  # nothing written beside the source
    for p in [pkg, *pkg.rglob("*")]:
        p.chmod(0o755)


def test_cache_dir_is_set_even_when_numba_was_imported_first(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
    env["XDG_CACHE_HOME"] = str(tmp_path)
    out = _run("""
        import numba
        import attnviz.engine
        print(numba.config.CACHE_DIR)
    """, env, tmp_path)
    from attnviz.engine.jitcache import source_digest

    assert out == str(tmp_path / "attnviz" / "numba" / f"engine-{source_digest()}")


def test_warmup_compiles_every_kernel():
    from attnviz.engine.flash import flash_kernel
    from attnviz.engine.naive import naive_kernel
    from attnviz.engine.overview import _overview_kernel
    from attnviz.engine.weights import _weights_kernel

    warmup(("float32", "float64"))
    for kernel in (flash_kernel, naive_kernel, _weights_kernel, _overview_kernel):
        dtypes = {str(sig[0].dtype) for sig in kernel.signatures}
        assert {"float32", "float64"} <= dtypes, kernel
    from attnviz.engine.activations import _gelu_erf_f32

    assert _gelu_erf_f32.signatures  # the corpus pass's GELU (float32 only)
    with pytest.raises(ValueError, match="dtypes"):
        warmup(("float16",))


@pytest.mark.slow
def test_the_first_view_warm_up_compiles_the_naive_kernel_a_first_start_needs_and_nothing_of_flash(tmp_path):
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "cache"))
    out = _run("""
        from numba.core import event
        compiled = []
        class Seen(event.Listener):
            def on_start(self, e): compiled.append(e.data["dispatcher"].py_func.__qualname__)
            def on_end(self, e): pass
        event.register("numba:compile", Seen())
        from attnviz.engine.warmup import warmup_first_view
        warmup_first_view()
        print(int("naive_kernel" in compiled))
        compiled.clear()
        from attnviz.engine.flash import flash_kernel
        from attnviz.model.compute import ComputeRequest, run
        from attnviz.model.demos import build_demo
        from attnviz.model.state import CustomSource, ModelConfig, SessionState
        wide = SessionState(sources=(CustomSource("tokens", count=256, generator="noise", seed=1),),
                            model=ModelConfig(d_model=64, nh=8, seed=0))  # big enough for a head preview first
        for state in (*(build_demo(d) for d in ("river-bank", "translation", "vla-mask")), wide):
            resp = run(ComputeRequest(1, state, rows=(0,), engine="naive-until-warm", preview_head=0),
                       on_preview=lambda p: None)
            print(resp.path, resp.kernel_stand_in)
        print(len(compiled), len(flash_kernel.signatures))
    """, env, tmp_path).splitlines()
    assert out == ["1", *["engine:naive flash"] * 4, "0 0"]


def test_thread_cap_is_respected_and_results_do_not_depend_on_it():
    q, k, v = qkv(4, 200, 150, 16, 16, np.float32, seed=2)
    mask = np.tri(200, 150, dtype=bool)
    before = get_num_threads()
    try:
        set_num_threads(1)
        assert get_num_threads() == 1
        one = attention(q, k, v, mask, block_m=32, block_n=32)
        set_num_threads(None)
        assert get_num_threads() == engine.runtime.max_threads()
        many = attention(q, k, v, mask, block_m=32, block_n=32)
    finally:
        set_num_threads(before if before != engine.runtime.max_threads() else None)
    np.testing.assert_array_equal(one.out, many.out)
    with pytest.raises(ValueError, match="threads"):
        set_num_threads(0)


def test_concurrent_callers_get_correct_results():
    q, k, v = qkv(2, 300, 300, 32, 32, np.float64, seed=3)
    ref = attention(q, k, v, kernel="reference")
    results, errors = [], []

    def work(kernel):
        try:
            for _ in range(3):
                results.append(attention(q, k, v, kernel=kernel).out)
        except Exception as exc:  # surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(kn,)) for kn in ("flash", "naive", "flash")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert len(results) == 9
    for out in results:
        np.testing.assert_allclose(out, ref.out, atol=1e-12)


def test_read_only_inputs_do_not_compile_new_kernel_versions():
    from attnviz.engine import BlockMask, recompute_weights
    from attnviz.engine.flash import flash_kernel
    from attnviz.engine.weights import _weights_kernel

    q, k, v = qkv(2, 40, 30, 8, 8, np.float64, seed=4)
    mask = np.tri(40, 30, dtype=bool)
    attention(q, k, v, BlockMask.from_dense(mask, 16, 16), return_weights=True)  # writable-typed versions
    before = (len(flash_kernel.signatures), len(_weights_kernel.signatures))
    for a in (q, k, v, mask):
        a.setflags(write=False)
    bmask = BlockMask.from_dense(mask, 16, 16)
    assert not bmask.dense.flags.writeable and not bmask.tile_state.flags.writeable
    res = attention(q, k, v, bmask, return_weights=True)
    recompute_weights(q, k, res.lse, mask, rows=[1, 2])
    assert (len(flash_kernel.signatures), len(_weights_kernel.signatures)) == before
    np.testing.assert_allclose(res.out, attention(q, k, v, mask, kernel="reference").out, atol=1e-12)


def test_one_thread_caps_only_the_calling_thread():
    from attnviz.engine.runtime import one_thread

    seen = {}
    before = get_num_threads()
    with one_thread():
        assert get_num_threads() == 1
        other = threading.Thread(target=lambda: seen.setdefault("other", get_num_threads()))
        other.start()
        other.join()
        q, k, v = qkv(2, 70, 50, 8, 8, np.float64, seed=3)
        inside = attention(q, k, v, np.tri(70, 50, dtype=bool), block_m=16, block_n=16)
    assert seen["other"] == before and get_num_threads() == before
    outside = attention(q, k, v, np.tri(70, 50, dtype=bool), block_m=16, block_n=16)
    np.testing.assert_array_equal(inside.out, outside.out)
