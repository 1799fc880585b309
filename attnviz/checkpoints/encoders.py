"""Numpy forward passes of RoBERTa, XLM-RoBERTa, ELECTRA, DistilBERT, ALBERT and MPNet, collecting every
attention map.

They reuse BERT's blocks (:func:`attnviz.checkpoints.forward.bert_blocks`) where they can and return the
same ``(attentions (L, nh, T, T), hidden (T, C))``; what differs is the embeddings and DistilBERT's names.
ALBERT's embeddings are narrower than the layers and projected up (``embedding_hidden_mapping_in``), and its
layers share weights: ``num_hidden_groups`` sets of one layer each, layer i running group
``int(i / (L / groups))`` (one group for every layer in the published models). MPNet adds one learned
relative position bias (T5-style buckets, 32 of them, up to distance 128; the same (nh, T, T) bias in
every layer) to the scaled scores. A ``terms`` dict passed to :func:`forward_encoder` receives the
score terms of such a model separately: ``"content"`` (q k^T / sqrt(hs), (L, nh, T, T)) and
``"position bias"`` (the bias, broadcast to (L, nh, T, T)); their sum is what the softmax takes.

:func:`parse_text_family` and :func:`text_family_tensors` read ALBERT's and MPNet's config.json and list
their tensors (``families`` dispatches to them).
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from attnviz.checkpoints.errors import CheckpointError
from attnviz.checkpoints.forward import _Cast, bert_blocks, biased_attention
from attnviz.checkpoints.layers import activation, layer_norm, linear, self_attention
from attnviz.checkpoints.model_config import ModelConfig, act_field, eps_field, int_field

TEXT_FAMILY_TYPES = ("albert", "mpnet")  # parsed here, run by forward_encoder
MPNET_BUCKETS, MPNET_MAX_DISTANCE = 32, 128  # MPNetEncoder.compute_position_bias's fixed arguments
MPNET_PAD = 1  # MPNetEmbeddings.padding_idx: fixed at 1 whatever pad_token_id says


def position_ids(c: ModelConfig, ids: np.ndarray) -> np.ndarray:
    """(T,) rows of the position table: 0..T-1, or RoBERTa's count of non-padding tokens after the pad index."""
    if c.padding_idx < 0:
        return np.arange(ids.shape[0])
    real = ids != c.padding_idx  # (T,)
    return np.cumsum(real) * real + c.padding_idx  # (T,) pad + 1 + i as fairseq made them; padding gets row pad


def forward_encoder(c: ModelConfig, weights, ids: np.ndarray, *, dtype=np.float32, kernel: str = "auto", edit=None,
                    terms: dict | None = None):
    """RoBERTa, XLM-RoBERTa, ELECTRA, DistilBERT, ALBERT or MPNet on token ids (T,), no padding; ``edit``: an
    intervention, applied as in :func:`attnviz.checkpoints.forward.bert_blocks`;
    ``terms``: a dict that receives MPNet's score terms (module docstring), left empty by the others."""
    W = _Cast(weights, dtype)
    if c.model_type == "distilbert":
        return _distilbert(c, W, ids, dtype, kernel, edit)
    if c.model_type == "albert":
        return _albert(c, W, ids, dtype, kernel, edit)
    if c.model_type == "mpnet":
        return _mpnet(c, W, ids, dtype, kernel, edit, terms)
    T = ids.shape[0]
    x = W.rows("embeddings.word_embeddings.weight", ids)  # (T, E)
    if c.type_vocab_size:
        x = x + W.rows("embeddings.token_type_embeddings.weight", np.zeros(T, dtype=np.int64))  # (T, E)
    x = x + W.rows("embeddings.position_embeddings.weight", position_ids(c, ids))  # (T, E)
    x = layer_norm(x, W["embeddings.LayerNorm.weight"], W["embeddings.LayerNorm.bias"], c.ln_eps)  # (T, E)
    if W.get("embeddings_project.weight") is not None:  # ELECTRA: narrower embeddings projected up
        x = linear(x, W["embeddings_project.weight"], W["embeddings_project.bias"])  # (T, C)
    return bert_blocks(c, W, x, None, dtype, kernel, edit)


