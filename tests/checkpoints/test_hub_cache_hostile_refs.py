"""A hub cache whose refs/ holds something huggingface_hub's scan would read whole and blocking (a FIFO,
a link to /dev/zero, a huge file): the listing neither hangs nor reads it, and still prefers the snapshot
each readable ``refs/main`` names."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from ckpt_helpers import DATA
from test_hub_cache_scan import checkpoint_files, hub_repo

from attnviz.checkpoints import hub_cache
from attnviz.checkpoints.hub_cache import cached_models, find_checkpoints, read_ref, resolve

ROOT = Path(__file__).resolve().parents[2]
GPT2 = DATA / "tiny_gpt2"


@pytest.fixture
def cache(tmp_path, monkeypatch):
    cache = tmp_path / "hub"
    cache.mkdir()
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    return cache


def _hostile(path: Path, kind: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.unlink(missing_ok=True)
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "dev_zero":
        path.symlink_to("/dev/zero")
    else:  # a huge file: 8 MiB of a "hash" padded with spaces
        with open(path, "wb") as fh:
            fh.write(b"a" * 40)
            fh.truncate(8 << 20)


def _two_repos(cache: Path):
    """acme/good with main naming its older snapshot, acme/bad whose refs are replaced by the test."""
    old = hub_repo(cache, "acme/good", "a" * 40, checkpoint_files(GPT2))
    newer = hub_repo(cache, "acme/good", "b" * 40, checkpoint_files(GPT2), ref="dev")
    os.utime(newer, (time.time() + 100, time.time() + 100))  # the newer folder is not the one main names
    bad = hub_repo(cache, "acme/bad", "c" * 40, checkpoint_files(GPT2))
    return old, bad


@pytest.mark.timeout(60)
@pytest.mark.parametrize("kind", ["fifo", "dev_zero", "huge"])
@pytest.mark.parametrize("ref", ["main", "pr/1"])
def test_a_hostile_ref_neither_hangs_nor_is_read_whole(cache, monkeypatch, kind, ref):
    import huggingface_hub

    old, bad = _two_repos(cache)
    assert dict(cached_models())["acme/good"] == old  # through the library's scan while every ref is readable
    bad_repo = cache / "models--acme--bad"
    _hostile(bad_repo / "refs" / ref, kind)

    def scan(*_a, **_k):  # it would read the ref whole: a 4 GiB file, /dev/zero, or block on the FIFO
        raise AssertionError("huggingface_hub's scan_cache_dir called on a cache with a hostile ref")

    monkeypatch.setattr(huggingface_hub, "scan_cache_dir", scan)
    t = time.monotonic()
    found = dict(cached_models())
    assert time.monotonic() - t < 10
    assert found["acme/good"] == old  # main still chosen for the repos whose refs are readable
    assert found["acme/bad"] == bad  # its only usable snapshot, no ref read whole
    assert resolve("acme/good") == (old, "acme/good")
    names = {f.name: f for f in find_checkpoints()}
    assert names["acme/bad"].family == "GPT-2" and names["acme/good"].folder == old


@pytest.mark.parametrize("kind", ["fifo", "dev_zero", "huge"])
def test_read_ref_refuses_what_is_not_a_small_regular_file(tmp_path, kind):
    _hostile(tmp_path / "refs" / "main", kind)
    assert read_ref(tmp_path) is None
    assert not hub_cache._refs_safe(tmp_path)


@pytest.mark.parametrize("text,expect", [("a" * 40, "a" * 40), ("abc\n", "abc"), ("../../elsewhere", None),
                                         ("/etc", None), ("..", None), ("", None), ("\xff", None)])
def test_read_ref_takes_a_plain_revision_name_only(tmp_path, text, expect):
    (tmp_path / "refs").mkdir()
    (tmp_path / "refs" / "main").write_bytes(text.encode("latin-1"))
    assert read_ref(tmp_path) == expect
    assert hub_cache._refs_safe(tmp_path)


def test_a_ref_pointing_outside_the_snapshots_is_not_followed_in_the_fallback(cache, tmp_path):
    old, bad = _two_repos(cache)
    _hostile(cache / "models--acme--bad" / "refs" / "pr" / "1", "fifo")  # the scan is done here, folder by folder
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "config.json").write_text('{"model_type": "llama"}')
    (cache / "models--acme--good" / "refs" / "main").write_text("../../../elsewhere")
    found = dict(cached_models())
    assert found["acme/good"].parent == cache / "models--acme--good" / "snapshots"
    assert found["acme/good"] != elsewhere


@pytest.mark.timeout(120)
def test_model_list_with_a_fifo_ref_answers_within_seconds(cache):
    _two_repos(cache)
    _hostile(cache / "models--acme--bad" / "refs" / "main", "fifo")
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    t = time.monotonic()
    r = subprocess.run([sys.executable, "-m", "attnviz.cli", "model", "list"], capture_output=True, text=True,
                       timeout=100, env=env)
    assert r.returncode == 0, r.stderr
    assert time.monotonic() - t < 60
    assert "acme/bad\tGPT-2" in r.stdout and "acme/good\tGPT-2" in r.stdout
    assert "Traceback" not in r.stderr
