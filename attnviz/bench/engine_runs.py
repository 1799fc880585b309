"""The engine's benchmark: per T, flash on dense, causal and block-sparse masks timed in rounds against its
anchors; the long one-head run and the overviews; the claims and targets computed from the paired calls."""

from __future__ import annotations

import os
import statistics
import time
from dataclasses import asdict, dataclass, field

import numpy as np

from attnviz.bench.anchors import flex_calls, import_torch, numpy_attention, sdpa_calls, sparse_tile_mask
from attnviz.bench.machine import machine_info
from attnviz.bench.measure import SETTLE, PeakMemory, once, paired_ratio, round_order, sgemm_gflops, timed


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
    flex: bool = True  # with torch: time compiled FlexAttention too (its compilation reported apart)
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
    flex_compile_s: dict = field(default_factory=dict)  # per T: mask -> seconds of FlexAttention's first call
    flex_skipped: dict = field(default_factory=dict)  # "T mask" -> why FlexAttention did not run
    fma_peak_gflops: float | None = None  # the float32 FMA peak of the engine's vector width, measured (best of two)


def run_bench(cfg: BenchConfig, progress=lambda msg: None) -> Report:
    """Measure everything in ``cfg``; ``progress`` receives one line per finished measurement."""
    from attnviz.engine.runtime import num_threads

    with num_threads(cfg.threads) as threads:
        return _run_bench(cfg, threads, progress)


def _run_bench(cfg: BenchConfig, threads: int, progress) -> Report:
    from attnviz.engine.runtime import blas_threads

    from attnviz.engine import BlockMask, attention
    from attnviz.engine.tiling import choose_blocks

    torch = import_torch() if cfg.torch else None
    if torch is not None:
        torch.set_num_threads(threads)
    sg = sgemm_gflops(threads)
    progress(f"sgemm {sg:.0f} GFLOP/s ({threads} threads), load average {os.getloadavg()[0]:.2f}")
    report = Report(machine_info(torch), asdict(cfg), sg)
    peak = fma_peak(threads)
    if peak is not None:
        progress(f"FMA peak {peak:.0f} GFLOP/s ({threads} threads, the engine's vector width)")
    report.load["start"] = list(os.getloadavg())
    rng = np.random.default_rng(cfg.seed)
    nh, hs = cfg.heads, cfg.hs
    scale = 1.0 / np.sqrt(hs)
    n = 2048
    ga = rng.standard_normal((n, n), dtype=np.float32)  # (n, n) the sgemm timed in every round
    gc = np.empty((n, n), dtype=np.float32)  # (n, n)

    def sgemm_call():
        with blas_threads(threads):
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
            if cfg.flex:
                progress(f"T={T:<6} compiling FlexAttention for {len(masks)} masks ...")
                flex, flex_notes, flex_first = flex_calls(torch, q, k, v, masks, threads, {"sparse": (bm, bn)})
                for name, fn in flex.items():
                    calls[(name, "torch_flex")] = fn
                for name, note in flex_notes.items():
                    notes[(name, "torch_flex")] = note
                report.flex_compile_s[str(T)] = flex_first
                report.flex_skipped.update({f"{T} {n}": note for n, note in flex_notes.items() if n not in flex})
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
                times[key].append(once(calls[key]))
            time.sleep(SETTLE)
            sg_times.append(once(sgemm_call))

        def add(key, med, best, mb, note):
            row = Row(T, key[0], key[1], med * 1e3, best * 1e3, flops / med / 1e9, flops / med / 1e9 / sg,
                      sparsity[key[0]], mb, note)
            report.rows.append(row)
            progress(f"T={T:<6} {key[0]:<7} {key[1]:<12} {row.ms:9.1f} ms (best {row.best_ms:.1f}) "
                     f"{row.gflops:6.0f} GFLOP/s  peak {mb or 0:7.1f} MB  {note}")

        for key in calls:
            add(key, statistics.median(times[key]), min(times[key]), peaks[key], notes[key])
        paired = {"flash_dense_sgemm_fraction": paired_ratio(sg_times, times[("dense", "flash")]) * flops / (2.0 * n**3),
                  "sgemm_gflops_in_rounds": 2.0 * n**3 / statistics.median(sg_times) / 1e9}
        if torch is not None:
            for name in masks:
                paired[f"flash_over_sdpa_time_{name}"] = paired_ratio(times[(name, "flash")], times[(name, "torch_sdpa")])
                if (name, "torch_flex") in times:
                    paired[f"flash_over_flex_time_{name}"] = paired_ratio(times[(name, "flash")],
                                                                          times[(name, "torch_flex")])
        report.paired[str(T)] = paired
        if cfg.naive:  # plain numpy in its own block: it is slow, and not one of the targets
            with blas_threads(threads):
                for name, m in masks.items():
                    add((name, "numpy"), *timed(lambda m=m: numpy_attention(q, k, v, m, scale), cfg.repeat), "")

    if cfg.long:
        _run_long(cfg, report, progress)
    end = sgemm_gflops(threads)  # again at the end: the better of the two is the machine's rate
    progress(f"sgemm at the end {end:.0f} GFLOP/s")
    report.sgemm_gflops = max(sg, end)
    again = fma_peak(threads)
    report.fma_peak_gflops = max(x for x in (peak, again, 0.0) if x is not None) or None
    for row in report.rows:
        row.sgemm_fraction = row.gflops / report.sgemm_gflops
    report.load["end"] = list(os.getloadavg())
    report.claims = claims(report)
    if report.fma_peak_gflops:
        for c in report.claims.values():
            dense = c.get("flash_dense_sgemm_fraction")
            if dense is not None:  # the same paired rate, against the FMA peak instead of sgemm
                c["flash_dense_peak_fraction"] = dense * report.sgemm_gflops / report.fma_peak_gflops
    report.machine["numba_threading_layer"] = machine_info(torch)["numba_threading_layer"]  # known once a kernel ran
    return report


def fma_peak(threads: int) -> float | None:
    """The engine's measured float32 FMA peak in GFLOP/s (:mod:`attnviz.engine.peak`), None where it cannot run."""
    try:
        from attnviz.engine.peak import fma_peak_gflops
    except ImportError:
        return None
    return fma_peak_gflops(threads)


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
