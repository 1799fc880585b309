"""Shared inputs for the engine tests: random q/k/v, the mask families, and the plain-numpy baseline."""

from __future__ import annotations

import numpy as np


def qkv(nh, Tq, Tk, hs, hv, dtype, seed=0, logit_scale=1.0):
    """Random q (nh, Tq, hs), k (nh, Tk, hs), v (nh, Tk, hv); logit_scale multiplies q and k each by sqrt."""
    rng = np.random.default_rng(seed)
    f = np.sqrt(logit_scale)
    q = (rng.standard_normal((nh, Tq, hs)) * f).astype(dtype)  # (nh, Tq, hs)
    k = (rng.standard_normal((nh, Tk, hs)) * f).astype(dtype)  # (nh, Tk, hs)
    v = rng.standard_normal((nh, Tk, hv)).astype(dtype)  # (nh, Tk, hv)
    return q, k, v


def make_mask(kind, nh, Tq, Tk, seed=0):
    """A bool mask of one family: none, causal, random, block (structured), dead_rows (some rows empty)."""
    rng = np.random.default_rng(seed + 1)
    if kind == "none":
        return None
    if kind == "causal":
        return np.tri(Tq, Tk, dtype=bool)  # (Tq, Tk)
    if kind == "random":
        return rng.random((nh, Tq, Tk)) < 0.5  # (nh, Tq, Tk) different per head
    if kind == "block":
        # prefix-LM style segments: segment ids grow along the sequence; attend to own and earlier segments
        qseg = (np.arange(Tq) * 4) // max(Tq, 1)  # (Tq,)
        kseg = (np.arange(Tk) * 4) // max(Tk, 1)  # (Tk,)
        return kseg[None, :] <= qseg[:, None]  # (Tq, Tk)
    if kind == "dead_rows":
        m = rng.random((Tq, Tk)) < 0.7  # (Tq, Tk)
        m[:: 3] = False  # every third query row sees no key
        return m
    raise ValueError(kind)


def numpy_attention(q, k, v, mask, scale):
    """Plain numpy attention in the inputs' own precision: the error baseline of the accuracy rule."""
    dt = q.dtype
    s = np.matmul(q, np.swapaxes(k, -1, -2)) * dt.type(scale)  # (nh, Tq, Tk)
    allowed = np.ones(s.shape, bool) if mask is None else np.broadcast_to(mask, s.shape)
    s = np.where(allowed, s, dt.type(-np.inf))
    has = allowed.any(-1)  # (nh, Tq)
    m = np.where(has, s.max(-1), dt.type(0))  # (nh, Tq)
    p = np.where(allowed, np.exp(s - m[..., None]), dt.type(0))  # (nh, Tq, Tk)
    l = p.sum(-1)  # (nh, Tq)
    safe = np.where(has, l, dt.type(1))
    out = np.matmul(p / safe[..., None], v)  # (nh, Tq, hv)
    with np.errstate(divide="ignore"):
        lse = np.where(has, m + np.log(safe), -np.inf)  # (nh, Tq)
    return out.astype(dt), lse.astype(dt)
