"""The public entry point: argument checking and dispatch to a kernel."""

from __future__ import annotations

import math

import numpy as np

from attnviz.engine.reference import reference_attention
from attnviz.engine.result import AttentionResult

KERNELS = ("reference",)


def attention(q, k, v, mask=None, *, scale=None, kernel="flash", block_m=None, block_n=None,
              return_weights=False) -> AttentionResult:
    """softmax(q k^T * scale, masked) v per head.

    q (nh, Tq, hs), k (nh, Tk, hs), v (nh, Tk, hv); 2-D arrays mean one head. ``mask`` None or bool
    (Tq, Tk) / (nh, Tq, Tk), True = query may attend to key. ``scale`` defaults to 1/sqrt(hs).
    """
    q, k, v = (np.asarray(a) for a in (q, k, v))
    squeeze = q.ndim == 2
    if squeeze:
        q, k, v = q[None], k[None], v[None]
    nh, Tq, hs = q.shape
    Tk = k.shape[1]
    if mask is None:
        mask = np.ones((nh, Tq, Tk), dtype=bool)
    mask = np.broadcast_to(np.asarray(mask, dtype=bool), (nh, Tq, Tk))
    scale = 1.0 / math.sqrt(hs) if scale is None else float(scale)
    out, lse, w = reference_attention(q, k, v, mask, scale)
    dt = np.float32 if q.dtype == np.float32 else np.float64
    res = AttentionResult(out.astype(dt), lse.astype(dt), w.astype(dt) if return_weights else None)
    if squeeze:
        res = AttentionResult(res.out[0], res.lse[0], None if res.weights is None else res.weights[0])
    return res
