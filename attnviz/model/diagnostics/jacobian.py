"""The softmax-Jacobian study of seed 000: why scores are divided by sqrt(d_k).

Unscaled scores z ~ N(0, d_k) saturate the softmax and its Jacobian norm collapses; z / sqrt(d_k)
keeps it flat. The closed form ``||J||_F^2 = sum s_i^2 - 2 sum s_i^3 + (sum s_i^2)^2`` (from
``J = diag(s) - s s^T``) lets the study run on whole batches without any n x n matrix.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attnviz.engine.softmax import masked_softmax as softmax_over_keys
from attnviz.model.diagnostics.normalisation import _as_scores_and_mask, masked_softmax


def _softmax_last(z: np.ndarray) -> np.ndarray:
    """Softmax of (..., n) finite logits over the last axis, every entry allowed."""
    return softmax_over_keys(z, True)[0]  # (..., n)


def softmax_jacobian(z) -> np.ndarray:
    """``diag(s) - s s^T`` for s = softmax(z) over the last axis: z (..., n) -> (..., n, n)."""
    z = np.asarray(z, dtype=np.float64)
    if z.ndim < 1 or z.shape[-1] == 0:
        raise ValueError(f"softmax_jacobian needs a non-empty vector, got shape {z.shape}")
    if not np.all(np.isfinite(z)):
        raise ValueError("softmax_jacobian needs finite logits")
    s = _softmax_last(z)  # (..., n)
    eye = np.eye(s.shape[-1])  # (n, n)
    return s[..., :, None] * eye - s[..., :, None] * s[..., None, :]  # (..., n, n)


def jacobian_frobenius(weights) -> np.ndarray:
    """Frobenius norm of the softmax Jacobian from the softmax output s (..., n) -> (...,).

    Zero entries of s (masked keys) contribute nothing, so a masked row's norm is the norm of the
    Jacobian over its allowed keys; an all-zero row gives 0.
    """
    s = np.asarray(weights, dtype=np.float64)
    s2 = (s * s).sum(axis=-1)  # (...,)
    s3 = (s * s * s).sum(axis=-1)  # (...,)
    return np.sqrt(np.maximum(s2 - 2.0 * s3 + s2 * s2, 0.0))  # (...,)


@dataclass(frozen=True)
class JacobianStudy:
    """Mean Frobenius norm of the softmax Jacobian against d_k, unscaled vs scaled."""

    d_k: np.ndarray  # (n_d,) key dimensions studied (x axis, log scale)
    unscaled_mean: np.ndarray  # (n_d,) mean norm for z ~ N(0, d_k)
    scaled_mean: np.ndarray  # (n_d,) mean norm for z / sqrt(d_k)
    unscaled_std: np.ndarray  # (n_d,) spread of the norms over the draws
    scaled_std: np.ndarray  # (n_d,)
    n_samples: int  # draws per d_k
    size: int  # length of each logit vector (number of keys)
    seed: int  # generator seed: the same seed gives the same curves


def jacobian_norm_study(d_k_values=None, n_samples: int = 1000, size: int = 50, seed: int = 0) -> JacobianStudy:
    """The seed-000 simulation, batched. ``d_k_values`` defaults to ``logspace(0, 4, 20)``.

    For each d_k the same standard-normal draws g give z = sqrt(d_k) g (unscaled) and z / sqrt(d_k) = g
    (scaled), exactly the seed's one-line change.
    """
    d_k = np.logspace(0, 4, 20) if d_k_values is None else np.asarray(d_k_values, dtype=np.float64).reshape(-1)
    if d_k.size == 0 or not np.all(np.isfinite(d_k)) or np.any(d_k <= 0):
        raise ValueError("d_k values must be a non-empty list of positive numbers")
    for name, value in (("n_samples", n_samples), ("size", size)):
        if isinstance(value, bool) or int(value) != value or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
    n_samples, size = int(n_samples), int(size)
    rng = np.random.default_rng(int(seed))
    g = rng.standard_normal((d_k.size, n_samples, size))  # (n_d, n_samples, size)
    z = g * np.sqrt(d_k)[:, None, None]  # (n_d, n_samples, size) z ~ N(0, d_k)
    un = jacobian_frobenius(_softmax_last(z))  # (n_d, n_samples)
    sc = jacobian_frobenius(_softmax_last(z / np.sqrt(d_k)[:, None, None]))  # (n_d, n_samples)
    return JacobianStudy(d_k=d_k, unscaled_mean=un.mean(axis=1), scaled_mean=sc.mean(axis=1),
                         unscaled_std=un.std(axis=1), scaled_std=sc.std(axis=1),
                         n_samples=n_samples, size=size, seed=int(seed))


def row_jacobian_norms(scores, mask=None, scale: float = 1.0) -> np.ndarray:
    """Frobenius norm of the softmax Jacobian of every query row of ``scale * scores``.

    scores (Tq, Tk) or (nh, Tq, Tk) raw dot products; the softmax runs over the allowed keys only.
    Returns (Tq,) or (nh, Tq); a fully masked row gives 0.
    """
    scale = float(scale)
    if not np.isfinite(scale):
        raise ValueError(f"scale must be finite, got {scale!r}")
    s, m = _as_scores_and_mask(scores, mask)  # (..., Tq, Tk) each
    s = np.where(m, s, 0.0)  # (..., Tq, Tk) masked cells may hold -inf; make them finite before scaling
    return jacobian_frobenius(masked_softmax(s * scale, m))  # (..., Tq)
