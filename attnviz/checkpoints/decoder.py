"""The numpy forward pass of a decoder LLM (Llama, Mistral, Qwen2, Qwen3, Gemma, Gemma 2, Gemma 3, GPT-NeoX,
Phi, Phi-3, OLMo, OLMo 2, StableLM, Falcon, OPT, BLOOM, Mixtral, Qwen2-MoE, Qwen3-MoE), every layer and head.

Block by block as transformers' eager implementation (a norm, grouped-query attention with RoPE, learned
positions or ALiBi, an MLP; the variants are in :class:`~attnviz.checkpoints.decoder_config.DecoderSpec`).
One layer is :func:`layer_input`, :func:`layer_qkv`, the engine's attention and :func:`layer_output`, which
the single pass here and generation's cached chunks (:mod:`attnviz.checkpoints.generate`) share; tensors
go by Llama's names (:func:`decoder_tensors`), each family's own given by :func:`stored_name`.
Long inputs keep only what the maps are recomputed from (:class:`DecoderTrace`), not the maps.
Vision-language models feed the pass their own input rows (:func:`embed_tokens`, ``embeds=``), mask
(``mask=``, :func:`block_sequence_masks`) and rotary positions (``positions=``).
"""

from __future__ import annotations

import math

import numpy as np

from attnviz.checkpoints.decoder_config import alibi_slopes
from attnviz.checkpoints.decoder_moe import moe_mlp, moe_tensors, stored_moe_name
from attnviz.checkpoints.model_config import CheckpointConfig
from attnviz.checkpoints.errors import CheckpointError
from attnviz.checkpoints.layers import activation, layer_norm, linear, merge_heads, pick_kernel, split_heads
from attnviz.checkpoints.rope import cos_sin, inverse_frequencies, rotate
from attnviz.engine import TiledMask, attention

TILE = (64, 128)  # block_m x block_n of the causal TiledMask of long inputs
BAND_CELLS = 1 << 22  # mask cells per band of query rows when a soft-capped long pass runs on the naive kernel
MASK_KEYS = ("full_attention", "sliding_attention")  # the layer types a mask mapping is keyed by (transformers')


def _norm_tensors(c: CheckpointConfig, name: str, width: int) -> dict[str, tuple[int, ...]]:
    kind = c.decoder.norm
    if kind == "plain":  # OLMo's LayerNorm has neither weight nor bias
        return {}
    out = {name + ".weight": (width,)}
    if kind == "layer":
        out[name + ".bias"] = (width,)
    return out


def decoder_tensors(c: CheckpointConfig) -> dict[str, tuple[int, ...]]:
    """Canonical name -> shape of every tensor the decoder forward pass reads (base model layout, in
    Llama's names: :func:`stored_name` gives each family's own)."""
    s = c.decoder
    d, ff, hd = c.d_model, c.d_ff, s.head_dim
    nq, nkv = c.n_head * hd, s.n_kv_head * hd
    shapes: dict[str, tuple[int, ...]] = {"embed_tokens.weight": (c.vocab_size, d)}
    if s.learned_positions:
        shapes["embed_positions.weight"] = (c.max_positions + s.position_offset, d)
    if s.embed_norm:
        shapes |= _norm_tensors(c, "embed_layernorm", d)

    def lin(name, n_out, n_in, bias):
        shapes[name + ".weight"] = (n_out, n_in)
        if bias:
            shapes[name + ".bias"] = (n_out,)

    for i in range(c.n_layer):
        p = f"layers.{i}."
        a = p + "self_attn."
        if s.block != "post":
            shapes |= _norm_tensors(c, p + "input_layernorm", d)
        if s.qkv == "separate":
            lin(a + "q_proj", nq, d, s.qkv_bias)
            lin(a + "k_proj", nkv, d, s.qkv_bias)
            lin(a + "v_proj", nkv, d, s.qkv_bias)
        else:
            lin(a + "qkv_proj", nq + 2 * nkv, d, s.qkv_bias)
        lin(a + "o_proj", d, nq, s.o_bias)
        if s.qk_norm:
            kind = s.qk_norm_kind
            if kind == "whole":
                shapes[a + "q_norm.weight"], shapes[a + "k_norm.weight"] = (nq,), (nkv,)
            elif kind == "per_head_layer":
                shapes |= {f"{a}q_norm.{h}.weight": (hd,) for h in range(c.n_head)}
                shapes |= {f"{a}k_norm.{h}.weight": (hd,) for h in range(s.n_kv_head)}
            else:
                shapes[a + "q_norm.weight"], shapes[a + "k_norm.weight"] = (hd,), (hd,)
                if kind == "head_layer":
                    shapes[a + "q_norm.bias"], shapes[a + "k_norm.bias"] = (hd,), (hd,)
        if s.block != "parallel":
            shapes |= _norm_tensors(c, p + "post_attention_layernorm", d)
        if s.sandwich_norm:
            shapes[p + "pre_feedforward_layernorm.weight"] = (d,)
        if s.sandwich_norm or s.block == "post":
            shapes[p + "post_feedforward_layernorm.weight"] = (d,)
        if s.moe is not None and s.moe.sparse(i):
            shapes |= moe_tensors(c, i)
            continue
        if s.mlp == "gated":
            lin(p + "mlp.gate_proj", ff, d, s.mlp_bias)
            lin(p + "mlp.up_proj", ff, d, s.mlp_bias)
        elif s.mlp == "fused_gated":
            lin(p + "mlp.gate_up_proj", 2 * ff, d, s.mlp_bias)
        else:
            lin(p + "mlp.up_proj", ff, d, s.mlp_bias)
        lin(p + "mlp.down_proj", d, ff, s.mlp_bias)
    shapes |= _norm_tensors(c, "norm", d)
    return shapes


