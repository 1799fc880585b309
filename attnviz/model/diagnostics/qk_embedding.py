"""A joint 2-D embedding of one head's queries and keys (principal components of both together),
so that a panel can show which queries sit near which keys, coloured query vs key.

Queries and keys are stacked, centred on their joint mean and projected on the two leading right
singular vectors. Each component's sign is fixed so its largest-magnitude loading is positive, which
keeps the picture from flipping between recomputations.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class QKEmbedding:
    """2-D coordinates of a head's queries and keys in one shared PCA frame."""

    q_xy: np.ndarray  # (Tq, 2) query coordinates
    k_xy: np.ndarray  # (Tk, 2) key coordinates
    coords: np.ndarray  # (Tq + Tk, 2) queries first, then keys
    labels: tuple[str, ...]  # "q" for the first Tq points, "k" for the rest
    token_index: np.ndarray  # (Tq + Tk,) token of each point within its own sequence
    explained_variance: np.ndarray  # (2,) share of the joint variance along each axis
    components: np.ndarray  # (2, hs) the axes in head space (rows of unit length, or 0 if absent)
    mean: np.ndarray  # (hs,) the joint centre subtracted before projecting


def qk_embedding(q, k) -> QKEmbedding:
    """Project q (Tq, hs) and k (Tk, hs) of one head on their joint first two principal components.

    With hs == 1 or rank < 2 the missing axis is all zeros with explained variance 0.
    """
    q = np.asarray(q, dtype=np.float64)
    k = np.asarray(k, dtype=np.float64)
    if q.ndim != 2 or k.ndim != 2 or q.shape[1] != k.shape[1] or q.shape[1] < 1:
        raise ValueError(f"q must be (Tq, hs) and k (Tk, hs) with the same hs >= 1, got {q.shape} and {k.shape}")
    if q.shape[0] + k.shape[0] == 0:
        raise ValueError("need at least one query or key to embed")
    if not (np.all(np.isfinite(q)) and np.all(np.isfinite(k))):
        raise ValueError("q and k must be finite")
    Tq, hs = q.shape
    x = np.concatenate([q, k], axis=0)  # (Tq + Tk, hs)
    mean = x.mean(axis=0)  # (hs,)
    xc = x - mean  # (Tq + Tk, hs)
    _, sv, vt = np.linalg.svd(xc, full_matrices=False)  # sv (r,), vt (r, hs)
    total = float((sv ** 2).sum())
    comps = np.zeros((2, hs))  # (2, hs)
    var = np.zeros(2)  # (2,)
    n = min(2, vt.shape[0])
    tiny = np.finfo(np.float64).eps * max(1.0, float(sv[0]) if sv.size else 1.0) * max(x.shape)
    for a in range(n):
        if sv[a] <= tiny:
            break
        c = vt[a]  # (hs,)
        comps[a] = c if c[np.argmax(np.abs(c))] > 0 else -c
        var[a] = sv[a] ** 2 / total
    coords = xc @ comps.T  # (Tq + Tk, 2)
    labels = ("q",) * Tq + ("k",) * k.shape[0]
    index = np.concatenate([np.arange(Tq), np.arange(k.shape[0])])  # (Tq + Tk,)
    return QKEmbedding(q_xy=coords[:Tq], k_xy=coords[Tq:], coords=coords, labels=labels, token_index=index,
                       explained_variance=var, components=comps, mean=mean)
