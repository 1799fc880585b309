"""Time from a widget update call to its pixels on screen, for the widgets a live edit redraws.

    QT_QPA_PLATFORM=offscreen .venv/bin/python benchmarks/bench_widgets.py [--repeat 15] [--json]
        [--only heatmap,mask,grid] [--heatmap-T 256,1024,4096] [--mask-T 1024,3000]

What one sample measures: the update call (``AttentionHeatmap.set_matrix``, ``MaskCanvas.set_mask``
[+ ``set_tiles``], ``HeadGrid.set_matrices``) and then ``QApplication.processEvents()`` repeated
until the widget's graphics view has received a paint event after the call and the widget's value
image has been converted to a QImage and drawn (pyqtgraph converts lazily, inside the paint). The
widgets are shown at window sizes (heatmap 900x700, mask canvas 800x700, head grid 900x300 for one
row of 8 heads and 1100x600 for 6 x 12) on the offscreen platform, so the paint is a real raster
paint into the window's backing store.

Cases (inputs change the way a live session changes them; every call gets new arrays):

- heatmap ``edit``: new weights and a mask that differs from the last one in one cell (a painted
  cell), labels and segments equal to the last call's (new lists with the same content);
- heatmap ``same-mask``: new weights, a mask equal to the last one (a new array), same labels;
- mask ``stroke``: the rule layer unchanged (a new, equal array), one more painted cell than last
  time (a brush stroke update), labels and segments unchanged; ``stroke+tiles`` also sets the
  flash-tile overlay of the new mask, as the mask designer does after every update;
- grid ``8x1024``: 8 heads of 1024 x 1024 with a causal mask, new maps every call;
  ``6x12x128``: 6 layers x 12 heads of 128 x 128.

Each figure is the median (and minimum) wall time over ``--repeat`` calls after two untimed warm-up
calls, and the median CPU time of the calling thread (``time.thread_time``; everything here runs on
the GUI thread, so on a busy machine it shows the work apart from the wait for a core). The machine
is shared: the load average (``/proc/loadavg``) is printed before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time

import numpy as np

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from PySide6.QtCore import QEvent, QObject  # noqa: E402
from PySide6.QtWidgets import QApplication  # noqa: E402

from attnviz.model.segments import Segment  # noqa: E402
from attnviz.model.score_rules import masked_softmax  # noqa: E402

SIZES = {"heatmap": (900, 700), "mask": (800, 700), "grid8": (900, 300), "grid72": (1100, 600)}


def loadavg() -> str:
    """The 1-, 5- and 15-minute load averages."""
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


class PaintCounter(QObject):
    """Counts paint events of one widget (a graphics view's viewport)."""

    def __init__(self, target):
        super().__init__()
        self.count = 0
        target.installEventFilter(self)

    def eventFilter(self, obj, ev):
        if ev.type() == QEvent.Type.Paint:
            self.count += 1
        return False


def until_painted(app: QApplication, counter: PaintCounter, before: int, images, limit: int = 50) -> int:
    """Process events until the view has painted since ``before`` and no image awaits conversion."""
    for n in range(1, limit + 1):
        app.processEvents()
        if counter.count > before and not any(getattr(im, "_renderRequired", False) and im.isVisible()
                                              for im in images):
            return n
    raise RuntimeError("the widget did not paint within the event-processing limit")


def timed(app, counter, images, calls, repeat: int) -> dict:
    """Median/min ms of ``calls[i]()`` + processing until painted, over ``repeat`` calls."""
    for i in range(2):
        before = counter.count
        calls(i)
        until_painted(app, counter, before, images)
    times, cpu, loops = [], [], []
    for i in range(2, repeat + 2):
        before = counter.count
        t0, c0 = time.perf_counter(), time.thread_time()
        calls(i)
        loops.append(until_painted(app, counter, before, images))
        cpu.append(time.thread_time() - c0)
        times.append(time.perf_counter() - t0)
    return {"median_ms": 1e3 * statistics.median(times), "min_ms": 1e3 * min(times),
            "cpu_median_ms": 1e3 * statistics.median(cpu), "max_event_loops": max(loops), "repeat": repeat}


def weights(T: int, mask: np.ndarray, seed: int) -> np.ndarray:
    """(T, T) float32 softmax weights of random scores under ``mask`` (peaks near the diagonal)."""
    rng = np.random.default_rng(seed)
    s = (rng.standard_normal((T, T), dtype=np.float32) * 2.0).astype(np.float32)  # (T, T)
    return masked_softmax(s, mask)[0].astype(np.float32)


def segments(T: int) -> tuple:
    a, b = T // 4, T // 2
    return (Segment("image", 0, a, "#4c78a8"), Segment("prompt", a, b, "#f58518"),
            Segment("actions", b, T, "#54a24b"))


def labels(T: int) -> list:
    return [f"tok{i}" if i % 7 else f" word {i}" for i in range(T)]


def tile_states(mask: np.ndarray, bm: int, bn: int) -> np.ndarray:
    """(nQt, nKt) int8 flash-tile states of ``mask``: 0 empty, 1 partial, 2 full."""
    Tq, Tk = mask.shape
    nq, nk = -(-Tq // bm), -(-Tk // bn)
    pad = np.zeros((nq * bm, nk * bn), dtype=np.int32)  # (nQt*bm, nKt*bn)
    pad[:Tq, :Tk] = mask
    counts = pad.reshape(nq, bm, nk, bn).sum(axis=(1, 3))  # (nQt, nKt)
    rows = np.minimum(bm, Tq - bm * np.arange(nq))[:, None]
    cols = np.minimum(bn, Tk - bn * np.arange(nk))[None, :]
    return np.where(counts == 0, 0, np.where(counts == rows * cols, 2, 1)).astype(np.int8)


def show(app, widget, size):
    widget.resize(*size)
    widget.show()
    for _ in range(10):
        app.processEvents()


def bench_heatmap(app, T: int, repeat: int) -> list[dict]:
    from attnviz.ui.widgets.heatmap import AttentionHeatmap

    causal = np.tri(T, dtype=bool)  # (T, T)
    mats = [weights(T, causal, s) for s in range(3)]
    lab, segs = labels(T), segments(T)
    out = []
    for case in ("edit", "same-mask"):
        w = AttentionHeatmap()
        show(app, w, SIZES["heatmap"])
        counter = PaintCounter(w.frame.viewport())
        masks = []
        for i in range(repeat + 2):
            m = causal.copy()
            if case == "edit":
                m[(37 * i + 5) % T, 0] = False  # one painted cell per edit, a different one each time
            masks.append(m)

        def call(i):
            w.set_matrix(mats[i % 3], mask=masks[i], row_labels=list(lab), col_labels=list(lab),
                         row_segments=segs, col_segments=segs, title="head 0 · weights", value_label="weight")

        r = timed(app, counter, [w.base.image, w.detail.image], call, repeat)
        vb = w.frame.view.sceneBoundingRect()
        r.update(widget="heatmap", case=case, T=T, size=SIZES["heatmap"],
                 view_px=(int(vb.width()), int(vb.height())), image=list(w.base.values.shape))
        out.append(r)
        w.close()
        w.deleteLater()
        app.processEvents()
    return out


def bench_mask(app, T: int, repeat: int) -> list[dict]:
    from attnviz.ui.widgets.mask_canvas import ALLOW, DENY, MaskCanvas

    segs = segments(T)
    a, b = segs[1].start, segs[2].start
    rule = np.zeros((T, T), dtype=bool)  # (T, T) prefix bidirectional, actions causal after it
    rule[:b, :b] = True
    rule[b:, :b] = True
    rule[b:, b:] = np.tri(T - b, dtype=bool)
    base = np.zeros((T, T), dtype=np.int8)  # (T, T) a few painted cells
    base[a:a + 8, 3] = DENY
    base[5, b + 10:b + 30] = ALLOW
    lab = labels(T)
    out = []
    for case in ("stroke", "stroke+tiles"):
        c = MaskCanvas()
        show(app, c, SIZES["mask"])
        counter = PaintCounter(c.frame.viewport())
        overs = []
        o = base.copy()
        for i in range(repeat + 2):
            o = o.copy()
            o[(a + 3 * i) % T, (b + 5 * i) % T] = ALLOW if i % 2 else DENY
            overs.append(o)
        tiles = [tile_states(np.where(ov == 0, rule, ov > 0), 64, 64) for ov in overs] \
            if case == "stroke+tiles" else None

        rules = [rule.copy() for _ in range(repeat + 2)]  # equal, not identical: made before timing

        def call(i):
            c.set_mask(rules[i], overs[i], row_labels=list(lab), col_labels=list(lab),
                       row_segments=segs, col_segments=segs, title="mask of all heads")
            if tiles is not None:
                c.set_tiles(tiles[i], 64, 64)

        r = timed(app, counter, [c.mask_image], call, repeat)
        r.update(widget="mask", case=case, T=T, size=SIZES["mask"],
                 image=list(c.mask_image.image.shape[:2]))
        out.append(r)
        c.close()
        c.deleteLater()
        app.processEvents()
    return out


def bench_grid(app, repeat: int) -> list[dict]:
    from attnviz.ui.widgets.small_multiples import HeadGrid

    out = []
    for case, shape, size in (("8x1024", (1, 8, 1024), "grid8"), ("6x12x128", (6, 12, 128), "grid72")):
        rows, cols, T = shape
        causal = np.tri(T, dtype=bool)  # (T, T)
        sets = []
        for s in range(3):
            rng = np.random.default_rng(s)
            sc = rng.standard_normal((rows, cols, T, T), dtype=np.float32) * 2.0  # (rows, cols, T, T)
            sets.append(masked_softmax(sc, causal)[0].astype(np.float32))
        g = HeadGrid()
        show(app, g, SIZES[size])
        counter = PaintCounter(g.plot.viewport())
        titles = [f"h{j}" for j in range(cols)]
        if rows == 1:
            def call(i):
                g.set_matrices(sets[i % 3][0], None, titles, mask=causal)
        else:
            def call(i):
                g.set_matrices(sets[i % 3], [f"L{r}" for r in range(rows)], titles)
        r = timed(app, counter, [g.image], call, repeat)
        r.update(widget="grid", case=case, T=T, size=SIZES[size], image=list(g.image.image.shape[:2]))
        out.append(r)
        g.close()
        g.deleteLater()
        app.processEvents()
        del sets
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=15, help="timed calls per case")
    ap.add_argument("--only", default="heatmap,mask,grid", help="comma-separated subset of heatmap,mask,grid")
    ap.add_argument("--heatmap-T", default="256,1024,4096", help="sequence lengths of the heatmap cases")
    ap.add_argument("--mask-T", default="1024,3000", help="sequence lengths of the mask canvas cases")
    ap.add_argument("--json", action="store_true", help="print JSON instead of a table")
    a = ap.parse_args(argv)
    which = [w for w in a.only.split(",") if w]
    for w in which:
        if w not in ("heatmap", "mask", "grid"):
            ap.error(f"unknown widget {w!r}; choose from heatmap, mask, grid")
    if a.repeat < 1:
        ap.error("--repeat must be at least 1")
    app = QApplication.instance() or QApplication(sys.argv[:1])
    from attnviz.ui.theme import apply_theme

    apply_theme(app, "light")
    load_before = loadavg()
    rows = []
    if "heatmap" in which:
        for T in (int(t) for t in a.heatmap_T.split(",") if t):
            rows += bench_heatmap(app, T, a.repeat)
            if not a.json:
                print(f"  measured heatmap T={T}", file=sys.stderr)
    if "mask" in which:
        for T in (int(t) for t in a.mask_T.split(",") if t):
            rows += bench_mask(app, T, a.repeat)
            if not a.json:
                print(f"  measured mask T={T}", file=sys.stderr)
    if "grid" in which:
        rows += bench_grid(app, a.repeat)
    env = {"loadavg_before": load_before, "loadavg_after": loadavg(), "cpus": os.cpu_count(),
           "machine": platform.processor() or platform.machine(), "python": platform.python_version(),
           "platform": app.platformName(), "measure": "update call + processEvents until painted"}
    if a.json:
        print(json.dumps({"env": env, "results": rows}, indent=1))
        return 0
    print(f"update -> pixels, ms (wall median and min, thread CPU median, of {a.repeat}); "
          f"Qt platform {env['platform']}")
    print(f"{'widget':<8} {'case':<13} {'T':>6} {'size':>9} {'image':>11} {'median':>8} {'min':>8} {'cpu':>8}")
    for r in rows:
        size = "x".join(str(s) for s in r["size"])
        image = "x".join(str(s) for s in r["image"])
        print(f"{r['widget']:<8} {r['case']:<13} {r['T']:>6} {size:>9} {image:>11} "
              f"{r['median_ms']:>8.1f} {r['min_ms']:>8.1f} {r['cpu_median_ms']:>8.1f}")
    print(f"load average before {env['loadavg_before']}, after {env['loadavg_after']}; {env['cpus']} cpus")
    return 0


if __name__ == "__main__":
    sys.exit(main())