# model_type -> (canonical fragment, the family's own) inside layer tensor names, and whole top-level names
_LAYER_NAMES = {
    "gpt_neox": ((".self_attn.qkv_proj.", ".attention.query_key_value."), (".self_attn.o_proj.", ".attention.dense."),
                 (".mlp.up_proj.", ".mlp.dense_h_to_4h."), (".mlp.down_proj.", ".mlp.dense_4h_to_h.")),
    "phi": ((".self_attn.o_proj.", ".self_attn.dense."), (".self_attn.q_norm.", ".self_attn.q_layernorm."),
            (".self_attn.k_norm.", ".self_attn.k_layernorm."), (".mlp.up_proj.", ".mlp.fc1."),
            (".mlp.down_proj.", ".mlp.fc2.")),
    "stablelm": ((".self_attn.q_norm.", ".self_attn.q_layernorm.norms."),
                 (".self_attn.k_norm.", ".self_attn.k_layernorm.norms.")),
    "opt": ((".input_layernorm.", ".self_attn_layer_norm."), (".post_attention_layernorm.", ".final_layer_norm."),
            (".self_attn.o_proj.", ".self_attn.out_proj."), (".mlp.up_proj.", ".fc1."), (".mlp.down_proj.", ".fc2.")),
}
_TOP_NAMES = {
    "gpt_neox": {"embed_tokens.weight": "embed_in.weight", "norm.weight": "final_layer_norm.weight",
                 "norm.bias": "final_layer_norm.bias"},
    "phi": {"norm.weight": "final_layernorm.weight", "norm.bias": "final_layernorm.bias"},
    "opt": {"norm.weight": "final_layer_norm.weight", "norm.bias": "final_layer_norm.bias"},
}
# where a causal LM keeps its head, in the order looked for (GPT-NeoX files before transformers 5: embed_out)
HEAD_NAMES = {"gpt_neox": ("lm_head.weight", "embed_out.weight")}


_FALCON_NAMES = ((".self_attn.qkv_proj.", ".self_attention.query_key_value."),
                 (".self_attn.o_proj.", ".self_attention.dense."), (".mlp.up_proj.", ".mlp.dense_h_to_4h."),
                 (".mlp.down_proj.", ".mlp.dense_4h_to_h."))


