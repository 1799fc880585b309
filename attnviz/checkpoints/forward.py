"""Numpy forward passes of BERT-family encoders, GPT-2 and ViT / DeiT, collecting every attention map.

Each returns ``(attentions (L, nh, T, T), hidden (T, C))``, rows = queries, as the Hugging Face base
model does. Precision: arithmetic in the dtype asked for (float32 by default: the stored precision
and what transformers computes in; float64 for a closer look); attention goes through
:func:`attnviz.engine.attention` (kernel "auto": flash, naive for soft-capped scores; see layers.pick_kernel).
"""

from __future__ import annotations

import math

import numpy as np

from attnviz.checkpoints.errors import CheckpointError
from attnviz.checkpoints.layers import (activation, conv1d, layer_norm, linear, merge_heads, pick_kernel, self_attention,
                                        split_heads)
from attnviz.checkpoints.model_config import CheckpointConfig
from attnviz.engine import attention


class _Cast:
    """Weights read in the forward dtype, converted one tensor at a time when used (no float64 copy
    of the whole checkpoint is ever held); embedding tables are indexed before converting."""

    def __init__(self, weights: dict[str, np.ndarray], dtype):
        self._w, self._dt = weights, dtype

    def __getitem__(self, name: str) -> np.ndarray:
        return self._w[name].astype(self._dt, copy=False)

    def get(self, name: str):
        return self[name] if name in self._w else None

    def matrix(self, name: str):
        """A weight matrix for :func:`linear`: the store's block-by-block bf16 matrix in a float32 pass."""
        if self._dt == np.float32 and hasattr(self._w, "matrix"):
            return self._w.matrix(name)
        return self[name]

    def rows(self, name: str, index) -> np.ndarray:
        """``weights[name][index]`` converted after indexing (a few rows of a large table)."""
        return self._w[name][index].astype(self._dt, copy=False)


def biased_attention(q, k, v, nh: int, bias: np.ndarray, scale: float, kernel: str, mask=None, content=None):
    """softmax(q k^T * scale + bias) v per head through the engine, whose kernels take no additive bias: each
    head's query rows (scaled) gain the bias rows and its keys an identity, so every score is
    scale q_i . k_j + bias[h, i, j] (the appended products are 0 but one).

    q, k, v (T, nh*hs), (Tk, nh*hs) x 2; bias (nh, T, Tk); ``content`` None or an (nh, T, Tk) array that
    receives the score term without the bias, q k^T * scale. -> (out (T, nh*hs), weights (nh, T, Tk))."""
    kernel = pick_kernel(kernel, cells=nh * q.shape[0] * k.shape[0])
    qh, kh, vh = split_heads(q, nh), split_heads(k, nh), split_heads(v, nh)  # (nh, T, hs), (nh, Tk, hs) x 2
    qh *= q.dtype.type(scale)
    if content is not None:
        np.matmul(qh, kh.transpose(0, 2, 1), out=content)  # (nh, T, Tk)
    Tk = kh.shape[1]
    eye = np.broadcast_to(np.eye(Tk, dtype=q.dtype), (nh, Tk, Tk))
    qa = np.concatenate([qh, bias.astype(q.dtype, copy=False)], axis=2)  # (nh, T, hs + Tk)
    ka = np.concatenate([kh, eye], axis=2)  # (nh, Tk, hs + Tk)
    res = attention(qa, ka, vh, mask, scale=1.0, kernel=kernel, return_weights=True)
    if res.weights is None:
        raise CheckpointError(f"attention kernel {kernel!r} did not return weights; choose a kernel that does")
    return merge_heads(res.out).astype(q.dtype, copy=False), res.weights.astype(q.dtype, copy=False)


def forward_bert(c: CheckpointConfig, weights, ids: np.ndarray, type_ids: np.ndarray | None = None,
                 key_mask: np.ndarray | None = None, *, dtype=np.float32, kernel: str = "auto", edit=None):
    """BERT-family encoder (post-LN blocks) on token ids (T,); ``key_mask`` (T,) bool, False for padding keys.
    ``edit``: an intervention (see :func:`bert_blocks`), None for the plain pass."""
    W = _Cast(weights, dtype)
    T = ids.shape[0]
    type_ids = np.zeros(T, dtype=np.int64) if type_ids is None else type_ids  # (T,)
    x = W.rows("embeddings.word_embeddings.weight", ids)  # (T, C)
    if c.type_vocab_size:
        x = x + W.rows("embeddings.token_type_embeddings.weight", type_ids)  # (T, C)
    x = x + W.rows("embeddings.position_embeddings.weight", slice(0, T))  # (T, C)
    x = layer_norm(x, W["embeddings.LayerNorm.weight"], W["embeddings.LayerNorm.bias"], c.ln_eps)
    return bert_blocks(c, W, x, key_mask, dtype, kernel, edit)


