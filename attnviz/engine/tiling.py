"""Automatic tile sizes for the flash kernel: measured once per shape class, cached in-process.

The best BLOCK_M x BLOCK_N depends on the CPU (caches, BLAS kernels), the head sizes, the dtype, the
thread count and the mask, so it is measured rather than guessed. The first call for a shape class
times every candidate on a proxy problem of that class (same hs, hv, dtype and threads; T capped so
the whole measurement stays near 0.2 s), once with every tile full and once with
every tile partial, and keeps the cost per score cell of each. A call then picks the candidate with
the lowest predicted time for its own mask: full cells x full cost + partial cells x partial cost,
empty tiles free. Every candidate is a multiple of the finest tile (64 x 128), so one count of the
mask's allowed cells at that tile gives the tile states of every candidate. Problems too small for
the choice to matter (fewer than SMALL_WORK scores) use DEFAULT without measuring.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

import numpy as np

from attnviz.engine.blockmask import coarsen_counts, states_from_counts, tile_counts, tile_sizes
from attnviz.engine.runtime import get_num_threads

CANDIDATES = ((64, 128), (128, 128), (64, 256), (128, 256), (256, 128), (128, 512))
FINEST = (64, 128)  # every candidate is a multiple of this
DEFAULT = (64, 128)
SMALL_WORK = 1 << 20  # nh * Tq * Tk below which every candidate runs in well under a millisecond
REPEATS = 3  # timed rounds per candidate; the best is kept
PROXY_TQ, PROXY_TK = 1024, 2048  # largest proxy problem: about 0.5 GFLOP per run at hs = 64


@dataclass(frozen=True)
class ShapeClass:
    """What the best tile size depends on, besides the mask."""

    Tq: int  # queries, rounded up to a power of two and capped at the proxy size
    Tk: int  # keys, likewise
    hs: int  # head size of q and k: the inner size of the score product
    hv: int  # head size of v: the width of the output product
    dtype: str  # float32 or float64: BLAS kernel and vector width
    threads: int  # worker threads: few large tiles starve threads


@dataclass(frozen=True)
class TileCost:
    """Measured seconds per score cell of one candidate tile size."""

    full: float  # in a tile without a mask test
    partial: float  # in a tile that reads the mask


_cache: dict[ShapeClass, dict[tuple[int, int], TileCost]] = {}
_lock = threading.Lock()


def _bucket(n: int, cap: int) -> int:
    return min(cap, 1 << max(0, int(n - 1).bit_length()))


def shape_class(Tq: int, Tk: int, hs: int, hv: int, dtype) -> ShapeClass:
    return ShapeClass(_bucket(Tq, PROXY_TQ), _bucket(Tk, PROXY_TK), hs, hv, np.dtype(dtype).name, get_num_threads())


def candidates_for(Tq: int, Tk: int) -> list[tuple[int, int]]:
    """Candidates whose tiles are not much larger than the problem."""
    fit = [(bm, bn) for bm, bn in CANDIDATES
           if bm <= max(FINEST[0], _bucket(Tq, 1 << 30)) and bn <= max(FINEST[1], _bucket(Tk, 1 << 30))]
    return fit or [DEFAULT]


def _measure(sc: ShapeClass) -> dict[tuple[int, int], TileCost]:
    from attnviz.engine.blockmask import classify
    from attnviz.engine.flash import flash_attention, full_tile_state  # late: flash imports runtime users

    rng = np.random.default_rng(0)
    nh = max(1, min(8, -(-4 * sc.threads * 256 // sc.Tq)))  # enough query tiles to feed every thread
    q = rng.standard_normal((nh, sc.Tq, sc.hs)).astype(sc.dtype)  # (nh, Tq, hs)
    k = rng.standard_normal((nh, sc.Tk, sc.hs)).astype(sc.dtype)  # (nh, Tk, hs)
    v = rng.standard_normal((nh, sc.Tk, sc.hv)).astype(sc.dtype)  # (nh, Tk, hv)
    holes = np.ones((1, sc.Tq, sc.Tk), dtype=bool)  # (1, Tq, Tk) one masked cell per finest tile
    holes[:, :: FINEST[0], :: FINEST[1]] = False
    scale = 1.0 / np.sqrt(sc.hs)
    cells = nh * sc.Tq * sc.Tk

    runs = []  # (candidate, kind, mask, tile states)
    for bm, bn in candidates_for(sc.Tq, sc.Tk):
        runs.append(((bm, bn), "full", None, full_tile_state(sc.Tq, sc.Tk, bm, bn)))
        runs.append(((bm, bn), "partial", holes, classify(holes, bm, bn)))
    best = {}
    for rep in range(REPEATS + 1):  # round-robin, so a burst of other load hits every candidate alike
        for cand, kind, dense, ts in runs:
            t0 = time.perf_counter()
            flash_attention(q, k, v, dense, ts, scale, *cand)
            t = time.perf_counter() - t0
            if rep:  # the first round warms caches (and compiles on first use)
                best[(cand, kind)] = min(best.get((cand, kind), float("inf")), t)
    # a partial tile does everything a full one does and more: on a busy machine a measurement can say
    # otherwise, so the partial cost is never taken below the full one
    return {cand: TileCost(best[(cand, "full")] / cells, max(best[(cand, "full")], best[(cand, "partial")]) / cells)
            for cand, *_ in runs}


def tile_costs(Tq: int, Tk: int, hs: int, hv: int, dtype) -> dict[tuple[int, int], TileCost]:
    """Measured per-cell costs of every candidate for this shape class (measured on first use)."""
    sc = shape_class(Tq, Tk, hs, hv, dtype)
    with _lock:
        if sc not in _cache:
            _cache[sc] = _measure(sc)
        return _cache[sc]


def _predicted(costs: dict[tuple[int, int], TileCost], fine: np.ndarray | None, Tq: int, Tk: int,
               nh: int) -> dict[tuple[int, int], float]:
    """Predicted seconds of each candidate for a mask given by its :func:`fine_counts` (None: every key
    allowed)."""
    if fine is None:
        return {c: cost.full * nh * Tq * Tk for c, cost in costs.items()}
    scale_h = nh // fine.shape[0]
    out = {}
    for (bm, bn), cost in costs.items():
        counts = coarsen_counts(fine, bm // FINEST[0], bn // FINEST[1])  # (h, nQ, nK)
        size = tile_sizes(Tq, Tk, bm, bn)  # (nQ, nK) cells per tile
        full = counts == size[None]
        partial = (counts > 0) & ~full
        t = (cost.full * float((size[None] * full).sum()) + cost.partial * float((size[None] * partial).sum()))
        out[(bm, bn)] = t * scale_h
    return out


def choose_blocks(nh: int, Tq: int, Tk: int, hs: int, hv: int, dtype, dense: np.ndarray | None = None,
                  fine: np.ndarray | None = None) -> tuple[int, int]:
    """(BLOCK_M, BLOCK_N) for this problem and mask ((nh or 1, Tq, Tk) bool or None); DEFAULT when tiny.
    ``fine``: the mask's :func:`fine_counts`, when the caller has them already."""
    if nh * Tq * Tk < SMALL_WORK:
        return DEFAULT
    if dense is not None and fine is None:
        fine = fine_counts(dense)
    pred = _predicted(tile_costs(Tq, Tk, hs, hv, dtype), fine, Tq, Tk, nh)
    return min(pred, key=pred.get)


def fine_counts(dense: np.ndarray) -> np.ndarray:
    """Allowed cells per FINEST tile of a (nh or 1, Tq, Tk) bool mask: (nh or 1, nQf, nKf) int64."""
    return tile_counts(dense, *FINEST)


def tile_state_from_fine(fine: np.ndarray, Tq: int, Tk: int, bm: int, bn: int) -> np.ndarray:
    """The (nh or 1, nQ, nK) tile states for tiles bm x bn (multiples of FINEST) from :func:`fine_counts`,
    without reading the mask again."""
    return states_from_counts(coarsen_counts(fine, bm // FINEST[0], bn // FINEST[1]), Tq, Tk, bm, bn)


def cached_costs() -> dict[ShapeClass, dict[tuple[int, int], TileCost]]:
    """The tile costs measured so far in this process."""
    with _lock:
        return {k: dict(v) for k, v in _cache.items()}
