"""The numpy forward pass of the BART-like encoder-decoders (MarianMT, BART, mBART), every layer and head
of the encoder's self-attention, the decoder's causal self-attention and its cross-attention over the
encoder's tokens.

Block by block as transformers' eager implementation: token rows (times sqrt(d_model) when
``scale_embedding``) plus positions (Marian: sinusoids, sines in the first half of each row and
cosines in the second; BART / mBART: a learned table read from row 2), BART's and mBART's
``layernorm_embedding``, then post-LN blocks (Marian, BART: ``LN(x + sublayer(x))``) or pre-LN blocks with
a final ``layer_norm`` per stack (mBART: ``x + sublayer(LN(x))``). Attention scores are scaled by
1 / sqrt(head_dim); masks: the encoder sees every source token, the decoder the earlier target
tokens, the cross-attention every source token. T5 is in :mod:`.seq2seq_t5`.
"""

from __future__ import annotations

import math

import numpy as np

from attnviz.checkpoints.decoder import _W, causal_mask
from attnviz.checkpoints.errors import CheckpointError
from attnviz.checkpoints.layers import activation, layer_norm, linear, merge_heads, pick_kernel, score_cells, split_heads
from attnviz.checkpoints.seq2seq_config import POSITION_OFFSET, Seq2SeqSpec
from attnviz.engine import attention


def multi_head(q, k, v, nh: int, mask, scale: float, kernel: str):
    """Attention of (Tq, nh*hs) queries over (Tk, nh*hs) keys and values -> (out (Tq, nh*hs), weights (nh, Tq, Tk))."""
    kernel = pick_kernel(kernel, cells=score_cells(q, nh, k.shape[0]))
    res = attention(split_heads(q, nh), split_heads(k, nh), split_heads(v, nh), mask, scale=scale, kernel=kernel,
                    return_weights=True)
    if res.weights is None:
        raise CheckpointError(f"attention kernel {kernel!r} did not return weights; choose a kernel that does")
    return merge_heads(res.out).astype(q.dtype, copy=False), res.weights.astype(q.dtype, copy=False)