def stored_name(c: CheckpointConfig, name: str) -> str:
    """The name canonical tensor ``name`` has in the family's files (without the base model's prefix)."""
    if c.model_type in ("falcon", "bloom"):
        top = {"embed_tokens.weight": "word_embeddings.weight", "norm.weight": "ln_f.weight", "norm.bias": "ln_f.bias",
               "embed_layernorm.weight": "word_embeddings_layernorm.weight",
               "embed_layernorm.bias": "word_embeddings_layernorm.bias"}
        if name in top:
            return top[name]
        rules = _FALCON_NAMES
        if c.decoder.block == "parallel2":  # the new decoder architecture's two norms
            rules += ((".input_layernorm.", ".ln_attn."), (".post_attention_layernorm.", ".ln_mlp."))
        name = "h." + name.removeprefix("layers.") if name.startswith("layers.") else name
        for canonical, own in rules:
            name = name.replace(canonical, own)
        return name
    if c.decoder.moe is not None:
        return stored_moe_name(c, name)
    top = _TOP_NAMES.get(c.model_type, {})
    if name in top:
        return top[name]
    for canonical, own in _LAYER_NAMES.get(c.model_type, ()):
        name = name.replace(canonical, own)
    return name


def rms_norm(x: np.ndarray, w: np.ndarray, eps: float) -> np.ndarray:
    """``w * x / sqrt(mean(x^2) + eps)`` over the last axis (variance in at least float32, as transformers)."""
    var = np.mean(x * x, axis=-1, keepdims=True)  # (..., 1)
    return w * (x / np.sqrt(var + x.dtype.type(eps)))


def rms_norm_plus_one(x: np.ndarray, w: np.ndarray, eps: float) -> np.ndarray:
    """Gemma's RMSNorm ``x / sqrt(mean(x^2) + eps) * (1 + w)``, computed in at least float32 and returned
    in the dtype of ``x`` (transformers computes it in float32 and casts back)."""
    dt = np.promote_types(x.dtype, np.float32)
    xf = x.astype(dt, copy=False)  # (..., C)
    var = np.mean(xf * xf, axis=-1, keepdims=True)  # (..., 1)
    out = xf / np.sqrt(var + dt.type(eps)) * (dt.type(1.0) + w.astype(dt, copy=False))  # (..., C)
    return out.astype(x.dtype, copy=False)


def apply_norm(c: CheckpointConfig, W, name: str, x: np.ndarray) -> np.ndarray:
    """The family's norm ``name`` (e.g. "layers.0.input_layernorm", "norm") of rows x (..., C): RMSNorm,
    Gemma's (1 + w) RMSNorm, LayerNorm with weight and bias, or OLMo's LayerNorm without either."""
    s = c.decoder
    if s.norm == "rms":
        return (rms_norm_plus_one if s.norm_plus_one else rms_norm)(x, W[name + ".weight"], c.ln_eps)
    if s.norm == "layer":
        return layer_norm(x, W[name + ".weight"], W[name + ".bias"], c.ln_eps)
    one = x.dtype.type
    return layer_norm(x, one(1.0), one(0.0), c.ln_eps)


def final_norm(c: CheckpointConfig, W, x: np.ndarray) -> np.ndarray:
    """The norm after the last layer (what the head reads) of rows x (..., C)."""
    return apply_norm(c, W, "norm", x)


def enter(c: CheckpointConfig, W, x: np.ndarray, pos: np.ndarray) -> np.ndarray:
    """The rows entering the first layer from the token rows x (n, C) at positions ``pos`` (n,): as they are,
    LayerNormed (BLOOM), or with the learned position table's rows added (OPT: row position + 2)."""
    s = c.decoder
    if s.embed_norm:  # BLOOM: a LayerNorm of the token rows
        x = apply_norm(c, W, "embed_layernorm", x)
    if not s.learned_positions:
        return x
    if pos.size and (pos.min() < 0 or pos.max() >= c.max_positions):
        raise CheckpointError(f"position {int(pos.max())} is outside the model's {c.max_positions} learned positions")
    return x + W.rows("embed_positions.weight", pos + s.position_offset)  # (n, C)


def rotary_tables(c: CheckpointConfig, layer: int, pos: np.ndarray, dtype, cache: dict):
    """(cos, sin) (T, rotary_dim) of ``layer`` at positions ``pos``, kept in ``cache`` per rotary setting (None,
    None for learned positions). The length-dependent types (dynamic, longrope) read the highest position + 1,
    as transformers does per call."""
    if c.decoder.learned_positions or c.decoder.alibi:
        return None, None
    rope = c.decoder.rope_for(layer)
    if rope not in cache:
        seq_len = int(pos.max()) + 1 if pos.size else 0
        inv, af = inverse_frequencies(rope, c.decoder.head_dim, dtype, seq_len)
        cos, sin = cos_sin(pos, inv, af)  # (T, rd) each
        cache[rope] = cos.astype(dtype, copy=False), sin.astype(dtype, copy=False)
    return cache[rope]


