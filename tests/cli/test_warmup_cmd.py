"""``attnviz-cli warmup``: --check says whether the kernel cache is warm (exit 0/1) and compiles nothing; a
warm cache is left alone; a cold one is warmed dtype by dtype and then marked warm."""

from __future__ import annotations

import importlib

from attnviz.cli import main
from attnviz.engine import jitcache

warmup_mod = importlib.import_module("attnviz.engine.warmup")  # the module (the package exports its function)


def test_check_reports_the_cache_state_without_compiling(monkeypatch, capsys):
    monkeypatch.setattr(warmup_mod, "warmup", lambda **kw: (_ for _ in ()).throw(AssertionError("compiled")))
    monkeypatch.setattr(jitcache, "is_warm", lambda: False)
    assert main(["warmup", "--check"]) == 1
    assert "not warm" in capsys.readouterr().out
    monkeypatch.setattr(jitcache, "is_warm", lambda: True)
    assert main(["warmup", "--check"]) == 0
    assert "kernel cache warm" in capsys.readouterr().out


def test_a_cold_cache_is_warmed_per_dtype_then_marked(monkeypatch, capsys):
    done, marked = [], []
    monkeypatch.setattr(jitcache, "is_warm", lambda: False)
    monkeypatch.setattr(jitcache, "mark_warm", lambda: marked.append(True))
    monkeypatch.setattr(warmup_mod, "warmup", lambda dtypes: done.extend(dtypes))
    assert main(["warmup"]) == 0
    assert done == ["float32", "float64"] and marked == [True]
    assert "kernel cache warm after" in capsys.readouterr().out


def test_an_interrupted_warmup_is_not_marked(monkeypatch, capsys):
    marked = []
    monkeypatch.setattr(jitcache, "is_warm", lambda: False)
    monkeypatch.setattr(jitcache, "mark_warm", lambda: marked.append(True))

    def stop(dtypes):
        raise KeyboardInterrupt

    monkeypatch.setattr(warmup_mod, "warmup", stop)
    assert main(["warmup"]) == 130
    assert marked == [] and "not marked warm" in capsys.readouterr().err


def test_a_warm_cache_is_left_alone(monkeypatch, capsys):
    monkeypatch.setattr(jitcache, "is_warm", lambda: True)
    monkeypatch.setattr(warmup_mod, "warmup", lambda **kw: (_ for _ in ()).throw(AssertionError("compiled")))
    assert main(["warmup"]) == 0
    assert "already warm" in capsys.readouterr().out
