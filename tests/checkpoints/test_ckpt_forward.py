"""The forward passes against an independent, loop-by-loop float64 re-implementation written here, on
tiny random checkpoints the tests write themselves (BERT with a WordPiece tokenizer; GPT-2 with the
scale-by-layer option), the BERT padding mask, and every attention kernel of the engine."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from ckpt_helpers import DATA, TINY, golden
from safetensors import safe_open
from safetensors.numpy import save_file
from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors

import attnviz.engine.api as engine_api
from attnviz.checkpoints import load_checkpoint, run_image, run_text
from attnviz.checkpoints.forward import forward_bert

WORDS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "the", "river", "bank", "boat", "sat", "by", "she", "##s", "."]
D, NH, FF, L, P = 12, 3, 20, 2, 16  # tiny BERT written by the tests
NH_GPT2 = 2  # heads of the committed tiny GPT-2


def _ln(x, w, b, eps):
    out = np.empty_like(x)
    for t in range(x.shape[0]):
        mu = sum(x[t]) / len(x[t])
        var = sum((x[t] - mu) ** 2) / len(x[t])
        out[t] = (x[t] - mu) / math.sqrt(var + eps) * w + b
    return out


def _softmax_rows(s, allowed):
    w = np.zeros_like(s)
    for i in range(s.shape[0]):
        keys = [j for j in range(s.shape[1]) if allowed[i, j]]
        m = max(s[i, j] for j in keys)
        e = {j: math.exp(s[i, j] - m) for j in keys}
        z = sum(e.values())
        for j in keys:
            w[i, j] = e[j] / z
    return w


def _mha(q, k, v, allowed, scale, nh):
    """Per-head attention of (T, C) projections, one head at a time."""
    T, hs = q.shape[0], q.shape[1] // nh
    out, att = np.zeros_like(q), np.zeros((nh, T, T))
    for h in range(nh):
        sl = slice(h * hs, (h + 1) * hs)
        att[h] = _softmax_rows(q[:, sl] @ k[:, sl].T * scale, allowed)
        out[:, sl] = att[h] @ v[:, sl]
    return out, att


ACTS = {
    "gelu": np.vectorize(lambda x: 0.5 * x * (1 + math.erf(x / math.sqrt(2)))),
    "relu": np.vectorize(lambda x: max(x, 0.0)),
    "gelu_new": np.vectorize(lambda x: 0.5 * x * (1 + math.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))),
}


def independent_bert(W, ids, act, eps, key_mask=None):
    T = len(ids)
    allowed = np.ones((T, T), bool) if key_mask is None else np.tile(key_mask, (T, 1))
    x = W["emb.word"][ids] + W["emb.type"][0] + W["emb.pos"][:T]
    x = _ln(x, W["emb.ln.w"], W["emb.ln.b"], eps)
    atts = []
    for i in range(L):
        g = lambda n: W[f"{i}.{n}"]  # noqa: E731
        ctx, att = _mha(x @ g("q.w").T + g("q.b"), x @ g("k.w").T + g("k.b"), x @ g("v.w").T + g("v.b"), allowed, 1 / math.sqrt(D // NH), NH)
        atts.append(att)
        x = _ln(ctx @ g("o.w").T + g("o.b") + x, g("ln1.w"), g("ln1.b"), eps)
        h = ACTS[act](x @ g("i.w").T + g("i.b"))
        x = _ln(h @ g("f.w").T + g("f.b") + x, g("ln2.w"), g("ln2.b"), eps)
    return np.array(atts), x


def _write_tiny_bert(folder, act: str, seed: int = 0):
    """A random BertForMaskedLM-style checkpoint: 'bert.' prefix, old LayerNorm gamma/beta names."""
    rng = np.random.default_rng(seed)
    V = len(WORDS)
    W = {"emb.word": rng.normal(0, 0.5, (V, D)), "emb.type": rng.normal(0, 0.5, (2, D)), "emb.pos": rng.normal(0, 0.5, (P, D)),
         "emb.ln.w": 1 + 0.3 * rng.normal(size=D), "emb.ln.b": 0.2 * rng.normal(size=D)}
    names = {"emb.word": "embeddings.word_embeddings.weight", "emb.type": "embeddings.token_type_embeddings.weight",
             "emb.pos": "embeddings.position_embeddings.weight", "emb.ln.w": "embeddings.LayerNorm.gamma",
             "emb.ln.b": "embeddings.LayerNorm.beta"}
    for i in range(L):
        p = f"encoder.layer.{i}."
        for short, name, shape in [("q", "attention.self.query", (D, D)), ("k", "attention.self.key", (D, D)),
                                   ("v", "attention.self.value", (D, D)), ("o", "attention.output.dense", (D, D)),
                                   ("i", "intermediate.dense", (FF, D)), ("f", "output.dense", (D, FF))]:
            W[f"{i}.{short}.w"] = rng.normal(0, 0.5, shape)
            W[f"{i}.{short}.b"] = rng.normal(0, 0.2, shape[0])
            names[f"{i}.{short}.w"], names[f"{i}.{short}.b"] = p + name + ".weight", p + name + ".bias"
        for short, name in [("ln1", "attention.output.LayerNorm"), ("ln2", "output.LayerNorm")]:
            W[f"{i}.{short}.w"] = 1 + 0.3 * rng.normal(size=D)
            W[f"{i}.{short}.b"] = 0.2 * rng.normal(size=D)
            names[f"{i}.{short}.w"], names[f"{i}.{short}.b"] = p + name + ".weight", p + name + ".bias"
    tensors = {"bert." + names[k]: v.astype(np.float32) for k, v in W.items()}
    tensors["cls.predictions.bias"] = np.zeros(V, np.float32)  # a task head the forward pass ignores
    save_file(tensors, str(folder / "model.safetensors"))
    cfg = {"model_type": "bert", "architectures": ["BertForMaskedLM"], "hidden_size": D, "num_hidden_layers": L,
           "num_attention_heads": NH, "intermediate_size": FF, "hidden_act": act, "layer_norm_eps": 1e-6,
           "max_position_embeddings": P, "type_vocab_size": 2, "vocab_size": V}
    (folder / "config.json").write_text(json.dumps(cfg))
    tok = Tokenizer(models.WordPiece({w: i for i, w in enumerate(WORDS)}, unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.post_processor = processors.TemplateProcessing(single="[CLS] $A [SEP]", special_tokens=[("[CLS]", 2), ("[SEP]", 3)])
    tok.save(str(folder / "tokenizer.json"))
    return {k: v.astype(np.float32).astype(np.float64) for k, v in W.items()}


@pytest.mark.parametrize("act", ["gelu", "relu", "gelu_new"])
def test_bert_matches_independent_float64(tmp_path, act):
    W = _write_tiny_bert(tmp_path, act)
    ck = load_checkpoint(tmp_path)
    res = run_text(ck, "She sat by the river banks.", dtype=np.float64)
    assert res.tokens == ["[CLS]", "she", "sat", "by", "the", "river", "bank", "##s", ".", "[SEP]"]
    want_att, want_hidden = independent_bert(W, res.ids, act, 1e-6)
    np.testing.assert_allclose(res.attentions, want_att, atol=1e-12, rtol=0)
    np.testing.assert_allclose(res.hidden, want_hidden, atol=1e-10, rtol=0)
    res32 = run_text(ck, "She sat by the river banks.")
    assert res32.attentions.dtype == np.float32
    np.testing.assert_allclose(res32.attentions, want_att, atol=1e-5, rtol=0)


def test_bert_padding_mask_hides_padded_keys(tmp_path):
    W = _write_tiny_bert(tmp_path, "gelu")
    ck = load_checkpoint(tmp_path)
    ids = np.array([2, 10, 8, 9, 4, 5, 6, 3], dtype=np.int64)
    padded = np.concatenate([ids, np.zeros(3, np.int64)])  # three [PAD] tokens
    key_mask = np.arange(len(padded)) < len(ids)
    att, hidden = forward_bert(ck.config, ck.weights, padded, key_mask=key_mask, dtype=np.float64)
    assert np.all(att[..., ~key_mask] == 0)  # no query attends to padding
    att0, hidden0 = forward_bert(ck.config, ck.weights, ids, dtype=np.float64)
    np.testing.assert_allclose(att[..., : len(ids), : len(ids)], att0, atol=1e-12)
    np.testing.assert_allclose(hidden[: len(ids)], hidden0, atol=1e-10)
    want, _ = independent_bert(W, padded, "gelu", 1e-6, key_mask=key_mask)
    np.testing.assert_allclose(att, want, atol=1e-12)


def independent_gpt2(W, ids, by_layer):
    T, d = len(ids), W["wte.weight"].shape[1]
    allowed = np.tril(np.ones((T, T), bool))
    x = W["wte.weight"][ids] + W["wpe.weight"][:T]
    atts = []
    n_layer = sum(1 for k in W if k.endswith("ln_1.weight"))
    for i in range(n_layer):
        g = lambda n: W[f"h.{i}.{n}"]  # noqa: E731
        h = _ln(x, g("ln_1.weight"), g("ln_1.bias"), 1e-5)
        qkv = h @ g("attn.c_attn.weight") + g("attn.c_attn.bias")
        scale = 1 / math.sqrt(d // NH_GPT2) / ((i + 1) if by_layer else 1)
        ctx, att = _mha(qkv[:, :d], qkv[:, d:2 * d], qkv[:, 2 * d:], allowed, scale, NH_GPT2)
        atts.append(att)
        x = x + ctx @ g("attn.c_proj.weight") + g("attn.c_proj.bias")
        h = _ln(x, g("ln_2.weight"), g("ln_2.bias"), 1e-5)
        x = x + ACTS["gelu_new"](h @ g("mlp.c_fc.weight") + g("mlp.c_fc.bias")) @ g("mlp.c_proj.weight") + g("mlp.c_proj.bias")
    return np.array(atts), _ln(x, W["ln_f.weight"], W["ln_f.bias"], 1e-5)


@pytest.mark.parametrize("by_layer", [False, True])
def test_gpt2_matches_independent_float64(tiny_copy, by_layer):
    d = tiny_copy("gpt2")
    cfg = json.loads((d / "config.json").read_text())
    cfg["scale_attn_by_inverse_layer_idx"] = by_layer
    (d / "config.json").write_text(json.dumps(cfg))
    with safe_open(str(d / "model.safetensors"), framework="numpy") as f:
        W = {k: f.get_tensor(k).astype(np.float64) for k in f.keys()}
    res = run_text(load_checkpoint(d), "the bank by the river", dtype=np.float64)
    want_att, want_hidden = independent_gpt2(W, res.ids, by_layer)
    np.testing.assert_allclose(res.attentions, want_att, atol=1e-12, rtol=0)
    np.testing.assert_allclose(res.hidden, want_hidden, atol=1e-10, rtol=0)


@pytest.mark.parametrize("kernel", engine_api.KERNELS)
def test_every_engine_kernel_matches_the_golden_values(tiny, kernel):
    g = golden(TINY["gpt2"] / "golden.npz")
    res = run_text(tiny["gpt2"], str(g["text"]), kernel=kernel)
    np.testing.assert_allclose(res.attentions, g["attentions"], atol=1e-5, rtol=0)
    gv = golden(TINY["vit"] / "golden.npz")
    np.testing.assert_allclose(run_image(tiny["vit"], gv["image"], kernel=kernel).attentions, gv["attentions"], atol=1e-5, rtol=0)


@pytest.mark.slow
@pytest.mark.parametrize("kernel", [k for k in engine_api.KERNELS if k != "reference"])
def test_minilm_with_other_kernels(minilm, kernel):
    g = golden(DATA / "minilm_golden.npz")
    res = run_text(minilm, str(g["text"]), kernel=kernel)
    np.testing.assert_allclose(res.attentions, g["attentions"], atol=1e-5, rtol=0)
