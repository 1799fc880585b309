"""Flash vs reference for the current session: per-head error of every fast kernel against the
float64 reference, the time of each kernel, and a model of the largest buffer each one holds.

Errors are measured, never asserted here; a kernel the engine does not provide (ValueError for
the name) is reported as unavailable with the engine's message instead of failing the check.
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass

import numpy as np

from attnviz.engine import attention

ESTIMATE_TILE = 64  # tile edge the memory model assumes when no block size is given


@dataclass(frozen=True)
class KernelReport:
    """One kernel measured against the reference."""

    kernel: str  # engine kernel name
    available: bool  # False when the engine rejected the name
    message: str  # why it is unavailable, "" otherwise
    out_error: np.ndarray  # (nh,) max |out - out_reference| per head (empty when unavailable)
    lse_error: np.ndarray  # (nh,) max |lse - lse_reference| over rows where both are finite
    lse_mismatch: np.ndarray  # (nh,) rows where exactly one of the two lse is -inf (should be 0)
    max_error: float  # max of out_error (nan-free; inf never occurs for finite input)
    time_s: float  # median wall time of one call, seconds (first-call compile excluded)
    intermediate_bytes: int  # largest working buffer, from the memory model above
    memory_note: str  # what that buffer is


@dataclass(frozen=True)
class FlashCheck:
    """The reference and each fast kernel on one session's q, k, v and mask."""

    shape: tuple[int, int, int, int, int]  # (nh, Tq, Tk, hs, hv)
    dtype: str  # input precision the fast kernels ran in
    reference: KernelReport  # errors all zero by definition; its time and memory
    kernels: tuple[KernelReport, ...]  # one per requested fast kernel, in request order
    repeats: int  # calls timed per kernel (median reported)

    def error_matrix(self) -> np.ndarray:
        """(n_kernels, nh) out errors of the available kernels, for a heatmap; unavailable rows are 0."""
        nh = self.shape[0]
        return np.stack([r.out_error if r.available else np.zeros(nh) for r in self.kernels]) \
            if self.kernels else np.zeros((0, nh))  # (n_kernels, nh)


def _median_time(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


def _memory(kernel: str, nh: int, Tq: int, Tk: int, hv: int, itemsize: int, block_m, block_n) -> tuple[int, str]:
    workers = os.cpu_count() or 1
    if kernel == "reference":
        return nh * Tq * Tk * 8, f"(nh, Tq, Tk) = ({nh}, {Tq}, {Tk}) float64 score matrix"
    if kernel == "naive":
        w = min(nh * Tq, workers)
        return w * Tk * itemsize, f"{w} worker(s) x one score row of {Tk}"
    if kernel == "flash":
        bm = int(block_m) if block_m else ESTIMATE_TILE
        bn = int(block_n) if block_n else ESTIMATE_TILE
        w = min(nh * math.ceil(Tq / bm), workers)
        per = bm * bn + 2 * bm * hv + 2 * bm
        return w * per * itemsize, f"{w} worker(s) x ({bm}x{bn} score tile + 2 x {bm}x{hv} output tiles + m_i, l_i)"
    return 0, "no memory model for this kernel"


def flash_check(q, k, v, mask=None, *, scale: float | None = None, kernels=("naive", "flash"),
                repeats: int = 3, block_m: int | None = None, block_n: int | None = None) -> FlashCheck:
    """Compare ``kernels`` with the reference on q (nh, Tq, hs), k (nh, Tk, hs), v (nh, Tk, hv).

    2-D inputs mean one head. ``mask`` is anything the engine accepts. Each kernel is called once
    untimed (compile, error measurement), then ``repeats`` times for the median time.
    """
    if isinstance(repeats, bool) or int(repeats) != repeats or repeats < 1:
        raise ValueError(f"repeats must be a positive integer, got {repeats!r}")
    repeats = int(repeats)
    q, k, v = (np.asarray(a) for a in (q, k, v))
    if q.ndim == 2:
        q, k, v = q[None], k[None], v[None]  # (1, T, hs) one head
    if q.ndim != 3 or k.ndim != 3 or v.ndim != 3:
        raise ValueError(f"q, k, v must be (nh, T, d) or (T, d), got {q.shape}, {k.shape}, {v.shape}")
    nh, Tq, hs = q.shape
    Tk, hv = k.shape[1], v.shape[2]
    item = np.dtype(q.dtype).itemsize if q.dtype in (np.float32, np.float64) else 8
    blocks = {} if block_m is None and block_n is None else {"block_m": block_m, "block_n": block_n}

    ref = attention(q.astype(np.float64), k.astype(np.float64), v.astype(np.float64), mask, scale=scale,
                    kernel="reference")
    t_ref = _median_time(lambda: attention(q, k, v, mask, scale=scale, kernel="reference"), repeats)
    rb, rn = _memory("reference", nh, Tq, Tk, hv, item, block_m, block_n)
    zeros = np.zeros(nh)
    ref_report = KernelReport("reference", True, "", zeros, zeros, np.zeros(nh, dtype=np.int64), 0.0, t_ref, rb, rn)

    reports = []
    for name in kernels:
        call = lambda name=name: attention(q, k, v, mask, scale=scale, kernel=name, **blocks)  # noqa: E731
        try:
            res = call()
        except ValueError as exc:
            reports.append(KernelReport(name, False, str(exc), np.zeros(0), np.zeros(0), np.zeros(0, dtype=np.int64),
                                        0.0, 0.0, 0, ""))
            continue
        out_err = np.abs(np.asarray(res.out, dtype=np.float64) - ref.out).max(axis=(1, 2), initial=0.0)  # (nh,)
        lse, lse_ref = np.asarray(res.lse, dtype=np.float64), ref.lse  # (nh, Tq) each
        both = np.isfinite(lse) & np.isfinite(lse_ref)  # (nh, Tq)
        lse_err = np.where(both, np.abs(np.where(both, lse, 0.0) - np.where(both, lse_ref, 0.0)), 0.0).max(
            axis=1, initial=0.0)  # (nh,)
        mismatch = (np.isfinite(lse) != np.isfinite(lse_ref)).sum(axis=1)  # (nh,)
        t = _median_time(call, repeats)
        b, note = _memory(name, nh, Tq, Tk, hv, item, block_m, block_n)
        reports.append(KernelReport(name, True, "", out_err, lse_err, mismatch, float(out_err.max(initial=0.0)),
                                    t, b, note))
    return FlashCheck(shape=(nh, Tq, Tk, hs, hv), dtype=str(q.dtype), reference=ref_report,
                      kernels=tuple(reports), repeats=repeats)
