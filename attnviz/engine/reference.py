"""The float64 numpy reference: the specification every fast kernel is tested against.

Readable first, fast never. Shapes: q (nh, Tq, hs), k (nh, Tk, hs), v (nh, Tk, hv), mask (nh, Tq, Tk) bool.
"""

from __future__ import annotations

import numpy as np


def reference_attention(q: np.ndarray, k: np.ndarray, v: np.ndarray, mask: np.ndarray, scale: float):
    """Return (out, lse, weights) in float64 for already-validated 3-D inputs and a 3-D bool mask."""
    q = q.astype(np.float64)  # (nh, Tq, hs)
    k = k.astype(np.float64)  # (nh, Tk, hs)
    v = v.astype(np.float64)  # (nh, Tk, hv)
    s = np.einsum("hqd,hkd->hqk", q, k) * scale  # (nh, Tq, Tk) scaled scores
    s = np.where(mask, s, -np.inf)  # (nh, Tq, Tk) masked cells can never win the softmax
    row_has_key = mask.any(axis=-1)  # (nh, Tq)
    m = np.where(row_has_key, s.max(axis=-1, initial=-np.inf), 0.0)  # (nh, Tq) finite shift per row
    p = np.where(mask, np.exp(s - m[..., None]), 0.0)  # (nh, Tq, Tk) unnormalised weights
    l = p.sum(axis=-1)  # (nh, Tq) >= 1 for any row with an allowed key
    safe_l = np.where(row_has_key, l, 1.0)  # (nh, Tq)
    weights = p / safe_l[..., None]  # (nh, Tq, Tk) a fully masked row stays all zero
    out = weights @ v  # (nh, Tq, hv)
    with np.errstate(divide="ignore"):
        lse = np.where(row_has_key, m + np.log(safe_l), -np.inf)  # (nh, Tq)
    return out, lse, weights
