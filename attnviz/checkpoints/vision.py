"""Forward passes of the vision transformers (ViT / DeiT, CLIP vision, SigLIP vision, DINOv2) at any input
size, and the per-layer hidden states of the CLIP and SigLIP towers that vision-language models read.

The patch grid is the input's (H // P, W // P), as the patch convolution's stride gives it; when it
differs from the trained grid the position table is interpolated as transformers does with
``interpolate_pos_encoding=True`` (:mod:`attnviz.checkpoints.interpolate`; SigLIP has no class-token
row, so the whole table is resized). Idefics3's and SmolVLM's SigLIP (``TOWER_TYPES``) instead pick
one trained position per patch by bucketing its fractional coordinate in the image's real patches
(:func:`bucket_position_ids`), and mask the padded patches out as keys.

:func:`vision_hidden_states` returns what transformers' ``output_hidden_states=True`` returns for the
CLIP and SigLIP towers: entry 0 the encoder's input (CLIP: after ``pre_layrnorm``), entry i the output
of layer i, the last entry before ``post_layernorm`` (:func:`post_norm` applies it).

DINOv2 with registers puts ``num_register_tokens`` learned tokens between [CLS] and the patches (after the
positions are added: they have none); its position table is resized with antialiasing
(``interpolate_positions(..., antialias=True)``). BEiT (:func:`_beit`) adds a learned relative position
bias to every layer's scores (one table per layer, or one shared table), scales each residual branch
by a learned vector (layer scale), has no position table unless ``use_absolute_position_embeddings``,
and with ``use_mean_pooling`` no final LayerNorm on the hidden state. Its bias is built for the input's
own patch grid as transformers builds it: the table's (2 gh - 1) x (2 gw - 1) part resized bilinearly
(viewed in transformers' own axis order, which for a non-square grid is transposed) and indexed by
each pair of patches' offset, three rows for the pairs with [CLS]. A ``terms`` dict passed to
:func:`forward_vision` receives BEiT's score terms separately: ``"content"`` (q k^T / sqrt(hs)) and
``"position bias"``, both (L, nh, T, T); their sum is what the softmax takes.

Swin (:mod:`attnviz.checkpoints.swin`) is shown by its first stage, whose tokens are the patches: each layer's
window attention laid into the (T, T) map of the patch grid (0 outside a query's window); ``hidden`` is its
``last_hidden_state`` (the last stage's merged tokens); ``terms`` gets its content, position bias, shift mask
and window mask.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from attnviz.checkpoints.errors import CheckpointError
from attnviz.checkpoints.families import CLIP_TYPES, SIGLIP_TYPES, TOWER_TYPES
from attnviz.checkpoints.forward import _Cast, biased_attention, forward_vit, patchify
from attnviz.checkpoints.interpolate import bilinear_resize, interpolate_positions
from attnviz.checkpoints.layers import KERNEL_CHOICES, activation, layer_norm, linear, self_attention
from attnviz.checkpoints.model_config import CheckpointConfig

# model_type -> name of its position table, and whether the table has a leading batch axis
POSITIONS = {"vit": ("embeddings.position_embeddings", True), "deit": ("embeddings.position_embeddings", True),
             "dinov2": ("embeddings.position_embeddings", True),
             "dinov2_with_registers": ("embeddings.position_embeddings", True),
             "beit": ("embeddings.position_embeddings", True),
             **{t: ("embeddings.position_embedding.weight", False) for t in CLIP_TYPES + SIGLIP_TYPES + TOWER_TYPES}}
HIDDEN_STATE_TYPES = CLIP_TYPES + SIGLIP_TYPES + TOWER_TYPES  # towers vision_hidden_states runs
ANTIALIASED = ("dinov2_with_registers",)  # position tables resized with antialias=True


def input_grid(c: CheckpointConfig, hw: tuple[int, int]) -> tuple[int, int]:
    """(gh, gw) patch grid of an input of (H, W) pixels; refuses one smaller than a patch."""
    gh, gw = hw[0] // c.patch_size[0], hw[1] // c.patch_size[1]
    if gh < 1 or gw < 1:
        raise CheckpointError(
            f"the model input is {hw[0]}x{hw[1]} px, smaller than one {c.patch_size[0]}x{c.patch_size[1]} px patch"
        )
    return gh, gw


def positions_for(c: CheckpointConfig, weights, grid: tuple[int, int]) -> np.ndarray:
    """(n_extra + gh*gw, d) position rows for ``grid``: the stored table, or it interpolated."""
    name, batched = POSITIONS[c.model_type]
    table = weights[name][0] if batched else weights[name]  # (N, d)
    if tuple(grid) == c.grid:
        return table
    return interpolate_positions(table, c.n_extra - c.n_registers, grid, antialias=c.model_type in ANTIALIASED)


def forward_vision(c: CheckpointConfig, weights, pixels: np.ndarray, *, dtype=np.float32, kernel: str = "auto", edit=None,
                   terms: dict | None = None):
    """(attentions (L, nh, T, T), hidden (T, d), grid (gh, gw)) of a vision model on pixels (C, H, W).

    ``hidden`` is the base model's ``last_hidden_state``: after the final LayerNorm for ViT, DeiT,
    DINOv2 and SigLIP (``post_layernorm``), the encoder's output for CLIP (whose post_layernorm only
    touches the pooled class token). ``edit``: an intervention, applied as in
    :func:`attnviz.checkpoints.forward.bert_blocks` (None: the plain pass). BEiT's hidden state has no final
    LayerNorm with mean pooling. ``terms``: a dict that receives BEiT's score terms (module docstring);
    the other families leave it empty.
    """
    grid = input_grid(c, pixels.shape[1:])
    pixels = pixels[:, : grid[0] * c.patch_size[0], : grid[1] * c.patch_size[1]]  # the stride drops the rest
    if c.model_type in HIDDEN_STATE_TYPES:
        atts, states = vision_hidden_states(c, weights, pixels, dtype=dtype, kernel=kernel, edit=edit)
        hidden = states[-1] if c.model_type in CLIP_TYPES else post_norm(c, weights, states[-1], dtype=dtype)
        return atts, hidden, grid
    if c.model_type == "swin":  # stage 0's layers, each window laid into the patch grid's map (checkpoints.swin)
        from attnviz.checkpoints.swin import forward_swin

        if edit is not None:
            raise CheckpointError("interventions are not available for Swin's windowed attention")
        stages, hidden = forward_swin(c, weights, pixels, dtype=dtype, kernel=kernel, terms=terms)
        return stages[0].maps(), hidden, grid
    if c.model_type == "beit":
        atts, hidden = _beit(c, _Cast(weights, dtype), pixels, grid, dtype, kernel, edit, terms)
        return atts, hidden, grid
    pos = positions_for(c, weights, grid)  # (T, d)
    if c.model_type in ("vit", "deit"):
        cg = replace(c, image_size=(grid[0] * c.patch_size[0], grid[1] * c.patch_size[1]))
        w = dict(weights)
        w["embeddings.position_embeddings"] = pos[None]
        atts, hidden = forward_vit(cg, w, np.ascontiguousarray(pixels), dtype=dtype, kernel=kernel, edit=edit)
    elif c.model_type in ("dinov2", "dinov2_with_registers"):
        atts, hidden = _dinov2(c, _Cast(weights, dtype), pixels, pos.astype(dtype, copy=False), dtype, kernel, edit)
    else:
        raise CheckpointError(f"no vision forward pass for model_type {c.model_type!r}")
    return atts, hidden, grid


def _patches(c: CheckpointConfig, W: _Cast, pixels: np.ndarray, weight: str, bias: str | None, dtype) -> np.ndarray:
    proj = W[weight].reshape(c.d_model, -1)  # (d, C*ph*pw)
    x = patchify(np.ascontiguousarray(pixels).astype(dtype, copy=False), c.patch_size)  # (N, C*ph*pw)
    return linear(x, proj, None if bias is None else W[bias])  # (N, d)


# ---- CLIP and SigLIP towers: per-layer hidden states ---------------------------------------------------


def vision_hidden_states(c: CheckpointConfig, weights, pixels: np.ndarray, *, dtype=np.float32, kernel: str = "auto",
                         upto: int | None = None, patch_mask: np.ndarray | None = None, edit=None):
    """(attentions (L', nh, T, T), hidden_states [L' + 1 arrays (T, d)]) of a CLIP or SigLIP tower on pixels (C, H, W).

    ``hidden_states`` is transformers' ``output_hidden_states=True`` tuple as a list: entry 0 the encoder's
    input (CLIP: the embeddings after ``pre_layrnorm``; SigLIP: patch embeddings + positions), entry i
    the output of layer i, the last entry *before* ``post_layernorm`` (apply :func:`post_norm` for
    PaliGemma's and Idefics3's ``last_hidden_state``). Tokens: CLIP's class token then the patches
    row-major; SigLIP's patches only.

    ``upto``: the hidden-state index the caller needs (a ``vision_feature_layer``: -2 for LLaVA, counted
    over the L + 1 entries like Python indices); only layers 0 .. upto-1 run, so ``hidden_states[-1]``
    is the entry asked for and ``attentions`` holds the L' = upto layers run. None runs every layer.

    ``weights``: any mapping from the canonical names of :func:`attnviz.checkpoints.families.family_tensors`
    (``embeddings.patch_embedding.weight``, ``encoder.layers.{i}.self_attn.q_proj.weight``, ...) to arrays,
    the checkpoint's own prefix (``vision_model.``, ``model.vision_tower.vision_model.``) stripped.

    ``patch_mask`` (gh, gw) bool, True for a real patch of a padded tile (Idefics3's
    ``patch_attention_mask``; SigLIP-type towers only): position ids are bucketised per image
    (:func:`bucket_position_ids`) and padded patches are masked out as keys (their rows are still computed,
    as transformers computes them). ``idefics3_vision`` / ``smolvlm_vision`` always bucket (an all-True
    mask when none is given), as their embeddings do.
    """
    dt = _float_dtype(dtype)
    if kernel not in KERNEL_CHOICES:
        raise CheckpointError(f"attention kernel {kernel!r} is not available (available: {', '.join(KERNEL_CHOICES)})")
    if c.model_type not in HIDDEN_STATE_TYPES:
        raise CheckpointError(f"vision_hidden_states runs CLIP and SigLIP towers, not model_type {c.model_type!r}")
    pixels = np.asarray(pixels)
    if pixels.ndim != 3 or pixels.shape[0] != c.num_channels:
        raise CheckpointError(f"pixels must be ({c.num_channels}, H, W) (got shape {pixels.shape})")
    grid = input_grid(c, pixels.shape[1:])
    pixels = pixels[:, : grid[0] * c.patch_size[0], : grid[1] * c.patch_size[1]]  # (C, H', W') the stride drops the rest
    n_run = layers_needed(c, upto)
    W = _Cast(weights, dt)
    key_mask = None
    if c.model_type in CLIP_TYPES:
        if patch_mask is not None:
            raise CheckpointError("patch_mask is for SigLIP towers with per-image position buckets (Idefics3), not CLIP")
        emb = _patches(c, W, pixels, "embeddings.patch_embedding.weight", None, dt)  # (N, d)
        pos = positions_for(c, weights, grid).astype(dt, copy=False)  # (1 + N, d)
        x = np.concatenate([W["embeddings.class_embedding"][None], emb], axis=0) + pos  # (T, d)
        x = layer_norm(x, W["pre_layrnorm.weight"], W["pre_layrnorm.bias"], c.ln_eps)  # (T, d)
    else:
        emb = _patches(c, W, pixels, "embeddings.patch_embedding.weight", "embeddings.patch_embedding.bias", dt)  # (N, d)
        if patch_mask is None and c.model_type not in TOWER_TYPES:
            x = emb + positions_for(c, weights, grid).astype(dt, copy=False)  # (N, d)
        else:
            if c.grid[0] != c.grid[1]:
                raise CheckpointError(f"patch_mask: position buckets need a square position table, the model's is "
                                      f"{c.grid[0]}x{c.grid[1]}")
            real = _check_patch_mask(patch_mask, grid)  # (gh, gw)
            ids = bucket_position_ids(real, c.grid[0])  # (N,)
            x = emb + W.rows("embeddings.position_embedding.weight", ids)  # (N, d)
            if not real.all():
                key_mask = real.reshape(-1)  # (N,) padded patches are no key
    atts, states = _pre_ln_layers(c, W, x, n_run, key_mask, kernel, edit)
    return atts, states


def post_norm(c: CheckpointConfig, weights, hidden: np.ndarray, *, dtype=np.float32) -> np.ndarray:
    """``post_layernorm`` applied to hidden states (T, d): SigLIP's ``last_hidden_state`` from the last entry of
    :func:`vision_hidden_states` (PaliGemma, Idefics3 read it). CLIP checkpoints hold the same tensor, but
    transformers applies it to the pooled class token only, and family_tensors does not list it for CLIP."""
    W = _Cast(weights, _float_dtype(dtype))
    h = np.asarray(hidden).astype(_float_dtype(dtype), copy=False)  # (T, d)
    return layer_norm(h, W["post_layernorm.weight"], W["post_layernorm.bias"], c.ln_eps)  # (T, d)


def layers_needed(c: CheckpointConfig, upto: int | None) -> int:
    """How many layers to run for hidden-state index ``upto`` (of L + 1 entries; negative from the end)."""
    if upto is None:
        return c.n_layer
    if isinstance(upto, bool) or not isinstance(upto, (int, np.integer)):
        raise CheckpointError(f"upto must be a hidden-state index (an integer, e.g. -2), not {upto!r}")
    n = c.n_layer + 1
    if not -n <= int(upto) < n:
        raise CheckpointError(f"upto {upto} is out of range for {n} hidden states ({c.n_layer} layers + the embeddings)")
    return int(upto) % n


def _pre_ln_layers(c: CheckpointConfig, W: _Cast, x: np.ndarray, n_run: int, key_mask, kernel: str, edit=None):
    """CLIP / SigLIP encoder layers 0 .. n_run-1 on x (T, d): (attentions (n_run, nh, T, T), [x, out_0, ...])."""
    T, scale = x.shape[0], 1.0 / math.sqrt(c.head_size)
    mask = None if key_mask is None else np.broadcast_to(key_mask[None, :], (T, T))  # (T, T) query may see key
    atts = np.empty((n_run, c.n_head, T, T), dtype=x.dtype)  # (L', nh, T, T)
    states = [x]
    for i in range(n_run):
        if edit is not None:
            x = edit.residual(i, x)
        p = f"encoder.layers.{i}."
        h = layer_norm(x, W[p + "layer_norm1.weight"], W[p + "layer_norm1.bias"], c.ln_eps)  # (T, d)
        q, k, v = (linear(h, W.matrix(p + f"self_attn.{n}_proj.weight"), W[p + f"self_attn.{n}_proj.bias"])
                   for n in ("q", "k", "v"))  # 3 x (T, d)
        m = mask if edit is None else edit.mask(i, mask)
        ctx, atts[i] = self_attention(q, k, v, c.n_head, m, scale, kernel)  # (T, d), (nh, T, T)
        if edit is not None:
            ctx = edit.merged(i, ctx, c.n_head)
        x = x + linear(ctx, W.matrix(p + "self_attn.out_proj.weight"), W[p + "self_attn.out_proj.bias"])  # (T, d)
        h = layer_norm(x, W[p + "layer_norm2.weight"], W[p + "layer_norm2.bias"], c.ln_eps)  # (T, d)
        h = activation(c.act, linear(h, W.matrix(p + "mlp.fc1.weight"), W[p + "mlp.fc1.bias"]))  # (T, ff)
        x = x + linear(h, W.matrix(p + "mlp.fc2.weight"), W[p + "mlp.fc2.bias"])  # (T, d)
        states.append(x)
    return atts, states


def _float_dtype(dtype):
    try:
        dt = np.dtype(dtype).type
    except TypeError:
        dt = None
    if dt not in (np.float32, np.float64):
        raise CheckpointError(f"forward dtype must be float32 or float64 (got {dtype!r})")
    return dt


# ---- Idefics3's position buckets ------------------------------------------------------------------------


def _check_patch_mask(patch_mask, grid: tuple[int, int]) -> np.ndarray:
    if patch_mask is None:
        return np.ones(grid, dtype=bool)  # (gh, gw)
    m = np.asarray(patch_mask)
    if m.dtype != bool or m.shape != tuple(grid):
        raise CheckpointError(f"patch_mask must be a bool ({grid[0]}, {grid[1]}) array, one per patch of the input "
                              f"(got {m.dtype} {m.shape})")
    if not m[:, 0].any() or not m[0, :].any():
        raise CheckpointError("patch_mask has no real patch in its first row or first column; the position rule counts "
                              "the real patches there (a tile padded at its bottom and right)")
    return m


def patch_mask_from_pixels(pixel_mask: np.ndarray, patch_size: tuple[int, int]) -> np.ndarray:
    """(H, W) bool pixel mask of a padded tile (the processor's ``pixel_attention_mask``) -> (gh, gw): a patch is
    real when any of its pixels is, as Idefics3's ``get_image_features`` unfolds it."""
    m = np.asarray(pixel_mask).astype(bool)  # (H, W)
    ph, pw = patch_size
    gh, gw = m.shape[0] // ph, m.shape[1] // pw
    blocks = m[: gh * ph, : gw * pw].reshape(gh, ph, gw, pw)  # (gh, ph, gw, pw)
    return blocks.any(axis=(1, 3))  # (gh, gw)


ARANGE_LANES = 8  # float32 lanes of torch's vectorised CPU arange on x86 (measured against torch 2.13 for 1/n, n < 600)


def _arange_f32(start: float, stop: float, step: float) -> np.ndarray:
    """torch.arange(start, stop, step) for Python floats, bit for bit as torch's x86 CPU kernel makes it: the
    length ceil((stop - start) / step) in double; whole pairs of 8-lane vectors take lane k of a vector
    starting at i0 as float32(float32(start + step * i0) + k * step); the tail is float32(start + step * i).
    (1/n in float32 and in double differ, so a boundary may differ from float32(start + step * i) by one ulp,
    which moves a patch whose coordinate falls on it to the next bucket.)"""
    n = max(0, math.ceil((stop - start) / step))
    i = np.arange(n, dtype=np.int64)  # (n,)
    out = (start + step * i.astype(np.float64)).astype(np.float32)  # (n,) the scalar tail's values
    vec = (n // (2 * ARANGE_LANES)) * 2 * ARANGE_LANES  # elements the vector loop writes
    i0 = (i[:vec] // ARANGE_LANES) * ARANGE_LANES  # (vec,) first index of each vector
    base = (start + step * i0.astype(np.float64)).astype(np.float32).astype(np.float64)  # (vec,)
    out[:vec] = (base + (i[:vec] - i0) * step).astype(np.float32)
    return out  # (n,) float32


def bucket_position_ids(real: np.ndarray, n_side: int) -> np.ndarray:
    """(gh * gw,) int64 rows of the n_side x n_side position table for the patches of one image, as
    Idefics3VisionEmbeddings picks them: the real patches' rows (the first column's count) and columns
    (the first row's count) get fractional coordinates i / count in float32, clamped below 1 - 1e-6 and
    bucketised into n_side equal buckets (``torch.bucketize(..., right=True)`` = ``searchsorted(side="right")``);
    row id * n_side + column id; padded patches take row 0."""
    real = np.asarray(real, dtype=bool)  # (gh, gw)
    gh, gw = real.shape
    boundaries = _arange_f32(1 / n_side, 1.0, 1 / n_side)  # (n_side - 1,) float32
    top = np.float32(1.0 - 1e-6)

    def buckets(count: int, size: int) -> np.ndarray:
        step = np.float32(1.0) / np.float32(count)
        frac = np.minimum(np.arange(size, dtype=np.float32) * step, top)  # (size,) float32
        return np.searchsorted(boundaries, frac, side="right").astype(np.int64)  # (size,)

    rows = buckets(int(real[:, 0].sum()), gh)  # (gh,)
    cols = buckets(int(real[0, :].sum()), gw)  # (gw,)
    ids = (rows[:, None] * n_side + cols[None, :]).reshape(-1)  # (gh * gw,)
    return np.where(real.reshape(-1), ids, 0)  # (gh * gw,)


# ---- DINOv2 ---------------------------------------------------------------------------------------------


def _dinov2(c: CheckpointConfig, W: _Cast, pixels, pos, dtype, kernel, edit=None):
    emb = _patches(c, W, pixels, "embeddings.patch_embeddings.projection.weight",
                   "embeddings.patch_embeddings.projection.bias", dtype)  # (N, d)
    x = np.concatenate([W["embeddings.cls_token"][0], emb], axis=0) + pos  # (1 + N, d)
    if c.n_registers:  # registers between [CLS] and the patches, without positions
        x = np.concatenate([x[:1], W["embeddings.register_tokens"][0], x[1:]], axis=0)  # (1 + R + N, d)
    T, scale = x.shape[0], 1.0 / math.sqrt(c.head_size)
    atts = np.empty((c.n_layer, c.n_head, T, T), dtype=dtype)  # (L, nh, T, T)
    for i in range(c.n_layer):
        if edit is not None:
            x = edit.residual(i, x)
        p = f"encoder.layer.{i}."
        h = layer_norm(x, W[p + "norm1.weight"], W[p + "norm1.bias"], c.ln_eps)  # (T, d)
        q, k, v = (linear(h, W[p + f"attention.attention.{n}.weight"], W.get(p + f"attention.attention.{n}.bias"))
                   for n in ("query", "key", "value"))  # 3 x (T, d)
        ctx, atts[i] = self_attention(q, k, v, c.n_head, None if edit is None else edit.mask(i, None), scale,
                                      kernel)  # (T, d), (nh, T, T)
        if edit is not None:
            ctx = edit.merged(i, ctx, c.n_head)
        a = linear(ctx, W[p + "attention.output.dense.weight"], W[p + "attention.output.dense.bias"])
        x = x + a * W[p + "layer_scale1.lambda1"]  # DINOv2's learned layer scale before the residual add
        h = layer_norm(x, W[p + "norm2.weight"], W[p + "norm2.bias"], c.ln_eps)
        h = activation(c.act, linear(h, W[p + "mlp.fc1.weight"], W[p + "mlp.fc1.bias"]))  # (T, ff)
        x = x + linear(h, W[p + "mlp.fc2.weight"], W[p + "mlp.fc2.bias"]) * W[p + "layer_scale2.lambda1"]
    return atts, layer_norm(x, W["layernorm.weight"], W["layernorm.bias"], c.ln_eps)


# ---- BEiT -----------------------------------------------------------------------------------------------


def beit_bias_index(grid: tuple[int, int]) -> np.ndarray:
    """(T, T) int64 row of the resized bias table for each (query, key) of a (gh, gw) grid with [CLS] first:
    patch pairs by their offset, (dy + gh - 1) * (2 gw - 1) + (dx + gw - 1); then n - 3 for [CLS] to a patch,
    n - 2 for a patch to [CLS], n - 1 for [CLS] to itself (n the table's rows), as BEiT's
    generate_relative_position_index."""
    gh, gw = grid
    n = (2 * gh - 1) * (2 * gw - 1) + 3
    r, col = np.divmod(np.arange(gh * gw), gw)  # (N,) each patch's row and column
    dy = r[:, None] - r[None, :] + gh - 1  # (N, N)
    dx = col[:, None] - col[None, :] + gw - 1  # (N, N)
    idx = np.empty((gh * gw + 1,) * 2, dtype=np.int64)  # (T, T)
    idx[1:, 1:] = dy * (2 * gw - 1) + dx
    idx[0, :] = n - 3
    idx[:, 0] = n - 2
    idx[0, 0] = n - 1
    return idx


def beit_bias(c: CheckpointConfig, table: np.ndarray, grid: tuple[int, int]) -> np.ndarray:
    """(nh, T, T) relative position bias of a BEiT layer on an input of (gh, gw) patches, from its table
    ((2 Gh - 1)(2 Gw - 1) + 3, nh) trained on the (Gh, Gw) grid: transformers views the patch part as
    (2 Gw - 1, 2 Gh - 1) (its own axis order), resizes that bilinearly to (2 gh - 1, 2 gw - 1) (a square grid
    at its trained size: unchanged) and reads it back row-major."""
    Gh, Gw = c.grid
    gh, gw = grid
    nh = table.shape[1]
    old = table[:-3].reshape(2 * Gw - 1, 2 * Gh - 1, nh)  # (2Gw-1, 2Gh-1, nh) as BeitRelativePositionBias views it
    new = bilinear_resize(old, (2 * gh - 1, 2 * gw - 1)).reshape(-1, nh)  # ((2gh-1)(2gw-1), nh)
    full = np.concatenate([new, table[-3:]], axis=0)  # (n, nh)
    return np.ascontiguousarray(full[beit_bias_index(grid)].transpose(2, 0, 1))  # (nh, T, T)


def _beit(c: CheckpointConfig, W: _Cast, pixels, grid, dtype, kernel: str, edit, terms: dict | None):
    emb = _patches(c, W, pixels, "embeddings.patch_embeddings.projection.weight",
                   "embeddings.patch_embeddings.projection.bias", dtype)  # (N, d)
    x = np.concatenate([W["embeddings.cls_token"][0], emb], axis=0)  # (T, d)
    if c.abs_positions:
        x = x + positions_for(c, W, grid)  # (T, d)
    T, scale = x.shape[0], 1.0 / math.sqrt(c.head_size)
    shared = (beit_bias(c, W["encoder.relative_position_bias.relative_position_bias_table"], grid)
              if c.rel_bias == "beit_shared" else None)  # (nh, T, T)
    zero = np.zeros((c.n_head, T, T), dtype=dtype)  # (nh, T, T) no bias at all (neither option set)
    atts = np.empty((c.n_layer, c.n_head, T, T), dtype=dtype)  # (L, nh, T, T)
    content = np.empty_like(atts) if terms is not None else None  # (L, nh, T, T)
    biases = np.empty_like(atts) if terms is not None else None  # (L, nh, T, T)
    for i in range(c.n_layer):
        if edit is not None:
            x = edit.residual(i, x)
        p = f"encoder.layer.{i}."
        if c.rel_bias == "beit":
            bias = beit_bias(c, W[p + "attention.attention.relative_position_bias.relative_position_bias_table"], grid)
        else:
            bias = shared if shared is not None else zero  # (nh, T, T)
        h = layer_norm(x, W[p + "layernorm_before.weight"], W[p + "layernorm_before.bias"], c.ln_eps)  # (T, d)
        q, k, v = (linear(h, W[p + f"attention.attention.{n}.weight"], W.get(p + f"attention.attention.{n}.bias"))
                   for n in ("query", "key", "value"))  # 3 x (T, d); the key has no bias
        ctx, atts[i] = biased_attention(q, k, v, c.n_head, bias, scale, kernel,
                                        mask=None if edit is None else edit.mask(i, None),
                                        content=None if content is None else content[i])  # (T, d), (nh, T, T)
        if biases is not None:
            biases[i] = bias
        if edit is not None:
            ctx = edit.merged(i, ctx, c.n_head)
        a = linear(ctx, W[p + "attention.output.dense.weight"], W[p + "attention.output.dense.bias"])  # (T, d)
        x = x + (W[p + "lambda_1"] * a if c.layer_scale else a)
        h = layer_norm(x, W[p + "layernorm_after.weight"], W[p + "layernorm_after.bias"], c.ln_eps)  # (T, d)
        h = activation(c.act, linear(h, W[p + "intermediate.dense.weight"], W[p + "intermediate.dense.bias"]))
        h = linear(h, W[p + "output.dense.weight"], W[p + "output.dense.bias"])  # (T, d)
        x = x + (W[p + "lambda_2"] * h if c.layer_scale else h)
    if terms is not None:
        terms["content"], terms["position bias"] = content, biases
    if c.final_norm:
        x = layer_norm(x, W["layernorm.weight"], W["layernorm.bias"], c.ln_eps)
    return atts, x
