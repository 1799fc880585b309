"""Every JSON a user hands in is read through attnviz.jsontext's guard: a file nested too deep or too large
for its reader is that reader's own one-line error, raised before the text is parsed (or read), never a
RecursionError, a MemoryError or a long wait."""

from __future__ import annotations

import json
import struct
import time
from pathlib import Path

import pytest

from attnviz.checkpoints import CheckpointError
from attnviz.checkpoints.decoder_chat import template_variables
from attnviz.checkpoints.idefics3 import _tokenizer_config
from attnviz.checkpoints.json_file import MAX_JSON_BYTES
from attnviz.checkpoints.safetensors_file import read_header
from attnviz.checkpoints.seq2seq_text import read_json_file
from attnviz.corpus.texts import iter_documents
from attnviz.jsontext import JsonRefused, depth_ok, loads_guarded
from attnviz.model.mask import export

DEEP = "[" * 100_000 + "]" * 100_000  # past Python's recursion limit (about 1,000 for the decoder)


def _sparse(path: Path, size: int) -> Path:
    """A file of ``size`` bytes that takes no disk (and would take ``size`` bytes of memory to read)."""
    with open(path, "wb") as f:
        f.truncate(size)
    return path


def _one_line(exc) -> str:
    text = str(exc)
    assert "\n" not in text and "Traceback" not in text
    return text


# -- the guard itself -------------------------------------------------------------------------------

def test_an_unclosed_string_full_of_escaped_quotes_is_checked_in_linear_time():
    text = '"' + '\\"' * 40_000  # 80 kB; every later quote used to start a scan to the end (about 30 s)
    start = time.perf_counter()
    assert depth_ok(text, 64)
    assert time.perf_counter() - start < 1.0


def test_brackets_after_an_unclosed_string_never_reach_the_decoder():
    with pytest.raises(json.JSONDecodeError):
        loads_guarded('["' + "[" * 100_000)


def test_the_guard_keeps_what_strings_hold_out_of_the_count():
    assert depth_ok('["' + "[" * 100 + '\\"' + "{" * 100 + '"]', 1)
    assert not depth_ok("[[", 1)
    with pytest.raises(JsonRefused, match="nests deeper than 64 levels"):
        loads_guarded(DEEP)
    with pytest.raises(JsonRefused, match="more than the 10 read"):
        loads_guarded('"' + "x" * 20 + '"', max_chars=10)


# -- checkpoint folders ------------------------------------------------------------------------------

def test_a_deep_marian_vocabulary_is_one_checkpoint_error(tmp_path):
    (tmp_path / "vocab.json").write_text(DEEP)
    with pytest.raises(CheckpointError) as err:
        read_json_file(tmp_path / "vocab.json", "the Marian vocabulary")
    assert "vocab.json nests deeper than 64 levels" in _one_line(err.value)


def test_a_huge_marian_vocabulary_is_refused_unread(tmp_path):
    path = _sparse(tmp_path / "vocab.json", MAX_JSON_BYTES + 1)
    with pytest.raises(CheckpointError) as err:
        read_json_file(path, "the Marian vocabulary")
    assert f"is {MAX_JSON_BYTES + 1:,} bytes, more than the {MAX_JSON_BYTES:,} read" in _one_line(err.value)


def test_a_deep_or_huge_idefics3_tokenizer_config_is_one_checkpoint_error(tmp_path):
    (tmp_path / "tokenizer_config.json").write_text('{"a": ' + DEEP + "}")
    with pytest.raises(CheckpointError) as err:
        _tokenizer_config(tmp_path)
    assert "tokenizer_config.json nests deeper than 64 levels" in _one_line(err.value)
    _sparse(tmp_path / "tokenizer_config.json", MAX_JSON_BYTES + 1)
    with pytest.raises(CheckpointError) as err:
        _tokenizer_config(tmp_path)
    assert "bytes, more than the" in _one_line(err.value)


def test_a_deep_special_tokens_map_leaves_the_family_defaults(tmp_path):
    (tmp_path / "special_tokens_map.json").write_text('{"bos_token": ' + DEEP + "}")
    assert dict(template_variables(tmp_path, {}, "llama"))["bos_token"] == "<s>"


def test_a_deep_safetensors_header_is_one_checkpoint_error(tmp_path):
    header = ('{"a": ' + DEEP + "}").encode()
    (tmp_path / "model.safetensors").write_bytes(struct.pack("<Q", len(header)) + header)
    with pytest.raises(CheckpointError) as err:
        read_header(tmp_path / "model.safetensors")
    assert "header is not JSON: it nests deeper than 64 levels" in _one_line(err.value)


# -- mask files --------------------------------------------------------------------------------------

def test_a_deep_mask_design_is_one_value_error():
    with pytest.raises(ValueError) as err:
        export.design_from_json('{"format": "attnviz-mask-design", "design": ' + DEEP + "}")
    assert _one_line(err.value) == "mask design JSON nests deeper than 64 levels"


def test_a_long_mask_design_text_is_refused_unparsed(monkeypatch):
    monkeypatch.setattr(export, "MAX_JSON_BYTES", 100)
    with pytest.raises(ValueError) as err:
        export.design_from_json('{"format": "attnviz-mask-design", "pad": "' + "x" * 200 + '"}')
    assert "more than the 100 read" in _one_line(err.value)


def test_a_deep_mask_file_is_one_value_error_whatever_reads_it(tmp_path):
    path = tmp_path / "m.json"
    path.write_text('{"ar_mask": ' + DEEP + "}")
    for read in (export.load_ar_mask, export.import_mask):
        with pytest.raises(ValueError) as err:
            read(path)
        assert _one_line(err.value) == f"{path} nests deeper than 64 levels"
    with pytest.raises(ValueError) as err:
        export.import_mask(path, "json")
    assert _one_line(err.value) == "mask design JSON nests deeper than 64 levels"


def test_a_huge_mask_file_is_refused_unread(tmp_path):
    path = _sparse(tmp_path / "m.json", export.MAX_JSON_BYTES + 1)
    for read in (export.load_ar_mask, export.import_mask, lambda p: export.import_mask(p, "json")):
        with pytest.raises(ValueError) as err:
            read(path)
        assert "bytes, more than the 1,073,741,824 read" in _one_line(err.value)


# -- corpus lines ------------------------------------------------------------------------------------

def test_a_jsonl_line_nested_past_the_guard_is_one_failed_document(tmp_path):
    p = tmp_path / "c.jsonl"
    p.write_text('{"text": "ok"}\n{"text": "deep", "meta": ' + "[" * 100 + "]" * 100 + "}\n")
    docs = list(iter_documents(p))
    assert docs[0].text == "ok" and str(docs[1].text) == "not a JSON object (nested too deeply)"