def _distilbert(c: ModelConfig, W: _Cast, ids: np.ndarray, dtype, kernel: str, edit=None):
    T = ids.shape[0]
    x = W.rows("embeddings.word_embeddings.weight", ids) + W.rows("embeddings.position_embeddings.weight", slice(0, T))
    x = layer_norm(x, W["embeddings.LayerNorm.weight"], W["embeddings.LayerNorm.bias"], c.ln_eps)  # (T, C)
    scale = 1.0 / math.sqrt(c.head_size)
    atts = np.empty((c.n_layer, c.n_head, T, T), dtype=dtype)  # (L, nh, T, T)
    for i in range(c.n_layer):
        if edit is not None:
            x = edit.residual(i, x)
        p = f"transformer.layer.{i}."
        q, k, v = (linear(x, W[p + f"attention.{n}.weight"], W[p + f"attention.{n}.bias"])
                   for n in ("q_lin", "k_lin", "v_lin"))  # 3 x (T, C)
        ctx, atts[i] = self_attention(q, k, v, c.n_head, None if edit is None else edit.mask(i, None), scale,
                                      kernel)  # (T, C), (nh, T, T)
        if edit is not None:
            ctx = edit.merged(i, ctx, c.n_head)
        a = linear(ctx, W[p + "attention.out_lin.weight"], W[p + "attention.out_lin.bias"])  # (T, C)
        x = layer_norm(a + x, W[p + "sa_layer_norm.weight"], W[p + "sa_layer_norm.bias"], c.ln_eps)
        h = activation(c.act, linear(x, W[p + "ffn.lin1.weight"], W[p + "ffn.lin1.bias"]))  # (T, ff)
        h = linear(h, W[p + "ffn.lin2.weight"], W[p + "ffn.lin2.bias"])  # (T, C)
        x = layer_norm(h + x, W[p + "output_layer_norm.weight"], W[p + "output_layer_norm.bias"], c.ln_eps)
    return atts, x


# ---- ALBERT ---------------------------------------------------------------------------------------------


def albert_group(c: ModelConfig, i: int) -> int:
    """The weight group layer i runs, as AlbertTransformer computes it (a float division, truncated)."""
    return int(i / (c.n_layer / c.n_groups))


def _albert(c: ModelConfig, W: _Cast, ids: np.ndarray, dtype, kernel: str, edit):
    T = ids.shape[0]
    x = W.rows("embeddings.word_embeddings.weight", ids)  # (T, E)
    if c.type_vocab_size:
        x = x + W.rows("embeddings.token_type_embeddings.weight", np.zeros(T, dtype=np.int64))  # (T, E)
    x = x + W.rows("embeddings.position_embeddings.weight", slice(0, T))  # (T, E)
    x = layer_norm(x, W["embeddings.LayerNorm.weight"], W["embeddings.LayerNorm.bias"], c.ln_eps)  # (T, E)
    x = linear(x, W["encoder.embedding_hidden_mapping_in.weight"], W["encoder.embedding_hidden_mapping_in.bias"])  # (T, C)
    scale = 1.0 / math.sqrt(c.head_size)
    atts = np.empty((c.n_layer, c.n_head, T, T), dtype=dtype)  # (L, nh, T, T)
    for i in range(c.n_layer):
        if edit is not None:
            x = edit.residual(i, x)
        p = f"encoder.albert_layer_groups.{albert_group(c, i)}.albert_layers.0."
        q, k, v = (linear(x, W[p + f"attention.{n}.weight"], W[p + f"attention.{n}.bias"])
                   for n in ("query", "key", "value"))  # 3 x (T, C)
        ctx, atts[i] = self_attention(q, k, v, c.n_head, None if edit is None else edit.mask(i, None), scale,
                                      kernel)  # (T, C), (nh, T, T)
        if edit is not None:
            ctx = edit.merged(i, ctx, c.n_head)
        a = linear(ctx, W[p + "attention.dense.weight"], W[p + "attention.dense.bias"])  # (T, C)
        x = layer_norm(x + a, W[p + "attention.LayerNorm.weight"], W[p + "attention.LayerNorm.bias"], c.ln_eps)
        h = activation(c.act, linear(x, W[p + "ffn.weight"], W[p + "ffn.bias"]))  # (T, ff)
        h = linear(h, W[p + "ffn_output.weight"], W[p + "ffn_output.bias"])  # (T, C)
        x = layer_norm(h + x, W[p + "full_layer_layer_norm.weight"], W[p + "full_layer_layer_norm.bias"], c.ln_eps)
    return atts, x


