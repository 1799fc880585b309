"""``attnviz-cli bench``: how fast the attention engine is, measured against the machine's own sgemm.

    attnviz-cli bench [--json] [--sizes 256,1024,4096,8192] [--heads 8] [--hs 64] [--threads N]
                      [--repeat 5] [--no-naive] [--no-torch] [--no-long] [--isa avx2]

Per T: flash float32 on dense, causal and ~40 %-empty-tile masks, torch SDPA on its 4-D fast path
when torch is importable (the backend it ran is named), and numpy; rates as fractions of an sgemm of
the same run. Flash and SDPA alternate call by call, so the targets are medians of paired ratios.
``--isa avx2`` restarts the run with numba, OpenBLAS, torch, oneDNN and MKL limited to AVX2. Run it
under ``env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE``: set on these machines, they halve GEMM speed.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
import tracemalloc
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np


@dataclass(frozen=True)
class BenchConfig:
    """What one benchmark run measures."""

    sizes: tuple[int, ...] = (256, 1024, 4096, 8192)  # sequence lengths of the main table (Tq = Tk)
    heads: int = 8  # heads per call: the work is parallel over (head, query tile)
    hs: int = 64  # head size of q, k and v
    repeat: int = 5  # timed runs per method after the warm-up and memory runs; median and best reported
    sparse_empty: float = 0.4  # share of empty tiles in the block-sparse mask
    threads: int | None = None  # worker threads for every method (None: all)
    naive: bool = True  # time plain numpy attention alongside
    torch: bool = True  # time torch SDPA when torch is importable
    long: bool = True  # the 65k one-head run and the overviews
    long_T: int = 65536  # one-head sequence length of the memory check
    overview_sizes: tuple[int, ...] = (16384, 32768, 65536)  # T of the overview timings
    overview_pixels: tuple[int, int] = (1024, 1024)  # (H, W) of an overview: a screen-sized heatmap
    seed: int = 0  # inputs are standard normal from this seed


@dataclass
class Row:
    """One timed method on one problem."""

    T: int
    mask: str
    method: str
    ms: float
    best_ms: float
    gflops: float
    sgemm_fraction: float
    sparsity: float | None
    peak_mb: float | None
    note: str = ""


@dataclass
class Report:
    machine: dict
    config: dict
    sgemm_gflops: float
    rows: list[Row] = field(default_factory=list)
    long: dict = field(default_factory=dict)
    long_causal: dict = field(default_factory=dict)  # the same head under a causal TiledMask built band by band
    overviews: list[dict] = field(default_factory=list)
    claims: dict = field(default_factory=dict)
    paired: dict = field(default_factory=dict)  # per T: ratios of calls made one after the other, median of rounds
    load: dict = field(default_factory=dict)  # os.getloadavg() at the start and at the end
    app: dict = field(default_factory=dict)  # --app: start-up and edit-to-pixels of the real window


# ---------------------------------------------------------------------------------------------- probes

VECTOR_FLAGS = ("sse4_2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl", "avx512_vnni",
                "avx512_bf16", "avx512_fp16", "avx_vnni", "amx_tile", "amx_bf16", "amx_int8", "asimd", "sve")


def cpu_flags() -> list[str]:
    """The vector extensions of this CPU among VECTOR_FLAGS (from /proc/cpuinfo; empty when unknown)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith(("flags", "Features")):
                    have = set(line.split(":", 1)[1].split())
                    return [flag for flag in VECTOR_FLAGS if flag in have]
    except OSError:
        pass
    return []


