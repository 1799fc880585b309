"""How the benchmark measures: wall time of a call, a block's peak extra memory, the sgemm rate it is
compared with, and the order of the paired calls of a timing round."""

from __future__ import annotations

import statistics
import time
import tracemalloc

import numpy as np

SETTLE = 0.1  # seconds of idle before each timed call: the previous method's thread pool goes quiet


class PeakMemory:
    """Peak extra memory of a block, in MB: the larger of two views.

    - resident memory (Linux): reset the high-water mark (/proc/self/clear_refs), run, read VmHWM minus
      VmRSS before; sees every allocation (numpy, numba, BLAS) that was not already resident;
    - tracemalloc's peak: sees numpy's allocations exactly, even when malloc reuses freed pages.
    """

    def __init__(self):
        self.mb: float | None = None

    def __enter__(self):
        from attnviz.engine.runtime import process_memory

        try:
            with open("/proc/self/clear_refs", "w", encoding="ascii") as f:
                f.write("5")
            self._rss = process_memory("VmRSS:")
        except OSError:
            self._rss = None
        tracemalloc.start()
        tracemalloc.reset_peak()
        self._traced = tracemalloc.get_traced_memory()[0]
        return self

    def __exit__(self, *exc):
        from attnviz.engine.runtime import process_memory

        traced = tracemalloc.get_traced_memory()[1] - self._traced
        tracemalloc.stop()
        rss = 0 if self._rss is None else process_memory("VmHWM:") - self._rss
        self.mb = max(traced, rss) / 2**20
        return False


def timed(fn, repeat: int, settle: float = 0.2) -> tuple[float, float, float | None]:
    """(median s, best s, peak extra MB) of fn: one warm-up call, one call measuring memory, then timings.

    Waits ``settle`` seconds first so that the thread pools of the previous method go idle.
    """
    time.sleep(settle)
    fn()
    with PeakMemory() as mem:
        fn()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), min(times), mem.mb


def sgemm_gflops(threads: int | None, n: int = 2048, repeat: int = 5) -> float:
    """Best float32 matrix-product rate of numpy's BLAS on n x n, with the benchmark's thread count."""
    from attnviz.engine.runtime import blas_threads

    rng = np.random.default_rng(1)
    a = rng.standard_normal((n, n), dtype=np.float32)  # (n, n)
    b = rng.standard_normal((n, n), dtype=np.float32)  # (n, n)
    c = np.empty((n, n), dtype=np.float32)  # (n, n)
    with blas_threads(threads):
        np.matmul(a, b, out=c)
        best = min(once(lambda: np.matmul(a, b, out=c)) for _ in range(repeat))
    return 2.0 * n**3 / best / 1e9


def once(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def paired_ratio(a: list[float], b: list[float]) -> float:
    """Median over rounds of a[i] / b[i]: each ratio from two calls made one after the other."""
    return statistics.median(x / y for x, y in zip(a, b))


def round_order(keys: list[tuple[str, str]], round_index: int) -> list[tuple[str, str]]:
    """The (mask, method) calls of one timing round: each mask's methods one after the other, in the
    order masks first appear in ``keys``, the methods' order turned round every round, so no method
    always runs first, or always right after the previous round's sgemm."""
    masks = list(dict.fromkeys(mask for mask, _ in keys))
    out = []
    for i, mask in enumerate(masks):
        mine = [key for key in keys if key[0] == mask]
        out += mine[::-1] if (round_index + i) % 2 else mine
    return out
