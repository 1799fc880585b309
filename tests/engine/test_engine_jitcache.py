"""The kernel cache's warm marker: a first start is told apart from one whose kernels are all cached."""

from __future__ import annotations

from attnviz.engine import jitcache


def test_the_marker_lives_in_the_cache_dir_and_records_a_complete_warm_up(tmp_path, monkeypatch):
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path))
    monkeypatch.setitem(jitcache._warm, "known", False)
    marker = jitcache.warm_marker()
    assert marker.parent == tmp_path and marker.name.startswith("attnviz-warm-")
    assert jitcache.warm_marker() == marker  # the same installation: the same fingerprint
    assert not jitcache.is_warm()
    jitcache.mark_warm()
    assert marker.exists() and jitcache.is_warm()
    # a new process (nothing known yet) reads the marker
    monkeypatch.setitem(jitcache._warm, "known", False)
    assert jitcache.is_warm()


def test_an_unwritable_cache_is_not_an_error(tmp_path, monkeypatch):
    ro = tmp_path / "missing" / "deeper"  # does not exist: touch fails
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(ro))
    monkeypatch.setitem(jitcache._warm, "known", False)
    jitcache.mark_warm()
    assert jitcache.is_warm()  # known in this process
    monkeypatch.setitem(jitcache._warm, "known", False)
    assert not jitcache.is_warm()  # but not recorded


def test_the_fingerprint_follows_the_engine_sources(monkeypatch):
    a = jitcache._fingerprint()
    real_stat = type(jitcache.Path(__file__)).stat

    def later(self, *args, **kwargs):
        st = real_stat(self, *args, **kwargs)
        if self.name == "flash.py":
            return type("St", (), {"st_size": st.st_size, "st_mtime_ns": st.st_mtime_ns + 1})()
        return st

    monkeypatch.setattr(type(jitcache.Path(__file__)), "stat", later)
    assert jitcache._fingerprint() != a


def test_warmup_runs_only_the_kernels_asked_for(monkeypatch):
    import importlib

    warmup_module = importlib.import_module("attnviz.engine.warmup")  # the module, not the exported function

    seen = []
    real = warmup_module.attention

    def spy(*a, **k):
        seen.append(k.get("kernel"))
        return real(*a, **k)

    monkeypatch.setattr(warmup_module, "attention", spy)
    overviews = []
    monkeypatch.setattr(warmup_module, "attention_overview", lambda *a, **k: overviews.append(k["reduce"]))
    warmup_module.warmup(dtypes=("float64",), kernels=("flash",), overview=False)
    assert set(seen) == {"flash"} and overviews == []
    seen.clear()
    warmup_module.warmup(dtypes=("float64",))
    assert set(seen) == {"naive", "flash"} and overviews == ["max", "mean"]


def test_wide_vectors_only_on_cpus_that_run_them_at_full_speed():
    avx512_fp16 = {"avx2": True, "avx512f": True, "avx512bw": True, "avx512vl": True, "avx512fp16": True}
    name, flags = jitcache.vector_features("sapphirerapids", avx512_fp16)
    assert name == "sapphirerapids" and flags.endswith(",-prefer-256-bit")
    assert "+avx512f" in flags.split(",") and "+avx2" in flags.split(",")
    older = {**avx512_fp16, "avx512fp16": False}  # e.g. Skylake-X: clocks down for 512-bit code
    assert jitcache.vector_features("skylake-avx512", older) is None
    assert jitcache.vector_features("znver3", {"avx2": True}) is None


def test_a_cpu_set_by_the_user_is_left_alone(monkeypatch):
    import subprocess
    import sys

    code = ("import os, attnviz.engine, numba; "
            "print(os.environ.get('NUMBA_CPU_NAME'), numba.config.CPU_FEATURES)")
    env = {**__import__("os").environ, "NUMBA_CPU_NAME": "haswell", "NUMBA_CPU_FEATURES": "+avx2,+fma"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["haswell", "+avx2,+fma"]


def test_the_fingerprint_follows_the_target_cpu(monkeypatch):
    import numba

    a = jitcache._fingerprint()
    monkeypatch.setattr(numba.config, "CPU_FEATURES", (numba.config.CPU_FEATURES or "") + ",+other")
    assert jitcache._fingerprint() != a


def test_the_cache_directory_follows_the_contents_of_every_engine_source(monkeypatch):
    """numba checks only a kernel's own file; the directory changes when any engine file's content does
    (the micro-kernel's, say), not when a time stamp alone does."""
    a = jitcache.source_digest()
    assert a == jitcache.source_digest()
    path_type = type(jitcache.Path(__file__))
    real_read = path_type.read_bytes

    def edited(self):
        data = real_read(self)
        return data + b"\n# edited\n" if self.name == "microkernel.py" else data

    monkeypatch.setattr(path_type, "read_bytes", edited)
    assert jitcache.source_digest() != a


def test_prune_keeps_the_current_and_the_latest_other_source_versions(tmp_path):
    import os

    for i, name in enumerate(["engine-old1", "engine-old2", "engine-old3", "engine-now"]):
        d = tmp_path / name
        d.mkdir()
        (d / "kernel.nbc").write_bytes(b"x")
        os.utime(d, (1000 + i, 1000 + i))  # old1 least recently used
    (tmp_path / "attnviz-warm-0123").touch()  # the flat layout of earlier versions
    (tmp_path / "attnviz").mkdir()
    removed = jitcache.prune(tmp_path, "engine-now", n_keep=3)
    left = sorted(p.name for p in tmp_path.iterdir())
    assert left == ["engine-now", "engine-old2", "engine-old3"]
    assert sorted(p.name for p in removed) == ["attnviz", "attnviz-warm-0123", "engine-old1"]
    assert jitcache.prune(tmp_path / "missing", "engine-now") == []