def layer_input(c: CheckpointConfig, W, i: int, x: np.ndarray) -> np.ndarray:
    """What layer ``i``'s attention reads: its input norm of the residual stream x (n, C) (OLMo 2: x itself)."""
    if c.decoder.block == "post":
        return x
    return apply_norm(c, W, f"layers.{i}.input_layernorm", x)


def layer_qkv(c: CheckpointConfig, W, i: int, h: np.ndarray, cos: np.ndarray, sin: np.ndarray, pos: np.ndarray | None = None):
    """(q (nh, n, hd), k (nkv, n, hd), v (nkv, n, hd)) of layer ``i`` from its attention input h (n, C): the
    projections (separate, fused or per head), OLMo's clamp, the q/k norms, the rotation (of the first
    rotary_dim features of each head). With ALiBi (BLOOM) q and k carry one feature more, 1 and
    slope_h * j / scale at key position j (``pos``), so the kernel's scaled q . k is scale q . k + slope_h j:
    the bias computed inside the engine's kernels, every kernel alike, and kept with the cached keys."""
    s = c.decoder
    nh, nkv, hd = c.n_head, s.n_kv_head, s.head_dim
    a = f"layers.{i}.self_attn."
    dtype = h.dtype
    if s.qkv == "separate":
        q = linear(h, W.matrix(a + "q_proj.weight"), W.get(a + "q_proj.bias"))  # (n, nh*hd)
        k = linear(h, W.matrix(a + "k_proj.weight"), W.get(a + "k_proj.bias"))  # (n, nkv*hd)
        v = linear(h, W.matrix(a + "v_proj.weight"), W.get(a + "v_proj.bias"))  # (n, nkv*hd)
    else:
        qkv = linear(h, W.matrix(a + "qkv_proj.weight"), W.get(a + "qkv_proj.bias"))  # (n, (nh + 2 nkv) hd)
        n = qkv.shape[0]
        if s.qkv == "fused":  # rows [q | k | v]
            q, k, v = qkv[:, :nh * hd], qkv[:, nh * hd:(nh + nkv) * hd], qkv[:, (nh + nkv) * hd:]
        elif s.qkv == "per_head":  # [q_h | k_h | v_h] per head
            per = qkv.reshape(n, nh, 3 * hd)
            q, k, v = (per[..., j * hd:(j + 1) * hd].reshape(n, nh * hd) for j in range(3))
        else:  # grouped: per kv head its group of query heads, then k, then v
            g = nh // nkv
            per = qkv.reshape(n, nkv, g + 2, hd)
            q, k, v = per[:, :, :g].reshape(n, nh * hd), per[:, :, g].reshape(n, nkv * hd), per[:, :, g + 1].reshape(n, nkv * hd)
    if s.clip_qkv is not None:
        cl = dtype.type(s.clip_qkv)
        q, k, v = np.clip(q, -cl, cl), np.clip(k, -cl, cl), np.clip(v, -cl, cl)
    if s.qk_norm and s.qk_norm_kind == "whole":  # OLMo 2: over the whole projection, before the heads
        q = rms_norm(q, W[a + "q_norm.weight"], c.ln_eps)
        k = rms_norm(k, W[a + "k_norm.weight"], c.ln_eps)
    q, k, v = split_heads(q, nh), split_heads(k, nkv), split_heads(v, nkv)  # (heads, n, hd)
    if s.qk_norm and s.qk_norm_kind == "head":
        norm = rms_norm_plus_one if s.norm_plus_one else rms_norm
        q = norm(q, W[a + "q_norm.weight"], c.ln_eps)
        k = norm(k, W[a + "k_norm.weight"], c.ln_eps)
    elif s.qk_norm and s.qk_norm_kind == "head_layer":
        q = layer_norm(q, W[a + "q_norm.weight"], W[a + "q_norm.bias"], c.ln_eps)
        k = layer_norm(k, W[a + "k_norm.weight"], W[a + "k_norm.bias"], c.ln_eps)
    elif s.qk_norm and s.qk_norm_kind == "per_head_layer":
        zero = dtype.type(0.0)
        q = np.stack([layer_norm(q[j], W[f"{a}q_norm.{j}.weight"], zero, c.ln_eps) for j in range(nh)])
        k = np.stack([layer_norm(k[j], W[f"{a}k_norm.{j}.weight"], zero, c.ln_eps) for j in range(nkv)])
    if cos is not None:
        q, k = rotate(q, cos, sin), rotate(k, cos, sin)
    if s.alibi:
        if pos is None:
            raise CheckpointError("ALiBi needs the key positions")
        slopes = np.asarray(alibi_slopes(nh), dtype=dtype)[:, None]  # (nh, 1) float32, as transformers' tensor
        bias = (slopes * pos.astype(dtype)[None, :]) / dtype.type(s.scale)  # (nh, n)
        q = np.concatenate([q, np.ones((nh, q.shape[1], 1), dtype=dtype)], axis=-1)  # (nh, n, hd + 1)
        k = np.concatenate([k, bias[:, :, None]], axis=-1)  # (nh, n, hd + 1)
    q = np.ascontiguousarray(q, dtype=dtype)  # (nh, n, hd)
    k = np.ascontiguousarray(k, dtype=dtype)  # (nkv, n, hd)
    return q, k, np.ascontiguousarray(v, dtype=dtype)