def machine_info(torch=None) -> dict:
    """CPU, its vector extensions and the CPU numba compiles for, cores, library versions, torch's CPU
    kernel level, what computes flash's float32 tile products, and the OpenBLAS variables in force."""
    from attnviz.engine.microkernel import LANES, enabled as microkernel_enabled
    from attnviz.engine.runtime import describe

    extra = {}
    if torch is not None:
        extra = {"torch": torch.__version__, "torch_threads": torch.get_num_threads()}
        try:
            extra["torch_cpu_capability"] = torch.backends.cpu.get_cpu_capability()
        except AttributeError:
            pass

    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return {
        "cpu": cpu,
        "vector_extensions": cpu_flags(),
        "logical_cpus": os.cpu_count(),
        "python": platform.python_version(),
        "numpy": np.__version__,
        **describe(),
        "flash_tile_products": (f"micro-kernel ({'AVX-512' if LANES == 16 else 'AVX2'})" if microkernel_enabled() else "OpenBLAS"),
        "OPENBLAS_CORETYPE": os.environ.get("OPENBLAS_CORETYPE"),
        "OPENBLAS_L2_SIZE": os.environ.get("OPENBLAS_L2_SIZE"),
        "OMP_WAIT_POLICY": os.environ.get("OMP_WAIT_POLICY"),
        "isa": os.environ.get(ISA_MARKER) or "native",
        **extra,
    }


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
    from threadpoolctl import threadpool_limits

    rng = np.random.default_rng(1)
    a = rng.standard_normal((n, n), dtype=np.float32)  # (n, n)
    b = rng.standard_normal((n, n), dtype=np.float32)  # (n, n)
    c = np.empty((n, n), dtype=np.float32)  # (n, n)
    with threadpool_limits(threads, user_api="blas"):
        np.matmul(a, b, out=c)
        best = min(_once(lambda: np.matmul(a, b, out=c)) for _ in range(repeat))
    return 2.0 * n**3 / best / 1e9


