"""The normalisation selector of seed 002: attention weights of a score matrix under the scaled,
unscaled ("No sqrt(d_k)") and uniform rules, with per-row entropy and maximum weight.

Scores are the raw dot products q·k (no scale applied yet). Rows are queries, columns keys; ``mask``
True means the query may attend to the key. A fully masked row gets weights 0, entropy 0, max weight 0
and is flagged in ``empty_rows`` — never NaN.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from attnviz.engine.softmax import masked_softmax as softmax_over_keys
from attnviz.engine.softmax import row_entropy

MODES = ("scaled", "unscaled", "uniform")


def _as_scores_and_mask(scores, mask) -> tuple[np.ndarray, np.ndarray]:
    s = np.asarray(scores, dtype=np.float64)
    if s.ndim < 2:
        raise ValueError(f"scores must be (Tq, Tk) or (..., Tq, Tk), got shape {s.shape}")
    if mask is None:
        m = np.ones(s.shape, dtype=bool)  # (..., Tq, Tk)
    else:
        m = np.asarray(mask)
        if m.dtype != bool:
            raise ValueError(f"mask must be a bool array, got dtype {m.dtype}")
        try:
            m = np.broadcast_to(m, s.shape)  # (..., Tq, Tk)
        except ValueError:
            raise ValueError(f"mask shape {m.shape} does not fit scores shape {s.shape}") from None
    if not np.all(np.isfinite(s[m])):
        raise ValueError("scores must be finite on every allowed (query, key) cell")
    return s, m


def masked_softmax(logits, mask=None) -> np.ndarray:
    """Row softmax over the allowed keys of (..., Tq, Tk) logits; masked cells and empty rows give 0."""
    s, m = _as_scores_and_mask(logits, mask)
    return softmax_over_keys(s, m)[0]  # (..., Tq, Tk)


@dataclass(frozen=True)
class Normalisation:
    """Weights of one score matrix under one normalisation rule, with row statistics."""

    mode: str  # "scaled", "unscaled" or "uniform"
    scale: float  # multiplier applied to the scores before the softmax (0 for uniform)
    weights: np.ndarray  # (..., Tq, Tk) rows sum to 1 over allowed keys, 0 elsewhere
    entropy_nats: np.ndarray  # (..., Tq) Shannon entropy of each row
    entropy_bits: np.ndarray  # (..., Tq) the same in bits
    max_entropy_nats: np.ndarray  # (..., Tq) log(#allowed): the uniform row's entropy, 0 for empty rows
    max_weight: np.ndarray  # (..., Tq) largest weight of each row
    argmax: np.ndarray  # (..., Tq) key with the largest weight, -1 for an empty row
    n_allowed: np.ndarray  # (..., Tq) number of keys the query may attend to
    empty_rows: np.ndarray  # (..., Tq) True where the mask allows no key


def normalise(scores, mask=None, mode: str = "scaled", d_k: int | None = None) -> Normalisation:
    """Weights of raw scores (Tq, Tk) (or (..., Tq, Tk)) under ``mode``.

    scaled = softmax(s / sqrt(d_k)); unscaled = softmax(s); uniform = 1 / #allowed in every allowed
    cell. ``d_k`` is needed for "scaled".
    """
    if mode not in MODES:
        raise ValueError(f"unknown normalisation {mode!r}; choose one of {', '.join(MODES)}")
    s, m = _as_scores_and_mask(scores, mask)
    if mode == "scaled":
        if d_k is None or isinstance(d_k, bool) or int(d_k) != d_k or d_k < 1:
            raise ValueError(f"scaled normalisation needs the key dimension d_k >= 1, got {d_k!r}")
        scale = 1.0 / math.sqrt(d_k)
    else:
        scale = 1.0 if mode == "unscaled" else 0.0
    n_allowed = m.sum(axis=-1)  # (..., Tq)
    empty = n_allowed == 0  # (..., Tq)
    if mode == "uniform":
        w = np.where(m, 1.0 / np.maximum(n_allowed, 1)[..., None], 0.0)  # (..., Tq, Tk)
    else:
        w = masked_softmax(s * scale, m)  # (..., Tq, Tk)
    ent = row_entropy(w)  # (..., Tq)
    argmax = np.where(empty, -1, np.argmax(w, axis=-1))  # (..., Tq)
    return Normalisation(
        mode=mode,
        scale=scale,
        weights=w,
        entropy_nats=ent,
        entropy_bits=ent / math.log(2.0),
        max_entropy_nats=np.log(np.maximum(n_allowed, 1)).astype(np.float64),
        max_weight=w.max(axis=-1, initial=0.0),
        argmax=argmax,
        n_allowed=n_allowed,
        empty_rows=empty,
    )


def compare_modes(scores, mask=None, d_k: int | None = None) -> dict[str, Normalisation]:
    """All three rules side by side, keyed by mode (what the selector switches between)."""
    return {mode: normalise(scores, mask, mode, d_k) for mode in MODES}
