"""DeBERTa-v3 repositories with only spm.model: token ids equal transformers 5.24's AutoTokenizer (DebertaV2Tokenizer)
on several texts, with the default tokenizer_config.json and with its options set; the model's maps on those ids
equal transformers' eager ones (tiny checkpoint by tools/make_deberta_spm_golden.py)."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from attnviz.checkpoints import CheckpointError
from attnviz.checkpoints.config import parse_model_config
from attnviz.checkpoints.encoders import forward_encoder
from attnviz.checkpoints.json_file import read_json
from attnviz.checkpoints.spm_text import CONTROL, USER_DEFINED, deberta_spm_tokenizer, spm_pieces
from attnviz.checkpoints.weights import load_weights
from attnviz.sources.errors import SourceError

from ckpt_helpers import DATA, golden

SPM = DATA / "tiny_deberta_v3_spm"
OPTIONS = {"do_lower_case": True, "split_by_punct": True, "add_prefix_space": False, "mask_token": "<mask>",
           "added_tokens_decoder": {"82": {"content": "<mask>", "special": True}}}


def test_the_folder_has_no_tokenizer_json():
    assert (SPM / "spm.model").is_file() and not (SPM / "tokenizer.json").exists()


def test_pieces_and_types_are_read_from_the_model():
    pieces = spm_pieces(SPM / "spm.model")
    assert [p for p, _, t in pieces if t == CONTROL] == ["[PAD]", "[CLS]", "[SEP]"]
    assert [p for p, _, t in pieces if t == USER_DEFINED] == ["<br>"]
    assert pieces[3][0] == "[UNK]" and len(pieces) == 82


@pytest.mark.parametrize("options", [False, True], ids=["defaults", "options"])
def test_ids_equal_autotokenizers(tmp_path, options):
    folder, g = SPM, golden(SPM / "golden.npz")
    if options:
        folder = tmp_path / "spm"
        shutil.copytree(SPM, folder)
        (folder / "tokenizer_config.json").write_text(json.dumps(OPTIONS))
        g = golden(SPM / "golden_options.npz")
    tok = deberta_spm_tokenizer(folder, "tiny")
    texts = [str(t) for t in g["texts"] if str(t)]
    assert len(texts) == 5
    for i, text in enumerate(texts):
        got = tok.encode(text, add_special_tokens=True)
        np.testing.assert_array_equal(got.ids, g[f"ids_{i}"], err_msg=repr(text))
        assert got.special[0] and got.special[-1]
    with pytest.raises(SourceError, match="text is empty"):
        tok.encode("", add_special_tokens=True)


def test_typed_specials_and_user_pieces_stay_whole():
    tok = deberta_spm_tokenizer(SPM, "tiny")
    got = tok.encode("[CLS] a [MASK] b<br>c", add_special_tokens=True)
    assert got.pieces.count("[MASK]") == 1 and "<br>" in got.pieces
    assert tok.vocab_size == 83  # [MASK] appended after the 82 pieces


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
def test_maps_on_those_ids_match_transformers(dtype):
    g = golden(SPM / "golden.npz")
    c = parse_model_config(read_json(SPM / "config.json", "config"))
    ids = deberta_spm_tokenizer(SPM, "tiny").encode(str(g["text"]), add_special_tokens=True).ids
    np.testing.assert_array_equal(ids, g["input_ids"])
    atts, hidden = forward_encoder(c, load_weights(SPM / "model.safetensors", c), ids, dtype=dtype)
    assert np.abs(atts - g["attentions"]).max() <= 1e-5
    np.testing.assert_allclose(hidden, g["last_hidden_state"], atol=2e-5, rtol=1e-5)


@pytest.mark.parametrize("change, expected", [
    ("garbage", "is not a SentencePiece model"),
    ("missing", "the DeBERTa tokenizer is missing"),
    ("flag", "'do_lower_case' must be true or false"),
    ("added", "added token '<x>' at id 90 does not follow the 82 pieces"),
])
def test_bad_files_are_one_line(tmp_path, change, expected):
    d = tmp_path / "spm"
    shutil.copytree(SPM, d)
    if change == "garbage":
        (d / "spm.model").write_bytes(b"\x0a\xff\xff not a model")
    elif change == "missing":
        (d / "spm.model").unlink()
    elif change == "flag":
        (d / "tokenizer_config.json").write_text(json.dumps({"do_lower_case": "no"}))
    else:
        (d / "tokenizer_config.json").write_text(json.dumps({"added_tokens_decoder": {"90": {"content": "<x>"}}}))
    with pytest.raises(CheckpointError, match=expected) as err:
        deberta_spm_tokenizer(d, "tiny")
    assert "\n" not in str(err.value)


def test_a_folder_with_only_spm_model_loads_and_runs():
    from attnviz.checkpoints import load_checkpoint, run_text

    g = golden(SPM / "golden.npz")
    ckpt = load_checkpoint(SPM)
    res = run_text(ckpt, str(g["text"]))
    np.testing.assert_array_equal(res.ids, g["input_ids"])
    assert np.abs(res.attentions - g["attentions"]).max() <= 1e-5
