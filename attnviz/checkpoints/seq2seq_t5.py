"""The numpy forward pass of T5 (v1.0 and v1.1 layouts, mT5), every layer and head of the encoder's
self-attention, the decoder's causal self-attention and its cross-attention.

As transformers' eager implementation: token rows unscaled, pre-norm blocks with RMSNorm (no mean, no
bias, ``w * x / sqrt(mean(x^2) + eps)``), q/k/v/o without biases, scores NOT divided by sqrt(d_kv), and a
learned bias per head and relative-position bucket (:func:`relative_buckets`) added to the self-attention
scores: the first layer of each stack owns the table, every layer of the stack adds the same bias. The
cross-attention has no bias. MLP ``wo(act(wi x))``, or ``wo(act(wi_0 x) * wi_1 x)`` when gated.

The engine's kernels have no additive-bias input, so the bias enters through the dot product itself:
query rows get the bias row appended and keys one-hot columns (:func:`biased_attention`), which adds
B[h, i, j] to q_i . k_j exactly (every other appended product is 0).
"""

from __future__ import annotations

import math

import numpy as np

from attnviz.checkpoints.decoder import _W, causal_mask, rms_norm
from attnviz.checkpoints.errors import CheckpointError
from attnviz.checkpoints.layers import activation, linear, merge_heads, pick_kernel, split_heads
from attnviz.checkpoints.seq2seq import multi_head
from attnviz.checkpoints.seq2seq_config import Seq2SeqSpec
from attnviz.engine import attention


def relative_buckets(Tq: int, Tk: int, bidirectional: bool, buckets: int, max_distance: int) -> np.ndarray:
    """(Tq, Tk) int64 bucket of each relative position j - i, as T5 buckets them: half the buckets (half of those
    for each direction when bidirectional) exact for small distances, the rest logarithmic up to max_distance,
    everything farther in the last one. The logarithm is taken in float32 and truncated, as torch computes it,
    so distances on a bucket edge land where transformers puts them."""
    rel = np.arange(Tk, dtype=np.int64)[None, :] - np.arange(Tq, dtype=np.int64)[:, None]  # (Tq, Tk) j - i
    out = np.zeros((Tq, Tk), dtype=np.int64)
    n_b = buckets
    if bidirectional:
        n_b //= 2
        out += (rel > 0) * n_b
        n = np.abs(rel)
    else:
        n = -np.minimum(rel, 0)
    exact = n_b // 2
    small = n < exact
    with np.errstate(divide="ignore"):
        ratio = n.astype(np.float32) / np.float32(exact)  # (Tq, Tk)
        logs = np.log(ratio) / np.float32(math.log(max_distance / exact)) * np.float32(n_b - exact)
    large = exact + np.where(small, 0, logs).astype(np.int64)  # float32 -> int truncates toward 0, as torch's .long()
    return out + np.where(small, n, np.minimum(large, n_b - 1))


def position_bias(s: Seq2SeqSpec, table: np.ndarray, T: int, bidirectional: bool) -> np.ndarray:
    """(nh, T, T) bias of the self-attention scores from the (buckets, nh) table."""
    b = relative_buckets(T, T, bidirectional, s.buckets, s.max_distance)  # (T, T)
    return np.ascontiguousarray(table[b].transpose(2, 0, 1))  # (nh, T, T)


def biased_attention(q, k, v, nh: int, bias: np.ndarray, mask, kernel: str):
    """softmax(q k^T + bias) v per head, scale 1, through the engine: q (T, nh*hs) gains the (nh, T, Tk) bias
    rows and k (Tk, nh*hs) an identity, so each score is q_i . k_j + bias[h, i, j]
    -> (out (T, nh*hs), weights (nh, T, Tk))."""
    kernel = pick_kernel(kernel, cells=nh * q.shape[0] * k.shape[0])
    qh, kh, vh = split_heads(q, nh), split_heads(k, nh), split_heads(v, nh)  # (nh, T, hs), (nh, Tk, hs) x 2
    Tk = kh.shape[1]
    eye = np.broadcast_to(np.eye(Tk, dtype=q.dtype), (nh, Tk, Tk))
    qa = np.concatenate([qh, bias.astype(q.dtype, copy=False)], axis=2)  # (nh, T, hs + Tk)
    ka = np.concatenate([kh, eye], axis=2)  # (nh, Tk, hs + Tk)
    res = attention(qa, ka, vh, mask, scale=1.0, kernel=kernel, return_weights=True)
    if res.weights is None:
        raise CheckpointError(f"attention kernel {kernel!r} did not return weights; choose a kernel that does")
    return merge_heads(res.out).astype(q.dtype, copy=False), res.weights.astype(q.dtype, copy=False)


def _mlp(s: Seq2SeqSpec, W, p: str, h: np.ndarray) -> np.ndarray:
    f = p + "DenseReluDense."
    if s.gated:
        g = activation(s.act, linear(h, W.matrix(f + "wi_0.weight"), None)) * linear(h, W.matrix(f + "wi_1.weight"), None)
    else:
        g = activation(s.act, linear(h, W.matrix(f + "wi.weight"), None))  # (T, ff)
    return linear(g, W.matrix(f + "wo.weight"), None)  # (T, C)


