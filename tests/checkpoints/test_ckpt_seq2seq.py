"""Encoder-decoders (MarianMT, BART, mBART, T5) against transformers: token ids as the family's tokenizer gives
them, every layer and head of the encoder self-attention, the decoder's causal self-attention and the
cross-attention as its eager attention, teacher-forced (tools/make_seq2seq_goldens.py writes the checkpoints)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from ckpt_helpers import golden

from attnviz.checkpoints import CheckpointError, Seq2SeqCheckpoint, load_checkpoint, run_seq2seq

DATA = Path(__file__).resolve().parents[1] / "data"
NAMES = ["tiny_marian", "tiny_marian_separate", "tiny_bart", "tiny_bart_bf16", "tiny_mbart", "tiny_mbart50", "tiny_t5",
         "tiny_t5_gated", "tiny_t5_mt5"]
MAPS = ("encoder_attentions", "decoder_attentions", "cross_attentions")


@pytest.fixture(scope="module")
def models():
    return {n: load_checkpoint(DATA / n) for n in NAMES}


@pytest.mark.parametrize("name", NAMES)
def test_ids_and_every_map_match_transformers(models, name):
    ck = models[name]
    assert isinstance(ck, Seq2SeqCheckpoint)
    g = golden(DATA / name / "golden.npz")
    res = run_seq2seq(ck, str(g["source"]), str(g["target"]))
    np.testing.assert_array_equal(res.encoder_ids, g["input_ids"])
    np.testing.assert_array_equal(res.target_ids, g["labels"])
    np.testing.assert_array_equal(res.decoder_ids, g["decoder_input_ids"])
    assert res.decoder_ids[0] == (g["labels"][-1] if name.startswith("tiny_mbart") else ck.spec.decoder_start_token_id)
    for key in MAPS:
        got = getattr(res, key)
        assert got.shape == g[key].shape and got.dtype == np.float32, key
        np.testing.assert_allclose(got, g[key], atol=1e-5, rtol=0, err_msg=key)
    np.testing.assert_allclose(res.encoder_hidden, g["encoder_hidden"], atol=1e-4, rtol=1e-4)
    np.testing.assert_allclose(res.decoder_hidden, g["decoder_hidden"], atol=1e-4, rtol=1e-4)
    L, nh, T, _ = res.decoder_attentions.shape
    assert (res.decoder_attentions[:, :, ~np.tril(np.ones((T, T), dtype=bool))] == 0).all()
    np.testing.assert_allclose(res.cross_attentions.sum(-1), 1.0, atol=1e-5)
    assert len(res.encoder_tokens) == len(res.encoder_ids) and len(res.decoder_tokens) == len(res.decoder_ids)


@pytest.mark.parametrize("name", NAMES)
def test_float64_pass_is_the_formula(models, name):
    """Against transformers' model in float64 (T5's norms too): the same arithmetic, so the maps agree to rounding."""
    g = golden(DATA / name / "golden.npz")
    res = run_seq2seq(models[name], str(g["source"]), str(g["target"]), dtype=np.float64)
    for key in MAPS:
        np.testing.assert_allclose(getattr(res, key), g[key + "_f64"], atol=1e-12, rtol=0, err_msg=key)


@pytest.mark.parametrize("name", NAMES)
def test_tokenizer_cases(models, name):
    """Several sentences, unknown characters, a typed </s> and an empty target, ids as transformers' tokenizer."""
    ck = models[name]
    for case in json.loads((DATA / name / "cases.json").read_text(encoding="utf-8")):
        res = run_seq2seq(ck, case["source"], case["target"])
        assert list(res.encoder_ids) == case["input_ids"], case["source"]
        assert list(res.target_ids) == case["labels"], case["target"]
        assert list(res.decoder_ids) == case["decoder_input_ids"], case["target"]


def test_marian_language_code_and_pieces(models):
    ck = models["tiny_marian"]
    res = run_seq2seq(ck, ">>fr<< I love you.", "je t' aime.")
    vocab = json.loads((DATA / "tiny_marian" / "vocab.json").read_text(encoding="utf-8"))
    assert res.encoder_ids[0] == vocab[">>fr<<"] and res.encoder_tokens[0] == ">>fr<<" and res.encoder_special[0]
    assert res.encoder_tokens[-1] == "</s>" and res.encoder_ids[-1] == vocab["</s>"]
    assert res.decoder_tokens[0] == "<pad>" and res.decoder_ids[0] == ck.spec.decoder_start_token_id
    assert "".join(res.encoder_tokens[1:-1]).strip() == "I love you."


