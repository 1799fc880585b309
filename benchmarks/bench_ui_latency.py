"""Edit -> updated heatmap pixels, through the real widgets: the median latency a person sees.

    QT_QPA_PLATFORM=offscreen env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE \
        .venv/bin/python benchmarks/bench_ui_latency.py [--T 256,1024] [--repeat 15] \
        [--edit seed|mask|text|qk] [--gap-ms 100] [--json]

Session: one custom block of T seeded noise tokens (for ``--edit text``: a typed text's BPE tokens,
then noise tokens up to T), d_model=512, nh=8 (hs=64), scaled dot-product on the flash kernel, the
default (full) mask. The window's own objects are used: an ``AppContext`` (undo stack, throttled
background ``ComputeController``) and the ``HeatmapPanel`` (AttentionHeatmap and the all-heads grid)
shown at 900 x 700, head 0 selected. Each edit goes through ``ctx.execute``:

- ``seed``: a new model seed (``SetModel``): every head's projections change;
- ``mask``: one painted mask cell (``EditMask(PaintCells)``): one query row changes;
- ``text``: one word of the typed text replaced (``SetText``, the same number of tokens);
- ``qk``: one hand-set component of head 0's query (``SetQKComponent``).

Each edit is made after ``--gap-ms`` (100) of idle event loop, as a person's clicks are spaced: the
last edit's grid and follow-up drawing are done. ``--gap-ms 0`` edits as soon as the last edit's
response is drawn.

The clock stops when the heatmap first shows the edit — the selected head's preview
(``attnviz.model.preview``: when an edit recomputes every head, the shown one is computed first) or
else the response — and its viewport has been repainted (a synchronous ``repaint()``: the pixels
exist). Split of each latency:

- ``throttle``: edit -> request dispatched to the worker (the controller's burst timer);
- ``compute``: on the worker, until the preview was handed over (``HeadPreview.seconds``) or, when
  there is none (mask edits), the whole run (``ComputeController.last_seconds``);
- ``deliver+draw``: result queued to the GUI thread, matrix handed to the widget, viewport repainted;
- ``complete``: edit -> the full response (every head, outputs, diagnostics) delivered and drawn.

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

from dataclasses import replace  # noqa: E402

from attnviz.model.commands import EditMask, SetQKComponent, SetText, set_model  # noqa: E402
from attnviz.model.display.head_grid import GRID_TILE  # noqa: E402
from attnviz.model.display.pooling import pool_max  # noqa: E402
from attnviz.model.mask.commands import PaintCells  # noqa: E402
from attnviz.model.session import Session  # noqa: E402
from attnviz.model.sequence import assemble  # noqa: E402
from attnviz.model.state import CustomSource, ModelConfig, SessionState, TextSource  # noqa: E402
from attnviz.ui.context import AppContext  # noqa: E402
from attnviz.ui.panels.heatmap_panel import HeatmapPanel  # noqa: E402


#: the typed text of ``--edit text`` (its BPE tokens lead the sequence; noise tokens fill it up to T)
TEXT = ("The river bank was steep and the water ran fast under the old bridge, where a heron stood "
        "still among the reeds and waited for the light to change over the fields. ") * 2
WORDS = ("slow", "cold", "deep", "clear", "brown", "wide")


def session(T: int, edit: str = "seed") -> SessionState:
    model = ModelConfig(d_model=512, nh=8, seed=0)
    if edit != "text":
        return SessionState(sources=(CustomSource("tokens", count=T, generator="noise", seed=1),), model=model)
    text = SessionState(sources=(TextSource("text", text=TEXT),), model=model)
    n = assemble(text)[0].T
    return replace(text, sources=(TextSource("text", text=TEXT), CustomSource("tokens", count=T - n, generator="noise", seed=1)))


def edit_command(edit: str, T: int, i: int):
    """The i-th edit of a kind: a new model seed, one painted mask cell, one word of the text changed
    (the same number of tokens), or one hand-set q component of head 0."""
    if edit == "seed":
        return set_model(seed=1000 + i)
    if edit == "text":
        return SetText("text", TEXT.replace("fast", WORDS[i % len(WORDS)], 1))
    if edit == "qk":
        return SetQKComponent("q", 0, i % 64, 0, 1.0 + i)
    return EditMask(PaintCells(((T - 1 - i, i),), "deny"))


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
            if self.panel.drawn_request_id == self.ctx.compute.latest_id and "t" not in done:
                self.panel.heatmap.frame.viewport().repaint()  # the pixels, now
                done["t"] = time.perf_counter()
                done["preview"] = self.panel._preview
            resp = self.panel._resp
            if resp is not None and resp.request_id == self.ctx.compute.latest_id:
                done["complete"] = time.perf_counter()
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
        if "complete" not in done:
            raise RuntimeError(f"no heatmap update within {timeout_s} s")
        total = done["t"] - t0
        preview = done["preview"]
        compute = preview.seconds if preview is not None else self.ctx.compute.last_seconds
        throttle = (self.dispatched or t0) - t0
        resp = self.panel._resp
        g0 = time.perf_counter()
        pool_max(resp.weights, resp.mask, (GRID_TILE, GRID_TILE))  # what the grid's worker does next
        grid = time.perf_counter() - g0
        return {"total": total, "throttle": throttle, "compute": compute,
                "deliver+draw": total - throttle - compute, "complete": done["complete"] - t0, "grid": grid,
                "previewed": float(preview is not None)}


def settle(ms: int) -> None:
    """Run the event loop for ``ms`` milliseconds (the grid and other follow-up work of the last edit
    finish, as they do between a person's clicks)."""
    if ms <= 0:
        return
    loop = QEventLoop()
    QTimer.singleShot(ms, loop.quit)
    loop.exec()


def bench(T: int, repeat: int, edit: str, warmup: int = 3, gap_ms: int = 100) -> dict:
    ctx = AppContext(Session(session(T, edit)))
    panel = HeatmapPanel(ctx)
    panel.resize(900, 700)
    panel.show()
    probe = Probe(ctx, panel)
    rows = []
    for i in range(warmup + repeat):
        cmd = edit_command(edit, T, i)
        settle(gap_ms)
        r = probe.edit(cmd)
        if i >= warmup:
            rows.append(r)
    ctx.compute.shutdown()
    panel.close()
    med = {k: statistics.median(r[k] for r in rows) for k in rows[0]}
    return {"T": T, "nh": 8, "edit": edit, "repeat": repeat, "gap_ms": gap_ms, "median_ms": {k: round(1000 * v, 2) for k, v in med.items()},
            "min_total_ms": round(1000 * min(r["total"] for r in rows), 2)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--T", default="256,1024", help="comma-separated sequence lengths")
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--edit", choices=("seed", "mask", "text", "qk"), default="seed")
    ap.add_argument("--gap-ms", type=int, default=100,
                    help="idle time before each edit, the event loop running (0: edit as soon as the last one is complete)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    app = QApplication.instance() or QApplication(sys.argv[:1])
    load0 = [f"{x:.2f}" for x in os.getloadavg()]
    results = [bench(int(t), args.repeat, args.edit, gap_ms=args.gap_ms) for t in args.T.split(",")]
    load1 = [f"{x:.2f}" for x in os.getloadavg()]
    out = {"machine": platform.processor() or platform.machine(), "cpus": os.cpu_count(),
           "platform": app.platformName(), "loadavg_before": load0, "loadavg_after": load1, "results": results}
    if args.json:
        print(json.dumps(out, indent=1))
    else:
        print(f"edit -> heatmap pixels ({args.edit} edits, {app.platformName()}, {os.cpu_count()} CPUs, "
              f"load {' '.join(load0)} -> {' '.join(load1)})")
        for r in results:
            m = r["median_ms"]
            first = "preview" if m["previewed"] >= 1000 * 0.5 else "response"
            print(f"  T={r['T']:5d} nh=8: first pixels ({first}) median {m['total']:7.1f} ms  (throttle "
                  f"{m['throttle']:.1f} · compute {m['compute']:.1f} · deliver+draw {m['deliver+draw']:.1f}; min "
                  f"{r['min_total_ms']:.1f});  complete {m['complete']:.1f} ms;  grid pooling on a worker "
                  f"{m['grid']:.1f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
