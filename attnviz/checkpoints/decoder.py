"""The numpy forward pass of a decoder LLM (Llama, Mistral, Qwen2, Qwen3), every layer and head.

Block by block as transformers' eager implementation (RMSNorm, grouped-query attention with RoPE,
SwiGLU MLP; the variants are in :class:`~attnviz.checkpoints.decoder_config.DecoderSpec`). Long
inputs keep only what the maps are recomputed from (:class:`DecoderTrace`), not the maps.
"""

from __future__ import annotations

import numpy as np

from attnviz.checkpoints.model_config import ModelConfig
from attnviz.checkpoints.errors import CheckpointError
from attnviz.checkpoints.layers import activation, linear, merge_heads, split_heads
from attnviz.checkpoints.rope import cos_sin, inverse_frequencies, rotate
from attnviz.engine import TiledMask, attention

TILE = (64, 128)  # block_m x block_n of the causal TiledMask of long inputs


def decoder_tensors(c: ModelConfig) -> dict[str, tuple[int, ...]]:
    """Canonical name -> shape of every tensor the decoder forward pass reads (base model layout)."""
    s = c.decoder
    d, ff, hd = c.d_model, c.d_ff, s.head_dim
    shapes: dict[str, tuple[int, ...]] = {"embed_tokens.weight": (c.vocab_size, d)}

    def lin(name, n_out, n_in, bias):
        shapes[name + ".weight"] = (n_out, n_in)
        if bias:
            shapes[name + ".bias"] = (n_out,)

    for i in range(c.n_layer):
        p = f"layers.{i}."
        shapes[p + "input_layernorm.weight"] = (d,)
        lin(p + "self_attn.q_proj", c.n_head * hd, d, s.qkv_bias)
        lin(p + "self_attn.k_proj", s.n_kv_head * hd, d, s.qkv_bias)
        lin(p + "self_attn.v_proj", s.n_kv_head * hd, d, s.qkv_bias)
        lin(p + "self_attn.o_proj", d, c.n_head * hd, s.o_bias)
        if s.qk_norm:
            shapes[p + "self_attn.q_norm.weight"] = (hd,)
            shapes[p + "self_attn.k_norm.weight"] = (hd,)
        shapes[p + "post_attention_layernorm.weight"] = (d,)
        lin(p + "mlp.gate_proj", ff, d, s.mlp_bias)
        lin(p + "mlp.up_proj", ff, d, s.mlp_bias)
        lin(p + "mlp.down_proj", d, ff, s.mlp_bias)
    shapes["norm.weight"] = (d,)
    return shapes


def rms_norm(x: np.ndarray, w: np.ndarray, eps: float) -> np.ndarray:
    """``w * x / sqrt(mean(x^2) + eps)`` over the last axis (variance in at least float32, as transformers)."""
    var = np.mean(x * x, axis=-1, keepdims=True)  # (..., 1)
    return w * (x / np.sqrt(var + x.dtype.type(eps)))


def causal_band(window: int):
    """band(r0, r1) -> bool (r1-r0, T) rows of the causal mask (keys j <= i, and j > i - window if window)."""

    def band(r0: int, r1: int, T: int) -> np.ndarray:
        i = np.arange(r0, r1)[:, None]  # (R, 1)
        j = np.arange(T)[None, :]  # (1, T)
        m = j <= i
        if window:
            m &= j > i - window
        return m

    return band


def causal_mask(T: int, window: int = 0) -> np.ndarray:
    """Dense (T, T) bool causal mask."""
    return causal_band(window)(0, T, T)


def tiled_causal_mask(T: int, window: int = 0) -> TiledMask:
    """The causal mask of T tokens kept per tile (never a dense T x T array)."""
    band = causal_band(window)
    return TiledMask.from_bands(lambda r0, r1: band(r0, r1, T), T, T, *TILE)


class _W:
    """Weights read in the forward dtype one tensor at a time; embedding rows converted after indexing."""

    def __init__(self, weights, dtype):
        self._w, self._dt = weights, dtype

    def __getitem__(self, name):
        return np.asarray(self._w[name]).astype(self._dt, copy=False)

    def get(self, name):
        return self[name] if name in self._w else None

    def rows(self, name, index):
        w = self._w
        raw = w.rows(name, index) if hasattr(w, "rows") else w[name][index]
        return np.asarray(raw).astype(self._dt, copy=False)


class DecoderTrace:
    """What a long decoder pass keeps: per layer rotated q, k and the flash kernel's log-sum-exp."""

    def __init__(self, L: int):
        self.q: list[np.ndarray] = [None] * L  # (nh, T, hs) per layer
        self.k: list[np.ndarray] = [None] * L  # (n_kv, T, hs) per layer
        self.lse: list[np.ndarray] = [None] * L  # (nh, T) per layer
        self.masks: dict[int, TiledMask] = {}  # window -> tiled causal mask


