"""Checkpoints found offline: ready models, folders given, the local Hugging Face cache; `model` CLI for decoders."""

from __future__ import annotations

import shutil

import numpy as np
import pytest
from ckpt_helpers import DATA, golden

from attnviz.checkpoints import CheckpointError
from attnviz.checkpoints.hub_cache import cache_dir, cached_models, describe_folder, find_checkpoints, resolve
from attnviz.cli import main


@pytest.fixture
def hub(tmp_path, monkeypatch):
    """A hub cache holding acme/tiny-llama (bf16, sharded, at refs/main) and an old revision of it."""
    cache = tmp_path / "hub"
    repo = cache / "models--acme--tiny-llama"
    shutil.copytree(DATA / "tiny_llama_bf16_sharded", repo / "snapshots" / "abc123")
    shutil.copytree(DATA / "tiny_qwen2", repo / "snapshots" / "old999")
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("abc123")
    (cache / "datasets--acme--corpus").mkdir()  # not a model
    (cache / "models--acme--broken" / "snapshots" / "r1").mkdir(parents=True)  # no config.json: skipped
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    return cache


def test_cache_dir_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    assert cache_dir() == tmp_path / "hf" / "hub"
    monkeypatch.delenv("HF_HOME")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_dir() == tmp_path / "xdg" / "huggingface" / "hub"
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "direct"))
    assert cache_dir() == tmp_path / "direct"


def test_cached_models_use_refs_main(hub):
    assert cached_models() == [("acme/tiny-llama", hub / "models--acme--tiny-llama" / "snapshots" / "abc123")]
    folder, name = resolve("acme/tiny-llama")
    assert name == "acme/tiny-llama" and folder.name == "abc123"
    with pytest.raises(CheckpointError, match="neither a folder nor a model in the local Hugging Face cache.*nothing is downloaded"):
        resolve("acme/other")


def test_described_from_headers_only(hub):
    found = {f.name: f for f in find_checkpoints([DATA / "tiny_qwen3", DATA / "tiny_vit"])}
    llama = found["acme/tiny-llama"]
    assert (llama.family, llama.dtype, llama.n_params, llama.origin) == ("Llama", "bf16", 21728, "cache")
    assert (found["tiny_qwen3"].family, found["tiny_qwen3"].dtype) == ("Qwen3", "f32")
    assert found["tiny_vit"].supported


def test_unsupported_and_broken_folders_are_listed_with_the_reason(tmp_path):
    (tmp_path / "swinv2").mkdir()
    (tmp_path / "swinv2" / "config.json").write_text('{"model_type": "swinv2"}')
    d = describe_folder(tmp_path / "swinv2")
    assert not d.supported and d.note == "no model.safetensors" and "swinv2" in d.line()


def test_cli_list_shows_the_cache(hub, capsys):
    assert main(["model", "list", str(DATA / "tiny_mistral")]) == 0
    out = capsys.readouterr().out
    assert "acme/tiny-llama\tLlama\t21,728\tbf16" in out and "tiny_mistral\tMistral" in out


def test_cli_inspect_cached_repo_id_writes_every_map(hub, tmp_path, capsys):
    g = golden(DATA / "tiny_llama_bf16_sharded" / "golden.npz")
    out = tmp_path / "o.npz"
    assert main(["model", "inspect", "acme/tiny-llama", "--text", str(g["text"]), "--npz", str(out)]) == 0
    with np.load(out) as z:
        np.testing.assert_allclose(z["attentions"], g["attentions"], atol=1e-5)
        np.testing.assert_array_equal(z["kv_head"], [0, 0, 1, 1])
        assert z["summary_to_first"].shape == (2, 4)
    text = capsys.readouterr().out
    assert "bf16, computed in float32" in text and "BOS added" in text


def test_cli_one_map_with_layer_and_head(tmp_path):
    g = golden(DATA / "tiny_qwen2" / "golden.npz")
    out = tmp_path / "o.npz"
    assert main(["model", "inspect", str(DATA / "tiny_qwen2"), "--text", str(g["text"]), "--npz", str(out),
                 "--layer", "1", "--head", "3"]) == 0
    with np.load(out) as z:
        np.testing.assert_allclose(z["attention"], g["attentions"][1, 3], atol=1e-5)
        assert "attentions" not in z.files