def test_t5_buckets_match_the_table_edges():
    """Distances on a logarithmic bucket's edge (16, 32, 64 under T5's defaults) land in the bucket torch puts them."""
    from attnviz.checkpoints.seq2seq_t5 import relative_buckets

    b = relative_buckets(1, 200, True, 32, 128)[0]  # query 0: relative positions 0 .. 199
    assert list(b[:8]) == [0] + list(range(17, 24))
    assert b[16] == 16 + 10 and b[32] == 16 + 12 and b[64] == 16 + 14 and b[128] == b[199] == 31
    causal = relative_buckets(200, 1, False, 32, 128)[:, 0]  # key 0: relative positions 0 .. -199
    assert causal[15] == 15 and causal[16] == 16 and causal[199] == 31


@pytest.mark.parametrize("source, target, message", [
    ("", "b", "the source text is empty"),
    ("   ", "b", "the source text is empty"),
    ("a", "x " * 60, "the target text gives .* tokens, more than the .* its position table holds"),
    ("x " * 60, "a", "the source text gives .* tokens, more than the"),
])
def test_bad_inputs_are_one_clear_line(models, source, target, message):
    for name in ("tiny_marian", "tiny_bart", "tiny_mbart"):
        with pytest.raises(CheckpointError, match=message):
            run_seq2seq(models[name], source, target)


def test_t5_long_text_and_other_bad_inputs(models):
    ck = models["tiny_t5"]
    with pytest.raises(CheckpointError, match="more than the 4,096 one pass takes"):
        run_seq2seq(ck, "a " * 5000, "b")
    with pytest.raises(CheckpointError, match="the target text must be a string"):
        run_seq2seq(ck, "a", 3)
    with pytest.raises(CheckpointError, match="dtype must be float32 or float64"):
        run_seq2seq(ck, "a", "b", dtype=np.float16)
    with pytest.raises(CheckpointError, match="not an encoder-decoder checkpoint"):
        run_seq2seq(object(), "a", "b")


