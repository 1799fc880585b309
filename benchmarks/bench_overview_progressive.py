"""Edit -> first pixels and -> the full overview of a long sequence in the Attention heatmap.

    QT_QPA_PLATFORM=offscreen .venv/bin/python benchmarks/bench_overview_progressive.py \
        [--demo long-context] [--repeat 5] [--head 0|mean] [--no-coarse]

The window's own ``AppContext`` and ``HeatmapPanel`` (900 x 700) on the demo (long-context: 2,900
tokens, beyond the dense limit, so the heatmap draws an overview computed on a worker). Each edit is
a new model seed; the clock starts at ``ctx.execute`` and stops at

- ``first``: the heatmap first shows the edit (the coarse picture, or with ``--no-coarse`` the full
  overview, as before the overview was progressive), its viewport repainted;
- ``full``: the full-resolution overview (and the small maps) drawn.

``stall`` is the longest the GUI thread went without running a 5 ms timer during the edit (what a
click would wait for). Medians over ``--repeat`` edits after one untimed warm-up edit.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from PySide6.QtCore import QEventLoop, QTimer  # noqa: E402
from PySide6.QtWidgets import QApplication  # noqa: E402

from attnviz.model.commands import set_model  # noqa: E402
from attnviz.model.demos import build_demo  # noqa: E402
from attnviz.model.session import Session  # noqa: E402
from attnviz.ui.context import AppContext  # noqa: E402
from attnviz.ui.panels import heatmap_panel  # noqa: E402


def one_edit(ctx, panel, seed: int, timeout_s: float = 120.0) -> dict:
    loop, t = QEventLoop(), {}
    gaps, last = [], [time.perf_counter()]

    def tick():
        now = time.perf_counter()
        gaps.append(now - last[0])
        last[0] = now

    def first():
        if "first" not in t:
            panel.heatmap.frame.viewport().repaint()
            t["first"] = time.perf_counter()

    def on_rendered():
        resp = panel._resp
        if resp is not None and resp.request_id == ctx.compute.latest_id and panel.mode == "overview":
            first()
            panel.heatmap.frame.viewport().repaint()
            t["full"] = time.perf_counter()
            loop.quit()

    def on_coarse():
        if panel._resp is not None and panel._resp.request_id == ctx.compute.latest_id:
            first()

    panel.rendered.connect(on_rendered)
    panel.coarse_rendered.connect(on_coarse)
    ticker = QTimer()
    ticker.timeout.connect(tick)
    ticker.start(5)
    QTimer.singleShot(int(timeout_s * 1000), loop.quit)
    t0 = time.perf_counter()
    ctx.execute(set_model(seed=seed))
    loop.exec()
    ticker.stop()
    panel.rendered.disconnect(on_rendered)
    panel.coarse_rendered.disconnect(on_coarse)
    if "full" not in t:
        raise RuntimeError(f"no full overview within {timeout_s} s")
    return {"first": t["first"] - t0, "full": t["full"] - t0, "stall": max(gaps, default=0.0)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--demo", default="long-context")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--head", default="0", help="head shown: a number or 'mean'")
    ap.add_argument("--no-coarse", action="store_true", help="no coarse picture first (the full overview only)")
    args = ap.parse_args(argv)
    app = QApplication.instance() or QApplication(sys.argv[:1])
    if args.no_coarse:
        heatmap_panel.COARSE_CELLS = float("inf")
    ctx = AppContext(Session(build_demo(args.demo)))
    ctx.set_view(head="mean" if args.head == "mean" else int(args.head))
    panel = heatmap_panel.HeatmapPanel(ctx)
    panel.resize(900, 700)
    panel.show()
    rows = [one_edit(ctx, panel, 500 + i) for i in range(args.repeat + 1)][1:]
    med = {k: 1000 * statistics.median(r[k] for r in rows) for k in rows[0]}
    resp = panel._resp
    print(f"{args.demo} (T = {resp.Tq:,}, head {args.head}, {'full overview only' if args.no_coarse else 'coarse first'}"
          f", {app.platformName()}, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}): edit -> first pixels "
          f"{med['first']:.0f} ms, -> full overview {med['full']:.0f} ms, longest GUI stall {med['stall']:.0f} ms "
          f"(medians of {args.repeat})")
    panel.shutdown()
    ctx.compute.shutdown(timeout=5)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
