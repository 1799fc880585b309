"""The hub cache as huggingface_hub lays it out (blobs, snapshot links, refs), read through its scan_cache_dir,
and the cache folder named by the library's rule."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from ckpt_helpers import DATA

from attnviz.checkpoints.hub_cache import cache_dir, cached_models, describe_folder, find_checkpoints, resolve


def hub_repo(cache: Path, repo_id: str, rev: str, files: dict[str, bytes], ref: str | None = "main",
             kind: str = "models") -> Path:
    """One revision of a repo as the hub writes it: each file a blob named by its hash, linked from
    ``snapshots/REV/NAME``; ``refs/REF`` holds REV. Returns the snapshot folder."""
    repo = cache / f"{kind}--{repo_id.replace('/', '--')}"
    snap = repo / "snapshots" / rev
    (repo / "blobs").mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        blob = repo / "blobs" / hashlib.sha256(data).hexdigest()
        blob.write_bytes(data)
        link = snap / name
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(os.path.relpath(blob, link.parent))
    if ref:
        (repo / "refs").mkdir(exist_ok=True)
        (repo / "refs" / ref).write_text(rev)  # no newline, as the hub writes it
    return snap


def checkpoint_files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file() and not p.name.startswith("golden")}


@pytest.fixture
def cache(tmp_path, monkeypatch):
    cache = tmp_path / "hub"
    cache.mkdir()
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    return cache


def test_main_is_the_revision_listed_and_files_are_read_through_the_blob_links(cache):
    main = hub_repo(cache, "acme/tiny-llama", "a" * 40, checkpoint_files(DATA / "tiny_llama_bf16_sharded"))
    newer = hub_repo(cache, "acme/tiny-llama", "b" * 40, checkpoint_files(DATA / "tiny_qwen2"), ref="dev")
    os.utime(newer / "config.json", follow_symlinks=True)  # the newer revision is not the one main names
    hub_repo(cache, "acme/corpus", "c" * 40, {"config.json": b"{}"}, kind="datasets")  # not a model
    assert cached_models() == [("acme/tiny-llama", main)]
    assert (main / "config.json").is_symlink()
    found = {f.name: f for f in find_checkpoints()}["acme/tiny-llama"]
    assert (found.family, found.dtype, found.n_params, found.origin) == ("Llama", "bf16", 21728, "cache")
    assert resolve("acme/tiny-llama") == (main, "acme/tiny-llama")


def test_without_refs_main_the_newest_revision_is_listed(cache):
    old = hub_repo(cache, "acme/m", "1" * 40, checkpoint_files(DATA / "tiny_qwen2"), ref=None)
    new = hub_repo(cache, "acme/m", "2" * 40, checkpoint_files(DATA / "tiny_qwen3"), ref=None)
    shared = {p.resolve() for p in old.iterdir()} & {p.resolve() for p in new.iterdir()}
    assert not shared
    for link in old.iterdir():
        os.utime(link, (1, 1))  # the old revision's blobs (the times of the files links point to)
    assert cached_models() == [("acme/m", new)]
    for link in new.iterdir():
        os.utime(link, (0, 0))  # now the other revision is the older one
    assert cached_models() == [("acme/m", old)]
    assert describe_folder(new).family == "Qwen3"


def test_a_repo_the_library_rejects_is_still_listed_from_its_snapshots(cache):
    """A broken blob link (a blob removed by hand) makes scan_cache_dir drop the repo as corrupted; its
    snapshot with a readable config.json is listed, as before the library scanned."""
    from huggingface_hub import scan_cache_dir

    snap = hub_repo(cache, "acme/partial", "d" * 40, checkpoint_files(DATA / "tiny_qwen3"))
    (snap / "model.safetensors").resolve().unlink()
    report = scan_cache_dir(cache)
    assert not report.repos and len(report.warnings) == 1
    assert cached_models() == [("acme/partial", snap)]
    assert describe_folder(snap, "acme/partial").note == "no model.safetensors"


def test_no_cache_or_a_file_in_its_place_lists_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "missing"))
    assert cached_models() == []
    (tmp_path / "file").write_text("x")
    assert cached_models(tmp_path / "file") == []


ENVIRONMENTS = [
    {"HF_HUB_CACHE": "{tmp}/direct"},
    {"HUGGINGFACE_HUB_CACHE": "{tmp}/legacy"},
    {"HF_HUB_CACHE": "{tmp}/direct", "HF_HOME": "{tmp}/home"},
    {"HF_HOME": "{tmp}/home"},
    {"HF_HOME": "$ATTNVIZ_TEST_BASE/expanded", "ATTNVIZ_TEST_BASE": "{tmp}"},
    {"XDG_CACHE_HOME": "{tmp}/xdg"},
    {"HOME": "{tmp}/user"},
]


@pytest.mark.parametrize("settings", ENVIRONMENTS, ids=lambda s: "+".join(sorted(s)))
def test_cache_dir_is_the_librarys_hf_hub_cache(tmp_path, monkeypatch, settings):
    """The folder attnviz reads is the one huggingface_hub downloads into, in a process started with the
    same environment (the library reads it once, at import)."""
    names = ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_HOME", "XDG_CACHE_HOME")
    env = {k: v for k, v in os.environ.items() if k not in names}
    env |= {k: v.format(tmp=tmp_path) for k, v in settings.items()}
    code = "from huggingface_hub import constants; print(constants.HF_HUB_CACHE)"
    theirs = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    for k in names:
        monkeypatch.delenv(k, raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    assert cache_dir() == Path(theirs.stdout.strip())
    assert str(tmp_path) in str(cache_dir())


def test_model_list_shows_a_cached_repo(cache, capsys):
    from attnviz.cli import main

    hub_repo(cache, "acme/tiny-qwen3", "e" * 40, checkpoint_files(DATA / "tiny_qwen3"))
    assert main(["model", "list"]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("acme/tiny-qwen3"))
    assert line.split("\t")[1:4] == ["Qwen3", describe_folder(DATA / "tiny_qwen3").line().split("\t")[2], "f32"]
    assert json.loads((cache / "models--acme--tiny-qwen3" / "snapshots" / ("e" * 40) / "config.json")
                      .read_text())["model_type"] == "qwen3"
