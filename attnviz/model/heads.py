"""Heads: the per-head projections W^Q, W^K, W^V, their positional treatment, and W^O.

Seed 000's multi-head attention, stacked per head (W_q (nh, d_model, hs); W_o (nh*hv, d_model)).
Positions: additive tables are already in X, RoPE rotates q and k here (each sequence from 0), ALiBi
is a score bias applied by ``compute``. Hand-set q/k components are written in last, after RoPE, so
an edit in the Q/K inspector shows exactly the number typed.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass

import numpy as np

from attnviz.model.positional import PositionalConfig, apply_rope
from attnviz.model.state import ModelConfig


@dataclass(frozen=True, eq=False)
class Weights:
    """The projection matrices actually used (hand-set or seeded), float64."""

    W_q: np.ndarray  # (nh, d_model, hs)
    W_k: np.ndarray  # (nh, d_model, hs)
    W_v: np.ndarray  # (nh, d_model, hv)
    W_o: np.ndarray  # (nh * hv, d_model)


_CACHE: dict = {}  # model -> _Draw, the last few
_CACHE_LOCK = threading.Lock()
ORDER = ("W_q", "W_k", "W_v", "W_o")  # the order the generator draws them in


class _Draw:
    """The seeded matrices of one model config, drawn in ``ORDER`` as far as asked so far.

    A generator's normal stream is the same drawn in one call or in several, so W_q and W_k can be
    drawn first (what a preview of one head needs) and W_v and W_o later, giving the same numbers."""

    def __init__(self, model: ModelConfig):
        self.model = model
        self.rng = np.random.default_rng(model.seed)
        self.arrays: dict[str, np.ndarray] = {}
        self.lock = threading.Lock()

    def upto(self, name: str) -> dict[str, np.ndarray]:
        model = self.model
        nh, d, hs, hv = model.nh, model.d_model, model.head_size, model.value_size
        shapes = {"W_q": ((nh, d, hs), d), "W_k": ((nh, d, hs), d), "W_v": ((nh, d, hv), d),
                  "W_o": ((nh * hv, d), nh * hv)}  # shape, fan-in
        with self.lock:
            for n in ORDER[:ORDER.index(name) + 1]:
                if n in self.arrays:
                    continue
                shape, fan_in = shapes[n]
                arr = self.rng.normal(0.0, 1.0 / math.sqrt(fan_in), size=shape)  # drawn even when hand-set
                hand = getattr(model, n)
                arr = np.array(hand.array) if hand is not None else arr
                arr.setflags(write=False)
                self.arrays[n] = arr
            return dict(self.arrays)


def _drawer(model: ModelConfig) -> _Draw:
    with _CACHE_LOCK:
        d = _CACHE.get(model)
        if d is None:
            if len(_CACHE) >= 4:
                _CACHE.pop(next(iter(_CACHE)))
            d = _CACHE[model] = _Draw(model)
        return d


def init_weights(model: ModelConfig) -> Weights:
    """Hand-set weights where given, seeded ones elsewhere; cached on the model config, read-only.

    One ``default_rng(model.seed)`` draws W_q, W_k, W_v ~ N(0, 1/d_model) then W_o ~ N(0, 1/(nh*hv)),
    always all four in that order, so hand-setting one never changes the others; with N(0, 1)
    embeddings q, k, v have about unit variance and combined outputs the size of a head output.
    """
    return Weights(**_drawer(model).upto("W_o"))


def query_key_weights(model: ModelConfig) -> tuple[np.ndarray, np.ndarray]:
    """(W_q, W_k) of :func:`init_weights` without drawing W_v and W_o yet (they follow, the same
    numbers, when init_weights is called): (nh, d_model, hs) each, read-only."""
    a = _drawer(model).upto("W_k")
    return a["W_q"], a["W_k"]


def project(X: np.ndarray, W: np.ndarray) -> np.ndarray:
    """X (T, d_model) @ W (nh, d_model, e) per head -> (nh, T, e)."""
    nh, d, e = W.shape
    W2 = W.transpose(1, 0, 2).reshape(d, nh * e)  # (d_model, nh*e) heads side by side: one GEMM
    return (X @ W2).reshape(X.shape[0], nh, e).transpose(1, 0, 2)  # (nh, T, e)


def apply_overrides(model: ModelConfig, q: np.ndarray, k: np.ndarray,
                    warnings: list[str] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """q (nh, Tq, hs), k (nh, Tk, hs) with the hand-set components written in: a copy of each array
    that has one, the array itself otherwise (the inputs are never modified)."""
    if not model.qk_overrides:
        return q, k
    which = {o.which for o in model.qk_overrides}
    q = q.copy() if "q" in which else q
    k = k.copy() if "k" in which else k
    skipped = 0
    for o in model.qk_overrides:
        arr = q if o.which == "q" else k
        if o.head < arr.shape[0] and o.token < arr.shape[1] and o.dim < arr.shape[2]:
            arr[o.head, o.token, o.dim] = o.value
        else:
            skipped += 1
    if skipped and warnings is not None:
        warnings.append(f"{skipped} hand-set q/k component(s) refer to tokens that no longer exist and were ignored")
    return q, k


def qkv(model: ModelConfig, positional: PositionalConfig, Xq: np.ndarray, Xk: np.ndarray,
        weights: Weights | None = None, warnings: list[str] | None = None):
    """q (nh, Tq, hs), k (nh, Tk, hs), v (nh, Tk, hv) from position-added Xq (Tq, d) and Xk (Tk, d)."""
    w = weights or init_weights(model)
    q = project(Xq, w.W_q)  # (nh, Tq, hs)
    k = project(Xk, w.W_k)  # (nh, Tk, hs)
    v = project(Xk, w.W_v)  # (nh, Tk, hv)
    if positional.kind == "rope":
        if model.head_size % 2:
            raise ValueError(f"RoPE rotates pairs of dimensions: it needs an even head size, got hs={model.head_size}")
        q = apply_rope(q, None, positional.base)  # (nh, Tq, hs)
        k = apply_rope(k, None, positional.base)  # (nh, Tk, hs)
    q, k = apply_overrides(model, q, k, warnings)
    return q, k, v


def combine(out: np.ndarray, W_o: np.ndarray) -> np.ndarray:
    """Concat(head_1 .. head_nh) W^O: out (nh, Tq, hv), W_o (nh*hv, d_model) -> (Tq, d_model)."""
    nh, Tq, hv = out.shape
    cat = out.transpose(1, 0, 2).reshape(Tq, nh * hv)  # (Tq, nh*hv) heads side by side
    return cat @ W_o  # (Tq, d_model)
