"""Summaries of attention maps (L, nh, T, T), rows = queries: per-head statistics, attention rollout
(Abnar & Zuidema, as ``vit_rollout.py`` computes it) and the class token's map over the patch grid.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attnviz.checkpoints.errors import CheckpointError
from attnviz.engine.softmax import row_entropy

# Token strings counted as special when no mask is given: BERT, GPT-2, RoBERTa-style, ViT extras.
SPECIAL_TOKENS = frozenset({"[CLS]", "[SEP]", "[PAD]", "[MASK]", "<|endoftext|>", "<s>", "</s>", "<pad>", "[DIST]"})
HEAD_FUSIONS = ("mean", "max", "min")


def _check_attentions(attentions) -> np.ndarray:
    a = np.asarray(attentions)
    if a.ndim != 4 or a.shape[2] != a.shape[3] or 0 in a.shape:
        raise CheckpointError(f"attentions must be (layers, heads, T, T) with T > 0 (got shape {a.shape})")
    if not np.issubdtype(a.dtype, np.floating) or not np.isfinite(a).all():
        raise CheckpointError("attentions must be finite floating-point weights")
    return a


@dataclass(frozen=True)
class HeadSummaries:
    """Per-head statistics, each (L, nh), averaged over the query rows that attend to anything."""

    entropy: np.ndarray  # (L, nh) mean over rows of -sum p log p, in nats: 0 = one key, log T = uniform
    to_special: np.ndarray  # (L, nh) mean weight on special tokens ([CLS], [SEP], BOS/EOS, padding; not [UNK])
    to_self: np.ndarray  # (L, nh) mean weight on the diagonal (a token attending to itself)
    to_previous: np.ndarray  # (L, nh) mean weight on the key just before the query (rows 1..T-1; 0 when T = 1)
    to_first: np.ndarray | None = None  # (L, nh) mean weight on the first token (attention sinks); decoders
    distance: np.ndarray | None = None  # (L, nh) mean attention distance sum_j w_ij |i - j| in tokens; decoders


def head_summaries(attentions, tokens=None, special=None) -> HeadSummaries:
    """Summarise every head of ``attentions`` (L, nh, T, T).

    ``special`` is a (T,) bool mask of special tokens; when None it is taken from ``tokens`` (strings in
    SPECIAL_TOKENS); when both are None no token is special.
    """
    a = _check_attentions(attentions).astype(np.float64)  # (L, nh, T, T)
    T = a.shape[-1]
    if special is None:
        special = np.zeros(T, dtype=bool) if tokens is None else np.array([t in SPECIAL_TOKENS for t in tokens])
    special = np.asarray(special, dtype=bool)  # (T,)
    if special.shape != (T,):
        raise CheckpointError(f"special-token mask has shape {special.shape}, the attentions have T = {T}")
    live = a.sum(axis=-1) > 0  # (L, nh, T) rows with any weight (a fully masked row has none)
    n_live = np.maximum(live.sum(axis=-1), 1)  # (L, nh)

    def row_mean(per_row):  # (L, nh, T) -> (L, nh), over live rows only
        return np.where(live, per_row, 0.0).sum(axis=-1) / n_live

    entropy = row_mean(row_entropy(a))
    to_special = row_mean(a[..., special].sum(axis=-1))
    to_self = row_mean(np.diagonal(a, axis1=-2, axis2=-1))
    if T > 1:
        prev = np.diagonal(a, offset=-1, axis1=-2, axis2=-1)  # (L, nh, T-1) a[i, i-1]
        live_prev = live[..., 1:]
        to_previous = np.where(live_prev, prev, 0.0).sum(axis=-1) / np.maximum(live_prev.sum(axis=-1), 1)
    else:
        to_previous = np.zeros(a.shape[:2])
    return HeadSummaries(entropy=entropy, to_special=to_special, to_self=to_self, to_previous=to_previous)


@dataclass(frozen=True)
class Rollout:
    """Attention rollout through all layers."""

    matrix: np.ndarray  # (T, T) rolled-out attention: row i = how much each input token flows into token i
    cls_map: np.ndarray | None  # (gh, gw) class-token row over the patches / its max (None without a grid)


def attention_rollout(attentions, head_fusion: str = "mean", discard_ratio: float = 0.0,
                      grid: tuple[int, int] | None = None, n_extra: int = 1) -> Rollout:
    """Rollout of ``attentions`` (L, nh, T, T); with ``grid`` (gh, gw) also the class-token map.

    Per layer: fuse heads, zero the lowest ``discard_ratio`` share of entries (ties by flat index; flat
    index 0, CLS -> CLS, always kept), ``(A + I) / 2``, renormalise rows; multiply from the first layer up.
    """
    a = _check_attentions(attentions).astype(np.float64)  # (L, nh, T, T)
    if head_fusion not in HEAD_FUSIONS:
        raise CheckpointError(f"head fusion {head_fusion!r} is not one of {', '.join(HEAD_FUSIONS)}")
    try:
        discard_ratio = float(discard_ratio)
    except (TypeError, ValueError):
        raise CheckpointError(f"discard ratio must be a number in [0, 1) (got {discard_ratio!r})") from None
    if not 0.0 <= discard_ratio < 1.0:
        raise CheckpointError(f"discard ratio must be in [0, 1) (got {discard_ratio})")
    L, nh, T, _ = a.shape
    eye = np.eye(T)  # (T, T)
    result = np.eye(T)  # (T, T)
    n_discard = int(T * T * discard_ratio)
    for layer in range(L):
        fused = getattr(a[layer], head_fusion)(axis=0)  # (T, T)
        if n_discard:
            flat = fused.reshape(-1).copy()  # (T*T,)
            idx = np.argsort(flat, kind="stable")[:n_discard]  # lowest entries first
            flat[idx[idx != 0]] = 0.0
            fused = flat.reshape(T, T)  # (T, T)
        m = (fused + eye) / 2.0  # (T, T)
        m = m / m.sum(axis=-1, keepdims=True)  # (T, T) rows sum to 1 (the diagonal keeps every sum > 0)
        result = m @ result  # (T, T)
    cls_map = None
    if grid is not None:
        gh, gw = _check_grid(grid, n_extra, T)
        row = result[0, n_extra:].reshape(gh, gw)  # (gh, gw)
        peak = row.max()
        cls_map = row / peak if peak > 0 else np.zeros_like(row)
    return Rollout(matrix=result, cls_map=cls_map)


def _check_grid(grid, n_extra: int, T: int) -> tuple[int, int]:
    try:
        gh, gw = (int(g) for g in grid)
    except (TypeError, ValueError):
        raise CheckpointError(f"grid must be (rows, columns) of patches (got {grid!r})") from None
    if gh < 1 or gw < 1 or n_extra < 1 or n_extra + gh * gw != T:
        raise CheckpointError(
            f"grid {gh}x{gw} with {n_extra} extra token(s) needs T = {n_extra + gh * gw} tokens, the attentions have T = {T}"
        )
    return gh, gw


def cls_attention_maps(attentions, layer: int, grid: tuple[int, int], n_extra: int = 1) -> np.ndarray:
    """(nh, gh, gw): how much the class token attends to each patch, per head, in ``layer`` (negative counts from the end)."""
    a = _check_attentions(attentions)  # (L, nh, T, T)
    L, nh, T, _ = a.shape
    if not -L <= int(layer) < L:
        raise CheckpointError(f"layer {layer} is out of range for {L} layers")
    gh, gw = _check_grid(grid, n_extra, T)
    return a[int(layer), :, 0, n_extra:].reshape(nh, gh, gw)  # (nh, gh, gw)
