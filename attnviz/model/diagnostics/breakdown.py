"""The neuron-level breakdown of one (query i, key j) cell of one head, as seed 002 walks it:
q_i, k_j, their elementwise product, its sum (the dot product), the scale, the scaled score, the whole
row's scores and weights, and the weight of j — plus, when V is given, the row's output and j's share.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from attnviz.model.diagnostics.normalisation import MODES, normalise


@dataclass(frozen=True)
class PairBreakdown:
    """How query i's weight on key j comes about (one head)."""

    i: int  # query row
    j: int  # key column
    mode: str  # normalisation rule: "scaled", "unscaled" or "uniform"
    q: np.ndarray  # (hs,) q_i
    k: np.ndarray  # (hs,) k_j
    products: np.ndarray  # (hs,) q_i * k_j elementwise
    dot: float  # sum of products = q_i · k_j
    scale: float  # 1/sqrt(d_k) for "scaled", 1 for "unscaled", 0 for "uniform"
    score: float  # dot * scale (what enters the softmax)
    allowed: bool  # mask[i, j]
    row_dots: np.ndarray  # (Tk,) q_i · k for every key
    row_scores: np.ndarray  # (Tk,) row_dots * scale; -inf where the mask denies the key
    row_weights: np.ndarray  # (Tk,) the row's weights (sum 1 over allowed keys, 0 elsewhere)
    weight: float  # row_weights[j]
    output: np.ndarray | None  # (hv,) sum_j w_j v_j when V was given
    contribution: np.ndarray | None  # (hv,) weight * v_j, key j's share of the output


def pair_breakdown(q, k, i: int, j: int, mask=None, mode: str = "scaled", scale: float | None = None,
                   v=None) -> PairBreakdown:
    """Break down cell (i, j) of one head from q (Tq, hs), k (Tk, hs) and optionally v (Tk, hv).

    ``scale`` overrides the mode's scale (default 1/sqrt(hs) for "scaled"); ``mask`` (Tq, Tk) bool.
    """
    if mode not in MODES:
        raise ValueError(f"unknown normalisation {mode!r}; choose one of {', '.join(MODES)}")
    q = np.asarray(q, dtype=np.float64)
    k = np.asarray(k, dtype=np.float64)
    if q.ndim != 2 or k.ndim != 2 or q.shape[1] != k.shape[1]:
        raise ValueError(f"q must be (Tq, hs) and k (Tk, hs) with the same hs, got {q.shape} and {k.shape}")
    Tq, hs = q.shape
    Tk = k.shape[0]
    if not (0 <= int(i) < Tq) or not (0 <= int(j) < Tk):
        raise ValueError(f"cell ({i}, {j}) is outside the {Tq} x {Tk} score matrix")
    i, j = int(i), int(j)
    if not (np.all(np.isfinite(q)) and np.all(np.isfinite(k))):
        raise ValueError("q and k must be finite")
    m = np.ones(Tk, dtype=bool) if mask is None else np.asarray(mask)  # (Tk,) after the row pick below
    if mask is not None:
        if m.dtype != bool or m.shape != (Tq, Tk):
            raise ValueError(f"mask must be a bool array of shape ({Tq}, {Tk}), got {m.dtype} {m.shape}")
        m = m[i]  # (Tk,)
    if scale is None:
        scale = {"scaled": 1.0 / math.sqrt(hs), "unscaled": 1.0, "uniform": 0.0}[mode]
    scale = float(scale)
    if not math.isfinite(scale):
        raise ValueError(f"scale must be finite, got {scale!r}")
    row_dots = k @ q[i]  # (Tk,)
    if mode == "uniform":
        w = normalise(row_dots[None], m[None], "uniform").weights[0]  # (Tk,)
    else:
        w = normalise(row_dots[None] * scale, m[None], "unscaled").weights[0]  # (Tk,)
    products = q[i] * k[j]  # (hs,)
    dot = float(products.sum())
    output = contribution = None
    if v is not None:
        v = np.asarray(v, dtype=np.float64)
        if v.ndim != 2 or v.shape[0] != Tk or not np.all(np.isfinite(v)):
            raise ValueError(f"v must be finite with shape ({Tk}, hv), got {v.shape}")
        output = w @ v  # (hv,)
        contribution = w[j] * v[j]  # (hv,)
    return PairBreakdown(i=i, j=j, mode=mode, q=q[i].copy(), k=k[j].copy(), products=products, dot=dot,
                         scale=scale, score=dot * scale, allowed=bool(m[j]), row_dots=row_dots,
                         row_scores=np.where(m, row_dots * scale, -np.inf), row_weights=w,
                         weight=float(w[j]), output=output, contribution=contribution)
