"""Automatic tile sizes for the flash kernel from a cost model, so every run makes the same choice.

A tile costs its score cells plus a fixed part per tile product, mask-reading tiles more, empty ones
nothing; the constants are fitted to single-thread timings, and the model replaced per-process timing
on a proxy problem, whose choice changed from run to run on a busy machine (see benchmarks/README.md).
Candidates are multiples of the finest tile, so one count of the mask at that tile serves them all.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attnviz.engine.blockmask import coarsen_counts, states_from_counts, tile_counts, tile_sizes
from attnviz.engine.runtime import get_num_threads

CANDIDATES = ((64, 128), (128, 128), (64, 256), (128, 256), (256, 128), (128, 512), (256, 256), (256, 512))
FINEST = (64, 128)  # every candidate is a multiple of this
DEFAULT = (64, 128)
SMALL_WORK = 1 << 20  # nh * Tq * Tk below which every candidate runs in well under a millisecond
CELL_NS = 1.87  # one score cell of a full tile (both products and the softmax), ns
PANEL_NS = 19.0  # one panel row (of BLOCK_M + BLOCK_N) of the tile products at hs = hv = 64, ns
PARTIAL_FACTOR = 1.5  # a cell of a tile that reads the mask, relative to a full tile's


@dataclass(frozen=True)
class TileCost:
    """Modelled seconds per score cell of one candidate tile size (a tile of full extent)."""

    full: float  # in a tile without a mask test
    partial: float  # in a tile that reads the mask


def _bucket(n: int, cap: int) -> int:
    return min(cap, 1 << max(0, int(n - 1).bit_length()))


def candidates_for(Tq: int, Tk: int) -> list[tuple[int, int]]:
    """Candidates whose tiles are not much larger than the problem."""
    fit = [(bm, bn) for bm, bn in CANDIDATES
           if bm <= max(FINEST[0], _bucket(Tq, 1 << 30)) and bn <= max(FINEST[1], _bucket(Tk, 1 << 30))]
    return fit or [DEFAULT]


def tile_costs(Tq: int, Tk: int, hs: int, hv: int) -> dict[tuple[int, int], TileCost]:
    """Modelled per-cell cost of every candidate: CELL_NS plus PANEL_NS per panel row (BLOCK_M + BLOCK_N,
    scaled by (hs + hv) / 128) spread over the tile's cells."""
    out = {}
    for bm, bn in candidates_for(Tq, Tk):
        full = 1e-9 * (CELL_NS + PANEL_NS * (bm + bn) * (hs + hv) / 128 / (bm * bn))
        out[(bm, bn)] = TileCost(full, full * PARTIAL_FACTOR)
    return out


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


def _wall(pred: dict[tuple[int, int], float], fine: np.ndarray | None, Tq: int, nh: int,
          threads: int) -> dict[tuple[int, int], float]:
    """Predicted wall time from predicted work: the (head, query tile) items with work are shared by the
    threads; fewer items than threads leave threads idle, and the last items dealt leave on average half
    an item of imbalance."""
    out = {}
    for (bm, bn), work in pred.items():
        items = nh * -(-Tq // bm)
        if fine is not None:  # query tiles without an allowed cell are no work
            rows = coarsen_counts(fine, bm // FINEST[0], bn // FINEST[1]).sum(axis=2)  # (h, nQ)
            items = max(1, int(np.count_nonzero(rows)) * (nh // fine.shape[0]))
        out[(bm, bn)] = work / min(threads, items) + 0.5 * work / items
    return out


def choose_blocks(nh: int, Tq: int, Tk: int, hs: int, hv: int, dtype=None, dense: np.ndarray | None = None,
                  fine: np.ndarray | None = None) -> tuple[int, int]:
    """(BLOCK_M, BLOCK_N) for this problem and mask ((nh or 1, Tq, Tk) bool or None); DEFAULT when tiny.
    ``fine``: the mask's :func:`fine_counts`, when the caller has them already. The same problem, mask
    and thread count always give the same choice (``dtype`` scales every candidate alike)."""
    if nh * Tq * Tk < SMALL_WORK:
        return DEFAULT
    if dense is not None and fine is None:
        fine = fine_counts(dense)
    pred = _predicted(tile_costs(Tq, Tk, hs, hv), fine, Tq, Tk, nh)
    wall = _wall(pred, fine, Tq, nh, get_num_threads())
    return min(wall, key=lambda c: (wall[c], c))


def fine_counts(dense: np.ndarray) -> np.ndarray:
    """Allowed cells per FINEST tile of a (nh or 1, Tq, Tk) bool mask: (nh or 1, nQf, nKf) int64."""
    return tile_counts(dense, *FINEST)


def tile_state_from_fine(fine: np.ndarray, Tq: int, Tk: int, bm: int, bn: int) -> np.ndarray:
    """The (nh or 1, nQ, nK) tile states for tiles bm x bn (multiples of FINEST) from :func:`fine_counts`,
    without reading the mask again."""
    return states_from_counts(coarsen_counts(fine, bm // FINEST[0], bn // FINEST[1]), Tq, Tk, bm, bn)