def _once(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


# ------------------------------------------------------------------------------------------------ masks

def sparse_tile_mask(T: int, block_m: int, block_n: int, empty: float, seed: int) -> np.ndarray:
    """(T, T) bool mask made of whole tiles, about ``empty`` of them empty; the diagonal tiles stay."""
    rng = np.random.default_rng(seed)
    nQ, nK = -(-T // block_m), -(-T // block_n)
    diag = np.zeros((nQ, nK), dtype=bool)  # (nQ, nK) tiles holding a diagonal cell
    rows = np.arange(T)
    diag[rows // block_m, rows // block_n] = True
    free = ~diag
    n_empty = min(int(round(empty * nQ * nK)), int(free.sum()))
    keep = np.ones((nQ, nK), dtype=bool)  # (nQ, nK)
    keep.flat[rng.choice(np.flatnonzero(free), size=n_empty, replace=False)] = False
    # np.repeat keeps the result C-contiguous (fancy indexing along axis 1 would not: a copy in every call)
    return np.repeat(np.repeat(keep, block_m, axis=0)[:T], block_n, axis=1)[:, :T].copy()  # (T, T)


def numpy_attention(q, k, v, mask, scale):
    """Plain numpy attention one head at a time (bounded memory): the baseline a user would write."""
    out = np.empty((q.shape[0], q.shape[1], v.shape[2]), dtype=q.dtype)  # (nh, T, hv)
    for h in range(q.shape[0]):
        s = q[h] @ k[h].T  # (T, T)
        s *= q.dtype.type(scale)
        if mask is not None:
            s[~mask] = -np.inf
        s -= s.max(axis=-1, keepdims=True)
        np.exp(s, out=s)
        s /= s.sum(axis=-1, keepdims=True)
        np.matmul(s, v[h], out=out[h])
    return out


def _torch():
    try:
        import torch  # optional: only to compare against
    except ImportError:
        return None
    return torch


# ------------------------------------------------------------------------------------------------ runs

def run_bench(cfg: BenchConfig, progress=lambda msg: None) -> Report:
    """Measure everything in ``cfg``; ``progress`` receives one line per finished measurement."""
    from attnviz.engine.runtime import num_threads

    with num_threads(cfg.threads) as threads:
        return _run_bench(cfg, threads, progress)


SETTLE = 0.1  # seconds of idle before each timed call: the previous method's thread pool goes quiet


def sdpa_calls(torch, q, k, v, masks: dict, threads: int) -> tuple[dict, dict]:
    """torch SDPA on its CPU fast path, per mask name: ({name: callable}, {name: backend name}).

    q, k, v (nh, T, hs) float32 become contiguous (1, nh, T, hs) tensors, the (batch, heads, T, hs)
    layout of torch's CPU flash kernel (3-D inputs were seen on the slow math path); a bool mask becomes a (1, 1, T, T) ``attn_mask``, the causal
    one ``is_causal=True``. Each call runs under ``sdpa_kernel(FLASH_ATTENTION)`` when torch's own choice
    for it is that kernel, so a silent fallback to the math path would raise instead of being timed.
    """
    F = torch.nn.functional
    tq, tk, tv = (torch.from_numpy(np.ascontiguousarray(a[None])) for a in (q, k, v))  # (1, nh, T, hs)
    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel
    except ImportError:  # an old torch: run it as it comes
        SDPBackend = sdpa_kernel = None
    calls, backends = {}, {}
    for name, m in masks.items():
        if name == "dense":
            kw = {}
        elif name == "causal":
            kw = {"is_causal": True}
        else:
            kw = {"attn_mask": torch.from_numpy(np.ascontiguousarray(m))[None, None]}  # (1, 1, T, T)
        backend = "default"
        if SDPBackend is not None and hasattr(torch, "_fused_sdp_choice"):
            backend = SDPBackend(int(torch._fused_sdp_choice(tq, tk, tv, **kw))).name

        def call(kw=kw, backend=backend):
            # again before every call: numba's parallel kernels in between reset the OpenMP thread count
            # torch's kernels read when both use the same OpenMP runtime
            torch.set_num_threads(threads)
            with torch.inference_mode():
                if backend == "FLASH_ATTENTION":
                    with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
                        return F.scaled_dot_product_attention(tq, tk, tv, **kw)
                return F.scaled_dot_product_attention(tq, tk, tv, **kw)

        calls[name], backends[name] = call, backend
    return calls, backends


def _paired(a: list[float], b: list[float]) -> float:
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


def _run_bench(cfg: BenchConfig, threads: int, progress) -> Report:
    from threadpoolctl import threadpool_limits

    from attnviz.engine import BlockMask, attention
    from attnviz.engine.tiling import choose_blocks

    torch = _torch() if cfg.torch else None
    if torch is not None:
        torch.set_num_threads(threads)
    sg = sgemm_gflops(threads)
    progress(f"sgemm {sg:.0f} GFLOP/s ({threads} threads), load average {os.getloadavg()[0]:.2f}")
    report = Report(machine_info(torch), asdict(cfg), sg)
    report.load["start"] = list(os.getloadavg())
    rng = np.random.default_rng(cfg.seed)
    nh, hs = cfg.heads, cfg.hs
    scale = 1.0 / np.sqrt(hs)
    n = 2048
    ga = rng.standard_normal((n, n), dtype=np.float32)  # (n, n) the sgemm timed in every round
    gc = np.empty((n, n), dtype=np.float32)  # (n, n)

    def sgemm_call():
        with threadpool_limits(threads, user_api="blas"):
            np.matmul(ga, ga, out=gc)

    for T in cfg.sizes:
        q = rng.standard_normal((nh, T, hs), dtype=np.float32)  # (nh, T, hs)
        k = rng.standard_normal((nh, T, hs), dtype=np.float32)  # (nh, T, hs)
        v = rng.standard_normal((nh, T, hs), dtype=np.float32)  # (nh, T, hs)
        flops = 4.0 * T * T * hs * nh
        bm, bn = choose_blocks(nh, T, T, hs, hs, np.float32)  # the dense choice sets the sparse pattern's tiles
        causal = np.tri(T, dtype=bool)  # (T, T)
        sparse = sparse_tile_mask(T, bm, bn, cfg.sparse_empty, cfg.seed)  # (T, T)
        masks = {"dense": None, "causal": causal, "sparse": sparse}
        tiles = {name: choose_blocks(nh, T, T, hs, hs, np.float32, None if m is None else m[None])
                 for name, m in masks.items()}  # what flash will pick for each mask
        sparsity = {name: 0.0 if m is None else BlockMask.from_dense(m, *tiles[name]).sparsity()
                    for name, m in masks.items()}
        calls = {(name, "flash"): (lambda m=m: attention(q, k, v, m, kernel="flash")) for name, m in masks.items()}
        notes = {(name, "flash"): f"tiles {tiles[name][0]}x{tiles[name][1]}" for name in masks}
        if torch is not None:
            sdpa, backends = sdpa_calls(torch, q, k, v, masks, threads)
            for name, fn in sdpa.items():
                calls[(name, "torch_sdpa")] = fn
                notes[(name, "torch_sdpa")] = "4-D, " + backends[name] + (
                    {"causal": ", is_causal=True", "sparse": ", bool attn_mask"}.get(name, ""))
            report.machine["sdpa_backends"] = backends
        # flash and SDPA are timed in rounds, each mask's two calls one after the other (round_order), so a
        # burst of other load hits both; every round also times the sgemm that the dense rate is compared with
        peaks, times = {}, {key: [] for key in calls}
        for key, fn in calls.items():  # warm-up (compiles, measures tile costs), then a memory run
            fn()
            with PeakMemory() as mem:
                fn()
            peaks[key] = mem.mb
        sg_times = []
        for rnd in range(cfg.repeat):
            for key in round_order(list(calls), rnd):
                time.sleep(SETTLE)
                times[key].append(_once(calls[key]))
            time.sleep(SETTLE)
            sg_times.append(_once(sgemm_call))

        def add(key, med, best, mb, note):
            row = Row(T, key[0], key[1], med * 1e3, best * 1e3, flops / med / 1e9, flops / med / 1e9 / sg,
                      sparsity[key[0]], mb, note)
            report.rows.append(row)
            progress(f"T={T:<6} {key[0]:<7} {key[1]:<12} {row.ms:9.1f} ms (best {row.best_ms:.1f}) "
                     f"{row.gflops:6.0f} GFLOP/s  peak {mb or 0:7.1f} MB  {note}")

        for key in calls:
            add(key, statistics.median(times[key]), min(times[key]), peaks[key], notes[key])
        paired = {"flash_dense_sgemm_fraction": _paired(sg_times, times[("dense", "flash")]) * flops / (2.0 * n**3),
                  "sgemm_gflops_in_rounds": 2.0 * n**3 / statistics.median(sg_times) / 1e9}
        if torch is not None:
            for name in masks:
                paired[f"flash_over_sdpa_time_{name}"] = _paired(times[(name, "flash")], times[(name, "torch_sdpa")])
        report.paired[str(T)] = paired
        if cfg.naive:  # plain numpy in its own block: it is slow, and not one of the targets
            with threadpool_limits(threads, user_api="blas"):
                for name, m in masks.items():
                    add((name, "numpy"), *timed(lambda m=m: numpy_attention(q, k, v, m, scale), cfg.repeat), "")

    if cfg.long:
        _run_long(cfg, report, progress)
    end = sgemm_gflops(threads)  # again at the end: the better of the two is the machine's rate
    progress(f"sgemm at the end {end:.0f} GFLOP/s")
    report.sgemm_gflops = max(sg, end)
    for row in report.rows:
        row.sgemm_fraction = row.gflops / report.sgemm_gflops
    report.load["end"] = list(os.getloadavg())
    report.claims = claims(report)
    report.machine["numba_threading_layer"] = machine_info(torch)["numba_threading_layer"]  # known once a kernel ran
    return report


def _run_long(cfg: BenchConfig, report: Report, progress) -> None:
    from attnviz.engine import attention, attention_overview

    rng = np.random.default_rng(cfg.seed + 1)
    hs = cfg.hs
    T = cfg.long_T
    q = rng.standard_normal((T, hs), dtype=np.float32)  # (T, hs)
    k = rng.standard_normal((T, hs), dtype=np.float32)  # (T, hs)
    v = rng.standard_normal((T, hs), dtype=np.float32)  # (T, hs)
    attention(q[:1024], k[:1024], v[:1024])  # tile-size measurement and compile outside the timed block
    with PeakMemory() as mem:
        t0 = time.perf_counter()
        res = attention(q, k, v)
        dt = time.perf_counter() - t0
    inputs_mb = 3 * q.nbytes / 2**20
    report.long = {"T": T, "heads": 1, "hs": hs, "ms": dt * 1e3, "gflops": 4.0 * T * T * hs / dt / 1e9,
                   "peak_extra_mb": mem.mb, "inputs_mb": inputs_mb}
    progress(f"long T={T} one head: {dt * 1e3:.0f} ms, peak extra {mem.mb:.1f} MB (inputs {inputs_mb:.1f} MB)")
    lse_full = res.lse
    _run_long_causal(q, k, v, dt, cfg, report, progress)
    H, W = cfg.overview_pixels
    for Tn in cfg.overview_sizes:
        if Tn > T:
            continue
        if Tn == T:
            lse = lse_full
        else:
            lse = attention(q[:Tn], k[:Tn], v[:Tn]).lse
        for reduce in ("max", "mean"):
            attention_overview(q[:256], k[:256], lse[:256], out_shape=(8, 8), reduce=reduce)  # compiled
            with PeakMemory() as mem:
                t0 = time.perf_counter()
                attention_overview(q[:Tn], k[:Tn], lse, out_shape=(H, W), reduce=reduce)
                dt = time.perf_counter() - t0
            report.overviews.append({"T": Tn, "reduce": reduce, "pixels": [H, W], "ms": dt * 1e3,
                                     "peak_extra_mb": mem.mb})
            progress(f"overview T={Tn} {reduce}: {dt * 1e3:.0f} ms, peak extra {mem.mb:.1f} MB")


def _run_long_causal(q, k, v, dense_s: float, cfg: BenchConfig, report: Report, progress) -> None:
    """The long head under a causal mask that is never dense: a TiledMask built one band of 64 query
    rows at a time (4.3 GB as a dense bool mask at T = 65,536), then flash and a max overview with it."""
    from attnviz.engine import TiledMask, attention, attention_overview

    T = q.shape[0]
    cols = np.arange(T)  # (T,)

    def causal_band(r0: int, r1: int) -> np.ndarray:
        return cols[None, :] <= np.arange(r0, r1)[:, None]  # (r1-r0, T)

    with PeakMemory() as mem:
        t0 = time.perf_counter()
        tm = TiledMask.from_bands(causal_band, T, T, 64, 128)
        build = time.perf_counter() - t0
        t0 = time.perf_counter()
        res = attention(q, k, v, tm)
        dt = time.perf_counter() - t0
    H, W = cfg.overview_pixels
    with PeakMemory() as omem:
        t0 = time.perf_counter()
        attention_overview(q, k, res.lse, tm, out_shape=(H, W), reduce="max")
        odt = time.perf_counter() - t0
    report.long_causal = {"T": T, "tiles": [64, 128], "build_ms": build * 1e3, "ms": dt * 1e3,
                          "causal_over_dense_time": dt / dense_s, "sparsity_percent": tm.sparsity(),
                          "mask_mb": tm.nbytes / 2**20, "dense_mask_mb": T * T / 2**20,
                          "peak_extra_mb": mem.mb, "overview_max_ms": odt * 1e3, "overview_peak_extra_mb": omem.mb}
    progress(f"long T={T} causal (TiledMask {tm.nbytes / 2**20:.1f} MB, built in {build * 1e3:.0f} ms): "
             f"{dt * 1e3:.0f} ms = {dt / dense_s:.2f} x dense; overview {odt * 1e3:.0f} ms")


def _rate(row: Row) -> float:
    """GFLOP/s of a row's best time."""
    return row.gflops * row.ms / row.best_ms


# the engine's targets at nh = 8, hs = 64, float32: (claim, comparison, bound, what it says)
TARGETS = (
    ("flash_over_sdpa_time_dense", "<=", 1.0, "dense flash / SDPA time (aim 0.8)"),
    ("flash_over_sdpa_time_causal", "<=", 1.0, "causal flash / SDPA is_causal=True time"),
    ("flash_over_sdpa_time_sparse", "<=", 0.6, "40 %-empty-tile mask flash / SDPA attn_mask time"),
    ("flash_dense_sgemm_fraction", ">=", 0.65, "dense flash rate / sgemm rate"),
)


def claims(report: Report) -> dict:
    """The ratios the engine is judged by, per T. The target ratios come from ``report.paired``: the
    median over rounds of two calls made one after the other. The others use each method's best time."""
    by = {(r.T, r.mask, r.method): r for r in report.rows}
    out = {}
    for T in sorted({r.T for r in report.rows}):
        d = by.get((T, "dense", "flash"))
        if d is None:
            continue
        c = dict(report.paired.get(str(T), {}))
        c.pop("sgemm_gflops_in_rounds", None)
        if (T, "causal", "flash") in by:
            c["causal_over_dense_time"] = by[(T, "causal", "flash")].best_ms / d.best_ms
        if (T, "sparse", "flash") in by:
            sp = by[(T, "sparse", "flash")]
            c["sparse_speedup_over_dense"] = d.best_ms / sp.best_ms
            c["sparse_tile_sparsity_percent"] = sp.sparsity
        if (T, "dense", "numpy") in by:
            c["flash_speedup_over_numpy"] = by[(T, "dense", "numpy")].best_ms / d.best_ms
        if (T, "dense", "torch_sdpa") in by:
            c["sdpa_dense_sgemm_fraction"] = _rate(by[(T, "dense", "torch_sdpa")]) / report.sgemm_gflops
        out[str(T)] = c
    return out


def target_lines(report: Report) -> list[str]:
    """One line per T and target: the measured ratio, the bound, met or not."""
    lines = []
    for T, c in report.claims.items():
        for key, op, bound, what in TARGETS:
            if key not in c:
                continue
            ok = c[key] <= bound if op == "<=" else c[key] >= bound
            lines.append(f"T={T:>5} {what:<50} {c[key]:5.2f}  target {op} {bound:.2f}  {'met' if ok else 'MISSED'}")
    return lines


# ------------------------------------------------------------------------------------------------ output

def format_report(report: Report) -> str:
    m = report.machine
    load = report.load
    lines = [f"machine: {m['cpu']}, {m['logical_cpus']} logical CPUs; vector extensions "
             f"{' '.join(m['vector_extensions']) or 'unknown'}; numba compiles for {m['numba_target_cpu']}",
             f"numpy {m['numpy']}, numba {m['numba']} ({m['numba_threading_layer']}), scipy {m['scipy']}, "
             f"{m['threads']} threads, flash tile products on {m.get('flash_tile_products', '?')}"
             + (f"; torch {m['torch']} (CPU kernels {m.get('torch_cpu_capability', '?')}, "
                f"SDPA backend {', '.join(sorted(set(m.get('sdpa_backends', {}).values())))})"
                if "torch" in m else "; torch not importable: no SDPA rows"),
             "load average (1 min) at the start {:.2f}, at the end {:.2f}".format(
                 load.get("start", [float("nan")])[0], load.get("end", [float("nan")])[0]),
             f"sgemm (numpy float32 2048^3, best of the start and the end of this run): {report.sgemm_gflops:.0f} GFLOP/s"]
    if m.get("isa", "native") != "native":
        lines.append(f"instruction sets limited to {m['isa']} (--isa): numba, OpenBLAS, torch, oneDNN and MKL")
    elif m["OPENBLAS_CORETYPE"] or m["OPENBLAS_L2_SIZE"]:
        lines.append("warning: OPENBLAS_CORETYPE/OPENBLAS_L2_SIZE are set; rerun with "
                     "env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE for representative GEMM speed")
    lines.append("")
    lines.append(f"{'T':>6} {'mask':<7} {'method':<11} {'ms':>9} {'best':>9} {'GFLOP/s':>8} {'%sgemm':>7} "
                 f"{'sparsity':>9} {'peak MB':>8}  note")
    for r in report.rows:
        lines.append(f"{r.T:>6} {r.mask:<7} {r.method:<11} {r.ms:9.1f} {r.best_ms:9.1f} {r.gflops:8.0f} "
                     f"{100 * r.sgemm_fraction:6.0f}% {r.sparsity:8.1f}% {r.peak_mb or 0:8.1f}  {r.note}")
    if report.long:
        lg = report.long
        lines += ["", f"one head, T={lg['T']}, hs={lg['hs']}: {lg['ms']:.0f} ms ({lg['gflops']:.0f} GFLOP/s), "
                      f"peak extra memory {lg['peak_extra_mb']:.1f} MB (inputs {lg['inputs_mb']:.1f} MB)"]
    if report.long_causal:
        lc = report.long_causal
        lines.append(f"the same head, causal as a TiledMask of {lc['tiles'][0]}x{lc['tiles'][1]} tiles "
                     f"({lc['mask_mb']:.1f} MB; dense {lc['dense_mask_mb']:.0f} MB; built in {lc['build_ms']:.0f} ms): "
                     f"{lc['ms']:.0f} ms = {lc['causal_over_dense_time']:.2f} x dense, peak extra "
                     f"{lc['peak_extra_mb']:.1f} MB; max overview {lc['overview_max_ms']:.0f} ms, peak extra "
                     f"{lc['overview_peak_extra_mb']:.1f} MB")
    for o in report.overviews:
        lines.append(f"overview T={o['T']} -> {o['pixels'][0]}x{o['pixels'][1]} {o['reduce']:<4}: "
                     f"{o['ms']:.0f} ms, peak extra {o['peak_extra_mb']:.1f} MB")
    if report.claims:
        lines.append("")
        for T, c in report.claims.items():
            lines.append(f"T={T}: " + ", ".join(f"{k}={v:.2f}" for k, v in c.items()))
        lines += ["", "targets (nh, hs, float32 as above; each ratio the median over rounds of two calls made "
                      "one after the other):", *target_lines(report)]
    return "\n".join(lines)


def _sizes(text: str) -> tuple[int, ...]:
    try:
        sizes = tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"sizes must be comma-separated integers, got {text!r}") from None
    if not sizes or min(sizes) < 1:
        raise argparse.ArgumentTypeError(f"sizes must be positive, got {text!r}")
    return sizes


def add_arguments(p: argparse.ArgumentParser) -> None:
    d = BenchConfig()
    p.add_argument("--json", action="store_true", help="print the full report as JSON")
    p.add_argument("--sizes", type=_sizes, default=d.sizes, help="comma-separated T values (default 256,1024,4096,8192)")
    p.add_argument("--heads", type=int, default=d.heads, help="heads per call (default 8)")
    p.add_argument("--hs", type=int, default=d.hs, help="head size (default 64)")
    p.add_argument("--threads", type=int, default=None, help="worker threads for every method (default all)")
    p.add_argument("--repeat", type=int, default=d.repeat, help=f"timed runs per method (default {d.repeat})")
    p.add_argument("--no-naive", action="store_true", help="skip plain numpy attention")
    p.add_argument("--no-torch", action="store_true", help="skip torch SDPA even when torch is importable")
    p.add_argument("--no-long", action="store_true", help="skip the T=65536 run and the overviews")
    p.add_argument("--isa", choices=("avx2",), default=None,
                   help="measure every library's AVX2 code on an AVX-512 CPU (restarts the run limited to AVX2)")
    p.add_argument("--app", action="store_true",
                   help="also run the window benchmarks in benchmarks/ (start-up, edit to heatmap pixels)")


# the window benchmarks: (report key, script in benchmarks/, its arguments)
APP_BENCHMARKS = (
    ("startup", "bench_startup.py", ["--json", "--runs", "3"]),
    ("edit_to_pixels_mask", "bench_ui_latency.py", ["--json", "--edit", "mask"]),
    ("edit_to_pixels_seed", "bench_ui_latency.py", ["--json", "--edit", "seed"]),
    ("edit_to_pixels_text", "bench_ui_latency.py", ["--json", "--edit", "text"]),
    ("edit_to_pixels_qk", "bench_ui_latency.py", ["--json", "--edit", "qk"]),
)


def benchmarks_dir() -> Path | None:
    """The repository's ``benchmarks/`` folder (present in a checkout, not in an installed wheel)."""
    d = Path(__file__).resolve().parents[2] / "benchmarks"
    return d if d.is_dir() else None


def run_app_benchmarks(progress, runner=subprocess.run, folder: Path | None = None) -> dict:
    """Run the window benchmarks offscreen, each in its own process; their JSON keyed by name.

    A benchmark that cannot run (no checkout, a failure) is reported under its key as ``{"error": ...}``.
    """
    folder = folder if folder is not None else benchmarks_dir()
    if folder is None:
        return {"error": "the window benchmarks live in the repository's benchmarks/ folder, which this "
                         "installation does not have"}
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen")
    out: dict = {}
    for key, script, argv in APP_BENCHMARKS:
        progress(f"window benchmark {key} ...")
        proc = runner([sys.executable, str(folder / script), *argv], capture_output=True, text=True, env=env,
                      timeout=1800)
        if proc.returncode != 0:
            tail = (proc.stderr or proc.stdout or "").strip().splitlines()[-1:] or ["no output"]
            out[key] = {"error": f"{script} exited {proc.returncode}: {tail[0]}"}
            continue
        try:
            out[key] = json.loads(proc.stdout)
        except ValueError:
            out[key] = {"error": f"{script} did not print JSON"}
    return out


def quiet_openmp() -> None:
    """Let idle OpenMP workers sleep instead of spinning (before any parallel kernel starts them).

    numba's omp layer and torch each keep an OpenMP pool; spinning workers of one method steal the
    cores of the next method timed. Only affects this process.
    """
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


def bytes_needed(cfg: BenchConfig, T: int) -> int:
    """Peak bytes one size of the main table needs: q, k, v and the outputs (float32), the causal and the
    block-sparse T x T bool masks, and with ``naive`` numpy's T x T float32 scores of one head and their
    temporaries, with torch its copy of the mask."""
    per_t = 6 * cfg.heads * T * cfg.hs * 4  # q, k, v, the outputs of flash and of the other method
    per_t2 = 2 + (9 if cfg.naive else 0) + (4 if cfg.torch else 0)  # bytes per mask cell
    return per_t + per_t2 * T * T


def check_memory(cfg: BenchConfig, available: int | None) -> None:
    """ValueError naming the size and the limit when the largest T would not fit in ``available`` bytes."""
    if available is None:
        return
    T = max(cfg.sizes)
    need = bytes_needed(cfg, T)
    if need > available:
        raise ValueError(f"--sizes: T = {T} needs about {need / 2**30:,.1f} GiB (q, k, v and T x T masks at "
                         f"{cfg.heads} heads of {cfg.hs}); this machine has {available / 2**30:,.1f} GiB available")


ISA_MARKER = "ATTNVIZ_BENCH_ISA"  # set in the restarted process of --isa


def avx2_environment(host_features: dict[str, bool], env: dict[str, str]) -> dict[str, str]:
    """``env`` for a run of the AVX2 code paths on this CPU: numba's target is the host without any
    AVX-512, AMX or AVX10 feature; OpenBLAS, torch (ATen), oneDNN and MKL are told AVX2."""
    wide = ("avx512", "amx", "avx10", "evex512", "avxvnni", "avxifma", "avxneconvert", "egpr", "apx")
    feats = ",".join(("+" if on and not name.startswith(wide) else "-") + name
                     for name, on in sorted(host_features.items()))
    out = {k: v for k, v in env.items() if k not in ("OPENBLAS_L2_SIZE",)}
    out.update(NUMBA_CPU_NAME="haswell", NUMBA_CPU_FEATURES=feats, OPENBLAS_CORETYPE="Haswell",
               ATEN_CPU_CAPABILITY="avx2", ONEDNN_MAX_CPU_ISA="AVX2", MKL_ENABLE_INSTRUCTIONS="AVX2")
    out[ISA_MARKER] = "avx2"
    return out


def _restart_for_isa(args) -> int:
    """Run this benchmark again in a process limited to ``args.isa``; its exit status."""
    from attnviz.engine.jitcache import host_cpu_features

    features = host_cpu_features()
    if not features.get("avx2"):
        raise ValueError("--isa avx2: this CPU has no AVX2")
    argv = ["--sizes", ",".join(map(str, args.sizes)), "--heads", str(args.heads), "--hs", str(args.hs),
            "--repeat", str(args.repeat), "--isa", args.isa]
    argv += ["--threads", str(args.threads)] if args.threads is not None else []
    argv += [flag for flag, on in (("--json", args.json), ("--no-naive", args.no_naive),
                                   ("--no-torch", args.no_torch), ("--no-long", args.no_long)) if on]
    code = "import sys; from attnviz.cli.bench_cmd import main; sys.exit(main(sys.argv[1:]))"
    return subprocess.run([sys.executable, "-c", code, *argv], env=avx2_environment(features, dict(os.environ))
                          ).returncode


def handle(args) -> int:
    if getattr(args, "isa", None) and os.environ.get(ISA_MARKER) != args.isa:
        if getattr(args, "app", False):
            raise ValueError("--isa measures the engine only; leave out --app")
        return _restart_for_isa(args)
    quiet_openmp()
    if args.heads < 1 or args.hs < 1 or args.repeat < 1 or (args.threads is not None and args.threads < 1):
        raise ValueError("--heads, --hs, --repeat and --threads must be positive")
    cfg = BenchConfig(sizes=args.sizes, heads=args.heads, hs=args.hs, repeat=args.repeat, threads=args.threads,
                      naive=not args.no_naive, torch=not args.no_torch, long=not args.no_long)
    from attnviz.engine.runtime import available_memory

    check_memory(cfg, available_memory())  # before any allocation
    progress = (lambda msg: print(msg, file=sys.stderr, flush=True))
    report = run_bench(cfg, progress)
    if getattr(args, "app", False):
        report.app.update(run_app_benchmarks(progress))
    if args.json:
        print(json.dumps(asdict(report), indent=2))
    else:
        print(format_report(report))
        for key, value in report.app.items():
            print(f"{key}: {json.dumps(value)[:400]}")
    return 0


def register(subparsers) -> None:
    """Add ``bench`` to the attnviz-cli parser."""
    p = subparsers.add_parser("bench", help="benchmark the attention engine against sgemm, numpy and torch",
                              description=__doc__.split("\n\n")[1])
    add_arguments(p)
    p.set_defaults(func=handle)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m attnviz.cli.bench_cmd", description=__doc__.splitlines()[0])
    add_arguments(parser)
    return handle(parser.parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())
