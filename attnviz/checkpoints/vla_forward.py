"""The numpy arithmetic of a SmolVLA forward pass, step by step as lerobot 0.4.4 computes it.

* pictures: ``resize_with_pad`` (torch's bilinear resize without antialiasing, padding on the left and top),
  then ``2x - 1``;
* SmolVLM's vision tower (SigLIP layers; position ids bucketised as transformers 4.57's
  ``SmolVLMVisionEmbeddings`` does, which maps patch rows and columns 0 and 1 both to position 0) and its
  connector (pixel shuffle, a linear map without bias);
* lerobot's own rotary embedding (``apply_rope``: base 10000 whatever the VLM's ``rope_theta``);
* one VLM layer over the prefix (its keys and values kept for the expert), one expert layer over the action
  tokens: self-attention over the cached prefix keys and its own, or cross-attention to the prefix through the
  expert's k/v projections of the VLM's cached keys and values;
* the flow-matching time embedding and the action / time MLP.

Every function takes and returns one dtype (float32 or float64); shapes use Tp prefix tokens, Ta action
tokens, nh heads, nkv key/value heads, hd head width.
"""

from __future__ import annotations

import math

import numpy as np

from attnviz.checkpoints.decoder import rms_norm
from attnviz.checkpoints.errors import CheckpointError
from attnviz.checkpoints.forward import patchify
from attnviz.checkpoints.layers import (activation, layer_norm, linear, merge_heads, pick_kernel, self_attention,
                                       split_heads)
from attnviz.engine import attention

ROPE_BASE = 10_000  # lerobot's apply_rope max_wavelength (fixed in its code)


class Weights:
    """A part's tensors read in the forward dtype (biases that the layout lacks are None)."""

    def __init__(self, view, dtype):
        self._v, self._dt = view, dtype

    def __getitem__(self, name: str) -> np.ndarray:
        return np.asarray(self._v[name]).astype(self._dt, copy=False)

    def get(self, name: str):
        return self[name] if name in self._v else None

    def rows(self, name: str, index) -> np.ndarray:
        return np.asarray(self._v.rows(name, index)).astype(self._dt, copy=False)


def resize_with_pad(img: np.ndarray, width: int, height: int) -> tuple[np.ndarray, tuple[int, int, int, int]]:
    """lerobot's resize_with_pad of one (3, H, W) float32 picture: bilinear resize keeping the aspect ratio
    (``F.interpolate(..., mode="bilinear", align_corners=False)``) so it fits (height, width), then zeros on
    the left and top. Returns the (3, height, width) canvas and (resized h, resized w, pad top, pad left)."""
    _, H, W = img.shape
    ratio = max(W / width, H / height)
    rh, rw = int(H / ratio), int(W / ratio)
    if rh < 1 or rw < 1:
        raise CheckpointError(f"a {H}x{W} px picture resized to fit {height}x{width} px leaves no pixel row or column")
    out = _bilinear_rows(img, rh)  # (3, rh, W)
    out = _bilinear_rows(out.transpose(0, 2, 1), rw).transpose(0, 2, 1)  # (3, rh, rw)
    pad_h, pad_w = max(0, height - rh), max(0, width - rw)
    canvas = np.zeros((img.shape[0], height, width), dtype=img.dtype)  # (3, height, width)
    canvas[:, pad_h:, pad_w:] = out
    return canvas, (rh, rw, pad_h, pad_w)


def _bilinear_rows(x: np.ndarray, n_out: int) -> np.ndarray:
    """Linear interpolation along axis 1 of (C, N, M) to n_out rows, with torch's source index arithmetic
    (half-pixel centres, negative sources clamped to 0, the last row repeated)."""
    n_in = x.shape[1]
    if n_in == n_out:
        return x
    dt = x.dtype.type
    scale = dt(n_in / n_out)
    src = scale * (np.arange(n_out, dtype=x.dtype) + dt(0.5)) - dt(0.5)  # (n_out,)
    src = np.maximum(src, dt(0))
    i0 = np.minimum(src.astype(np.int64), n_in - 1)  # (n_out,)
    lam = np.clip(src - i0.astype(x.dtype), 0, 1).astype(x.dtype)  # (n_out,)
    i1 = i0 + (i0 < n_in - 1)
    return x[:, i0] * (dt(1) - lam)[None, :, None] + x[:, i1] * lam[None, :, None]  # (C, n_out, M)