def test_folder_problems_are_refused(tmp_path):
    folder = tmp_path / "m"
    shutil.copytree(DATA / "tiny_marian", folder)
    (folder / "target.spm").unlink()
    with pytest.raises(CheckpointError, match="target.spm not found"):
        load_checkpoint(folder)
    shutil.copy(DATA / "tiny_marian" / "target.spm", folder / "target.spm")
    (folder / "source.spm").write_bytes(b"not a model")
    with pytest.raises(CheckpointError, match="is not a SentencePiece model"):
        load_checkpoint(folder)
    t5 = tmp_path / "t5"
    shutil.copytree(DATA / "tiny_t5", t5)
    cfg = json.loads((t5 / "config.json").read_text())
    cfg["num_layers"] = 3
    (t5 / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(CheckpointError, match="lacks T5 s2s tensors the config implies: encoder.block.2"):
        load_checkpoint(t5)
    cfg["num_layers"], cfg["feed_forward_proj"] = 2, "gated-tanh-x"
    (t5 / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(CheckpointError, match="feed_forward_proj 'gated-tanh-x' is not supported"):
        load_checkpoint(t5)
    bart = tmp_path / "mbart"
    shutil.copytree(DATA / "tiny_mbart", bart)
    cfg = json.loads((bart / "config.json").read_text())
    del cfg["decoder_start_token_id"]
    (bart / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(CheckpointError, match="no decoder_start_token_id"):
        load_checkpoint(bart)


@pytest.mark.parametrize("name", NAMES)
def test_next_token_logits_match_transformers(models, name):
    """The LM head on the decoder's last hidden states: tied or not, Marian's final_logits_bias, T5's scaling."""
    g = golden(DATA / name / "golden.npz")
    ck = models[name]
    res = run_seq2seq(ck, str(g["source"]), str(g["target"]))
    logits = ck.logits(res.decoder_hidden)
    assert logits.shape == g["logits"].shape
    np.testing.assert_allclose(logits, g["logits"], atol=1e-4, rtol=1e-4)

    def softmax(a):
        e = np.exp(a - a.max(-1, keepdims=True))
        return e / e.sum(-1, keepdims=True)

    np.testing.assert_allclose(softmax(logits), softmax(g["logits"]), atol=1e-5, rtol=0)
    with pytest.raises(CheckpointError, match="hidden must be"):
        ck.logits(res.decoder_hidden[:, :3])


@pytest.mark.parametrize("name", NAMES)
def test_greedy_translation_matches_transformers_generate(models, name):
    """generate(do_sample=False, num_beams=1) under the folder's generation_config.json: forced EOS at the
    length limit (the BART-likes), end of sequence before it (tiny_t5_gated's second source)."""
    from attnviz.checkpoints.seq2seq_generate import generate_seq2seq

    g = golden(DATA / name / "golden_generate.npz")
    ck = models[name]
    for i in range(3):
        want = g[f"sequences_{i}"]
        out = generate_seq2seq(ck, str(g[f"source_{i}"]), max_new_tokens=int(g["max_new_tokens"]))
        np.testing.assert_array_equal(out.generated, want[1:], err_msg=f"source {i}")
        att = out.attention
        np.testing.assert_array_equal(att.decoder_ids, want[:-1])
        np.testing.assert_array_equal(att.target_ids, want[1:])
        assert att.cross_attentions.shape[2:] == (len(want) - 1, len(att.encoder_ids))
        assert out.finished == (want[-1] == ck.spec.eos_token_id)


def test_generation_inputs_and_cancel(models):
    from attnviz.checkpoints.seq2seq_generate import generate_seq2seq

    ck = models["tiny_t5"]
    with pytest.raises(CheckpointError, match="max_new_tokens must be a whole number from 1 to 512"):
        generate_seq2seq(ck, "a", max_new_tokens=0)
    with pytest.raises(CheckpointError, match="the source text is empty"):
        generate_seq2seq(ck, " ", max_new_tokens=3)
    steps = []
    out = generate_seq2seq(ck, "the cat", max_new_tokens=8, cancel=lambda: steps.append(1) or len(steps) > 3)
    assert len(out.generated) == 3 and not out.finished


@pytest.mark.parametrize("name", NAMES)
def test_greedy_rules_of_generation_config(tmp_path, name):
    """no_repeat_ngram_size, repetition_penalty, min_new_tokens and a banned token in generation_config.json
    change the translation as they change transformers'."""
    from attnviz.checkpoints.seq2seq_generate import generate_seq2seq

    g = golden(DATA / name / "golden_generate.npz")
    folder = tmp_path / name
    shutil.copytree(DATA / name, folder)
    cfg = json.loads((folder / "generation_config.json").read_text())
    (folder / "generation_config.json").write_text(json.dumps(cfg | json.loads(str(g["rules"]))))
    out = generate_seq2seq(load_checkpoint(folder), str(g["source_0"]), max_new_tokens=int(g["max_new_tokens"]))
    np.testing.assert_array_equal(out.generated, g["sequences_rules"][1:])


def test_t5_position_bias_is_the_term_added_to_the_scores(models):
    """softmax(q k^T + bias) of layer 0 rebuilt from the returned bias reproduces the map (q, k recomputed here)."""
    from attnviz.checkpoints.decoder import rms_norm

    ck = models["tiny_t5"]
    res = run_seq2seq(ck, "the cat sat on the mat.", "le chat")
    assert run_seq2seq(models["tiny_bart"], "a", "b").position_bias is None
    enc, dec = res.position_bias["encoder"], res.position_bias["decoder"]
    assert enc.shape == (4, len(res.encoder_ids), len(res.encoder_ids)) and dec.shape[1:] == (len(res.decoder_ids),) * 2
    W = ck.weights
    p = "s2s/encoder.block.0.layer.0."
    x = np.asarray(W["s2s/shared.weight"])[res.encoder_ids]
    h = rms_norm(x, np.asarray(W[p + "layer_norm.weight"]), ck.spec.ln_eps)
    q = (h @ np.asarray(W[p + "SelfAttention.q.weight"]).T).reshape(len(x), 4, 8).transpose(1, 0, 2)
    k = (h @ np.asarray(W[p + "SelfAttention.k.weight"]).T).reshape(len(x), 4, 8).transpose(1, 0, 2)
    s = q @ k.transpose(0, 2, 1) + enc
    w = np.exp(s - s.max(-1, keepdims=True))
    np.testing.assert_allclose(w / w.sum(-1, keepdims=True), res.encoder_attentions[0], atol=1e-5)
