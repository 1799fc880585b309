"""Time of ``attnviz.model.compute.run`` for the edits a person makes while watching the heatmaps.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE .venv/bin/python benchmarks/bench_compute.py \
        [--T 256,1024,4096] [--repeat 7] [--edits mask,seed,view] [--mask full|causal] [--blas-threads N] [--json]

Session: one custom token block of T seeded noise tokens, d_model=512, nh=8, hs=64, scaled dot-product
on the flash kernel, ``want="full"`` with the default dense limit (so at T=4096 no full matrices are
built: only outputs, lse and the selected row). Every edit is applied through the session commands to
the previous state, as the window does, and timed as one ``run()`` call on a fresh request:

- ``mask``: paint one cell deny (``EditMask(PaintCells)``), a different cell each time;
- ``seed``: change the model seed (``SetModel``), a new seed each time (new W_q, W_k, W_v, W_o);
- ``view``: change the selected head (``SetView``). The window does not recompute on view changes;
  the figure shows what ``run()`` costs if it is called anyway.

Before timing, each T runs one untimed warm-up of every edit (JIT compile, tile-size measurement).
Each figure is the median over ``--repeat`` edits of wall time and of each ``response.timings`` stage
(``attention.kernel`` / ``.scores`` / ``.weights`` are the parts of ``attention`` in a full engine
run: the kernel's out and lse, the float32 score GEMM, exp(score - lse)); ``rows`` is the median of
``response.recomputed_rows``. The machine is shared: the load average (``/proc/loadavg``) is printed
before and after. The script runs against any version of ``attnviz.model.compute`` (put an older
tree first on PYTHONPATH to compare).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from dataclasses import replace

from attnviz.model.commands import EditMask, SetModel, SetView
from attnviz.model import compute
from attnviz.model.compute import ComputeRequest, run
from attnviz.model.mask.commands import PaintCells
from attnviz.model.mask.presets import preset
from attnviz.model.state import CustomSource, ModelConfig, SessionState

EDITS = ("mask", "seed", "view")
STAGES = ("prepare", "project", "mask", "attention", "attention.kernel", "attention.scores", "attention.weights",
          "combine")


def loadavg() -> str:
    """The 1-, 5- and 15-minute load averages."""
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def session(T: int, mask: str) -> SessionState:
    """A custom-block session of T tokens, d_model=512, nh=8, hs=64."""
    st = SessionState(sources=(CustomSource("tokens", count=T, generator="noise", seed=1),),
                      model=ModelConfig(d_model=512, nh=8, hs=64, seed=0))
    if mask == "causal":
        st = replace(st, mask=preset("causal", []))
    return st


def edit(state: SessionState, kind: str, i: int) -> SessionState:
    """The i-th edit of ``kind`` applied to ``state``."""
    T = state.sources[0].count
    if kind == "mask":
        r = (37 * i + 5) % T
        c = (11 * i + 3) % max(1, r + 1)  # below the diagonal, so a causal mask changes too
        cmd = EditMask(PaintCells(((r, c),), "deny"))
    elif kind == "seed":
        cmd = SetModel((("seed", state.model.seed + 1),))
    elif kind == "view":
        cmd = SetView((("head", (i + 1) % state.model.nh),))
    else:
        raise ValueError(kind)
    return cmd.apply(state)[0]


def time_edits(T: int, kind: str, repeat: int, mask: str, rid: list) -> dict:
    """Median wall time and stage times of ``repeat`` edits of ``kind`` at T."""
    st = session(T, mask)
    rid[0] += 1
    r = run(ComputeRequest(rid[0], st, rows=(0,)))  # the session as it stands before the edits
    if not r.ok:
        raise SystemExit(f"T={T}: {r.error}")
    st = edit(st, kind, 0)
    rid[0] += 1
    run(ComputeRequest(rid[0], st, rows=(0,)))  # warm-up of this edit kind
    walls, stages, recomputed = [], {}, []
    for i in range(1, repeat + 1):
        st = edit(st, kind, i)
        rid[0] += 1
        t0 = time.perf_counter()
        r = run(ComputeRequest(rid[0], st, rows=(0,)))
        walls.append(time.perf_counter() - t0)
        if not r.ok:
            raise SystemExit(f"T={T} {kind}: {r.error}")
        for k, v in r.timings.items():
            stages.setdefault(k, []).append(v)
        recomputed.append(getattr(r, "recomputed_rows", T))
    return {"T": T, "edit": kind, "repeat": repeat, "median_ms": 1e3 * statistics.median(walls),
            "min_ms": 1e3 * min(walls), "dense": r.weights is not None,
            "rows": statistics.median(recomputed),
            "stages_ms": {k: 1e3 * statistics.median(v) for k, v in stages.items()}}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--T", default="256,1024,4096", help="comma-separated sequence lengths")
    ap.add_argument("--repeat", type=int, default=7, help="timed edits per (T, edit)")
    ap.add_argument("--edits", default=",".join(EDITS), help="comma-separated subset of mask,seed,view")
    ap.add_argument("--mask", default="full", choices=("full", "causal"), help="the session's mask design")
    ap.add_argument("--blas-threads", type=int, default=None,
                    help="numpy BLAS threads inside run(), 0: numpy's own setting (default: compute.BLAS_THREADS)")
    ap.add_argument("--json", action="store_true", help="print JSON instead of a table")
    a = ap.parse_args(argv)
    if a.blas_threads is not None:
        compute.BLAS_THREADS = a.blas_threads or None
    Ts = [int(t) for t in a.T.split(",") if t]
    kinds = [k for k in a.edits.split(",") if k]
    for k in kinds:
        if k not in EDITS:
            ap.error(f"unknown edit {k!r}; choose from {', '.join(EDITS)}")
    load_before = loadavg()
    rows, rid = [], [0]
    for T in Ts:
        for kind in kinds:
            rows.append(time_edits(T, kind, a.repeat, a.mask, rid))
            if not a.json:
                print(f"  measured T={T} {kind}", file=sys.stderr)
    env = {"loadavg_before": load_before, "loadavg_after": loadavg(), "cpus": os.cpu_count(),
           "machine": platform.processor() or platform.machine(), "mask": a.mask,
           "OPENBLAS_CORETYPE": os.environ.get("OPENBLAS_CORETYPE"),
           "blas_threads": getattr(compute, "BLAS_THREADS", None),
           "python": platform.python_version()}
    if a.json:
        print(json.dumps({"env": env, "results": rows}, indent=1))
        return 0
    seen = {k for r in rows for k in r["stages_ms"]}
    stages = [k for k in STAGES if k in seen] + sorted(seen - set(STAGES))
    head = f"{'T':>6} {'edit':<5} {'rows':>5} {'median':>8} {'min':>8} " + " ".join(f"{s.replace('attention.', 'att.'):>10}"
                                                                   for s in stages)
    print(f"run() per edit, ms (median of {a.repeat}); nh=8 hs=64 d_model=512, mask={a.mask}")
    print(head)
    for r in rows:
        print(f"{r['T']:>6} {r['edit']:<5} {r['rows']:5.0f} {r['median_ms']:8.1f} {r['min_ms']:8.1f} "
              + " ".join(f"{r['stages_ms'].get(s, float('nan')):10.1f}" for s in stages))
    print(f"load average before {env['loadavg_before']}, after {env['loadavg_after']}; "
          f"OPENBLAS_CORETYPE={env['OPENBLAS_CORETYPE']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
