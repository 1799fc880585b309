"""Permutation equivariance and invariance of attention (seed 001), measured on real inputs.

Tokens are shuffled but positions stay by slot (additive tables, RoPE angles, ALiBi distances and
the mask all follow the slot), so equivariance holds to rounding (~1e-15) only without positional
encoding and mask: content moved while position stayed. Cross-attention: shuffling queries permutes
the output, shuffling key-value pairs together leaves it unchanged, again only with nothing positional.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from attnviz.engine import attention
from attnviz.model.diagnostics.normalisation import masked_softmax
from attnviz.model.positional import PositionalConfig, alibi_bias, apply_rope, positional_inputs


def _stack(w, name: str, d_model: int) -> np.ndarray:
    w = np.asarray(w, dtype=np.float64)
    if w.ndim == 2:
        w = w[None]  # (1, d_model, hs)
    if w.ndim != 3 or w.shape[1] != d_model:
        raise ValueError(f"{name} must be (nh, d_model={d_model}, hs) or (d_model, hs), got shape {w.shape}")
    return w


def _weights(x_model: int, w_q, w_k, w_v):
    wq, wk, wv = (_stack(w, n, x_model) for w, n in ((w_q, "w_q"), (w_k, "w_k"), (w_v, "w_v")))
    if not (wq.shape[0] == wk.shape[0] == wv.shape[0]):
        raise ValueError(f"w_q, w_k, w_v disagree on the number of heads: {wq.shape[0]}, {wk.shape[0]}, {wv.shape[0]}")
    if wq.shape[2] != wk.shape[2]:
        raise ValueError(f"w_q and w_k must share the head size, got {wq.shape[2]} and {wk.shape[2]}")
    return wq, wk, wv


def _tokens(x, name: str) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    if x.ndim != 2 or x.shape[0] < 1:
        raise ValueError(f"{name} must be (T, d_model) with T >= 1, got shape {x.shape}")
    if not np.all(np.isfinite(x)):
        raise ValueError(f"{name} must be finite")
    return x


def _heads(xq, xkv, wq, wk, wv, pos: PositionalConfig, mask, scale) -> np.ndarray:
    """Per-head outputs (nh, Tq, hv) for query tokens xq and key/value tokens xkv at slots 0..T-1."""
    Tq, Tk, d = xq.shape[0], xkv.shape[0], xq.shape[1]
    xq = xq + positional_inputs(pos, Tq, d)  # (Tq, d_model)
    xkv = xkv + positional_inputs(pos, Tk, d)  # (Tk, d_model)
    q = np.einsum("td,hde->hte", xq, wq)  # (nh, Tq, hs)
    k = np.einsum("td,hde->hte", xkv, wk)  # (nh, Tk, hs)
    v = np.einsum("td,hde->hte", xkv, wv)  # (nh, Tk, hv)
    if pos.kind == "rope":
        q = apply_rope(q, np.arange(Tq), pos.base)  # (nh, Tq, hs)
        k = apply_rope(k, np.arange(Tk), pos.base)  # (nh, Tk, hs)
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else float(scale)
    if pos.kind == "alibi":  # the engine takes no score bias: the same float64 softmax here, bias added
        s = np.einsum("hqd,hkd->hqk", q, k) * scale + alibi_bias(q.shape[0], Tq, Tk)  # (nh, Tq, Tk)
        m = np.ones(s.shape, dtype=bool) if mask is None else np.broadcast_to(mask, s.shape)  # (nh, Tq, Tk)
        return masked_softmax(s, m) @ v  # (nh, Tq, hv)
    return attention(q, k, v, mask, scale=scale, kernel="reference").out  # (nh, Tq, hv)


def _mask(mask, Tq: int, Tk: int):
    if mask is None:
        return None
    m = np.asarray(mask)
    if m.dtype != bool or m.shape != (Tq, Tk):
        raise ValueError(f"mask must be a bool array of shape ({Tq}, {Tk}), got {m.dtype} {m.shape}")
    return m


def _perm(T: int, seed: int, perm) -> np.ndarray:
    if perm is None:
        rng = np.random.default_rng(int(seed))
        p = rng.permutation(T)  # (T,)
        if T > 1:
            while np.array_equal(p, np.arange(T)):  # a shuffle that moves nothing shows nothing
                p = rng.permutation(T)
        return p
    p = np.asarray(perm).reshape(-1)  # (T,)
    if p.shape != (T,) or not np.array_equal(np.sort(p), np.arange(T)):
        raise ValueError(f"perm must be a permutation of 0..{T - 1}")
    return p.astype(np.int64)


@dataclass(frozen=True)
class PermutationCheck:
    """Self-attention before and after shuffling the token embeddings."""

    perm: np.ndarray  # (T,) X_perm = X[perm]: slot t now holds the token that was at perm[t]
    positional: str  # positional encoding kind used (positions stay with slots)
    masked: bool  # whether a mask (which also stays with slots) was applied
    out: np.ndarray  # (nh, T, hv) per-head outputs on X
    out_perm: np.ndarray  # (nh, T, hv) per-head outputs on X[perm]
    deviation_per_head: np.ndarray  # (nh,) max |out[:, perm] - out_perm|
    deviation_per_token: np.ndarray  # (T,) max over heads and dims, indexed by shuffled slot
    max_deviation: float  # the headline number
    equivariant: bool  # max_deviation <= tol


def permutation_check(x, w_q, w_k, w_v, positional: PositionalConfig | None = None, seed: int = 0,
                      perm=None, mask=None, scale: float | None = None, tol: float = 1e-9) -> PermutationCheck:
    """Shuffle the rows of x (T, d_model) and compare per-head outputs (see module docstring).

    ``w_q``, ``w_k``: (nh, d_model, hs); ``w_v``: (nh, d_model, hv); 2-D means one head. ``perm``
    overrides the seeded shuffle (a seeded shuffle is never the identity when T > 1).
    """
    pos = positional or PositionalConfig()
    x = _tokens(x, "x")
    T = x.shape[0]
    wq, wk, wv = _weights(x.shape[1], w_q, w_k, w_v)
    m = _mask(mask, T, T)
    p = _perm(T, seed, perm)
    out = _heads(x, x, wq, wk, wv, pos, m, scale)  # (nh, T, hv)
    out_p = _heads(x[p], x[p], wq, wk, wv, pos, m, scale)  # (nh, T, hv)
    diff = np.abs(out[:, p] - out_p)  # (nh, T, hv)
    dev = float(diff.max(initial=0.0))
    return PermutationCheck(perm=p, positional=pos.kind, masked=m is not None, out=out, out_perm=out_p,
                            deviation_per_head=diff.max(axis=(1, 2), initial=0.0),
                            deviation_per_token=diff.max(axis=(0, 2), initial=0.0),
                            max_deviation=dev, equivariant=dev <= tol)


@dataclass(frozen=True)
class CrossPermutationCheck:
    """Cross-attention under a query shuffle and under a key-value shuffle."""

    query_perm: np.ndarray  # (Tq,) queries reordered as xq[query_perm]
    kv_perm: np.ndarray  # (Tk,) key-value tokens reordered together as xkv[kv_perm]
    positional: str  # positional encoding kind (positions stay with slots on both sides)
    out: np.ndarray  # (nh, Tq, hv) per-head outputs before any shuffle
    query_deviation: float  # max |out[:, query_perm] - out(xq[query_perm], xkv)|: ~0 = equivariant
    kv_deviation: float  # max |out - out(xq, xkv[kv_perm])|: ~0 = invariant
    query_equivariant: bool
    kv_invariant: bool


def cross_permutation_check(xq, xkv, w_q, w_k, w_v, positional: PositionalConfig | None = None, seed: int = 0,
                            scale: float | None = None, tol: float = 1e-9) -> CrossPermutationCheck:
    """Queries from xq (Tq, d_model), keys and values from xkv (Tk, d_model); see module docstring."""
    pos = positional or PositionalConfig()
    xq, xkv = _tokens(xq, "xq"), _tokens(xkv, "xkv")
    if xq.shape[1] != xkv.shape[1]:
        raise ValueError(f"xq and xkv must share d_model, got {xq.shape[1]} and {xkv.shape[1]}")
    wq, wk, wv = _weights(xq.shape[1], w_q, w_k, w_v)
    pq = _perm(xq.shape[0], seed, None)
    pk = _perm(xkv.shape[0], int(seed) + 1, None)
    out = _heads(xq, xkv, wq, wk, wv, pos, None, scale)  # (nh, Tq, hv)
    out_q = _heads(xq[pq], xkv, wq, wk, wv, pos, None, scale)  # (nh, Tq, hv)
    out_kv = _heads(xq, xkv[pk], wq, wk, wv, pos, None, scale)  # (nh, Tq, hv)
    dq = float(np.abs(out[:, pq] - out_q).max(initial=0.0))
    dk = float(np.abs(out - out_kv).max(initial=0.0))
    return CrossPermutationCheck(query_perm=pq, kv_perm=pk, positional=pos.kind, out=out,
                                 query_deviation=dq, kv_deviation=dk,
                                 query_equivariant=dq <= tol, kv_invariant=dk <= tol)