# ---- MPNet ----------------------------------------------------------------------------------------------


def mpnet_bias(c: ModelConfig, table: np.ndarray, T: int) -> np.ndarray:
    """(nh, T, T) relative position bias of MPNet's scores from the (buckets, nh) table."""
    from attnviz.checkpoints.seq2seq_t5 import relative_buckets  # T5's bucketing: the same rule, bidirectional

    b = relative_buckets(T, T, True, MPNET_BUCKETS, MPNET_MAX_DISTANCE)  # (T, T)
    return np.ascontiguousarray(table[b].transpose(2, 0, 1))  # (nh, T, T)


def _mpnet(c: ModelConfig, W: _Cast, ids: np.ndarray, dtype, kernel: str, edit, terms: dict | None):
    T = ids.shape[0]
    x = W.rows("embeddings.word_embeddings.weight", ids) + W.rows("embeddings.position_embeddings.weight",
                                                                   position_ids(c, ids))  # (T, C)
    x = layer_norm(x, W["embeddings.LayerNorm.weight"], W["embeddings.LayerNorm.bias"], c.ln_eps)  # (T, C)
    bias = mpnet_bias(c, W["encoder.relative_attention_bias.weight"], T)  # (nh, T, T)
    scale = 1.0 / math.sqrt(c.head_size)
    atts = np.empty((c.n_layer, c.n_head, T, T), dtype=dtype)  # (L, nh, T, T)
    content = np.empty_like(atts) if terms is not None else None  # (L, nh, T, T)
    for i in range(c.n_layer):
        if edit is not None:
            x = edit.residual(i, x)
        p = f"encoder.layer.{i}."
        q, k, v = (linear(x, W[p + f"attention.attn.{n}.weight"], W[p + f"attention.attn.{n}.bias"])
                   for n in ("q", "k", "v"))  # 3 x (T, C)
        ctx, atts[i] = biased_attention(q, k, v, c.n_head, bias, scale, kernel,
                                        mask=None if edit is None else edit.mask(i, None),
                                        content=None if content is None else content[i])  # (T, C), (nh, T, T)
        if edit is not None:
            ctx = edit.merged(i, ctx, c.n_head)
        a = linear(ctx, W[p + "attention.attn.o.weight"], W[p + "attention.attn.o.bias"])  # (T, C)
        x = layer_norm(a + x, W[p + "attention.LayerNorm.weight"], W[p + "attention.LayerNorm.bias"], c.ln_eps)
        h = activation(c.act, linear(x, W[p + "intermediate.dense.weight"], W[p + "intermediate.dense.bias"]))
        h = linear(h, W[p + "output.dense.weight"], W[p + "output.dense.bias"])  # (T, C)
        x = layer_norm(h + x, W[p + "output.LayerNorm.weight"], W[p + "output.LayerNorm.bias"], c.ln_eps)
    if terms is not None:
        terms["content"] = content
        terms["position bias"] = np.broadcast_to(bias[None], atts.shape)  # (L, nh, T, T) one bias for every layer
    return atts, x


# ---- config.json and tensor lists ----------------------------------------------------------------------