def bert_blocks(c: CheckpointConfig, W, x: np.ndarray, key_mask: np.ndarray | None, dtype, kernel: str, edit=None):
    """BERT's post-LN blocks on the embedded tokens x (T, C); W reads weights in ``dtype`` (see _Cast).

    ``edit`` (an :class:`attnviz.checkpoints.interventions.Edit`, None for the plain pass) may change, per
    layer, the stream entering it (``edit.residual(i, x)``), the mask (``edit.mask(i, m)``, m None or (T, T))
    and the heads' merged outputs before the output projection (``edit.merged(i, ctx, nh)``, (T, C))."""
    T = x.shape[0]
    mask = None if key_mask is None else np.broadcast_to(key_mask[None, :], (T, T))  # (T, T) query may see key
    scale = 1.0 / math.sqrt(c.head_size)
    atts = np.empty((c.n_layer, c.n_head, T, T), dtype=dtype)  # (L, nh, T, T)
    for i in range(c.n_layer):
        if edit is not None:
            x = edit.residual(i, x)
        p = f"encoder.layer.{i}."
        q, k, v = (linear(x, W[p + f"attention.self.{n}.weight"], W[p + f"attention.self.{n}.bias"])
                   for n in ("query", "key", "value"))  # 3 x (T, C)
        m = mask if edit is None else edit.mask(i, mask)
        ctx, atts[i] = self_attention(q, k, v, c.n_head, m, scale, kernel)  # (T, C), (nh, T, T)
        if edit is not None:
            ctx = edit.merged(i, ctx, c.n_head)
        a = linear(ctx, W[p + "attention.output.dense.weight"], W[p + "attention.output.dense.bias"])  # (T, C)
        x = layer_norm(a + x, W[p + "attention.output.LayerNorm.weight"], W[p + "attention.output.LayerNorm.bias"], c.ln_eps)
        h = activation(c.act, linear(x, W[p + "intermediate.dense.weight"], W[p + "intermediate.dense.bias"]))  # (T, ff)
        h = linear(h, W[p + "output.dense.weight"], W[p + "output.dense.bias"])  # (T, C)
        x = layer_norm(h + x, W[p + "output.LayerNorm.weight"], W[p + "output.LayerNorm.bias"], c.ln_eps)
    return atts, x


def forward_gpt2(c: CheckpointConfig, weights, ids: np.ndarray, *, dtype=np.float32, kernel: str = "auto", edit=None,
                 stream: list | None = None):
    """GPT-2 (pre-LN blocks, Conv1D weights stored (in, out)) on token ids (T,), causal; hidden is after ``ln_f``.

    ``edit`` (an :class:`attnviz.checkpoints.interventions.Edit`) may change the stream entering each layer,
    its causal mask and the heads' merged outputs before ``attn.c_proj``; ``stream`` receives the residual
    stream entering each layer and leaving the last one, (T, C) each."""
    W = _Cast(weights, dtype)
    T = ids.shape[0]
    C = c.d_model
    x = W.rows("wte.weight", ids) + W.rows("wpe.weight", slice(0, T))  # (T, C)
    causal = np.tril(np.ones((T, T), dtype=bool))  # (T, T) query i sees keys j <= i
    atts = np.empty((c.n_layer, c.n_head, T, T), dtype=dtype)  # (L, nh, T, T)
    for i in range(c.n_layer):
        if edit is not None:
            x = edit.residual(i, x)
        if stream is not None:
            stream.append(x)
        p = f"h.{i}."
        scale = 1.0 / math.sqrt(c.head_size) / ((i + 1) if c.scale_by_layer else 1)
        h = layer_norm(x, W[p + "ln_1.weight"], W[p + "ln_1.bias"], c.ln_eps)  # (T, C)
        qkv = conv1d(h, W[p + "attn.c_attn.weight"], W[p + "attn.c_attn.bias"])  # (T, 3C)
        q, k, v = qkv[:, :C], qkv[:, C:2 * C], qkv[:, 2 * C:]  # 3 x (T, C)
        mask = causal if edit is None else edit.mask(i, causal)
        ctx, atts[i] = self_attention(q, k, v, c.n_head, mask, scale, kernel)  # (T, C), (nh, T, T)
        if edit is not None:
            ctx = edit.merged(i, ctx, c.n_head)  # (T, C) the heads' outputs side by side, as c_proj reads them
        x = x + conv1d(ctx, W[p + "attn.c_proj.weight"], W[p + "attn.c_proj.bias"])  # (T, C)
        h = layer_norm(x, W[p + "ln_2.weight"], W[p + "ln_2.bias"], c.ln_eps)  # (T, C)
        h = activation(c.act, conv1d(h, W[p + "mlp.c_fc.weight"], W[p + "mlp.c_fc.bias"]))  # (T, ff)
        x = x + conv1d(h, W[p + "mlp.c_proj.weight"], W[p + "mlp.c_proj.bias"])  # (T, C)
    if stream is not None:
        stream.append(x)
    return atts, layer_norm(x, W["ln_f.weight"], W["ln_f.bias"], c.ln_eps)


