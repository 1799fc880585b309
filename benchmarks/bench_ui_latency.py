"""Edit -> updated heatmap pixels, through the real widgets: the median latency a person sees.

    QT_QPA_PLATFORM=offscreen env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE \
        .venv/bin/python benchmarks/bench_ui_latency.py [--T 256,1024] [--repeat 15] [--edit seed|mask] [--json]

Session: one custom block of T seeded noise tokens, d_model=512, nh=8 (hs=64), scaled dot-product on
the flash kernel, the default (full) mask. The window's own objects are used: an ``AppContext`` (undo
stack, throttled background ``ComputeController``) and the ``HeatmapPanel`` (AttentionHeatmap and the
all-heads grid) shown at 900 x 700. Each edit goes through ``ctx.execute`` — a new model seed
(``SetModel``), or one painted mask cell (``EditMask(PaintCells)``) — and the clock stops when the
panel has drawn the response to that edit and the heatmap's viewport has been repainted (a
synchronous ``repaint()``: the pixels exist). Split of each latency:

- ``throttle``: edit -> request dispatched to the worker (the controller's burst timer);
- ``compute``: ``attnviz.model.compute.run`` on the worker (``ComputeController.last_seconds``);
- ``deliver+draw``: result queued to the GUI thread, matrix handed to the widget, viewport repainted.

The all-heads grid's maps are pooled on a worker thread after the heatmap is drawn; that pooling
time is reported separately (``grid``) and is not part of the latency. Each T starts with untimed warm-up edits.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from PySide6.QtCore import QEventLoop, QTimer  # noqa: E402
from PySide6.QtWidgets import QApplication  # noqa: E402

from attnviz.model.commands import EditMask, set_model  # noqa: E402
from attnviz.model.mask_commands import PaintCells  # noqa: E402
from attnviz.model.session import Session  # noqa: E402
from attnviz.model.state import CustomSource, ModelConfig, SessionState  # noqa: E402
from attnviz.ui.context import AppContext  # noqa: E402
from attnviz.ui.panels.heatmap_panel import GRID_TILE, HeatmapPanel  # noqa: E402
from attnviz.ui.widgets.pooling import pool_max  # noqa: E402


def session(T: int) -> SessionState:
    return SessionState(sources=(CustomSource("tokens", count=T, generator="noise", seed=1),),
                        model=ModelConfig(d_model=512, nh=8, seed=0))


class Probe:
    """Timestamps of one edit's way to the screen."""

    def __init__(self, ctx, panel):
        self.ctx, self.panel = ctx, panel
        self.dispatched = None
        ctx.compute.started.connect(self._on_started)

    def _on_started(self, _rid):
        self.dispatched = time.perf_counter()

    def edit(self, cmd, timeout_s: float = 120.0) -> dict:
        loop = QEventLoop()
        done = {}

        def on_rendered():
            resp = self.panel._resp
            if resp is not None and resp.request_id == self.ctx.compute.latest_id and "t" not in done:
                self.panel.heatmap.frame.viewport().repaint()  # the pixels, now
                done["t"] = time.perf_counter()
                loop.quit()

        self.panel.rendered.connect(on_rendered)
        guard = QTimer()
        guard.setSingleShot(True)
        guard.timeout.connect(loop.quit)
        guard.start(int(timeout_s * 1000))
        self.dispatched = None
        t0 = time.perf_counter()
        if not self.ctx.execute(cmd):
            raise RuntimeError(f"edit refused: {cmd}")
        loop.exec()
        self.panel.rendered.disconnect(on_rendered)
        if "t" not in done:
            raise RuntimeError(f"no heatmap update within {timeout_s} s")
        total = done["t"] - t0
        compute = self.ctx.compute.last_seconds
        throttle = (self.dispatched or t0) - t0
        resp = self.panel._resp
        g0 = time.perf_counter()
        pool_max(resp.weights, resp.mask, (GRID_TILE, GRID_TILE))  # what the grid's worker does next
        grid = time.perf_counter() - g0
        return {"total": total, "throttle": throttle, "compute": compute,
                "deliver+draw": total - throttle - compute, "grid": grid}


def bench(T: int, repeat: int, edit: str, warmup: int = 3) -> dict:
    ctx = AppContext(Session(session(T)))
    panel = HeatmapPanel(ctx)
    panel.resize(900, 700)
    panel.show()
    probe = Probe(ctx, panel)
    rows = []
    for i in range(warmup + repeat):
        if edit == "seed":
            cmd = set_model(seed=1000 + i)
        else:
            cmd = EditMask(PaintCells(((T - 1 - i, i),), "deny"))
        r = probe.edit(cmd)
        if i >= warmup:
            rows.append(r)
    ctx.compute.shutdown()
    panel.close()
    med = {k: statistics.median(r[k] for r in rows) for k in rows[0]}
    return {"T": T, "nh": 8, "edit": edit, "repeat": repeat, "median_ms": {k: round(1000 * v, 2) for k, v in med.items()},
            "min_total_ms": round(1000 * min(r["total"] for r in rows), 2)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--T", default="256,1024", help="comma-separated sequence lengths")
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--edit", choices=("seed", "mask"), default="seed")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    app = QApplication.instance() or QApplication(sys.argv[:1])
    load0 = open("/proc/loadavg").read().split()[:3] if os.path.exists("/proc/loadavg") else []
    results = [bench(int(t), args.repeat, args.edit) for t in args.T.split(",")]
    load1 = open("/proc/loadavg").read().split()[:3] if os.path.exists("/proc/loadavg") else []
    out = {"machine": platform.processor() or platform.machine(), "cpus": os.cpu_count(),
           "platform": app.platformName(), "loadavg_before": load0, "loadavg_after": load1, "results": results}
    if args.json:
        print(json.dumps(out, indent=1))
    else:
        print(f"edit -> heatmap pixels ({args.edit} edits, {app.platformName()}, {os.cpu_count()} CPUs, "
              f"load {' '.join(load0)} -> {' '.join(load1)})")
        for r in results:
            m = r["median_ms"]
            print(f"  T={r['T']:5d} nh=8: median {m['total']:7.1f} ms  (throttle {m['throttle']:.1f} · compute "
                  f"{m['compute']:.1f} · deliver+draw {m['deliver+draw']:.1f}; min {r['min_total_ms']:.1f})"
                  f"   grid pooling on a worker {m['grid']:.1f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
