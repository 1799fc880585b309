"""GPT-2's forward pass with an intervention applied: the blocks of :func:`attnviz.checkpoints.forward.forward_gpt2`
with the points an :class:`~attnviz.checkpoints.interventions.Edit` changes (the stream entering each layer, the
causal mask, the heads' merged outputs before ``attn.c_proj``), the residual streams kept and the last position's
logits read through the tied embedding (transformers' GPT2LMHeadModel; an untied ``lm_head.weight`` when the
checkpoint has one).
"""

from __future__ import annotations

import math

import numpy as np

from attnviz.checkpoints.errors import CheckpointError
from attnviz.checkpoints.forward import _Cast
from attnviz.checkpoints.layers import activation, conv1d, layer_norm, linear, self_attention


def gpt2_pass(c, weights, ids: np.ndarray, edit, kernel: str = "auto"):
    """(logits (vocab,) float64 at the last position, attentions (L, nh, T, T), stream (L + 1, T, C)) of GPT-2
    over token ids (T,) in float32 with ``edit`` applied."""
    T = ids.shape[0]
    if c.max_positions and T > c.max_positions:
        raise CheckpointError(f"{T:,} tokens are more than GPT-2's {c.max_positions:,} learned positions")
    W = _Cast(weights, np.float32)
    C, nh = c.d_model, c.n_head
    x = W.rows("wte.weight", ids) + W.rows("wpe.weight", slice(0, T))  # (T, C)
    causal = np.tril(np.ones((T, T), dtype=bool))  # (T, T) query i sees keys j <= i
    atts = np.empty((c.n_layer, nh, T, T), dtype=np.float32)  # (L, nh, T, T)
    stream = []
    for i in range(c.n_layer):
        x = edit.residual(i, x)
        stream.append(x)
        p = f"h.{i}."
        scale = 1.0 / math.sqrt(c.head_size) / ((i + 1) if c.scale_by_layer else 1)
        h = layer_norm(x, W[p + "ln_1.weight"], W[p + "ln_1.bias"], c.ln_eps)  # (T, C)
        qkv = conv1d(h, W[p + "attn.c_attn.weight"], W[p + "attn.c_attn.bias"])  # (T, 3C)
        q, k, v = qkv[:, :C], qkv[:, C:2 * C], qkv[:, 2 * C:]  # 3 x (T, C)
        ctx, atts[i] = self_attention(q, k, v, nh, edit.mask(i, causal), scale, kernel)  # (T, C), (nh, T, T)
        ctx = edit.merged(i, ctx, nh)  # (T, C) the heads' outputs side by side, as c_proj reads them
        x = x + conv1d(ctx, W[p + "attn.c_proj.weight"], W[p + "attn.c_proj.bias"])  # (T, C)
        h = layer_norm(x, W[p + "ln_2.weight"], W[p + "ln_2.bias"], c.ln_eps)  # (T, C)
        h = activation(c.act, conv1d(h, W[p + "mlp.c_fc.weight"], W[p + "mlp.c_fc.bias"]))  # (T, ff)
        x = x + conv1d(h, W[p + "mlp.c_proj.weight"], W[p + "mlp.c_proj.bias"])  # (T, C)
    stream.append(x)
    last = layer_norm(x[-1:], W["ln_f.weight"], W["ln_f.bias"], c.ln_eps)  # (1, C)
    head = W["lm_head.weight"] if "lm_head.weight" in weights else W["wte.weight"]  # (vocab, C)
    logits = linear(np.ascontiguousarray(last, dtype=np.float32), head, None)[0].astype(np.float64)  # (vocab,)
    return logits, atts, np.stack(stream)