def vision_positions(n_side: int, gh: int, gw: int) -> np.ndarray:
    """(gh * gw,) position ids of a full (gh, gw) patch grid, as SmolVLMVisionEmbeddings buckets them."""
    step = 1.0 / n_side
    n = max(0, math.ceil((1.0 - step) / step))
    boundaries = (step + np.arange(n) * step).astype(np.float32)  # (n_side - 1,)

    def buckets(k: int) -> np.ndarray:
        frac = (np.arange(k, dtype=np.float32) / np.float32(k)) * np.float32(1 - 1e-6)  # (k,)
        return np.searchsorted(boundaries, frac, side="right")

    return (buckets(gh)[:, None] * n_side + buckets(gw)[None, :]).reshape(-1)  # (gh * gw,)


def vision_tower(v, W: Weights, pixels: np.ndarray, dtype, kernel: str) -> tuple[np.ndarray, np.ndarray]:
    """SmolVLM's vision tower on (3, S, S) pixels -> (maps (L_v, nh_v, P, P), hidden (P, d_v) after post_layernorm)."""
    S = pixels.shape[1]
    g = S // v.patch
    x = patchify(np.ascontiguousarray(pixels, dtype=dtype), (v.patch, v.patch))  # (P, 3*p*p)
    x = linear(x, W["embeddings.patch_embedding.weight"].reshape(v.d, -1), W["embeddings.patch_embedding.bias"])
    pos = vision_positions(v.image_size // v.patch, g, g)  # (P,)
    x = x + W.rows("embeddings.position_embedding.weight", pos)  # (P, d_v)
    P = x.shape[0]
    maps = np.empty((v.n_layer, v.n_head, P, P), dtype=dtype)  # (L_v, nh_v, P, P)
    scale = (v.d // v.n_head) ** -0.5
    for i in range(v.n_layer):
        p = f"encoder.layers.{i}."
        h = layer_norm(x, W[p + "layer_norm1.weight"], W[p + "layer_norm1.bias"], v.eps)  # (P, d_v)
        q, k, vv = (linear(h, W[p + f"self_attn.{n}_proj.weight"], W.get(p + f"self_attn.{n}_proj.bias"))
                    for n in ("q", "k", "v"))  # 3 x (P, d_v)
        ctx, maps[i] = self_attention(q, k, vv, v.n_head, None, scale, kernel)  # (P, d_v), (nh_v, P, P)
        x = x + linear(ctx, W[p + "self_attn.out_proj.weight"], W.get(p + "self_attn.out_proj.bias"))
        h = layer_norm(x, W[p + "layer_norm2.weight"], W[p + "layer_norm2.bias"], v.eps)
        h = activation(v.act, linear(h, W[p + "mlp.fc1.weight"], W.get(p + "mlp.fc1.bias")))  # (P, d_ff)
        x = x + linear(h, W[p + "mlp.fc2.weight"], W.get(p + "mlp.fc2.bias"))  # (P, d_v)
    return maps, layer_norm(x, W["post_layernorm.weight"], W["post_layernorm.bias"], v.eps)


def pixel_shuffle(x: np.ndarray, s: int) -> np.ndarray:
    """The connector's pixel shuffle of one image: (g*g, d) -> (g*g / s^2, d*s^2), row-major over (g/s, g/s)."""
    seq, d = x.shape
    g = int(seq ** 0.5)
    x = x.reshape(g, g // s, d * s)  # (h, w/s, d*s)
    x = x.transpose(1, 0, 2).reshape(g // s, g // s, d * s * s)  # (w/s, h/s, d*s*s)
    return x.transpose(1, 0, 2).reshape(seq // (s * s), d * s * s)  # (g*g/s^2, d*s^2)


def rope(x: np.ndarray, positions: np.ndarray) -> np.ndarray:
    """lerobot's apply_rope of (heads, T, hd) at (T,) positions: halves rotated together, base 10000."""
    dt = x.dtype.type
    half = x.shape[-1] // 2
    expo = dt(2.0 / x.shape[-1]) * np.arange(half, dtype=x.dtype)  # (hd/2,)
    timescale = np.power(dt(ROPE_BASE), expo).astype(x.dtype)  # (hd/2,)
    rad = positions.astype(x.dtype)[:, None] / timescale[None, :]  # (T, hd/2)
    sin, cos = np.sin(rad), np.cos(rad)
    x1, x2 = x[..., :half], x[..., half:]
    return np.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], axis=-1)  # (heads, T, hd)


def _attend(q, k, v, mask, group: int, hd: int, kernel: str):
    """Grouped-query attention as lerobot's eager_attention_forward: (out (T, nh*hd), weights (nh, Tq, Tk))."""
    kx = np.repeat(k, group, axis=0) if group > 1 else k  # (nh, Tk, hd)
    vx = np.repeat(v, group, axis=0) if group > 1 else v  # (nh, Tk, hd)
    try:
        res = attention(np.ascontiguousarray(q), np.ascontiguousarray(kx), np.ascontiguousarray(vx), mask,
                        scale=hd ** -0.5, kernel=pick_kernel(kernel, cells=q.shape[0] * q.shape[1] * kx.shape[1]),
                        return_weights=True)
    except ValueError as exc:
        raise CheckpointError(str(exc)) from None
    if res.weights is None:
        raise CheckpointError(f"attention kernel {kernel!r} did not return weights; choose a kernel that does")
    return merge_heads(res.out.astype(q.dtype, copy=False)), res.weights.astype(q.dtype, copy=False)


def _mlp_block(W: Weights, p: str, x: np.ndarray, eps: float) -> np.ndarray:
    """x + down(silu(gate(h)) * up(h)) with h the post-attention RMSNorm of x."""
    h = rms_norm(x, W[p + "post_attention_layernorm.weight"], eps)  # (T, C)
    m = p + "mlp."
    gate = activation("silu", linear(h, W[m + "gate_proj.weight"], W.get(m + "gate_proj.bias")))  # (T, ff)
    gate *= linear(h, W[m + "up_proj.weight"], W.get(m + "up_proj.bias"))
    return x + linear(gate, W[m + "down_proj.weight"], W.get(m + "down_proj.bias"))  # (T, C)


def vlm_layer(c, W: Weights, i: int, x: np.ndarray, positions: np.ndarray, mask: np.ndarray, kernel: str,
              edit=None):
    """One VLM layer over the prefix -> (x (Tp, C), weights (nh, Tp, Tp), k (nkv, Tp, hd) after the rotation, v).

    ``edit`` (an :class:`attnviz.checkpoints.interventions.Edit` over the prefix, or None) removes knocked-out
    edges from ``mask`` and edits the heads' outputs before ``o_proj``, as a forward pre-hook there would; its
    ``stream``, when a list, gets the residual stream entering the layer."""
    s = c.decoder
    p, a = f"layers.{i}.", f"layers.{i}.self_attn."
    if edit is not None and edit.stream is not None:
        edit.stream.append(x)  # the residual stream entering the layer
    h = rms_norm(x, W[p + "input_layernorm.weight"], c.ln_eps)  # (Tp, C)
    q = split_heads(linear(h, W[a + "q_proj.weight"], W.get(a + "q_proj.bias")), c.n_head)  # (nh, Tp, hd)
    k = split_heads(linear(h, W[a + "k_proj.weight"], W.get(a + "k_proj.bias")), s.n_kv_head)  # (nkv, Tp, hd)
    v = split_heads(linear(h, W[a + "v_proj.weight"], W.get(a + "v_proj.bias")), s.n_kv_head)  # (nkv, Tp, hd)
    q, k = rope(q, positions), rope(k, positions)
    if edit is not None:
        mask = edit.mask(i, mask)  # (Tp, Tp) or (nh, Tp, Tp)
    ctx, w = _attend(q, k, v, mask, s.group, s.head_dim, kernel)  # (Tp, nh*hd), (nh, Tp, Tp)
    if edit is not None:
        ctx = edit.merged(i, ctx, c.n_head)
    x = x + linear(ctx, W[a + "o_proj.weight"], W.get(a + "o_proj.bias"))  # (Tp, C)
    return _mlp_block(W, p, x, c.ln_eps), w, k, v


def expert_layer(c, W: Weights, j: int, e: np.ndarray, k_cache: np.ndarray, v_cache: np.ndarray, cross: bool,
                 positions: np.ndarray, mask: np.ndarray, kernel: str, edit=None):
    """Expert layer j over the action tokens -> (e (Ta, C_e), weights (nh, Ta, Tk)).

    Self-attention (``cross`` False): keys and values are the VLM layer's cached prefix ones followed by the
    expert's own, rotated at ``positions`` (the suffix's, after the prefix); ``mask`` (Ta, Tp + Ta).
    Cross-attention: keys and values are the expert's k/v projections of the cached (rotated) prefix keys and
    values, not rotated again; the queries are rotated at 0..Ta-1; ``mask`` (Ta, Tp). ``edit`` (an
    :class:`~attnviz.checkpoints.interventions.Edit` over the action rows: knockouts (Ta, Tk), head outputs
    (nh, Ta, hd)) as in :func:`vlm_layer`."""
    s = c.decoder
    p, a = f"layers.{j}.", f"layers.{j}.self_attn."
    if edit is not None and edit.stream is not None:
        edit.stream.append(e)  # the action rows' stream entering the layer
    h = rms_norm(e, W[p + "input_layernorm.weight"], c.ln_eps)  # (Ta, C_e)
    q = split_heads(linear(h, W[a + "q_proj.weight"], W.get(a + "q_proj.bias")), c.n_head)  # (nh, Ta, hd)
    if cross:
        kc, vc = merge_heads(k_cache), merge_heads(v_cache)  # (Tp, nkv*hd) each
        k = split_heads(linear(kc, W[a + "k_proj.weight"], W.get(a + "k_proj.bias")), s.n_kv_head)  # (nkv, Tp, hd)
        v = split_heads(linear(vc, W[a + "v_proj.weight"], W.get(a + "v_proj.bias")), s.n_kv_head)  # (nkv, Tp, hd)
        q = rope(q, positions - positions.min())
    else:
        k = split_heads(linear(h, W[a + "k_proj.weight"], W.get(a + "k_proj.bias")), s.n_kv_head)  # (nkv, Ta, hd)
        v = split_heads(linear(h, W[a + "v_proj.weight"], W.get(a + "v_proj.bias")), s.n_kv_head)  # (nkv, Ta, hd)
        q, k = rope(q, positions), rope(k, positions)
        k = np.concatenate([k_cache, k], axis=1)  # (nkv, Tp + Ta, hd)
        v = np.concatenate([v_cache, v], axis=1)  # (nkv, Tp + Ta, hd)
    if edit is not None:
        mask = edit.mask(j, mask)  # (Ta, Tk) or (nh, Ta, Tk)
    ctx, w = _attend(q, k, v, mask, s.group, s.head_dim, kernel)  # (Ta, nh*hd), (nh, Ta, Tk)
    if edit is not None:
        ctx = edit.merged(j, ctx, c.n_head)
    e = e + linear(ctx, W[a + "o_proj.weight"], W.get(a + "o_proj.bias"))  # (Ta, C_e)
    return _mlp_block(W, p, e, c.ln_eps), w


def time_embedding(t: float, dim: int, min_period: float, max_period: float, dtype) -> np.ndarray:
    """(dim,) sine-cosine embedding of the flow time, in float64 as lerobot computes it, then cast."""
    frac = np.linspace(0.0, 1.0, dim // 2, dtype=np.float64)  # (dim/2,)
    period = min_period * (max_period / min_period) ** frac  # (dim/2,)
    x = (1.0 / period * 2 * math.pi) * float(np.float32(t))  # (dim/2,): t is a float32 tensor there
    return np.concatenate([np.sin(x), np.cos(x)]).astype(dtype)  # (dim,)


def suffix_embedding(H: Weights, noisy: np.ndarray, t: float, spec, dtype) -> np.ndarray:
    """(Ta, C_e) action tokens: action_in_proj of the noisy actions beside the time embedding, through the MLP."""
    act = linear(noisy, H["action_in_proj.weight"], H["action_in_proj.bias"])  # (Ta, C_e)
    temb = np.broadcast_to(time_embedding(t, spec.expert.d_model, spec.min_period, spec.max_period, dtype),
                           act.shape)  # (Ta, C_e)
    h = linear(np.concatenate([act, temb], axis=1), H["action_time_mlp_in.weight"], H["action_time_mlp_in.bias"])
    h = activation("silu", h)  # (Ta, C_e)
    return linear(h, H["action_time_mlp_out.weight"], H["action_time_mlp_out.bias"])  # (Ta, C_e)


def ar_mask_2d(ar: np.ndarray, valid: np.ndarray) -> np.ndarray:
    """openpi / lerobot make_att_2d_masks: M[i, j] = cumsum(ar)[j] <= cumsum(ar)[i], both tokens valid."""
    c = np.cumsum(ar)  # (T,)
    return (c[None, :] <= c[:, None]) & valid[None, :] & valid[:, None]  # (T, T)
