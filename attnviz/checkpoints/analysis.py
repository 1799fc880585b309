"""Summaries of attention maps (L, nh, T, T), rows = queries: per-head statistics, attention rollout
(Abnar & Zuidema, as ``vit_rollout.py`` computes it) and maps over the patch grid: the class token's
row, one patch's row, and the mean attention each patch receives.

A model without a class token (SigLIP: ``n_extra`` 0) has no row that stands for the whole image:
its "what the model looks at" maps are the mean over every query row instead (the rollout's too),
or the row of one chosen patch.
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
    cls_map: np.ndarray | None  # (gh, gw) class-token row over the patches / its max (None without a grid or class token)
    patch_map: np.ndarray | None = None  # (gh, gw) the map asked for over the patches / its max (see ``rows``)
    rows: str = ""  # which row(s) patch_map is: "[CLS]", "token i" (a chosen query) or "mean over all T queries"


def attention_rollout(attentions, head_fusion: str = "mean", discard_ratio: float = 0.0,
                      grid: tuple[int, int] | None = None, n_extra: int = 1, query: int | None = None) -> Rollout:
    """Rollout of ``attentions`` (L, nh, T, T); with ``grid`` (gh, gw) also maps over the patches.

    Per layer: fuse heads, zero the lowest ``discard_ratio`` share of entries (ties by flat index; flat
    index 0, CLS -> CLS, always kept), ``(A + I) / 2``, renormalise rows; multiply from the first layer up.
    ``patch_map`` is the rolled-out row of token ``query`` when one is given, else the class token's, else
    (``n_extra`` 0: no class token) the mean of every row: how much each patch flows into the output
    tokens on average, with no token standing for the image.
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
    if grid is None:
        if query is not None:
            raise CheckpointError("a rollout query row needs the patch grid")
        return Rollout(matrix=result, cls_map=None)
    gh, gw = _check_grid(grid, n_extra, T)
    cls_map = _by_peak(result[0, n_extra:].reshape(gh, gw)) if n_extra else None  # (gh, gw)
    if query is not None:
        q = _check_query(query, T)
        patch_map, rows = _by_peak(result[q, n_extra:].reshape(gh, gw)), f"token {q}"  # (gh, gw)
    elif n_extra:
        patch_map, rows = cls_map, "[CLS]"
    else:
        patch_map, rows = _by_peak(result[:, n_extra:].mean(axis=0).reshape(gh, gw)), f"mean over all {T} queries"
    return Rollout(matrix=result, cls_map=cls_map, patch_map=patch_map, rows=rows)


def _by_peak(row: np.ndarray) -> np.ndarray:
    peak = row.max()
    return row / peak if peak > 0 else np.zeros_like(row)


def _check_query(query, T: int) -> int:
    if isinstance(query, bool) or not isinstance(query, (int, np.integer)) or not 0 <= int(query) < T:
        raise CheckpointError(f"query {query!r} is not a token index in 0..{T - 1}")
    return int(query)


def _check_grid(grid, n_extra: int, T: int) -> tuple[int, int]:
    try:
        gh, gw = (int(g) for g in grid)
    except (TypeError, ValueError):
        raise CheckpointError(f"grid must be (rows, columns) of patches (got {grid!r})") from None
    if gh < 1 or gw < 1 or n_extra < 0 or n_extra + gh * gw != T:
        raise CheckpointError(
            f"grid {gh}x{gw} with {n_extra} extra token(s) needs T = {n_extra + gh * gw} tokens, the attentions have T = {T}"
        )
    return gh, gw


def _layer(a: np.ndarray, layer) -> int:
    L = a.shape[0]
    if not -L <= int(layer) < L:
        raise CheckpointError(f"layer {layer} is out of range for {L} layers")
    return int(layer)


def cls_attention_maps(attentions, layer: int, grid: tuple[int, int], n_extra: int = 1) -> np.ndarray:
    """(nh, gh, gw): how much the class token attends to each patch, per head, in ``layer`` (negative counts from the end)."""
    a = _check_attentions(attentions)  # (L, nh, T, T)
    L, nh, T, _ = a.shape
    layer = _layer(a, layer)
    gh, gw = _check_grid(grid, n_extra, T)
    if n_extra < 1:
        raise CheckpointError("the model has no class token (its tokens are all patches): draw one patch's row "
                              "(query_attention_maps) or the mean attention each patch receives (received_attention_maps)")
    return a[layer, :, 0, n_extra:].reshape(nh, gh, gw)  # (nh, gh, gw)


def query_attention_maps(attentions, layer: int, grid: tuple[int, int], n_extra: int, query: int) -> np.ndarray:
    """(nh, gh, gw): how much token ``query`` (a patch is token n_extra + r * gw + c) attends to each patch, per head."""
    a = _check_attentions(attentions)  # (L, nh, T, T)
    L, nh, T, _ = a.shape
    layer = _layer(a, layer)
    gh, gw = _check_grid(grid, n_extra, T)
    return a[layer, :, _check_query(query, T), n_extra:].reshape(nh, gh, gw)  # (nh, gh, gw)


def received_attention_maps(attentions, layer: int, grid: tuple[int, int], n_extra: int = 0) -> np.ndarray:
    """(nh, gh, gw): the mean over every query row (T of them, extra tokens included) of the weight each patch
    receives, per head: where the layer looks overall when no class token speaks for the image (1 / T each
    when attention is uniform; the maps of a model without extra tokens sum to 1)."""
    a = _check_attentions(attentions)  # (L, nh, T, T)
    L, nh, T, _ = a.shape
    layer = _layer(a, layer)
    gh, gw = _check_grid(grid, n_extra, T)
    return a[layer, :, :, n_extra:].mean(axis=1).reshape(nh, gh, gw)  # (nh, gh, gw)
