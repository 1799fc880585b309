"""The designer's "Time flash" measurement, a pure function run off the GUI thread: the flash kernel on
the designed mask against the same kernel with every key allowed, for the session's q, k, v and tile
size (median of a few repeats after one untimed warm-up). Each method is timed in its own block, as
alternating them on small problems makes the thread pools interfere, and each timed call holds the
engine's parallel lock before the clock starts, so a background computation is not counted.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from attnviz.engine import attention
from attnviz.engine.blockmask import BlockMask
from attnviz.engine.runtime import PARALLEL_LOCK


@dataclass(frozen=True)
class SpeedResult:
    """Median wall times of the flash kernel with the designed mask and with the dense mask."""

    masked_s: float  # median seconds per call on the designed mask
    dense_s: float  # median seconds per call on the all-True mask
    repeats: int  # timed calls per method
    block_m: int  # BLOCK_M used
    block_n: int  # BLOCK_N used
    skipped: float  # percent of tiles the designed mask lets the kernel skip

    @property
    def speedup(self) -> float:
        """dense time / masked time (> 1: the mask makes flash faster)."""
        return self.dense_s / self.masked_s if self.masked_s > 0 else float("inf")

    def text(self) -> str:
        return (f"flash: {_ms(self.masked_s)} on this mask vs {_ms(self.dense_s)} dense "
                f"(median of {self.repeats}, {self.block_m}x{self.block_n} tiles, {self.skipped:.1f} % skipped) "
                f"→ {self.speedup:.2f}x")


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.3g} ms" if seconds >= 1e-4 else f"{seconds * 1e6:.3g} µs"


def _median_time(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        with PARALLEL_LOCK:
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
    return float(np.median(times))


def time_flash(q, k, v, mask, block_m: int, block_n: int, repeats: int = 5) -> SpeedResult:
    """Time ``attention(q, k, v, kernel="flash")`` with ``mask`` against the dense mask.

    q (nh, Tq, hs), k (nh, Tk, hs), v (nh, Tk, hv); ``mask`` bool (Tq, Tk) or (nh, Tq, Tk).
    """
    if isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 1:
        raise ValueError(f"repeats must be an integer >= 1, got {repeats!r}")
    m = np.asarray(mask)
    if m.dtype != bool or m.ndim not in (2, 3):
        raise ValueError(f"the mask must be a bool (Tq, Tk) or (nh, Tq, Tk) array, got {m.dtype} {m.shape}")
    if m.shape[-2:] != (q.shape[-2], k.shape[-2]):
        raise ValueError(f"the mask is {m.shape[-2]} x {m.shape[-1]} but q and k have {q.shape[-2]} and "
                         f"{k.shape[-2]} tokens: wait for the computation to catch up and time again")
    designed = BlockMask.from_dense(m, int(block_m), int(block_n))
    dense = BlockMask.from_dense(np.ones(m.shape[-2:], dtype=bool), int(block_m), int(block_n))  # (Tq, Tk)

    def run_masked():
        attention(q, k, v, mask=designed, kernel="flash")

    def run_dense():
        attention(q, k, v, mask=dense, kernel="flash")

    run_masked()  # warm-up: first-call compile / cache load is not part of the measurement
    masked = _median_time(run_masked, repeats)
    run_dense()
    dense_t = _median_time(run_dense, repeats)
    return SpeedResult(masked, dense_t, repeats, int(block_m), int(block_n), float(designed.sparsity()))
