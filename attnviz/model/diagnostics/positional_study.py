"""The numbers behind the positional-encoding views: seed 000's three properties of the sinusoidal
table (rotation M_k, dot product depending on t - s only, wavelength spectrum) and the same views
for RoPE.

Both studies are measured, not asserted: the deviation from "depends only on t - s" is the largest
spread of the Gram matrix along any diagonal t - s = const, and the rotation error is
``max |PE(pos + k) - M_k PE(pos)|`` over every position where both sides exist.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attnviz.model.positional import apply_rope, frequencies, rope_angles, rotation_matrix, sinusoidal


def _check_shift(T: int, k: int) -> int:
    if isinstance(k, bool) or int(k) != k:
        raise ValueError(f"shift k must be an integer, got {k!r}")
    k = int(k)
    if T < 1 or abs(k) >= T:
        raise ValueError(f"shift k={k} needs |k| < T={T} so that PE(pos + k) exists for some pos")
    return k


def diagonal_profile(g: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
    """Mean of a (T, T) matrix along each diagonal t - s, and the largest spread along any diagonal.

    Returns (offsets (2T-1,) from -(T-1) to T-1, profile (2T-1,), deviation).
    """
    T = g.shape[0]
    d = (np.arange(T)[:, None] - np.arange(T)[None, :] + (T - 1)).ravel()  # (T*T,) diagonal index
    vals = g.ravel()  # (T*T,)
    count = np.bincount(d, minlength=2 * T - 1)  # (2T-1,)
    profile = np.bincount(d, weights=vals, minlength=2 * T - 1) / count  # (2T-1,)
    hi = np.full(2 * T - 1, -np.inf)  # (2T-1,)
    lo = np.full(2 * T - 1, np.inf)  # (2T-1,)
    np.maximum.at(hi, d, vals)
    np.minimum.at(lo, d, vals)
    return np.arange(-(T - 1), T), profile, float(np.max(hi - lo))


@dataclass(frozen=True)
class SinusoidalStudy:
    """Everything the sinusoidal view draws, for positions 0 .. T-1."""

    pe: np.ndarray  # (T, d_model) the table PE[pos, dim]
    gram: np.ndarray  # (T, T) PE(t) · PE(s)
    offsets: np.ndarray  # (2T-1,) t - s from -(T-1) to T-1
    profile: np.ndarray  # (2T-1,) mean of the Gram matrix along each t - s
    profile_formula: np.ndarray  # (2T-1,) sum_i cos(w_i (t - s)) over the (sin, cos) pairs
    shift_deviation: float  # largest spread of the Gram matrix along a diagonal (0 = depends on t - s only)
    k: int  # the shift M_k is built for
    rotation: np.ndarray  # (m, m) M_k over the first m = 2 * (d_model // 2) dimensions
    rotation_error_per_pos: np.ndarray  # (T - |k|,) max_dim |PE(pos + k) - M_k PE(pos)| per start pos
    rotation_error: float  # max of rotation_error_per_pos (~1e-12 or below)
    frequencies: np.ndarray  # (ceil(d_model/2),) w_i
    wavelengths: np.ndarray  # (ceil(d_model/2),) 2 pi / w_i, in positions
    wavelength_per_dim: np.ndarray  # (d_model,) the wavelength each column oscillates with
    base: float


def sinusoidal_study(T: int, d_model: int, base: float = 10000.0, k: int = 1) -> SinusoidalStudy:
    """Measure seed 000's properties of the sinusoidal table for T positions.

    An odd d_model keeps its lone last sin column in the table and the Gram matrix (where it makes the
    Gram matrix depend on more than t - s, which ``shift_deviation`` shows); M_k covers the paired
    dimensions only.
    """
    k = _check_shift(int(T), k)
    pe = sinusoidal(T, d_model, base)  # (T, d_model)
    gram = pe @ pe.T  # (T, T)
    offsets, profile, dev = diagonal_profile(gram)
    w = frequencies(d_model, base)  # (n_freq,)
    pairs = d_model // 2
    formula = np.cos(offsets[:, None] * w[None, :pairs]).sum(axis=1)  # (2T-1,)
    m = 2 * pairs
    if m == d_model:
        rot = rotation_matrix(k, d_model, base)  # (d_model, d_model) the function the model ships
    else:
        rot = _rotation_for(w[:pairs], k)  # (m, m) odd d_model: the paired columns, d_model's frequencies
    lo, hi = max(0, -k), min(T, T - k)
    moved = pe[lo:hi, :m] @ rot.T  # (T-|k|, m) row p is M_k PE(p)
    err = np.abs(moved - pe[lo + k:hi + k, :m]).max(axis=1, initial=0.0)  # (T-|k|,)
    lam = 2.0 * np.pi / w  # (n_freq,)
    return SinusoidalStudy(pe=pe, gram=gram, offsets=offsets, profile=profile, profile_formula=formula,
                           shift_deviation=dev, k=k, rotation=rot, rotation_error_per_pos=err,
                           rotation_error=float(err.max(initial=0.0)), frequencies=w, wavelengths=lam,
                           wavelength_per_dim=np.repeat(lam, 2)[:d_model], base=float(base))


def _rotation_for(w: np.ndarray, k: float) -> np.ndarray:
    """Block-diagonal [[cos, sin], [-sin, cos]](w_i k) for given frequencies, (2n, 2n)."""
    n = w.shape[0]
    c, s = np.cos(w * k), np.sin(w * k)  # (n,)
    m = np.zeros((2 * n, 2 * n))  # (2n, 2n)
    e = np.arange(0, 2 * n, 2)  # (n,)
    m[e, e], m[e, e + 1], m[e + 1, e], m[e + 1, e + 1] = c, s, -s, c
    return m


def rope_rotation(k: float, hs: int, base: float = 10000.0) -> np.ndarray:
    """R_k (hs, hs) with ``rope(x, pos + k) = R_k @ rope(x, pos)``: blocks [[cos, -sin], [sin, cos]]."""
    ang = rope_angles([float(k)], hs, base)[0]  # (hs/2,)
    c, s = np.cos(ang), np.sin(ang)  # (hs/2,)
    r = np.zeros((hs, hs))  # (hs, hs)
    e = np.arange(0, hs, 2)  # (hs/2,)
    r[e, e], r[e, e + 1], r[e + 1, e], r[e + 1, e + 1] = c, -s, s, c
    return r


@dataclass(frozen=True)
class RopeStudy:
    """The RoPE counterparts of the sinusoidal views, for positions 0 .. T-1 and head size hs."""

    table: np.ndarray  # (T, hs) RoPE applied to (1, 0, 1, 0, ...): (cos, sin) of every pair's angle
    angles: np.ndarray  # (T, hs/2) rotation angle of each (position, pair)
    q: np.ndarray  # (hs,) the query vector placed at every position
    k_vec: np.ndarray  # (hs,) the key vector placed at every position
    scores: np.ndarray  # (T, T) rope(q, t) · rope(k, s)
    offsets: np.ndarray  # (2T-1,) t - s
    profile: np.ndarray  # (2T-1,) mean score along each t - s
    relative_error: float  # largest spread of the scores along a diagonal (0 = relative only)
    k: int  # the shift R_k is built for
    rotation: np.ndarray  # (hs, hs) R_k
    rotation_error: float  # max |rope(x, pos + k) - R_k rope(x, pos)| over positions, for x = q
    frequencies: np.ndarray  # (hs/2,) base^(-2i/hs)
    wavelengths: np.ndarray  # (hs/2,) 2 pi / frequency, in positions
    base: float


def rope_study(T: int, hs: int, base: float = 10000.0, k: int = 1, q=None, k_vec=None,
               seed: int = 0) -> RopeStudy:
    """Measure RoPE's relative property: q·k after rotation depends only on t - s.

    ``q`` and ``k_vec`` (hs,) default to seeded standard-normal vectors.
    """
    k = _check_shift(int(T), k)
    rng = np.random.default_rng(int(seed))
    qv = rng.standard_normal(hs) if q is None else np.asarray(q, dtype=np.float64).reshape(-1)  # (hs,)
    kv = rng.standard_normal(hs) if k_vec is None else np.asarray(k_vec, dtype=np.float64).reshape(-1)  # (hs,)
    if qv.shape != (hs,) or kv.shape != (hs,):
        raise ValueError(f"q and k_vec must have hs={hs} components, got {qv.shape} and {kv.shape}")
    pos = np.arange(T, dtype=np.float64)  # (T,)
    unit = np.zeros(hs)  # (hs,)
    unit[0::2] = 1.0
    table = apply_rope(np.broadcast_to(unit, (T, hs)), pos, base)  # (T, hs)
    qr = apply_rope(np.broadcast_to(qv, (T, hs)), pos, base)  # (T, hs)
    kr = apply_rope(np.broadcast_to(kv, (T, hs)), pos, base)  # (T, hs)
    scores = qr @ kr.T  # (T, T)
    offsets, profile, dev = diagonal_profile(scores)
    rot = rope_rotation(k, hs, base)  # (hs, hs)
    lo, hi = max(0, -k), min(T, T - k)
    err = np.abs(qr[lo:hi] @ rot.T - qr[lo + k:hi + k]).max(initial=0.0)
    freq = base ** (-2.0 * np.arange(hs // 2) / hs)  # (hs/2,)
    return RopeStudy(table=table, angles=rope_angles(pos, hs, base), q=qv, k_vec=kv, scores=scores,
                     offsets=offsets, profile=profile, relative_error=dev, k=k, rotation=rot,
                     rotation_error=float(err), frequencies=freq, wavelengths=2.0 * np.pi / freq,
                     base=float(base))
