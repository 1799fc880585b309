"""The float64 numpy reference: the specification every fast kernel is tested against.

Readable first; its products are float64 BLAS calls, so it also serves as the stand-in a first
pass runs on while the kernels are not compiled yet. Shapes: q (nh, Tq, hs), k (nh, Tk, hs), v (nh, Tk, hv), mask (nh, Tq, Tk) bool.
A soft cap c (Gemma 2's attention-logit soft-capping) turns every scaled score s into c tanh(s / c)
before the mask and the softmax.
"""

from __future__ import annotations

import numpy as np

from attnviz.engine.softmax import masked_softmax


def reference_attention(q: np.ndarray, k: np.ndarray, v: np.ndarray, mask: np.ndarray, scale: float,
                        softcap: float = 0.0):
    """Return (out, lse, weights) in float64 for already-validated 3-D inputs and a 3-D bool mask;
    ``softcap`` > 0 caps the scaled scores at c tanh(s / c) (0: no cap)."""
    q = q.astype(np.float64)  # (nh, Tq, hs)
    k = k.astype(np.float64)  # (nh, Tk, hs)
    v = v.astype(np.float64)  # (nh, Tk, hv)
    s = (q @ k.transpose(0, 2, 1)) * scale  # (nh, Tq, Tk) scaled scores (one float64 BLAS product per head)
    if softcap:
        s = softcap * np.tanh(s / softcap)  # (nh, Tq, Tk) soft-capped scores, in (-c, c)
    weights, lse = masked_softmax(s, mask)  # (nh, Tq, Tk), (nh, Tq); a fully masked row: 0 and -inf
    out = weights @ v  # (nh, Tq, hv)
    return out, lse, weights
