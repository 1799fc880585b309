"""Hostile checkpoint folders and inputs: deeply nested or oversized config files, absurd layer norm
epsilons, and which tokens count as special in the per-head statistics."""

from __future__ import annotations

import json

import numpy as np
import pytest
from ckpt_helpers import DATA
from tokenizers import Tokenizer, models, pre_tokenizers, processors

from attnviz.checkpoints import CheckpointError, head_summaries, load_checkpoint, run_text
from attnviz.checkpoints.model_config import LN_EPS_RANGE
from attnviz.cli import main
from attnviz.sources.text import BpeTokenizer

DEEP = 200_000


def _nest(path, depth: int = DEEP) -> None:
    """Keep the file's keys and add one value nested ``depth`` lists deep."""
    cfg = json.loads(path.read_text())
    text = json.dumps(cfg)
    path.write_text(text[:-1] + ', "deep": ' + "[" * depth + "]" * depth + "}")


@pytest.mark.parametrize("kind, name", [("gpt2", "config.json"), ("vit", "config.json"),
                                        ("vit", "preprocessor_config.json")])
def test_deeply_nested_config_is_refused_before_parsing(tiny_copy, kind, name):
    d = tiny_copy(kind)
    _nest(d / name)
    with pytest.raises(CheckpointError, match=f"{name} nests deeper than 64 levels; not a config file"):
        load_checkpoint(d)


def test_deeply_nested_tokenizer_is_refused_too(tiny_copy):
    d = tiny_copy("gpt2")
    _nest(d / "tokenizer.json")
    with pytest.raises(CheckpointError, match="tokenizer"):
        load_checkpoint(d)


def test_cli_inspect_deeply_nested_config(tiny_copy, tmp_path, capsys):
    d = tiny_copy("gpt2")
    _nest(d / "config.json")
    assert main(["model", "inspect", str(d), "--text", "the river", "--npz", str(tmp_path / "a.npz")]) == 1
    out, err = capsys.readouterr()
    assert err.startswith("error: ") and "config.json nests deeper than 64 levels" in err
    assert "Traceback" not in err and "RecursionError" not in err and not (tmp_path / "a.npz").exists()


def test_shallow_nesting_still_loads(tiny_copy):
    d = tiny_copy("gpt2")
    _nest(d / "config.json", depth=60)  # plus the object itself: 61 levels
    assert load_checkpoint(d).config.n_layer == 2