def patchify(pixels: np.ndarray, patch_size: tuple[int, int]) -> np.ndarray:
    """(C, H, W) -> (gh * gw, C * P_h * P_w): row-major over the grid, each patch ordered (C, P_h, P_w)
    like the weight of the patch-embedding convolution, so the convolution becomes one matrix product."""
    C, H, W_ = pixels.shape
    ph, pw = patch_size
    gh, gw = H // ph, W_ // pw
    x = pixels.reshape(C, gh, ph, gw, pw).transpose(1, 3, 0, 2, 4)  # (gh, gw, C, ph, pw)
    return x.reshape(gh * gw, C * ph * pw)  # (N, C*ph*pw)


def forward_vit(c: CheckpointConfig, weights, pixels: np.ndarray, *, dtype=np.float32, kernel: str = "auto", edit=None):
    """ViT / DeiT on preprocessed pixels (C, H, W) of the model's image size; hidden is after the final LayerNorm.
    ``edit``: an intervention, applied as in :func:`bert_blocks`."""
    W = _Cast(weights, dtype)
    d = c.d_model
    proj = W["embeddings.patch_embeddings.projection.weight"].reshape(d, -1)  # (C_model, C*ph*pw)
    patches = patchify(pixels.astype(dtype, copy=False), c.patch_size)  # (N, C*ph*pw)
    emb = linear(patches, proj, W["embeddings.patch_embeddings.projection.bias"])  # (N, C_model)
    extra = [W["embeddings.cls_token"][0]]  # [(1, C_model)]
    if c.n_extra == 2:
        extra.append(W["embeddings.distillation_token"][0])
    x = np.concatenate(extra + [emb], axis=0) + W["embeddings.position_embeddings"][0]  # (T, C_model)
    T = x.shape[0]
    scale = 1.0 / math.sqrt(c.head_size)
    atts = np.empty((c.n_layer, c.n_head, T, T), dtype=dtype)  # (L, nh, T, T)
    for i in range(c.n_layer):
        if edit is not None:
            x = edit.residual(i, x)
        p = f"encoder.layer.{i}."
        h = layer_norm(x, W[p + "layernorm_before.weight"], W[p + "layernorm_before.bias"], c.ln_eps)  # (T, C)
        q, k, v = (linear(h, W[p + f"attention.attention.{n}.weight"], W.get(p + f"attention.attention.{n}.bias"))
                   for n in ("query", "key", "value"))  # 3 x (T, C)
        ctx, atts[i] = self_attention(q, k, v, c.n_head, None if edit is None else edit.mask(i, None), scale,
                                      kernel)  # (T, C), (nh, T, T)
        if edit is not None:
            ctx = edit.merged(i, ctx, c.n_head)
        x = x + linear(ctx, W[p + "attention.output.dense.weight"], W[p + "attention.output.dense.bias"])  # (T, C)
        h = layer_norm(x, W[p + "layernorm_after.weight"], W[p + "layernorm_after.bias"], c.ln_eps)  # (T, C)
        h = activation(c.act, linear(h, W[p + "intermediate.dense.weight"], W[p + "intermediate.dense.bias"]))  # (T, ff)
        x = x + linear(h, W[p + "output.dense.weight"], W[p + "output.dense.bias"])  # (T, C)
    return atts, layer_norm(x, W["layernorm.weight"], W["layernorm.bias"], c.ln_eps)
