"""``attnviz-cli warmup``: compile every attention kernel once into the kernel cache, so that later
processes — the window, ``model inspect``, the corpus command — load them in well under a second.

A fresh installation compiles them on first use instead (about 40 s for the flash kernel of one dtype,
2-3 minutes for all of them); until then checkpoint passes run on the float64 reference, which needs no
compilation (see :func:`attnviz.checkpoints.layers.pick_kernel`). ``make setup`` runs this once.
"""

from __future__ import annotations

import sys
import time

DTYPES = ("float32", "float64")


def register(subparsers) -> None:
    p = subparsers.add_parser("warmup", help="compile the attention kernels once into the kernel cache",
                              description=__doc__.splitlines()[0].replace("``", ""))
    p.add_argument("--check", action="store_true",
                   help="only say whether the cache is warm (exit 0) or not (exit 1); compile nothing")
    p.add_argument("--force", action="store_true", help="run every kernel even when the cache is marked warm")
    p.set_defaults(func=run_warmup)


def run_warmup(args) -> int:
    from attnviz.engine import jitcache

    where = jitcache.cache_dir() or "numba's default location"
    if args.check:
        warm = jitcache.is_warm()
        print(f"kernel cache {'warm' if warm else 'not warm'}: {where}")
        return 0 if warm else 1
    if jitcache.is_warm() and not args.force:
        print(f"kernel cache already warm: {where}")
        return 0
    from attnviz.engine.warmup import warmup

    t_all = time.perf_counter()
    try:
        for dtype in DTYPES:
            t0 = time.perf_counter()
            print(f"compiling the {dtype} kernels ...", end=" ", flush=True)
            warmup(dtypes=(dtype,))
            print(f"{time.perf_counter() - t0:.0f} s", flush=True)
    except KeyboardInterrupt:
        print("\ninterrupted: the kernels compiled so far stay cached; the cache is not marked warm",
              file=sys.stderr)
        return 130
    jitcache.mark_warm()
    print(f"kernel cache warm after {time.perf_counter() - t_all:.0f} s: {where}")
    return 0
