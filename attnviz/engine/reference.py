"""The float64 numpy reference: the specification every fast kernel is tested against.

Readable first, fast never. Shapes: q (nh, Tq, hs), k (nh, Tk, hs), v (nh, Tk, hv), mask (nh, Tq, Tk) bool.
"""

from __future__ import annotations

import numpy as np

from attnviz.engine.softmax import masked_softmax


def reference_attention(q: np.ndarray, k: np.ndarray, v: np.ndarray, mask: np.ndarray, scale: float):
    """Return (out, lse, weights) in float64 for already-validated 3-D inputs and a 3-D bool mask."""
    q = q.astype(np.float64)  # (nh, Tq, hs)
    k = k.astype(np.float64)  # (nh, Tk, hs)
    v = v.astype(np.float64)  # (nh, Tk, hv)
    s = np.einsum("hqd,hkd->hqk", q, k) * scale  # (nh, Tq, Tk) scaled scores
    weights, lse = masked_softmax(s, mask)  # (nh, Tq, Tk), (nh, Tq); a fully masked row: 0 and -inf
    out = weights @ v  # (nh, Tq, hv)
    return out, lse, weights