def _qkv(W, p: str, x, memory):
    return (linear(x, W.matrix(p + "q.weight"), None), linear(memory, W.matrix(p + "k.weight"), None),
            linear(memory, W.matrix(p + "v.weight"), None))


def _edited(edit, i: int, mask, nh: int):
    """Layer ``i``'s mask with an Edit's knocked-out edges removed, and a function that edits the heads' merged
    outputs ctx (T, nh * d_kv) as the sublayer's ``o`` reads them (a PyTorch pre-hook on ``...SelfAttention.o``)."""
    if edit is None:
        return mask, (lambda out: out)
    return edit.mask(i, mask), (lambda out: edit.merged(i, out, nh))


def encode(s: Seq2SeqSpec, weights, ids: np.ndarray, *, dtype=np.float32, kernel: str = "auto", edit=None):
    """Encoder on source ids (T,) -> (attentions (L_enc, nh, T, T), hidden (T, C) after the final norm).
    ``edit``: an Edit of the self-attention (and the stream entering each block)."""
    W = _W(weights, dtype)
    x = W.rows("shared.weight", ids)  # (T, C)
    T = ids.shape[0]
    bias = position_bias(s, W["encoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight"], T, True)
    atts = np.empty((s.enc_layers, s.enc_heads, T, T), dtype=dtype)  # (L, nh, T, T)
    for i in range(s.enc_layers):
        p = f"encoder.block.{i}.layer."
        if edit is not None:
            x = edit.residual(i, x)
        h = rms_norm(x, W[p + "0.layer_norm.weight"], s.ln_eps)  # (T, C)
        q, k, v = _qkv(W, p + "0.SelfAttention.", h, h)
        mask, heads = _edited(edit, i, None, s.enc_heads)
        ctx, atts[i] = biased_attention(q, k, v, s.enc_heads, bias, mask, kernel)
        x = x + linear(heads(ctx), W.matrix(p + "0.SelfAttention.o.weight"), None)  # (T, C)
        x = x + _mlp(s, W, p + "1.", rms_norm(x, W[p + "1.layer_norm.weight"], s.ln_eps))
    return atts, rms_norm(x, W["encoder.final_layer_norm.weight"], s.ln_eps)


def decode(s: Seq2SeqSpec, weights, ids: np.ndarray, memory: np.ndarray, *, dtype=np.float32, kernel: str = "auto",
           cross_cache: dict | None = None, edit=None, cross_edit=None):
    """Decoder on target ids (T,) over the encoder's hidden states memory (S, C) -> (self-attentions
    (L_dec, nh, T, T) causal, cross-attentions (L_dec, nh, T, S), hidden (T, C) after the final norm).
    ``cross_cache``: a dict kept across calls over the same memory (the cross-attention's keys and values);
    ``edit`` / ``cross_edit``: Edits of the self-attention (and the stream entering each block) / the
    cross-attention."""
    W = _W(weights, dtype)
    x = W.rows("shared.weight", ids)  # (T, C)
    T, S = ids.shape[0], memory.shape[0]
    memory = memory.astype(dtype, copy=False)
    bias = position_bias(s, W["decoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight"], T, False)
    causal = causal_mask(T)  # (T, T)
    self_atts = np.empty((s.dec_layers, s.dec_heads, T, T), dtype=dtype)  # (L, nh, T, T)
    cross = np.empty((s.dec_layers, s.dec_heads, T, S), dtype=dtype)  # (L, nh, T, S)
    for i in range(s.dec_layers):
        p = f"decoder.block.{i}.layer."
        if edit is not None:
            x = edit.residual(i, x)
        h = rms_norm(x, W[p + "0.layer_norm.weight"], s.ln_eps)
        q, k, v = _qkv(W, p + "0.SelfAttention.", h, h)
        mask, heads = _edited(edit, i, causal, s.dec_heads)
        ctx, self_atts[i] = biased_attention(q, k, v, s.dec_heads, bias, mask, kernel)
        x = x + linear(heads(ctx), W.matrix(p + "0.SelfAttention.o.weight"), None)
        h = rms_norm(x, W[p + "1.layer_norm.weight"], s.ln_eps)
        c = p + "1.EncDecAttention."
        if cross_cache is not None and c in cross_cache:
            q, (k, v) = linear(h, W.matrix(c + "q.weight"), None), cross_cache[c]
        else:
            q, k, v = _qkv(W, c, h, memory)
            if cross_cache is not None:
                cross_cache[c] = k, v
        mask, heads = _edited(cross_edit, i, None, s.dec_heads)
        ctx, cross[i] = multi_head(q, k, v, s.dec_heads, mask, 1.0, kernel)
        x = x + linear(heads(ctx), W.matrix(p + "1.EncDecAttention.o.weight"), None)
        x = x + _mlp(s, W, p + "2.", rms_norm(x, W[p + "2.layer_norm.weight"], s.ln_eps))
    return self_atts, cross, rms_norm(x, W["decoder.final_layer_norm.weight"], s.ln_eps)
