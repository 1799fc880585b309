"""Forward passes of the vision transformers (ViT / DeiT, CLIP vision, DINOv2) at any input size.

The patch grid is the input's (H // P, W // P), as the patch convolution's stride gives it; when it
differs from the trained grid the position table is interpolated as transformers does with
``interpolate_pos_encoding=True`` (:mod:`attnviz.checkpoints.interpolate`).
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from attnviz.checkpoints.model_config import ModelConfig
from attnviz.checkpoints.errors import CheckpointError
from attnviz.checkpoints.forward import _Cast, forward_vit, patchify
from attnviz.checkpoints.interpolate import interpolate_positions
from attnviz.checkpoints.layers import activation, layer_norm, linear, self_attention

# model_type -> name of its position table, and whether the table has a leading batch axis
POSITIONS = {"vit": ("embeddings.position_embeddings", True), "deit": ("embeddings.position_embeddings", True),
             "dinov2": ("embeddings.position_embeddings", True),
             "clip_vision_model": ("embeddings.position_embedding.weight", False),
             "clip": ("embeddings.position_embedding.weight", False)}


def input_grid(c: ModelConfig, hw: tuple[int, int]) -> tuple[int, int]:
    """(gh, gw) patch grid of an input of (H, W) pixels; refuses one smaller than a patch."""
    gh, gw = hw[0] // c.patch_size[0], hw[1] // c.patch_size[1]
    if gh < 1 or gw < 1:
        raise CheckpointError(
            f"the model input is {hw[0]}x{hw[1]} px, smaller than one {c.patch_size[0]}x{c.patch_size[1]} px patch"
        )
    return gh, gw


def positions_for(c: ModelConfig, weights, grid: tuple[int, int]) -> np.ndarray:
    """(n_extra + gh*gw, d) position rows for ``grid``: the stored table, or it interpolated."""
    name, batched = POSITIONS[c.model_type]
    table = weights[name][0] if batched else weights[name]  # (N, d)
    if tuple(grid) == c.grid:
        return table
    return interpolate_positions(table, c.n_extra, grid)


def forward_vision(c: ModelConfig, weights, pixels: np.ndarray, *, dtype=np.float32, kernel: str = "reference"):
    """(attentions (L, nh, T, T), hidden (T, d), grid (gh, gw)) of a vision model on pixels (C, H, W)."""
    grid = input_grid(c, pixels.shape[1:])
    pixels = pixels[:, : grid[0] * c.patch_size[0], : grid[1] * c.patch_size[1]]  # the stride drops the rest
    pos = positions_for(c, weights, grid)  # (T, d)
    if c.model_type in ("vit", "deit"):
        cg = replace(c, image_size=(grid[0] * c.patch_size[0], grid[1] * c.patch_size[1]))
        w = dict(weights)
        w["embeddings.position_embeddings"] = pos[None]
        atts, hidden = forward_vit(cg, w, np.ascontiguousarray(pixels), dtype=dtype, kernel=kernel)
    elif c.model_type in ("clip_vision_model", "clip"):
        atts, hidden = _clip(c, _Cast(weights, dtype), pixels, pos.astype(dtype, copy=False), dtype, kernel)
    elif c.model_type == "dinov2":
        atts, hidden = _dinov2(c, _Cast(weights, dtype), pixels, pos.astype(dtype, copy=False), dtype, kernel)
    else:
        raise CheckpointError(f"no vision forward pass for model_type {c.model_type!r}")
    return atts, hidden, grid


def _patches(c: ModelConfig, W: _Cast, pixels: np.ndarray, weight: str, bias: str | None, dtype) -> np.ndarray:
    proj = W[weight].reshape(c.d_model, -1)  # (d, C*ph*pw)
    x = patchify(np.ascontiguousarray(pixels).astype(dtype, copy=False), c.patch_size)  # (N, C*ph*pw)
    return linear(x, proj, None if bias is None else W[bias])  # (N, d)


def _clip(c: ModelConfig, W: _Cast, pixels, pos, dtype, kernel):
    emb = _patches(c, W, pixels, "embeddings.patch_embedding.weight", None, dtype)  # (N, d)
    x = np.concatenate([W["embeddings.class_embedding"][None], emb], axis=0) + pos  # (T, d)
    x = layer_norm(x, W["pre_layrnorm.weight"], W["pre_layrnorm.bias"], c.ln_eps)
    T, scale = x.shape[0], 1.0 / math.sqrt(c.head_size)
    atts = np.empty((c.n_layer, c.n_head, T, T), dtype=dtype)  # (L, nh, T, T)
    for i in range(c.n_layer):
        p = f"encoder.layers.{i}."
        h = layer_norm(x, W[p + "layer_norm1.weight"], W[p + "layer_norm1.bias"], c.ln_eps)  # (T, d)
        q, k, v = (linear(h, W[p + f"self_attn.{n}_proj.weight"], W[p + f"self_attn.{n}_proj.bias"])
                   for n in ("q", "k", "v"))  # 3 x (T, d)
        ctx, atts[i] = self_attention(q, k, v, c.n_head, None, scale, kernel)  # (T, d), (nh, T, T)
        x = x + linear(ctx, W[p + "self_attn.out_proj.weight"], W[p + "self_attn.out_proj.bias"])
        h = layer_norm(x, W[p + "layer_norm2.weight"], W[p + "layer_norm2.bias"], c.ln_eps)
        h = activation(c.act, linear(h, W[p + "mlp.fc1.weight"], W[p + "mlp.fc1.bias"]))  # (T, ff)
        x = x + linear(h, W[p + "mlp.fc2.weight"], W[p + "mlp.fc2.bias"])  # (T, d)
    return atts, x  # the encoder's output: post_layernorm only touches the pooled class token


def _dinov2(c: ModelConfig, W: _Cast, pixels, pos, dtype, kernel):
    emb = _patches(c, W, pixels, "embeddings.patch_embeddings.projection.weight",
                   "embeddings.patch_embeddings.projection.bias", dtype)  # (N, d)
    x = np.concatenate([W["embeddings.cls_token"][0], emb], axis=0) + pos  # (T, d)
    T, scale = x.shape[0], 1.0 / math.sqrt(c.head_size)
    atts = np.empty((c.n_layer, c.n_head, T, T), dtype=dtype)  # (L, nh, T, T)
    for i in range(c.n_layer):
        p = f"encoder.layer.{i}."
        h = layer_norm(x, W[p + "norm1.weight"], W[p + "norm1.bias"], c.ln_eps)  # (T, d)
        q, k, v = (linear(h, W[p + f"attention.attention.{n}.weight"], W.get(p + f"attention.attention.{n}.bias"))
                   for n in ("query", "key", "value"))  # 3 x (T, d)
        ctx, atts[i] = self_attention(q, k, v, c.n_head, None, scale, kernel)  # (T, d), (nh, T, T)
        a = linear(ctx, W[p + "attention.output.dense.weight"], W[p + "attention.output.dense.bias"])
        x = x + a * W[p + "layer_scale1.lambda1"]  # DINOv2's learned layer scale before the residual add
        h = layer_norm(x, W[p + "norm2.weight"], W[p + "norm2.bias"], c.ln_eps)
        h = activation(c.act, linear(h, W[p + "mlp.fc1.weight"], W[p + "mlp.fc1.bias"]))  # (T, ff)
        x = x + linear(h, W[p + "mlp.fc2.weight"], W[p + "mlp.fc2.bias"]) * W[p + "layer_scale2.lambda1"]
    return atts, layer_norm(x, W["layernorm.weight"], W["layernorm.bias"], c.ln_eps)