def test_oversized_config_is_refused_unread(tiny_copy):
    d = tiny_copy("gpt2")
    cfg = json.loads((d / "config.json").read_text())
    cfg["padding"] = "x" * (17 * 2**20)
    (d / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(CheckpointError, match=r"is 17,\d{3},\d{3} bytes; a config file is at most 16,777,216"):
        load_checkpoint(d)


def _set_raw(path, key: str, raw: str) -> None:
    """Set ``key`` to the JSON text ``raw`` (so 1e400, Infinity and NaN reach the reader as written)."""
    cfg = json.loads(path.read_text())
    cfg[key] = "@@"
    path.write_text(json.dumps(cfg).replace('"@@"', raw))


@pytest.mark.parametrize("raw, match", [
    ("1e308", r"'layer_norm_epsilon' is 1e\+308; a layer norm epsilon must be between 1e-30 and 0.1"),
    ("0.5", r"'layer_norm_epsilon' is 0.5; a layer norm epsilon must be between"),
    ("1e-40", r"'layer_norm_epsilon' is 1e-40; a layer norm epsilon must be between"),
    ("0", r"'layer_norm_epsilon' is 0.0; a layer norm epsilon must be between"),
    ("-1e-5", r"'layer_norm_epsilon' is -1e-05; a layer norm epsilon must be between"),
    ("1e400", "'layer_norm_epsilon' must be finite"),
    ("Infinity", "'layer_norm_epsilon' must be finite"),
    ("NaN", "'layer_norm_epsilon' must be finite"),
    ("true", "'layer_norm_epsilon' must be a number"),
])
def test_absurd_layer_norm_epsilon_is_refused(tiny_copy, raw, match):
    d = tiny_copy("gpt2")
    _set_raw(d / "config.json", "layer_norm_epsilon", raw)
    with pytest.raises(CheckpointError, match=match):
        load_checkpoint(d)


@pytest.mark.parametrize("kind", ["vit", "deit"])
def test_absurd_vit_epsilon_names_its_field(tiny_copy, kind):
    d = tiny_copy(kind)
    _set_raw(d / "config.json", "layer_norm_eps", "1e308")
    with pytest.raises(CheckpointError, match=r"'layer_norm_eps' is 1e\+308; .* between 1e-30 and 0.1"):
        load_checkpoint(d)


@pytest.mark.parametrize("eps", LN_EPS_RANGE)
def test_epsilon_range_ends_load_and_run_finite(tiny_copy, eps):
    d = tiny_copy("gpt2")
    _set_raw(d / "config.json", "layer_norm_epsilon", repr(eps))
    ckpt = load_checkpoint(d)
    assert ckpt.config.ln_eps == eps
    assert np.isfinite(run_text(ckpt, "the river bank").attentions).all()


def test_cli_inspect_absurd_epsilon(tiny_copy, tmp_path, capsys):
    d = tiny_copy("gpt2")
    _set_raw(d / "config.json", "layer_norm_epsilon", "1e308")
    assert main(["model", "inspect", str(d), "--text", "the river", "--npz", str(tmp_path / "a.npz")]) == 1
    err = capsys.readouterr().err
    assert "layer_norm_epsilon" in err and "between 1e-30 and 0.1" in err and "Warning" not in err


# --- special tokens ---------------------------------------------------------------------------------

def _wordpiece() -> BpeTokenizer:
    """A tiny BERT-style tokenizer: WordPiece with [UNK], [CLS] ... [SEP] added by the post-processor."""
    vocab = {"[UNK]": 0, "[CLS]": 1, "[SEP]": 2, "[PAD]": 3, "[MASK]": 4, "river": 5, "bank": 6}
    tok = Tokenizer(models.WordPiece(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.add_special_tokens(["[UNK]", "[CLS]", "[SEP]", "[PAD]", "[MASK]"])
    tok.post_processor = processors.BertProcessing(("[SEP]", 2), ("[CLS]", 1))
    return BpeTokenizer(tok, name="wordpiece")


def test_unknown_token_is_not_special_markers_are():
    toks = _wordpiece().encode("river \u2603 bank [SEP] [UNK] [MASK] [PAD]", add_special_tokens=True)
    got = dict(zip(range(len(toks)), zip(toks.pieces, toks.special)))
    assert [p for p, _ in got.values()] == ["[CLS]", "river", "[UNK]", "bank", "[SEP]", "[UNK]", "[MASK]",
                                            "[PAD]", "[SEP]"]
    assert [s for _, s in got.values()] == [True, False, False, False, True, False, True, True, True]


def test_attention_to_special_tokens_leaves_out_unk(minilm):
    res = run_text(minilm, "the \u2603 river [SEP] bank")
    assert "[UNK]" in res.tokens
    unk = np.array([t == "[UNK]" for t in res.tokens])
    marker = np.array([t in ("[CLS]", "[SEP]") for t in res.tokens])
    np.testing.assert_array_equal(res.special, marker)
    s = head_summaries(res.attentions, special=res.special)
    a = res.attentions.astype(np.float64)  # (L, nh, T, T)
    np.testing.assert_allclose(s.to_special, a[..., marker].sum(axis=-1).mean(axis=-1), rtol=1e-12)
    with_unk = a[..., marker | unk].sum(axis=-1).mean(axis=-1)
    assert (with_unk > s.to_special).all()  # [UNK] takes some weight, and none of it is counted


@pytest.mark.parametrize("patch, match", [
    ({"model_type": ["llama"]}, "'model_type' must be a name"),
    ({"partial_rotary_factor": [0.5]}, "config.json: 'partial_rotary_factor' must be a number"),
    ({"partial_rotary_factor": "half"}, "config.json: 'partial_rotary_factor' must be a number"),
    ({"rope_parameters": {"rope_type": "default", "rope_theta": 1e4, "partial_rotary_factor": [0.5]}},
     "rope_scaling: 'partial_rotary_factor' must be a number"),
    ({"partial_rotary_factor": 0.5}, "partial_rotary_factor 0.5 is not supported"),
])
def test_config_fields_of_the_wrong_type_name_the_field(tmp_path, capsys, patch, match):
    """A list or string where a name or a number belongs is one line naming the file and the field."""
    import json
    import shutil

    from attnviz.cli import main

    folder = tmp_path / "m"
    shutil.copytree(DATA / "tiny_llama", folder)
    cfg = json.loads((folder / "config.json").read_text())
    cfg.update(patch)
    (folder / "config.json").write_text(json.dumps(cfg))
    assert main(["model", "inspect", str(folder), "--text", "hi", "--npz", str(tmp_path / "o.npz")]) == 1
    err = capsys.readouterr().err
    assert match in err and "Traceback" not in err and err.count("\n") == 1
