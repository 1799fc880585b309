"""Positional encodings: sinusoidal, learned, RoPE and ALiBi, and the config that picks one.

Kept apart on purpose: additive tables (sinusoidal, learned) are added to the embeddings X before
the projections (:func:`positional_inputs` is exactly that addend); relative ones act later, RoPE
rotating q and k and ALiBi biasing the scaled scores, and add nothing to X. Sinusoidal follows seed
000: ``PE[pos, 2i] = sin(w_i pos)``, ``PE[pos, 2i+1] = cos(w_i pos)``, ``PE(pos + k) = M_k PE(pos)``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

KINDS = ("none", "sinusoidal", "learned", "rope", "alibi")


def _check_int(name: str, value, lo: int) -> int:
    """``value`` as an int >= lo; ValueError naming ``name`` otherwise (also for None, strings, 2.5)."""
    try:
        ok = not isinstance(value, bool) and int(value) == value and int(value) >= lo
    except (TypeError, ValueError, OverflowError):
        ok = False
    if not ok:
        raise ValueError(f"{name} must be a {'positive' if lo > 0 else 'non-negative'} integer, got {value!r}")
    return int(value)


def _check_dim(name: str, value) -> int:
    return _check_int(name, value, 1)


def _check_count(name: str, value) -> int:
    return _check_int(name, value, 0)


def _check_base(base: float) -> float:
    base = float(base)
    if not math.isfinite(base) or base <= 1.0:
        raise ValueError(f"positional base must be a finite number > 1, got {base!r}")
    return base


# ----------------------------------------------------------------------------------------------
# sinusoidal


def frequencies(d_model: int, base: float = 10000.0) -> np.ndarray:
    """Angular frequencies ``w_i = base^(-2i / d_model)``, shape (ceil(d_model / 2),)."""
    d_model = _check_dim("d_model", d_model)
    base = _check_base(base)
    i = np.arange((d_model + 1) // 2, dtype=np.float64)  # (n_freq,)
    return base ** (-2.0 * i / d_model)  # (n_freq,)


def wavelengths(d_model: int, base: float = 10000.0) -> np.ndarray:
    """Wavelengths ``lambda_i = 2 pi / w_i`` in positions, shape (ceil(d_model / 2),)."""
    return 2.0 * np.pi / frequencies(d_model, base)  # (n_freq,)


def sinusoidal(T: int, d_model: int, base: float = 10000.0, offset: int = 0) -> np.ndarray:
    """The sinusoidal table for positions ``offset .. offset + T - 1``, shape (T, d_model) float64."""
    T = _check_count("T", T)
    w = frequencies(d_model, base)  # (n_freq,)
    pos = float(offset) + np.arange(T, dtype=np.float64)  # (T,)
    ang = pos[:, None] * w[None, :]  # (T, n_freq)
    pe = np.empty((T, d_model), dtype=np.float64)  # (T, d_model)
    pe[:, 0::2] = np.sin(ang)  # even columns: sin, one per frequency
    pe[:, 1::2] = np.cos(ang[:, : d_model // 2])  # odd columns: cos (odd d_model: last cos dropped)
    return pe


def rotation_matrix(k: float, d_model: int, base: float = 10000.0) -> np.ndarray:
    """Block-diagonal M_k (d_model, d_model) with ``PE(pos + k) = M_k @ PE(pos)`` for every pos."""
    d_model = _check_dim("d_model", d_model)
    if d_model % 2:
        raise ValueError(f"the rotation M_k needs an even d_model (the last sin column of d_model={d_model} "
                         "has no cos partner)")
    wk = frequencies(d_model, base) * float(k)  # (d_model/2,)
    c, s = np.cos(wk), np.sin(wk)  # (d_model/2,)
    m = np.zeros((d_model, d_model), dtype=np.float64)  # (d_model, d_model)
    e = np.arange(0, d_model, 2)  # (d_model/2,) the sin row/column of each pair
    m[e, e] = c
    m[e, e + 1] = s
    m[e + 1, e] = -s
    m[e + 1, e + 1] = c
    return m


# ----------------------------------------------------------------------------------------------
# learned


def learned(T: int, d_model: int, seed: int = 0, scale: float = 0.02) -> np.ndarray:
    """A seeded Gaussian position table N(0, scale^2), shape (T, d_model) float64.

    Row t depends only on (seed, d_model, t): a longer table extends a shorter one.
    """
    T = _check_count("T", T)
    d_model = _check_dim("d_model", d_model)
    scale = float(scale)
    if not math.isfinite(scale) or scale < 0:
        raise ValueError(f"learned position scale must be a finite number >= 0, got {scale!r}")
    rng = np.random.default_rng(int(seed))
    return rng.normal(0.0, 1.0, size=(T, d_model)) * scale  # (T, d_model)


# ----------------------------------------------------------------------------------------------
# RoPE


def _positions(positions, T: int) -> np.ndarray:
    if positions is None:
        return np.arange(T, dtype=np.float64)  # (T,)
    pos = np.asarray(positions, dtype=np.float64).reshape(-1)  # (T,)
    if pos.shape[0] != T:
        raise ValueError(f"got {pos.shape[0]} positions for {T} tokens")
    if not np.all(np.isfinite(pos)):
        raise ValueError("positions must be finite")
    return pos


def rope_angles(positions, hs: int, base: float = 10000.0) -> np.ndarray:
    """Rotation angle of every (token, pair): ``pos * base^(-2i / hs)``, shape (T, hs // 2)."""
    hs = _check_dim("hs", hs)
    if hs % 2:
        raise ValueError(f"RoPE needs an even head size, got hs={hs}")
    base = _check_base(base)
    pos = np.asarray(positions, dtype=np.float64).reshape(-1)  # (T,)
    theta = base ** (-2.0 * np.arange(hs // 2, dtype=np.float64) / hs)  # (hs/2,)
    return pos[:, None] * theta[None, :]  # (T, hs/2)


def apply_rope(x, positions=None, base: float = 10000.0) -> np.ndarray:
    """Rotate interleaved pairs (2i, 2i+1) of x (T, hs) or (nh, T, hs) by their RoPE angles.

    ``(x0, x1) -> (x0 cos - x1 sin, x0 sin + x1 cos)``, so ``rope(q, m) . rope(k, n)`` depends on m - n
    only. ``positions`` (T,) defaults to 0 .. T-1. Returns float64 of the same shape.
    """
    x = np.asarray(x, dtype=np.float64)
    if x.ndim not in (2, 3):
        raise ValueError(f"apply_rope expects (T, hs) or (nh, T, hs), got shape {x.shape}")
    T, hs = x.shape[-2], x.shape[-1]
    if hs % 2:
        raise ValueError(f"RoPE needs an even head size, got hs={hs}")
    ang = rope_angles(_positions(positions, T), hs, base)  # (T, hs/2)
    c, s = np.cos(ang), np.sin(ang)  # (T, hs/2)
    x0, x1 = x[..., 0::2], x[..., 1::2]  # (..., T, hs/2)
    out = np.empty_like(x)  # (..., T, hs)
    out[..., 0::2] = x0 * c - x1 * s
    out[..., 1::2] = x0 * s + x1 * c
    return out


# ----------------------------------------------------------------------------------------------
# ALiBi


def _pow2_slopes(n: int) -> list[float]:
    return [2.0 ** (-8.0 * (h + 1) / n) for h in range(n)]


def alibi_slopes(nh: int) -> np.ndarray:
    """Per-head ALiBi slopes, shape (nh,).

    nh a power of two: ``2^(-8 (h+1) / nh)`` (8 heads: 1/2, 1/4, ..., 1/256). Otherwise the usual
    interpolation: the slopes of the largest power of two p < nh, then every other slope of 2p.
    """
    nh = _check_dim("nh", nh)
    p = 1 << (nh.bit_length() - 1)  # largest power of two <= nh
    slopes = _pow2_slopes(p)
    if p != nh:
        slopes += _pow2_slopes(2 * p)[0::2][: nh - p]
    return np.asarray(slopes, dtype=np.float64)  # (nh,)


def alibi_bias(nh: int, Tq: int, Tk: int, q_offset: int | None = None) -> np.ndarray:
    """ALiBi bias ``-slope_h * |pos_i - j|`` to add to the scaled scores, shape (nh, Tq, Tk).

    Key j sits at position j, query i at ``q_offset + i`` (default Tk - Tq: the last query at the last
    key). Where a causal mask allows (j <= i) this is the original ``-slope * (i - j)``; the absolute
    value keeps it a penalty for keys after the query when there is no causal mask.
    """
    Tq = _check_count("Tq", Tq)
    Tk = _check_count("Tk", Tk)
    off = Tk - Tq if q_offset is None else int(q_offset)
    slopes = alibi_slopes(nh)  # (nh,)
    qpos = off + np.arange(Tq, dtype=np.float64)  # (Tq,)
    kpos = np.arange(Tk, dtype=np.float64)  # (Tk,)
    dist = np.abs(qpos[:, None] - kpos[None, :])  # (Tq, Tk)
    return -slopes[:, None, None] * dist[None, :, :]  # (nh, Tq, Tk)


# ----------------------------------------------------------------------------------------------
# configuration


@dataclass(frozen=True)
class PositionalConfig:
    """Which positional encoding a session uses and its parameters."""

    kind: str = "none"  # one of KINDS: where position enters (X, q/k rotation, or score bias)
    base: float = 10000.0  # sinusoidal / RoPE frequency base; 10000 is the seed's value
    seed: int = 0  # learned table's random seed, so a session reproduces its positions
    scale: float = 0.02  # learned table's standard deviation, small next to unit embeddings

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"unknown positional encoding {self.kind!r}; choose one of {', '.join(KINDS)}")
        _check_base(self.base)
        if isinstance(self.seed, bool) or int(self.seed) != self.seed or self.seed < 0:
            raise ValueError(f"positional seed must be a non-negative integer, got {self.seed!r}")
        if not math.isfinite(float(self.scale)) or float(self.scale) < 0:
            raise ValueError(f"learned position scale must be a finite number >= 0, got {self.scale!r}")

    @property
    def additive(self) -> bool:
        """True when the encoding is a table added to X (sinusoidal, learned)."""
        return self.kind in ("sinusoidal", "learned")

    def to_dict(self) -> dict:
        return {"kind": self.kind, "base": float(self.base), "seed": int(self.seed), "scale": float(self.scale)}

    @classmethod
    def from_dict(cls, d: dict) -> "PositionalConfig":
        if not isinstance(d, dict):
            raise ValueError(f"positional config must be a mapping, got {type(d).__name__}")
        try:
            return cls(kind=str(d.get("kind", "none")), base=float(d.get("base", 10000.0)),
                       seed=int(d.get("seed", 0)), scale=float(d.get("scale", 0.02)))
        except (TypeError, ValueError) as exc:
            raise ValueError(f"bad positional config {d!r}: {exc}") from None


def positional_inputs(config: PositionalConfig, T: int, d_model: int, offset: int = 0) -> np.ndarray:
    """What the model adds to X (T, d_model): the table for sinusoidal/learned, zeros otherwise.

    ``offset`` shifts the positions (sinusoidal) or the table rows (learned), e.g. for a sequence that
    continues another.
    """
    T = _check_count("T", T)
    d_model = _check_dim("d_model", d_model)
    if config.kind == "sinusoidal":
        return sinusoidal(T, d_model, config.base, offset)  # (T, d_model)
    if config.kind == "learned":
        off = _check_count("offset", offset)
        return learned(off + T, d_model, config.seed, config.scale)[off:]  # (T, d_model)
    return np.zeros((T, d_model), dtype=np.float64)  # (T, d_model)