def layer_mlp(c: CheckpointConfig, W, i: int, h: np.ndarray) -> np.ndarray:
    """Layer ``i``'s MLP on rows h (n, C) -> (n, C): gated (separate or fused gate/up), plain, or a sparse
    layer's mixture of experts (:mod:`attnviz.checkpoints.decoder_moe`)."""
    s = c.decoder
    if s.moe is not None and s.moe.sparse(i):
        return moe_mlp(c, W, i, h)
    m = f"layers.{i}.mlp."
    if s.mlp == "gated":
        gate = activation(c.act, linear(h, W.matrix(m + "gate_proj.weight"), W.get(m + "gate_proj.bias")))  # (n, ff)
        gate *= linear(h, W.matrix(m + "up_proj.weight"), W.get(m + "up_proj.bias"))
    elif s.mlp == "fused_gated":  # Phi-3: [gate | up]
        gu = linear(h, W.matrix(m + "gate_up_proj.weight"), W.get(m + "gate_up_proj.bias"))  # (n, 2 ff)
        gate = gu[:, c.d_ff:] * activation(c.act, gu[:, :c.d_ff])
    else:
        gate = activation(c.act, linear(h, W.matrix(m + "up_proj.weight"), W.get(m + "up_proj.bias")))  # (n, ff)
    return linear(gate, W.matrix(m + "down_proj.weight"), W.get(m + "down_proj.bias"))  # (n, C)


def layer_output(c: CheckpointConfig, W, i: int, x: np.ndarray, h: np.ndarray, out: np.ndarray) -> np.ndarray:
    """The residual stream leaving layer ``i``: x (n, C) entering it, h (n, C) its attention's input and
    out (nh, n, hd) the heads' outputs, through the output projection, the MLP and the family's block."""
    s = c.decoder
    p = f"layers.{i}."
    o = linear(merge_heads(out), W.matrix(p + "self_attn.o_proj.weight"), W.get(p + "self_attn.o_proj.bias"))  # (n, C)
    if s.block == "parallel":  # Phi, StableLM: both read the one input norm
        return (o + layer_mlp(c, W, i, h)) + x
    if s.block == "parallel2":  # GPT-NeoX: the MLP reads its own norm of x
        return (layer_mlp(c, W, i, apply_norm(c, W, p + "post_attention_layernorm", x)) + o) + x
    if s.block == "post":  # OLMo 2
        x = x + apply_norm(c, W, p + "post_attention_layernorm", o)
        return x + apply_norm(c, W, p + "post_feedforward_layernorm", layer_mlp(c, W, i, x))
    if s.sandwich_norm:
        x = x + apply_norm(c, W, p + "post_attention_layernorm", o)
        h = apply_norm(c, W, p + "pre_feedforward_layernorm", x)
    else:
        x = x + o
        h = apply_norm(c, W, p + "post_attention_layernorm", x)
    f = layer_mlp(c, W, i, h)
    if s.sandwich_norm:
        f = apply_norm(c, W, p + "post_feedforward_layernorm", f)
    return x + f


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