def test_cli_refuses_maps_that_do_not_fit_and_points_to_layer_head(tmp_path, capsys, monkeypatch):
    from attnviz.checkpoints import decoder_run

    real = decoder_run.pass_bytes
    monkeypatch.setattr(decoder_run, "pass_bytes", lambda c, T, mode, item=4: 2**50 if mode == "weights" else real(c, T, mode, item))
    rc = main(["model", "inspect", str(DATA / "tiny_llama"), "--text", "the river bank " * 10, "--npz",
               str(tmp_path / "o.npz")])
    err = capsys.readouterr().err
    assert rc == 1 and "--layer L --head H" in err and "GiB" in err and not (tmp_path / "o.npz").exists()


@pytest.mark.parametrize("argv, expected", [
    (["--layer", "1"], "--layer and --head together"),
    (["--layer", "2", "--head", "0"], r"no head \(2, 0\)"),
])
def test_cli_bad_layer_head(tmp_path, capsys, argv, expected):
    rc = main(["model", "inspect", str(DATA / "tiny_llama"), "--text", "the river", "--npz", str(tmp_path / "o.npz"), *argv])
    assert rc == 1 and expected.replace("\\", "") in capsys.readouterr().err.replace("\\", "")


def test_dtype_help_says_what_is_computed(capsys):
    with pytest.raises(SystemExit):
        main(["model", "inspect", "--help"])
    assert "bf16 weights converted to float32" in " ".join(capsys.readouterr().out.split())


@pytest.mark.parametrize("ref", ["../../../elsewhere", "ABSOLUTE", "abc123/../../../../elsewhere"])
def test_a_ref_holding_a_path_never_leaves_the_cache(hub, tmp_path, ref):
    """refs/main naming a path (relative or absolute) is ignored: the repo id loads its own snapshot only."""
    outside = tmp_path / "elsewhere"
    shutil.copytree(DATA / "tiny_qwen3", outside)
    repo = hub / "models--acme--tiny-llama"
    (repo / "refs" / "main").write_text(str(outside) if ref == "ABSOLUTE" else ref)
    rid, snap = cached_models()[0]
    assert rid == "acme/tiny-llama" and snap.parent == repo / "snapshots"
    folder, _ = resolve("acme/tiny-llama")
    assert folder.parent == repo / "snapshots" and folder.resolve() != outside.resolve()


def test_a_snapshot_linked_outside_the_cache_is_ignored(hub, tmp_path):
    repo = hub / "models--acme--linked"
    (repo / "snapshots").mkdir(parents=True)
    (repo / "snapshots" / "r1").symlink_to(DATA / "tiny_qwen3", target_is_directory=True)
    assert "acme/linked" not in dict(cached_models())


def test_an_unreadable_snapshot_does_not_fail_the_listing(hub, monkeypatch, capsys):
    from pathlib import Path

    bad = hub / "models--acme--tiny-llama" / "snapshots" / "abc123"
    real = Path.is_file

    def is_file(self):
        if bad in (self, self.parent):
            raise PermissionError(13, "Permission denied", str(self))
        return real(self)

    monkeypatch.setattr(Path, "is_file", is_file)
    assert main(["model", "list"]) == 0
    out = capsys.readouterr().out
    assert "Errno" not in out and "acme/tiny-llama" in out  # the readable old revision is listed instead


@pytest.mark.parametrize("kind", ["fifo", "zero"])
def test_listing_a_folder_never_reads_a_device_or_a_fifo(tmp_path, kind):
    import os
    import time

    folder = tmp_path / "m"
    folder.mkdir()
    if kind == "fifo":
        os.mkfifo(folder / "config.json")
    else:
        (folder / "config.json").symlink_to("/dev/zero")
    t0 = time.monotonic()
    d = describe_folder(folder)
    assert d.note == "no readable config.json" and time.monotonic() - t0 < 5
