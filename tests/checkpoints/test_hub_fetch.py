"""attnviz-cli model fetch: only the files the loaders read, one line when offline or cancelled, the cache
as huggingface_hub lays it out (no network: the Hub is never reached here)."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from fnmatch import fnmatch
from pathlib import Path

import pytest
from ckpt_helpers import DATA
from test_hub_cache_scan import checkpoint_files, hub_repo

from attnviz.checkpoints import hub_fetch
from attnviz.checkpoints.hub_fetch import ALLOW_PATTERNS, fetch_model
from attnviz.cli import main

CHECKPOINTS = Path(hub_fetch.__file__).parent
FILE_NAME = (".json", ".jinja", ".spm", ".safetensors", ".model", ".txt", ".bin", ".msgpack", ".h5", ".pth")
NAMED_TO_REFUSE = {"pytorch_model.bin", "pytorch_model.bin.index.json"}  # only named in "convert it" messages
TEST_INPUTS = (".npz", ".npy", ".png", ".wav")  # goldens, pictures and sounds the tests feed the checkpoints


def allowed(name: str) -> bool:
    return any(fnmatch(name, p) for p in ALLOW_PATTERNS)


def names_the_loaders_open() -> set[str]:
    """Every string constant in attnviz/checkpoints that is a file name (or a glob of one), with the
    folder it is joined to when a path is built as ``folder / "sub" / f.name``."""
    names = set()
    for path in sorted(CHECKPOINTS.glob("*.py")):
        if path.name == "hub_fetch.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                v = node.value
                if v.endswith(FILE_NAME) and not v.startswith(".") and not set(" /{") & set(v) and len(v) < 60:
                    names.add(v)
    return names


def test_every_file_a_loader_opens_is_fetched():
    read = names_the_loaders_open()
    assert {"config.json", "tokenizer.json", "model.safetensors", "source.spm", "chat_template.jinja",
            "policy_preprocessor.json"} <= read
    assert "*.jinja" in read  # decoder_chat.py globs additional_chat_templates/
    missing = sorted(n for n in read - NAMED_TO_REFUSE if not allowed(n.replace("*", "x"))
                     and not allowed("additional_chat_templates/" + n.replace("*", "x")))
    assert not missing, f"files attnviz reads that model fetch leaves out: {missing}"


def test_every_pattern_is_a_file_a_loader_opens():
    read = names_the_loaders_open() | {"additional_chat_templates/*.jinja", "model-*-of-*.safetensors",
                                       "policy_preprocessor_*.safetensors"}  # shards and state files: by name
    assert not [p for p in ALLOW_PATTERNS if p not in read], "model fetch downloads what no loader reads"


def test_the_test_checkpoints_are_fetched_whole_and_nothing_else_is():
    """Every file the committed checkpoints hold (as transformers and lerobot save them) is fetched; other
    frameworks' weights, pickles, repo extras and sub-folders are not."""
    files = {p.name for d in DATA.iterdir() if d.is_dir() for p in d.iterdir()
             if p.is_file() and not p.name.endswith(TEST_INPUTS)}
    assert {"model-00001-of-00003.safetensors", "policy_preprocessor_step_5_normalizer_processor.safetensors",
            "preprocessor_config.json"} <= files
    assert [f for f in sorted(files) if not allowed(f)] == []
    for name in ("pytorch_model.bin", "pytorch_model.bin.index.json", "tf_model.h5", "flax_model.msgpack",
                 "consolidated.safetensors", "onnx/model.safetensors", "original/consolidated.00.pth",
                 "README.md", ".gitattributes", "vlm/config.json", "model.fp16.safetensors", "spiece.model.bak"):
        assert not allowed(name), name


