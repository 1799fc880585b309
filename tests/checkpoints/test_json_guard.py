"""Every JSON file of a checkpoint folder goes through one guarded reader (attnviz.checkpoints.json_file): a
tokenizer config or a weight index nested too deep, too large, or not an object is one CheckpointError line
naming the file, never a RecursionError, a MemoryError or a silent default."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from attnviz.checkpoints import CheckpointError
from attnviz.checkpoints import json_file
from attnviz.checkpoints.decoder_text import read_special
from attnviz.checkpoints.safetensors_file import weight_files
from attnviz.sources.text import BpeTokenizer

DATA = Path(__file__).resolve().parents[1] / "data" / "checkpoints"
DEEP = "[" * 5000 + "]" * 5000


@pytest.fixture
def llama(tmp_path) -> Path:
    folder = tmp_path / "llama"
    shutil.copytree(DATA / "tiny_llama_lm", folder)
    return folder


@pytest.mark.parametrize("text, words", [(DEEP, "nests deeper"), ("[1, 2]", "JSON object"), ("{oops", "readable JSON")])
def test_a_bad_tokenizer_config_is_one_line(llama, text, words):
    (llama / "tokenizer_config.json").write_text(text)
    tok = BpeTokenizer.from_file(llama / "tokenizer.json", name="t")
    with pytest.raises(CheckpointError) as err:
        read_special(llama, tok, "llama")
    assert words in str(err.value) and "tokenizer_config.json" in str(err.value)
    assert "\n" not in str(err.value)


def test_an_oversized_weight_index_is_refused_before_it_is_read(tmp_path, monkeypatch):
    monkeypatch.setattr(json_file, "MAX_JSON_BYTES", 1000)
    (tmp_path / "model.safetensors.index.json").write_text('{"weight_map": {"a": "' + "x" * 2000 + '"}}')
    with pytest.raises(CheckpointError, match="at most 1,000"):
        weight_files(tmp_path)


def test_a_deep_weight_index_is_one_line(tmp_path):
    (tmp_path / "model.safetensors.index.json").write_text('{"weight_map": ' + DEEP + "}")
    with pytest.raises(CheckpointError, match="nests deeper"):
        weight_files(tmp_path)


def test_the_config_reader_is_the_same_function():
    from attnviz.checkpoints import config

    assert config.read_json is json_file.read_json
