"""Numpy forward passes of RoBERTa, XLM-RoBERTa, ELECTRA and DistilBERT, collecting every attention map.

They reuse BERT's blocks (:func:`attnviz.checkpoints.forward.bert_blocks`) and return the same
``(attentions (L, nh, T, T), hidden (T, C))``; what differs is the embeddings and DistilBERT's names.
"""

from __future__ import annotations

import math

import numpy as np

from attnviz.checkpoints.model_config import ModelConfig
from attnviz.checkpoints.forward import _Cast, bert_blocks
from attnviz.checkpoints.layers import activation, layer_norm, linear, self_attention


def position_ids(c: ModelConfig, ids: np.ndarray) -> np.ndarray:
    """(T,) rows of the position table: 0..T-1, or RoBERTa's count of non-padding tokens after the pad index."""
    if c.padding_idx < 0:
        return np.arange(ids.shape[0])
    real = ids != c.padding_idx  # (T,)
    return np.cumsum(real) * real + c.padding_idx  # (T,) pad + 1 + i as fairseq made them; padding gets row pad


def forward_encoder(c: ModelConfig, weights, ids: np.ndarray, *, dtype=np.float32, kernel: str = "auto", edit=None):
    """RoBERTa, XLM-RoBERTa, ELECTRA or DistilBERT on token ids (T,), no padding; ``edit``: an intervention,
    applied as in :func:`attnviz.checkpoints.forward.bert_blocks`."""
    W = _Cast(weights, dtype)
    if c.model_type == "distilbert":
        return _distilbert(c, W, ids, dtype, kernel, edit)
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