def sinusoids(T: int, d: int, dtype) -> np.ndarray:
    """(T, d) Marian's position rows: angle pos / 10000^(2 (j // 2) / d), the sines of the even columns j
    first, then the cosines of the odd ones (computed in float64, as transformers builds its table)."""
    pos = np.arange(T, dtype=np.float64)[:, None]  # (T, 1)
    j = np.arange(d)
    angle = pos / np.power(10000.0, 2 * (j // 2) / d)[None, :]  # (T, d)
    return np.concatenate([np.sin(angle[:, 0::2]), np.cos(angle[:, 1::2])], axis=1).astype(np.float32).astype(dtype)


def embed(s: Seq2SeqSpec, W, stack: str, ids: np.ndarray, dtype) -> np.ndarray:
    """(T, d_model): token rows (scaled), positions and BART's embedding LayerNorm."""
    T = ids.shape[0]
    table = "shared.weight" if s.shared_embeddings else f"{stack}.embed_tokens.weight"
    x = W.rows(table, ids)  # (T, C)
    if s.scale_embedding:
        x = x * np.dtype(dtype).type(math.sqrt(s.d_model))
    if s.family == "marian":
        return x + sinusoids(T, s.d_model, dtype)  # (T, C)
    x = x + W.rows(f"{stack}.embed_positions.weight", np.arange(T) + POSITION_OFFSET)  # (T, C)
    return layer_norm(x, W[f"{stack}.layernorm_embedding.weight"], W[f"{stack}.layernorm_embedding.bias"], s.ln_eps)


def _attend(s: Seq2SeqSpec, W, p: str, x, memory, nh: int, mask, kernel: str, kv_cache: dict | None = None,
            edit=None, i: int = 0):
    """One attention sublayer ``p`` (self_attn / encoder_attn): queries from x (Tq, C), keys and values from
    memory (Tk, C) -> (projected output (Tq, C), weights (nh, Tq, Tk)). ``kv_cache`` keeps the keys and values
    of the memory per sublayer (the encoder's, the same at every generation step). ``edit`` (an
    :class:`attnviz.checkpoints.interventions.Edit`) changes layer ``i``'s mask and the heads' outputs before
    ``out_proj``."""
    q = linear(x, W.matrix(p + "q_proj.weight"), W[p + "q_proj.bias"])  # (Tq, C)
    if kv_cache is not None and p in kv_cache:
        k, v = kv_cache[p]
    else:
        k = linear(memory, W.matrix(p + "k_proj.weight"), W.get(p + "k_proj.bias"))  # (Tk, C); Whisper: no bias
        v = linear(memory, W.matrix(p + "v_proj.weight"), W[p + "v_proj.bias"])  # (Tk, C)
        if kv_cache is not None:
            kv_cache[p] = k, v
    if edit is not None:
        mask = edit.mask(i, mask)
    ctx, w = multi_head(q, k, v, nh, mask, 1.0 / math.sqrt(s.d_model // nh), kernel)
    if edit is not None:
        ctx = edit.merged(i, ctx, nh)  # (Tq, C) every head's output side by side, as out_proj reads it
    return linear(ctx, W.matrix(p + "out_proj.weight"), W[p + "out_proj.bias"]), w


def _sublayer(s: Seq2SeqSpec, W, norm: str, x, f):
    """Post-LN ``LN(x + f(x))`` or pre-LN ``x + f(LN(x))``; f returns (output, extra)."""
    w, b = W[norm + ".weight"], W[norm + ".bias"]
    if s.pre_norm:
        y, extra = f(layer_norm(x, w, b, s.ln_eps))
        return x + y, extra
    y, extra = f(x)
    return layer_norm(x + y, w, b, s.ln_eps), extra


def _mlp(s: Seq2SeqSpec, W, p: str):
    def f(h):
        h = activation(s.act, linear(h, W.matrix(p + "fc1.weight"), W[p + "fc1.bias"]))  # (T, ff)
        return linear(h, W.matrix(p + "fc2.weight"), W[p + "fc2.bias"]), None

    return f


def encode(s: Seq2SeqSpec, weights, ids: np.ndarray | None, *, dtype=np.float32, kernel: str = "auto",
           embedded: np.ndarray | None = None, edit=None):
    """Encoder on source ids (T,) -> (attentions (L_enc, nh_enc, T, T), hidden (T, C)), every source token
    visible to every other. ``embedded``: the (T, C) input rows made elsewhere (Whisper's audio frames), then
    ``ids`` is not read. ``edit``: an Edit of the self-attention (and the stream entering each layer)."""
    W = _W(weights, dtype)
    x = embed(s, W, "encoder", ids, dtype) if embedded is None else embedded.astype(dtype, copy=False)  # (T, C)
    T = x.shape[0]
    atts = np.empty((s.enc_layers, s.enc_heads, T, T), dtype=dtype)  # (L, nh, T, T)
    for i in range(s.enc_layers):
        p = f"encoder.layers.{i}."
        if edit is not None:
            x = edit.residual(i, x)
        x, atts[i] = _sublayer(s, W, p + "self_attn_layer_norm", x,
                               lambda h, p=p, i=i: _attend(s, W, p + "self_attn.", h, h, s.enc_heads, None, kernel,
                                                           edit=edit, i=i))
        x, _ = _sublayer(s, W, p + "final_layer_norm", x, _mlp(s, W, p))
    if s.pre_norm:
        x = layer_norm(x, W["encoder.layer_norm.weight"], W["encoder.layer_norm.bias"], s.ln_eps)
    return atts, x


def decode(s: Seq2SeqSpec, weights, ids: np.ndarray, memory: np.ndarray, *, dtype=np.float32, kernel: str = "auto",
           cross_cache: dict | None = None, embedded: np.ndarray | None = None, edit=None, cross_edit=None):
    """Decoder on target ids (T,) over the encoder's hidden states memory (S, C), teacher-forced ->
    (self-attentions (L_dec, nh, T, T) causal, cross-attentions (L_dec, nh, T, S), hidden (T, C)).
    ``cross_cache``: a dict kept across calls over the same memory (the cross-attention's keys and values);
    ``embedded``: the (T, C) input rows made elsewhere (Whisper's token rows plus its learned positions);
    ``edit`` / ``cross_edit``: Edits of the self-attention (and the stream entering each layer) / the cross-attention."""
    W = _W(weights, dtype)
    x = embed(s, W, "decoder", ids, dtype) if embedded is None else embedded.astype(dtype, copy=False)  # (T, C)
    T, S = ids.shape[0], memory.shape[0]
    causal = causal_mask(T)  # (T, T)
    memory = memory.astype(dtype, copy=False)
    self_atts = np.empty((s.dec_layers, s.dec_heads, T, T), dtype=dtype)  # (L, nh, T, T)
    cross = np.empty((s.dec_layers, s.dec_heads, T, S), dtype=dtype)  # (L, nh, T, S)
    for i in range(s.dec_layers):
        p = f"decoder.layers.{i}."
        if edit is not None:
            x = edit.residual(i, x)
        x, self_atts[i] = _sublayer(s, W, p + "self_attn_layer_norm", x,
                                    lambda h, p=p, i=i: _attend(s, W, p + "self_attn.", h, h, s.dec_heads, causal,
                                                                kernel, edit=edit, i=i))
        x, cross[i] = _sublayer(s, W, p + "encoder_attn_layer_norm", x,
                                lambda h, p=p, i=i: _attend(s, W, p + "encoder_attn.", h, memory, s.dec_heads, None,
                                                            kernel, cross_cache, edit=cross_edit, i=i))
        x, _ = _sublayer(s, W, p + "final_layer_norm", x, _mlp(s, W, p))
    if s.pre_norm:
        x = layer_norm(x, W["decoder.layer_norm.weight"], W["decoder.layer_norm.bias"], s.ln_eps)
    return self_atts, cross, x
