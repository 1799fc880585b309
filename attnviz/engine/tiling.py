"""Automatic tile sizes for the flash kernel: measured once per shape class and cached in-process.

The best BLOCK_M x BLOCK_N depends on the CPU (caches, BLAS kernels), the head sizes, the dtype and the
thread count, so it is measured rather than guessed: the first call for a shape class times every
candidate on a proxy problem of that class (same hs, hv, dtype and threads; T capped so the measurement
stays near 0.1 s) and keeps the fastest. Problems too small for the choice to matter (fewer than
SMALL_WORK scores) use DEFAULT without measuring.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

import numpy as np

from attnviz.engine.runtime import get_num_threads

CANDIDATES = ((64, 128), (128, 128), (64, 256), (128, 256), (256, 128), (128, 512))
DEFAULT = (64, 128)
SMALL_WORK = 1 << 20  # nh * Tq * Tk below which every candidate runs in well under a millisecond


@dataclass(frozen=True)
class ShapeClass:
    """What the best tile size depends on."""

    Tq: int  # queries, rounded up to a power of two and capped at the proxy size
    Tk: int  # keys, likewise
    hs: int  # head size of q and k: the inner size of the score product
    hv: int  # head size of v: the width of the output product
    dtype: str  # float32 or float64: BLAS kernel and vector width
    threads: int  # worker threads: few large tiles starve threads


_cache: dict[ShapeClass, tuple[int, int]] = {}
_lock = threading.Lock()


def _bucket(n: int, cap: int) -> int:
    return min(cap, 1 << max(0, int(n - 1).bit_length()))


def shape_class(nh: int, Tq: int, Tk: int, hs: int, hv: int, dtype) -> ShapeClass:
    return ShapeClass(_bucket(Tq, 2048), _bucket(Tk, 4096), hs, hv, np.dtype(dtype).name, get_num_threads())


def candidates_for(Tq: int, Tk: int) -> list[tuple[int, int]]:
    """Candidates whose tiles are not much larger than the problem."""
    fit = [(bm, bn) for bm, bn in CANDIDATES if bm <= max(64, _bucket(Tq, 1 << 30)) and bn <= max(128, _bucket(Tk, 1 << 30))]
    return fit or [DEFAULT]


def _measure(sc: ShapeClass) -> tuple[int, int]:
    from attnviz.engine.flash import flash_attention, full_tile_state  # late: flash imports this module's users

    rng = np.random.default_rng(0)
    nh = max(1, min(8, -(-4 * sc.threads * 256 // sc.Tq)))  # enough query tiles to feed every thread
    q = rng.standard_normal((nh, sc.Tq, sc.hs)).astype(sc.dtype)  # (nh, Tq, hs)
    k = rng.standard_normal((nh, sc.Tk, sc.hs)).astype(sc.dtype)  # (nh, Tk, hs)
    v = rng.standard_normal((nh, sc.Tk, sc.hv)).astype(sc.dtype)  # (nh, Tk, hv)
    scale = 1.0 / np.sqrt(sc.hs)
    best, best_t = DEFAULT, float("inf")
    for bm, bn in candidates_for(sc.Tq, sc.Tk):
        ts = full_tile_state(sc.Tq, sc.Tk, bm, bn)
        flash_attention(q, k, v, None, ts, scale, bm, bn)  # warm caches (and compile on first use)
        t = float("inf")
        for _ in range(2):
            t0 = time.perf_counter()
            flash_attention(q, k, v, None, ts, scale, bm, bn)
            t = min(t, time.perf_counter() - t0)
        if t < best_t:
            best, best_t = (bm, bn), t
    return best


def choose_blocks(nh: int, Tq: int, Tk: int, hs: int, hv: int, dtype) -> tuple[int, int]:
    """(BLOCK_M, BLOCK_N) for this problem: measured once per shape class, DEFAULT for tiny problems."""
    if nh * Tq * Tk < SMALL_WORK:
        return DEFAULT
    sc = shape_class(nh, Tq, Tk, hs, hv, dtype)
    with _lock:
        if sc not in _cache:
            _cache[sc] = _measure(sc)
        return _cache[sc]


def cached_choices() -> dict[ShapeClass, tuple[int, int]]:
    """The tile sizes measured so far in this process."""
    with _lock:
        return dict(_cache)