def forward_decoder(c: ModelConfig, weights, ids: np.ndarray, *, dtype=np.float32, kernel: str = "reference",
                    keep: str = "weights"):
    """Decoder on token ids (T,). Returns (attentions (L, nh, T, T), hidden) for ``keep="weights"``,
    (DecoderTrace, hidden) for ``keep="qk"`` (flash kernel, causal TiledMask)."""
    if keep not in ("weights", "qk"):
        raise CheckpointError(f"keep must be 'weights' or 'qk' (got {keep!r})")
    s = c.decoder
    W = _W(weights, dtype)
    T = int(ids.shape[0])
    hd, nh, nkv, g = s.head_dim, c.n_head, s.n_kv_head, s.group
    inv, af = inverse_frequencies(s.rope, hd, dtype)
    cos, sin = cos_sin(np.arange(T), inv, af)  # (T, hd) each
    cos, sin = cos.astype(dtype, copy=False), sin.astype(dtype, copy=False)
    scale = float(hd) ** -0.5
    x = W.rows("embed_tokens.weight", ids)  # (T, C)
    atts = np.empty((c.n_layer, nh, T, T), dtype=dtype) if keep == "weights" else None  # (L, nh, T, T)
    trace = DecoderTrace(c.n_layer) if keep == "qk" else None
    dense_masks: dict[int, np.ndarray] = {}
    for i in range(c.n_layer):
        p = f"layers.{i}."
        a = p + "self_attn."
        h = rms_norm(x, W[p + "input_layernorm.weight"], c.ln_eps)  # (T, C)
        q = split_heads(linear(h, W[a + "q_proj.weight"], W.get(a + "q_proj.bias")), nh)  # (nh, T, hd)
        k = split_heads(linear(h, W[a + "k_proj.weight"], W.get(a + "k_proj.bias")), nkv)  # (nkv, T, hd)
        v = split_heads(linear(h, W[a + "v_proj.weight"], W.get(a + "v_proj.bias")), nkv)  # (nkv, T, hd)
        del h
        if s.qk_norm:
            q = rms_norm(q, W[a + "q_norm.weight"], c.ln_eps)
            k = rms_norm(k, W[a + "k_norm.weight"], c.ln_eps)
        q = np.ascontiguousarray(rotate(q, cos, sin), dtype=dtype)  # (nh, T, hd)
        k = np.ascontiguousarray(rotate(k, cos, sin), dtype=dtype)  # (nkv, T, hd)
        kx = np.repeat(k, g, axis=0) if g > 1 else k  # (nh, T, hd): query head h reads kv head h // g
        vx = np.repeat(v, g, axis=0) if g > 1 else v  # (nh, T, hd)
        window = s.window(i)
        try:
            if keep == "weights":
                if window not in dense_masks:
                    dense_masks[window] = causal_mask(T, window)
                res = attention(q, kx, vx, dense_masks[window], scale=scale, kernel=kernel, return_weights=True)
                if res.weights is None:
                    raise CheckpointError(f"attention kernel {kernel!r} did not return weights; choose a kernel that does")
                atts[i] = res.weights
            else:
                if window not in trace.masks:
                    trace.masks[window] = tiled_causal_mask(T, window)
                res = attention(q, kx, vx, trace.masks[window], scale=scale, kernel="flash")
                trace.q[i], trace.k[i], trace.lse[i] = q, k, np.ascontiguousarray(res.lse, dtype=dtype)
        except ValueError as exc:
            raise CheckpointError(f"layer {i}: {exc}") from None
        del kx, vx
        ctx = merge_heads(res.out.astype(dtype, copy=False))  # (T, nh*hd)
        x = x + linear(ctx, W[a + "o_proj.weight"], W.get(a + "o_proj.bias"))  # (T, C)
        h = rms_norm(x, W[p + "post_attention_layernorm.weight"], c.ln_eps)  # (T, C)
        m = p + "mlp."
        gate = activation("silu", linear(h, W[m + "gate_proj.weight"], W.get(m + "gate_proj.bias")))  # (T, ff)
        gate *= linear(h, W[m + "up_proj.weight"], W.get(m + "up_proj.bias"))
        x = x + linear(gate, W[m + "down_proj.weight"], W.get(m + "down_proj.bias"))  # (T, C)
        del gate, h
    hidden = rms_norm(x, W["norm.weight"], c.ln_eps)  # (T, C)
    return (atts if keep == "weights" else trace), hidden
