"""Caches of the compute pipeline (projections, scores, compiled masks, results), so that an edit
recomputes only what it changes: the mask does not enter the scores and softmax runs per query row,
so after a mask edit only the rows whose mask changed are recomputed (:func:`changed_rows`), and a
view edit reuses everything. Cached arrays are shared with responses, never written after they are
stored. :func:`attnviz.model.compute.run` uses them; see docs/architecture.md.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import numpy as np

from attnviz.engine.blockmask import BlockMask, classify
from attnviz.model.sequence import LRUCache


def freeze(*arrays) -> None:
    """Make arrays read-only (they are shared between responses and caches)."""
    for a in arrays:
        if isinstance(a, np.ndarray):
            a.setflags(write=False)


def _nbytes(value) -> int:
    return int(sum(getattr(value, n).nbytes for n in getattr(value, "ARRAYS", ()) if getattr(value, n) is not None)
               if not isinstance(value, np.ndarray) else value.nbytes)


@dataclass(frozen=True, eq=False)
class Projection:
    """Token rows and projections of one (sources, model, positional) key; arrays read-only, float64."""

    ARRAYS = ("Xq", "Xk", "q", "k", "v")

    Xq: np.ndarray  # (Tq, d_model) query-side rows, positions added
    Xk: np.ndarray  # (Tk, d_model) key-side rows (Xq itself for self-attention)
    W: object  # attnviz.model.heads.Weights actually used
    q: np.ndarray  # (nh, Tq, hs) after RoPE, before hand-set components
    k: np.ndarray  # (nh, Tk, hs) after RoPE, before hand-set components
    v: np.ndarray  # (nh, Tk, hv)


@dataclass(frozen=True, eq=False)
class CompiledMask:
    """A compiled mask design and what is derived from it alone; arrays read-only."""

    ARRAYS = ("mask", "fully")

    mask: np.ndarray  # (Tq, Tk) or (nh, Tq, Tk) bool, True = may attend (never written)
    block_mask: BlockMask  # its tile map at the session's tile size (shares ``mask``; read-only views)
    fully: np.ndarray  # (Tq,) or (nh, Tq) bool: rows with no allowed key


@dataclass(frozen=True, eq=False)
class Result:
    """One finished attention computation, kept so the next edit can reuse its rows; read-only."""

    ARRAYS = ("out", "lse", "combined", "scores", "weights")

    compiled: CompiledMask  # the mask it was computed with
    out: np.ndarray  # (nh, Tq, hv) float64
    lse: np.ndarray  # (nh, Tq) float64
    combined: np.ndarray  # (Tq, d_model) float64
    scores: np.ndarray | None  # (nh, Tq, Tk) display dtype, or None (not dense)
    weights: np.ndarray | None  # (nh, Tq, Tk) display dtype, or None (not dense)


#: bytes the large caches may hold: two float32 (8, 2048, 2048) stacks are 268 MB
MAX_BYTES = 320 << 20

# Each key holds all that its value depends on.
# key: sources, tokenizer, cross, model without hand-set q/k components, positional encoding, token limit
projections = LRUCache(2, max_bytes=MAX_BYTES // 4, nbytes=_nbytes)
# key: projection key, hand-set q/k components, score rule, display dtype -> (nh, Tq, Tk) scaled scores
scores = LRUCache(2, max_bytes=MAX_BYTES // 2, nbytes=_nbytes)
# key: everything but the mask design, the view and the rows asked for -> the last finished Result
results = LRUCache(2, max_bytes=MAX_BYTES, nbytes=_nbytes)

# key: the mask design (by identity), segments, nh, tile size
_masks: list = []  # [(design, rest of key, CompiledMask)], newest last, by design identity
_masks_lock = threading.Lock()
MASK_ENTRIES = 2


def cached_mask(design, rest: tuple) -> CompiledMask | None:
    """The CompiledMask of exactly this design object (designs are immutable) and ``rest`` of the key."""
    with _masks_lock:
        for d, r, c in reversed(_masks):
            if d is design and r == rest:
                return c
    return None


def store_mask(design, rest: tuple, compiled: CompiledMask) -> None:
    with _masks_lock:
        _masks.append((design, rest, compiled))
        del _masks[:-MASK_ENTRIES]


def clear() -> None:
    """Forget every cached projection, score matrix, mask and result."""
    for c in (projections, scores, results):
        c.clear()
    with _masks_lock:
        _masks.clear()


# ------------------------------------------------------------------------------------------------
# masks: what changed, and the tile map updated for it


def changed_rows(old: np.ndarray, new: np.ndarray) -> np.ndarray:
    """Query rows where two masks of the same shape differ (in any head): (R,) int64, sorted."""
    if old.shape[-1] % 8 == 0 and old.flags.c_contiguous and new.flags.c_contiguous:
        old, new = old.view(np.uint64), new.view(np.uint64)  # 8 cells per compare
    diff = old != new  # (Tq, Tk') or (nh, Tq, Tk')
    rows = diff.any(axis=-1)  # (Tq,) or (nh, Tq)
    if rows.ndim == 2:
        rows = rows.any(axis=0)  # (Tq,)
    return np.flatnonzero(rows)


def block_mask(mask: np.ndarray, block_m: int, block_n: int, prev: BlockMask | None = None,
               rows: np.ndarray | None = None) -> BlockMask:
    """The BlockMask of ``mask`` (C-contiguous writable bool, never written afterwards) without copying
    it: the engine kernels read ``mask`` itself (:meth:`BlockMask.share`), so no run copies it and
    every kernel sees the same (writable) array type that warm-up compiled.

    With ``prev`` (the tile map of a mask that differs from ``mask`` only in query ``rows``, same
    shape and tile size), only the tile rows holding ``rows`` are classified again.
    """
    m3 = mask if mask.ndim == 3 else mask[None]  # (nh|1, Tq, Tk)
    if prev is None or rows is None or prev.dense.shape != mask.shape or \
            (prev.block_m, prev.block_n) != (block_m, block_n):
        state = classify(m3, block_m, block_n)  # (nh|1, nQ, nK)
    else:
        state = np.array(prev.tile_state)  # (nh|1, nQ, nK)
        for b in np.unique(np.asarray(rows) // block_m):
            r0 = int(b) * block_m
            state[:, b:b + 1] = classify(m3[:, r0:r0 + block_m], block_m, block_n)  # (nh|1, 1, nK)
    return BlockMask.share(mask, block_m, block_n, state)
