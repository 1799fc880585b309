"""``attnviz-cli bench``: how fast the attention engine is, measured against the machine's own sgemm.

    attnviz-cli bench [--json] [--sizes 256,1024,4096,8192] [--heads 8] [--hs 64] [--threads N]
                      [--repeat 5] [--no-naive] [--no-torch] [--no-flex] [--no-long] [--isa avx2]

Per T: flash float32 on dense, causal and ~40 %-empty-tile masks, torch SDPA on its 4-D fast path
and compiled FlexAttention (its compilation reported apart) when torch is importable (the SDPA
backend it ran is named), and numpy; rates as fractions of an sgemm of
the same run. Flash and SDPA alternate call by call, so the targets are medians of paired ratios.
``--isa avx2`` restarts the run with numba, OpenBLAS, torch, oneDNN and MKL limited to AVX2. Run it
under ``env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE``: set on these machines, they halve GEMM speed.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from dataclasses import asdict

from attnviz.bench.app_runs import run_app_benchmarks
from attnviz.bench.engine_runs import BenchConfig, check_memory, run_bench
from attnviz.bench.machine import ISA_MARKER, avx2_environment, quiet_openmp
from attnviz.bench.report import format_report


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
    p.add_argument("--no-flex", action="store_true",
                   help="skip compiled FlexAttention (with torch; compiling its kernels takes a minute or more)")
    p.add_argument("--no-long", action="store_true", help="skip the T=65536 run and the overviews")
    p.add_argument("--isa", choices=("avx2",), default=None,
                   help="measure every library's AVX2 code on an AVX-512 CPU (restarts the run limited to AVX2)")
    p.add_argument("--app", action="store_true",
                   help="also run the window benchmarks in benchmarks/ (start-up, edit to heatmap pixels)")


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
                                   ("--no-torch", args.no_torch), ("--no-flex", args.no_flex),
                                   ("--no-long", args.no_long)) if on]
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
                      naive=not args.no_naive, torch=not args.no_torch, flex=not args.no_flex,
                      long=not args.no_long)
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