def parse_text_family(cfg: dict, model_type: str) -> ModelConfig:
    """The ModelConfig of an ALBERT or MPNet config.json (defaults: the transformers config class's)."""
    if model_type == "albert":
        if int_field(cfg, "inner_group_num", 1) != 1:
            raise CheckpointError(f"config.json: inner_group_num {cfg['inner_group_num']} is not supported (only 1 "
                                  "layer per ALBERT group, as in the published models)")
        pet = cfg.get("position_embedding_type", "absolute")
        if pet != "absolute":
            raise CheckpointError(f"config.json: position_embedding_type {pet!r} is not supported; only 'absolute' tables are")
        c = ModelConfig(
            kind="bert", model_type=model_type, d_model=int_field(cfg, "hidden_size", 4096),
            n_layer=int_field(cfg, "num_hidden_layers", 12), n_head=int_field(cfg, "num_attention_heads", 64),
            d_ff=int_field(cfg, "intermediate_size", 16384), act=act_field(cfg, "hidden_act", "gelu_new"),
            ln_eps=eps_field(cfg, "layer_norm_eps", 1e-12), vocab_size=int_field(cfg, "vocab_size", 30000),
            max_positions=int_field(cfg, "max_position_embeddings", 512),
            type_vocab_size=int_field(cfg, "type_vocab_size", 2, minimum=0),
            embedding_size=int_field(cfg, "embedding_size", 128), n_groups=int_field(cfg, "num_hidden_groups", 1))
        if c.n_groups > c.n_layer:
            raise CheckpointError(f"config.json: num_hidden_groups {c.n_groups} is more than the {c.n_layer} layers")
        return c
    if model_type == "mpnet":
        c = ModelConfig(
            kind="bert", model_type=model_type, d_model=int_field(cfg, "hidden_size", 768),
            n_layer=int_field(cfg, "num_hidden_layers", 12), n_head=int_field(cfg, "num_attention_heads", 12),
            d_ff=int_field(cfg, "intermediate_size", 3072), act=act_field(cfg, "hidden_act", "gelu"),
            ln_eps=eps_field(cfg, "layer_norm_eps", 1e-12), vocab_size=int_field(cfg, "vocab_size", 30527),
            max_positions=int_field(cfg, "max_position_embeddings", 514), padding_idx=MPNET_PAD, rel_bias="mpnet")
        buckets = int_field(cfg, "relative_attention_num_buckets", 32)
        if buckets < MPNET_BUCKETS:
            raise CheckpointError(f"config.json: relative_attention_num_buckets {buckets} is fewer than the "
                                  f"{MPNET_BUCKETS} buckets MPNet's position bias indexes")
        if c.max_positions <= MPNET_PAD + 1:
            raise CheckpointError(f"config.json: max_position_embeddings {c.max_positions} leaves no positions after "
                                  f"the padding row {MPNET_PAD}")
        return replace(c, rel_buckets=buckets)
    raise CheckpointError(f"config.json: model_type {model_type!r} is not one of {', '.join(TEXT_FAMILY_TYPES)}")


def _ln(name: str, d: int) -> dict:
    return {f"{name}.weight": (d,), f"{name}.bias": (d,)}


def _lin(name: str, n_out: int, n_in: int) -> dict:
    return {f"{name}.weight": (n_out, n_in), f"{name}.bias": (n_out,)}


def text_family_tensors(c: ModelConfig) -> dict[str, tuple[int, ...]]:
    """Canonical tensor name -> shape of every tensor ALBERT's or MPNet's forward pass reads."""
    d, ff = c.d_model, c.d_ff
    if c.model_type == "albert":
        e = c.embedding_size
        shapes = {"embeddings.word_embeddings.weight": (c.vocab_size, e),
                  "embeddings.position_embeddings.weight": (c.max_positions, e)}
        if c.type_vocab_size:
            shapes["embeddings.token_type_embeddings.weight"] = (c.type_vocab_size, e)
        shapes |= _ln("embeddings.LayerNorm", e) | _lin("encoder.embedding_hidden_mapping_in", d, e)
        for g in range(min(c.n_groups, c.n_layer)):  # (min: weights.implied_counts counts per layer)
            p = f"encoder.albert_layer_groups.{g}.albert_layers.0."
            for n in ("query", "key", "value", "dense"):
                shapes |= _lin(p + f"attention.{n}", d, d)
            shapes |= _ln(p + "attention.LayerNorm", d) | _lin(p + "ffn", ff, d) | _lin(p + "ffn_output", d, ff)
            shapes |= _ln(p + "full_layer_layer_norm", d)
        return shapes
    if c.model_type == "mpnet":
        shapes = {"embeddings.word_embeddings.weight": (c.vocab_size, d),
                  "embeddings.position_embeddings.weight": (c.max_positions, d)} | _ln("embeddings.LayerNorm", d)
        shapes["encoder.relative_attention_bias.weight"] = (c.rel_buckets, c.n_head)
        for i in range(c.n_layer):
            p = f"encoder.layer.{i}."
            for n in ("q", "k", "v", "o"):
                shapes |= _lin(p + f"attention.attn.{n}", d, d)
            shapes |= _ln(p + "attention.LayerNorm", d) | _lin(p + "intermediate.dense", ff, d)
            shapes |= _lin(p + "output.dense", d, ff) | _ln(p + "output.LayerNorm", d)
        return shapes
    raise CheckpointError(f"no tensor list for model_type {c.model_type!r}")
