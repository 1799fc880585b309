"""Masked softmax over keys and the entropy of weight rows, in float64 numpy.

The one implementation of ``softmax(scores)`` restricted to the allowed keys that the reference
kernel, the numpy score rules, the diagnostics and the checkpoint summaries share. Rows are queries,
the last axis is keys; ``mask`` True means the query may attend to the key. A fully masked row gives
weights 0 and lse = -inf, never NaN, whatever the scores of its masked cells (even inf or NaN).
"""

from __future__ import annotations

import numpy as np


def masked_softmax(scores, mask) -> tuple[np.ndarray, np.ndarray]:
    """(weights (..., Tq, Tk), lse (..., Tq)) in float64 of ``scores`` over the allowed keys.

    ``mask`` is bool, broadcastable to ``scores``; allowed cells must hold finite scores.
    """
    s = np.asarray(scores, dtype=np.float64)  # (..., Tq, Tk)
    m = np.broadcast_to(np.asarray(mask, dtype=bool), s.shape)  # (..., Tq, Tk)
    has = m.any(axis=-1)  # (..., Tq) rows with an allowed key
    s = np.where(m, s, -np.inf)  # (..., Tq, Tk) masked cells can never win the softmax
    mx = np.where(has, s.max(axis=-1, initial=-np.inf), 0.0)  # (..., Tq) finite shift per row
    p = np.exp(s - mx[..., None])  # (..., Tq, Tk) exactly 0 on masked cells
    l = np.where(has, p.sum(axis=-1), 1.0)  # (..., Tq) >= 1 for a row with an allowed key
    weights = p / l[..., None]  # (..., Tq, Tk) a fully masked row stays all zero
    with np.errstate(divide="ignore"):
        lse = np.where(has, mx + np.log(l), -np.inf)  # (..., Tq)
    return weights, lse


def row_entropy(weights) -> np.ndarray:
    """Shannon entropy in nats of each row of (..., Tk) weights, 0 log 0 = 0: (...,) float64.

    0 for a row on one key (or a fully masked, all-zero row), log n for uniform weights on n keys.
    """
    w = np.asarray(weights, dtype=np.float64)  # (..., Tk)
    logw = np.log(np.where(w > 0, w, 1.0))  # (..., Tk) 0 where w == 0
    return -(w * logw).sum(axis=-1)  # (...,)