def windowed(mask: np.ndarray, window: int) -> np.ndarray:
    """A dense (T, T) mask on a sliding layer: intersected with transformers' sliding_window_overlay
    (key j > i - window; keys after i are not limited, so a bidirectional block keeps its later keys)."""
    if not window:
        return mask
    T = mask.shape[0]
    return mask & (np.arange(T)[None, :] > np.arange(T)[:, None] - window)  # (T, T)


def block_sequence_masks(c: CheckpointConfig, block_ids) -> dict[str, np.ndarray]:
    """The masks transformers 5.24 builds from ``block_sequence_ids`` (PaliGemma's prefix, Gemma 3's
    images): a token sees the earlier keys (within the window on a sliding layer) and every token of its
    own block (id >= 0, -1: no block), whatever the window. Returns the mapping ``forward_decoder``
    takes as ``mask``: {"full_attention": (T, T), "sliding_attention": (T, T)} bool."""
    ids = np.asarray(block_ids)
    if ids.ndim != 1 or ids.dtype.kind not in "iu":
        raise CheckpointError(f"block ids must be a 1-D array of integers (got {ids.dtype} {ids.shape})")
    T = ids.shape[0]
    same = (ids[:, None] == ids[None, :]) & (ids[:, None] >= 0)  # (T, T) bidirectional within a block
    window = max((c.decoder.window(i) for i in range(c.n_layer)), default=0)
    return {"full_attention": causal_mask(T) | same, "sliding_attention": causal_mask(T, window) | same}


def embed_scale(c: CheckpointConfig, dtype=np.float32):
    """The number token rows are multiplied by before the first layer: sqrt(d_model) in ``dtype`` for
    the Gemma families (transformers keeps it as a tensor in the weights' dtype), None for the others."""
    return np.dtype(dtype).type(math.sqrt(c.d_model)) if c.decoder.embed_scale else None


def embed_tokens(c: CheckpointConfig, weights, ids, dtype=np.float32) -> np.ndarray:
    """(T, d_model) rows of the token embedding table for ``ids`` (T,), in ``dtype``, BEFORE the family's
    embedding scale (:func:`embed_scale`): what :func:`forward_decoder` takes as ``embeds``."""
    ids = _check_ids(c, ids)
    return np.array(_W(weights, dtype).rows("embed_tokens.weight", ids), dtype=dtype)  # (T, C), a copy to edit


def _check_ids(c: CheckpointConfig, ids) -> np.ndarray:
    ids = np.asarray(ids)
    if ids.ndim != 1 or ids.dtype.kind not in "iu":
        raise CheckpointError(f"token ids must be a 1-D array of integers (got {ids.dtype} {ids.shape})")
    if ids.size and (ids.min() < 0 or ids.max() >= c.vocab_size):
        bad = int(ids.max()) if ids.max() >= c.vocab_size else int(ids.min())
        raise CheckpointError(f"token id {bad} is outside the model's {c.vocab_size}-row embedding table")
    return ids.astype(np.int64, copy=False)


def _check_positions(positions, T: int) -> np.ndarray:
    pos = np.asarray(positions)
    if pos.shape != (T,) or pos.dtype.kind not in "iu":
        raise CheckpointError(f"positions must be ({T},) integers, one rotary position per token "
                              f"(got {pos.dtype} {pos.shape})")
    return pos.astype(np.int64, copy=False)


def _check_mask(mask, T: int) -> dict | np.ndarray:
    """A dense (T, T) bool mask, or a mapping of one per layer type (MASK_KEYS), checked."""
    if isinstance(mask, dict):
        unknown = sorted(set(mask) - set(MASK_KEYS))
        if unknown:
            raise CheckpointError(f"mask: unknown layer type(s) {', '.join(map(repr, unknown))} "
                                  f"(the keys are {', '.join(map(repr, MASK_KEYS))})")
        return {k: _check_mask(m, T) for k, m in mask.items()}
    m = np.asarray(mask)
    if m.dtype != np.bool_ or m.shape != (T, T):
        raise CheckpointError(f"mask must be a bool ({T}, {T}) array, True where query i may see key j "
                              f"(got {m.dtype} {m.shape})")
    return np.ascontiguousarray(m)


