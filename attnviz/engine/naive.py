"""The naive numba kernel: one query row at a time, every score materialised, plain ``np.exp``.

The readable twin of the flash kernel in compiled form: scores for the whole row, max, exponentials,
sum, weighted sum of values. Parallel over (head, query row). It also writes the weights when asked, and
soft-caps the scaled scores (c tanh(s / c), Gemma 2) when given a cap.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from attnviz.engine.fastexp import FASTMATH, like


@njit(parallel=True, nogil=True, cache=True, fastmath=FASTMATH)
def naive_kernel(q, k, v, mask, use_mask, scale, softcap, out, lse, weights, write_weights):
    """q (nh, Tq, hs), k (nh, Tk, hs), v (nh, Tk, hv); mask (nh or 1, Tq, Tk) bool read when use_mask;
    softcap > 0: every scaled score s becomes softcap * tanh(s / softcap) (0: no cap).

    Writes out (nh, Tq, hv), lse (nh, Tq) and, when write_weights, weights (nh, Tq, Tk).
    """
    nh, Tq, hs = q.shape
    Tk = k.shape[1]
    hv = v.shape[2]
    c = like(q, scale)
    capped = softcap > 0
    cap = like(q, softcap)
    inv_cap = like(q, 1.0 / softcap if capped else 0.0)
    for w in prange(nh * Tq):
        h = w // Tq
        i = w - h * Tq
        hm = h if mask.shape[0] > 1 else 0
        s = np.empty(Tk, dtype=q.dtype)  # (Tk,) scores of row i
        allowed = np.ones(Tk, dtype=np.bool_)  # (Tk,)
        if use_mask:
            allowed[:] = mask[hm, i]
        n_allowed = 0
        m = like(q, 0.0)
        for j in range(Tk):
            if allowed[j]:
                acc = like(q, 0.0)
                for d in range(hs):
                    acc += q[h, i, d] * k[h, j, d]
                s[j] = acc * c
                if capped:
                    s[j] = cap * np.tanh(s[j] * inv_cap)
                if n_allowed == 0 or s[j] > m:
                    m = s[j]
                n_allowed += 1
        if n_allowed == 0:  # fully masked row
            for d in range(hv):
                out[h, i, d] = 0
            lse[h, i] = -np.inf
            if write_weights:
                for j in range(Tk):
                    weights[h, i, j] = 0
            continue
        total = like(q, 0.0)
        for j in range(Tk):
            if allowed[j]:
                s[j] = np.exp(s[j] - m)
                total += s[j]
            else:
                s[j] = 0
        inv = like(q, 1.0) / total
        for d in range(hv):
            out[h, i, d] = 0
        for j in range(Tk):
            if allowed[j]:
                p = s[j] * inv
                for d in range(hv):
                    out[h, i, d] += p * v[h, j, d]
        lse[h, i] = m + np.log(total)
        if write_weights:
            for j in range(Tk):
                weights[h, i, j] = s[j] * inv
