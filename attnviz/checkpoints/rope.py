"""Rotary position embeddings (RoPE) of decoder LLMs, with the ``rope_scaling`` types their configs carry.

Follows transformers' rope utilities (default, linear, llama3, yarn, dynamic, longrope), in float32 as
they do (float64 in a float64 pass), with the "half" layout Llama-family checkpoints are stored in: the
two halves of the rotated part of each head are rotated together, not interleaved pairs. With a
``partial_rotary_factor`` below 1 (GPT-NeoX's ``rotary_pct``, Phi, StableLM) only the first
``int(head_dim * factor)`` features of each head are rotated; the rest pass unchanged.
"""

from __future__ import annotations

import math

import numpy as np


def rotary_dim(rope, head_dim: int) -> int:
    """Features of each head that are rotated: ``int(head_dim * partial_rotary_factor)``."""
    return int(head_dim * rope.partial)


def inverse_frequencies(rope, head_dim: int, dtype=np.float32, seq_len: int = 0) -> tuple[np.ndarray, float]:
    """(rotary_dim / 2,) inverse frequencies and the attention factor cos/sin are multiplied by.

    ``seq_len``: the highest position + 1 of the pass (or of the chunk a generation step computes), which
    the length-dependent types read as transformers' dynamic_rope_update does: "dynamic" raises the base
    once it passes ``max_position_embeddings``, "longrope" takes its long factors once it passes
    ``original_max_position_embeddings`` (keys already cached keep the rotation they were given)."""
    dt = np.dtype(dtype).type
    dim = rotary_dim(rope, head_dim)
    t = rope.rope_type
    if t == "dynamic":
        base = dt(rope.theta)
        if seq_len > rope.max_positions:  # as transformers computes it, on a float32 tensor of the length
            grow = dt(rope.factor) * dt(seq_len) / dt(rope.max_positions) - dt(rope.factor - 1)
            base = dt(base * grow ** dt(dim / (dim - 2)))
        exps = np.arange(0, dim, 2, dtype=np.int64).astype(dt) / dt(dim)  # (dim/2,)
        return (dt(1.0) / (base ** exps)).astype(dt), 1.0
    if t == "longrope":
        ext = rope.long_factor if seq_len > rope.original_max_positions else rope.short_factor
        exps = np.arange(0, dim, 2, dtype=np.int64).astype(dt) / dt(dim)  # (dim/2,)
        inv = dt(1.0) / (np.asarray(ext, dtype=dt) * dt(rope.theta) ** exps)
        return inv.astype(dt), float(rope.attention_factor)
    pos_freqs = dt(rope.theta) ** (np.arange(0, dim, 2, dtype=np.int64).astype(dt) / dt(dim))  # (dim/2,)
    inv = (dt(1.0) / pos_freqs).astype(dt)  # (dim/2,)
    if t == "default":
        return inv, 1.0
    if t == "linear":  # positions interpolated
        return (inv / dt(rope.factor)).astype(dt), 1.0
    if t == "llama3":  # long wavelengths divided by factor, short ones kept, a smooth blend between
        old = rope.original_max_positions
        low_wavelen = old / rope.low_freq_factor
        high_wavelen = old / rope.high_freq_factor
        wavelen = (dt(2 * math.pi) / inv).astype(dt)  # (dim/2,)
        scaled = np.where(wavelen > low_wavelen, inv / dt(rope.factor), inv).astype(dt)
        smooth = ((dt(old) / wavelen - dt(rope.low_freq_factor))
                  / dt(rope.high_freq_factor - rope.low_freq_factor)).astype(dt)
        smoothed = ((1 - smooth) * scaled / dt(rope.factor) + smooth * scaled).astype(dt)
        medium = ~(wavelen < high_wavelen) & ~(wavelen > low_wavelen)
        return np.where(medium, smoothed, scaled).astype(dt), 1.0
    # yarn: per-dimension blend of interpolated and extrapolated speeds over the beta_fast / beta_slow
    # correction range; cos/sin scaled by attention_factor (0.1 ln(factor) + 1 unless configured)
    factor = rope.factor

    def mscale(scale, m=1.0):
        return 1.0 if scale <= 1 else 0.1 * m * math.log(scale) + 1.0

    af = rope.attention_factor
    if af is None:
        af = (mscale(factor, rope.mscale) / mscale(factor, rope.mscale_all_dim)
              if rope.mscale and rope.mscale_all_dim else mscale(factor))

    def correction_dim(n_rot):
        return dim * math.log(rope.original_max_positions / (n_rot * 2 * math.pi)) / (2 * math.log(rope.theta))

    low, high = correction_dim(rope.beta_fast), correction_dim(rope.beta_slow)
    if rope.truncate:
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, dim - 1)
    if low == high:
        high += 0.001
    ramp = np.clip((np.arange(dim // 2, dtype=dt) - dt(low)) / dt(high - low), 0, 1).astype(dt)  # (dim/2,)
    extrap = (1 - ramp).astype(dt)
    interp_inv = (dt(1.0) / (dt(factor) * pos_freqs)).astype(dt)
    return (interp_inv * (1 - extrap) + inv * extrap).astype(dt), float(af)


def cos_sin(positions: np.ndarray, inv: np.ndarray, attention_factor: float) -> tuple[np.ndarray, np.ndarray]:
    """(T, head_dim) cos and sin of angle position * speed, each speed used for both halves."""
    dt = inv.dtype.type
    ang = positions.astype(dt)[:, None] * inv[None, :]  # (T, dim/2)
    emb = np.concatenate([ang, ang], axis=1)  # (T, dim)
    return (np.cos(emb) * dt(attention_factor)).astype(dt), (np.sin(emb) * dt(attention_factor)).astype(dt)


def rotate(x: np.ndarray, cos: np.ndarray, sin: np.ndarray) -> np.ndarray:
    """x (heads, T, dim) rotated: ``x * cos + rotate_half(x) * sin``, rotate_half(a, b) = (-b, a), over the
    first r = cos.shape[-1] features (r < dim: partial rotary; the others are kept as they are)."""
    r = cos.shape[-1]
    if r < x.shape[-1]:
        return np.concatenate([rotate(x[..., :r], cos, sin), x[..., r:]], axis=-1)
    half = x.shape[-1] // 2
    rot = np.concatenate([-x[..., half:], x[..., :half]], axis=-1)  # (heads, T, dim)
    return x * cos + rot * sin