def _layer_mask(mask, window: int, layer: int) -> np.ndarray:
    """The dense mask of one layer from ``forward_decoder``'s ``mask`` (an array or a mapping)."""
    if isinstance(mask, dict):
        key = "sliding_attention" if window else "full_attention"
        if key not in mask:
            raise CheckpointError(f"mask has no {key!r} entry, which layer {layer} needs")
        return mask[key]
    return windowed(mask, window)


def _banded_attention(q, kx, vx, tm: TiledMask, scale: float, softcap: float):
    """(out, lse) of a soft-capped layer on the naive kernel, band by band of query rows, each band's
    dense mask rows made from the TiledMask (flash has no soft-capping; no T x T array is held)."""
    nh, T, _ = q.shape
    out = np.empty((nh, T, vx.shape[2]), dtype=q.dtype)  # (nh, T, hd)
    lse = np.empty((nh, T), dtype=q.dtype)  # (nh, T)
    step = max(64, BAND_CELLS // max(T, 1))
    for r0 in range(0, T, step):
        r1 = min(T, r0 + step)
        rows = tm.rows(np.arange(r0, r1))  # (1, R, T)
        seen = np.flatnonzero(rows.any(axis=(0, 1)))  # keys some row of the band may see
        a, b = (int(seen[0]), int(seen[-1]) + 1) if seen.size else (0, 1)
        res = attention(q[:, r0:r1], kx[:, a:b], vx[:, a:b], rows[:, :, a:b], scale=scale, kernel="naive",
                        softcap=softcap)
        out[:, r0:r1], lse[:, r0:r1] = res.out, res.lse
    return out, lse


class _W:
    """Weights read in the forward dtype one tensor at a time; embedding rows converted after indexing."""

    def __init__(self, weights, dtype):
        self._w, self._dt = weights, dtype

    def __getitem__(self, name):
        return np.asarray(self._w[name]).astype(self._dt, copy=False)

    def get(self, name):
        return self[name] if name in self._w else None

    def matrix(self, name):
        """A weight matrix for :func:`linear`: the store's block-by-block bf16 matrix in a float32 pass."""
        if self._dt == np.float32 and hasattr(self._w, "matrix"):
            return self._w.matrix(name)
        return self[name]

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
        self.masks: dict[int, TiledMask] = {}  # window -> tiled mask of the layers with that window


def forward_decoder(c: CheckpointConfig, weights, ids: np.ndarray | None, *, dtype=np.float32, kernel: str = "auto",
                    keep: str = "weights", embeds=None, mask=None, positions=None):
    """Decoder on token ids (T,). Returns (attentions (L, nh, T, T), hidden) for ``keep="weights"``,
    (DecoderTrace, hidden) for ``keep="qk"`` (flash kernel, causal TiledMask; a soft-capped family runs
    on the naive kernel band by band instead, as flash has no soft-capping).

    ``embeds`` (T, d_model): the input rows instead of ``ids``' (which may then be None), given BEFORE the
    family's embedding scale, as :func:`embed_tokens` returns them; the pass multiplies them by
    :func:`embed_scale` (Gemma: sqrt(d_model)). transformers 5.24 scales only the token rows (inside its
    embedding module) and takes ``inputs_embeds`` as they are, so rows it puts in after that scale
    (PaliGemma's projected image features) are given here divided by :func:`embed_scale`.
    ``mask``: a bool (T, T) mask (True: query i may see key j) for every layer instead of the causal
    one, intersected on sliding layers with the window as transformers' sliding_window_overlay does
    (key j > i - window; later keys are not limited); or a mapping {"full_attention": (T, T),
    "sliding_attention": (T, T)} used as given per layer type, like transformers' mask mapping (see
    :func:`block_sequence_masks`). A fully masked row gives weights 0 (transformers' eager softmax gives
    it uniform weights). ``positions`` (T,) integers: the rotary positions (default 0 .. T-1); the mask
    does not follow from them.
    """
    if keep not in ("weights", "qk"):
        raise CheckpointError(f"keep must be 'weights' or 'qk' (got {keep!r})")
    s = c.decoder
    W = _W(weights, dtype)
    if embeds is None:
        if ids is None:
            raise CheckpointError("give token ids or input embeddings (embeds)")
        ids = _check_ids(c, ids)
        T = int(ids.shape[0])
    else:
        e = np.asarray(embeds)  # ids, when given, only set the length (a caller's image ids need no table row)
        if e.ndim != 2 or e.shape[1] != c.d_model or (ids is not None and e.shape[0] != np.size(ids)):
            n = "T" if ids is None else np.size(ids)
            raise CheckpointError(f"embeds must be ({n}, {c.d_model}): one row of d_model per token (got {e.shape})")
        T = int(e.shape[0])
        if e.dtype.kind not in "fiu" or not np.isfinite(e).all():
            raise CheckpointError("embeds must be finite real numbers")
    hd, nh, nkv, g = s.head_dim, c.n_head, s.n_kv_head, s.group
    pos = np.arange(T) if positions is None else _check_positions(positions, T)
    rot: dict = {}  # RopeSpec -> (cos, sin) (T, hd) each
    scale = s.scale
    softcap = s.attn_softcap
    kernel = pick_kernel(kernel, softcap, cells=nh * T * T if keep == "weights" else None)
    if softcap and keep == "weights" and kernel == "flash":
        raise CheckpointError(f"{c.model_type} soft-caps its attention scores (attn_logit_softcapping {softcap:g}); "
                              "the flash kernel cannot: use the reference or naive kernel")
    if embeds is None:
        x = W.rows("embed_tokens.weight", ids)  # (T, C)
    else:
        x = np.array(embeds, dtype=dtype)  # (T, C)
    if s.embed_scale:
        x = x * embed_scale(c, dtype)  # (T, C)
    x = enter(c, W, x, pos)  # (T, C)
    if mask is not None:
        mask = _check_mask(mask, T)
    atts = np.empty((c.n_layer, nh, T, T), dtype=dtype) if keep == "weights" else None  # (L, nh, T, T)
    trace = DecoderTrace(c.n_layer) if keep == "qk" else None
    dense_masks: dict[int, np.ndarray] = {}
    for i in range(c.n_layer):
        cos, sin = rotary_tables(c, i, pos, dtype, rot)  # (T, rd) each
        h = layer_input(c, W, i, x)  # (T, C)
        q, k, v = layer_qkv(c, W, i, h, cos, sin, pos)  # (nh, T, hd), (nkv, T, hd) x 2
        kx = np.repeat(k, g, axis=0) if g > 1 else k  # (nh, T, hd): query head h reads kv head h // g
        vx = np.repeat(v, g, axis=0) if g > 1 else v  # (nh, T, hd)
        window = s.window(i)
        try:
            if keep == "weights":
                if window not in dense_masks:
                    dense_masks[window] = causal_mask(T, window) if mask is None else _layer_mask(mask, window, i)
                res = attention(q, kx, vx, dense_masks[window], scale=scale, kernel=kernel, return_weights=True,
                                softcap=softcap)
                if res.weights is None:
                    raise CheckpointError(f"attention kernel {kernel!r} did not return weights; choose a kernel that does")
                atts[i] = res.weights
                out = res.out
            else:
                if window not in trace.masks:
                    if mask is None:
                        trace.masks[window] = tiled_causal_mask(T, window)
                    else:
                        lm = _layer_mask(mask, window, i)
                        trace.masks[window] = TiledMask.from_bands(lambda r0, r1, lm=lm: lm[r0:r1], T, T, *TILE)
                if softcap:
                    out, lse = _banded_attention(q, kx, vx, trace.masks[window], scale, softcap)
                else:
                    res = attention(q, kx, vx, trace.masks[window], scale=scale, kernel="flash")
                    out, lse = res.out, res.lse
                trace.q[i], trace.k[i], trace.lse[i] = q, k, np.ascontiguousarray(lse, dtype=dtype)
        except ValueError as exc:
            if isinstance(exc, CheckpointError):
                raise
            raise CheckpointError(f"layer {i}: {exc}") from None
        del kx, vx
        x = layer_output(c, W, i, x, h, out.astype(dtype, copy=False))  # (T, C)
        del h
    hidden = final_norm(c, W, x)  # (T, C)
    return (atts if keep == "weights" else trace), hidden
