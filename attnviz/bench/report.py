"""The text report of a benchmark run."""

from __future__ import annotations

from attnviz.bench.engine_runs import Report, target_lines


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
             f"sgemm (numpy float32 2048^3, best of the start and the end of this run): {report.sgemm_gflops:.0f} GFLOP/s"
             + (f"; FMA peak (measured, float32, the engine's vector width): {report.fma_peak_gflops:.0f} GFLOP/s"
                if report.fma_peak_gflops else "")]
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
    if report.flex_compile_s:
        lines.append("FlexAttention's first calls (compilation; not in the timings): " + "; ".join(
            f"T={T} " + ", ".join(f"{m} {sec:.1f} s" for m, sec in by.items()) for T, by in report.flex_compile_s.items()))
    for key, why in report.flex_skipped.items():
        lines.append(f"FlexAttention at T={key}: {why}")
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