def run_cli(args, env_extra, tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUGGINGFACE_"))}
    env |= {"HF_HUB_CACHE": str(tmp_path / "hub"), "HF_HOME": str(tmp_path / "hf-home"), **env_extra}
    return subprocess.run([sys.executable, "-m", "attnviz.cli", "model", "fetch", *args], env=env,
                          capture_output=True, text=True, timeout=300, cwd=tmp_path)


def test_offline_is_one_line_and_exit_2(tmp_path):
    proc = run_cli(["acme/tiny-llama", "--revision", "v1"], {"HF_HUB_OFFLINE": "1"}, tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.splitlines() == [
        f"offline: HF_HUB_OFFLINE is set, and acme/tiny-llama at revision v1 is not in the local cache "
        f"({tmp_path / 'hub'})"]
    assert proc.stdout == "" and not (tmp_path / "hub" / "models--acme--tiny-llama" / "snapshots").exists()


def test_offline_with_the_model_in_the_cache_gives_its_folder(tmp_path):
    snap = hub_repo(tmp_path / "hub", "acme/tiny-qwen3", "f" * 40, checkpoint_files(DATA / "tiny_qwen3"))
    proc = run_cli(["acme/tiny-qwen3"], {"HF_HUB_OFFLINE": "1"}, tmp_path)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == f"fetched acme/tiny-qwen3 into {snap}"
    assert lines[2].split("\t")[:2] == ["acme/tiny-qwen3", "Qwen3"]


def test_ctrl_c_is_one_line_and_exit_130(monkeypatch, tmp_path, capsys):
    import huggingface_hub

    def interrupted(*a, **kw):
        raise KeyboardInterrupt

    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    monkeypatch.setattr(huggingface_hub, "snapshot_download", interrupted)
    assert main(["model", "fetch", "acme/big"]) == 130
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["cancelled: acme/big was not fetched completely; what arrived stays in the cache and the same "
                   "command resumes it"]


def test_shards_the_patterns_miss_are_fetched_by_name(monkeypatch, tmp_path):
    """An index naming shards outside the usual model-0000X-of-0000Y names: a second pass fetches exactly them."""
    import huggingface_hub

    calls = []
    snap = tmp_path / "models--acme--odd" / "snapshots" / "r1"

    def download(repo_id, revision=None, cache_dir=None, allow_patterns=None, tqdm_class=None):
        calls.append((repo_id, revision, Path(cache_dir), list(allow_patterns)))
        snap.mkdir(parents=True, exist_ok=True)
        if len(calls) == 1:
            (snap / "config.json").write_text('{"model_type": "llama"}')
            (snap / "model.safetensors.index.json").write_text(json.dumps(
                {"weight_map": {"a": "part-1.safetensors", "b": "part-2.safetensors", "c": "../x.safetensors"}}))
        else:
            for name in allow_patterns:
                (snap / name).write_bytes(b"")
        return str(snap)

    monkeypatch.setattr(huggingface_hub, "snapshot_download", download)
    assert fetch_model("acme/odd", "r1", cache=tmp_path) == snap
    assert calls[0][:3] == ("acme/odd", "r1", tmp_path) and tuple(calls[0][3]) == ALLOW_PATTERNS
    assert calls[1][3] == ["part-1.safetensors", "part-2.safetensors"]  # never a path out of the folder


@pytest.mark.parametrize("repo_id", ["bad//name", "no-org", "a/b/c", "../etc"])
def test_a_bad_repo_id_is_one_line(repo_id, capsys):
    assert main(["model", "fetch", repo_id]) == 1
    assert capsys.readouterr().err.strip() == f"error: {repo_id!r} is not a Hugging Face repo id (ORG/NAME)"


def test_a_repo_without_a_config_is_refused(monkeypatch, tmp_path, capsys):
    import huggingface_hub

    snap = tmp_path / "models--acme--data" / "snapshots" / "r1"
    snap.mkdir(parents=True)
    monkeypatch.setattr(huggingface_hub, "snapshot_download", lambda *a, **kw: str(snap))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    assert main(["model", "fetch", "acme/data"]) == 1
    assert "acme/data has no config.json at its top" in capsys.readouterr().err


def test_a_fetched_policy_names_the_vlm_it_still_needs(monkeypatch, tmp_path, capsys):
    """A lerobot policy names its VLM by repo id: fetch says to fetch that too, until the cache holds it."""
    import huggingface_hub

    files = checkpoint_files(DATA / "tiny_smolvla")
    cfg = json.loads(files["config.json"])
    cfg["vlm_model_name"] = "acme/tiny-smolvlm"
    files["config.json"] = json.dumps(cfg).encode()
    snap = hub_repo(tmp_path, "acme/policy", "p" * 40, files)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    monkeypatch.setattr(huggingface_hub, "snapshot_download", lambda *a, **kw: str(snap))
    assert main(["model", "fetch", "acme/policy"]) == 0
    hint = "this policy is built on acme/tiny-smolvlm, which is not in the cache: attnviz-cli model fetch acme/tiny-smolvlm"
    assert capsys.readouterr().out.splitlines()[-1] == hint
    hub_repo(tmp_path, "acme/tiny-smolvlm", "v" * 40, checkpoint_files(DATA / "tiny_smolvlm"))
    assert main(["model", "fetch", "acme/policy"]) == 0
    assert "this policy is built on" not in capsys.readouterr().out
