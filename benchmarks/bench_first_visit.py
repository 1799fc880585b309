"""The longest the GUI thread stalls when each workspace is shown for the first time, on a long input.

    QT_QPA_PLATFORM=offscreen .venv/bin/python benchmarks/bench_first_visit.py \
        [--demo long-context] [--repeat 3] [--settle 6] [--order qkv,image,diagnostics,mask,pretrained,attention]

The window as ``attnviz --demo long-context`` opens it (MainWindow, 1280 x 800, the first computation
scheduled as the app does; no saved layout): once the Attention workspace has drawn the first result,
each workspace of ``--order`` is shown in turn and the event loop runs ``--settle`` seconds. A timer
ticks every 10 ms meanwhile; ``stall`` is the longest gap between two ticks (what a click would wait
for: building the workspace's panels on their first visit, their first drawing, anything their
results do on the GUI thread), and ``cpu`` the most CPU time the GUI thread spent between two ticks
(``time.thread_time``: the work of the longest step, without the waits a loaded machine adds). A first visit happens once per process (modules are imported, panels
built), so each repeat is a fresh process; the table gives the median and the largest of the repeats.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ORDER = "qkv,image,diagnostics,mask,pretrained,attention"


def one_run(demo: str, order: list[str], settle: float, collector_on: bool = True) -> dict:
    """Open the window in this process, visit each workspace once; {workspace: (stall, cpu) seconds}."""
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from PySide6.QtCore import QEventLoop, QTimer
    from PySide6.QtWidgets import QApplication

    from attnviz.model.demos import build_demo
    from attnviz.model.session import Session
    from attnviz.ui import collector
    from attnviz.ui.app import StartupClock, _schedule_first_work
    from attnviz.ui.context import AppContext
    from attnviz.ui.main_window import MainWindow
    from attnviz.ui.theme import apply_theme

    app = QApplication.instance() or QApplication(sys.argv[:1])
    apply_theme(app, "light")
    ctx = AppContext(Session(build_demo(demo)))
    ctx.engine_mode = "always"
    win = MainWindow(ctx, restore=False, hint=False)
    win.resize(1280, 800)
    _schedule_first_work(win, ctx, StartupClock(), None)
    if collector_on:  # as attnviz.ui.app.main does
        win.first_painted.connect(collector.enable)
    win.show()

    def run_loop(seconds: float, action=None) -> tuple[float, float, list[float]]:
        """(longest gap between ticks, the most CPU time the GUI thread spent between two ticks, the CPU
        times of every gap over 0.1 s, largest first)."""
        gaps, last = [(0.0, 0.0)], [time.perf_counter(), time.thread_time()]

        def tick():
            now, cpu = time.perf_counter(), time.thread_time()
            gaps.append((now - last[0], cpu - last[1]))
            last[0], last[1] = now, cpu

        ticker = QTimer()
        ticker.timeout.connect(tick)
        ticker.start(10)
        loop = QEventLoop()
        QTimer.singleShot(int(seconds * 1000), loop.quit)
        if action is not None:
            action()  # counted: the gap it makes ends at the first tick after it
        loop.exec()
        ticker.stop()
        return (max(g[0] for g in gaps), max(g[1] for g in gaps),
                sorted((g[1] for g in gaps if g[1] > 0.1), reverse=True))

    deadline = time.perf_counter() + 120
    while (ctx.response is None or ctx.compute.busy) and time.perf_counter() < deadline:
        run_loop(0.1)
    out = {"startup": run_loop(settle), "T": ctx.response.Tq if ctx.response is not None else 0}
    for name in order:
        out[name] = run_loop(settle, lambda n=name: win.show_workspace(n))  # [wall, cpu, [cpu over 0.1 s]]
    win.stop_workers()
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--demo", default="long-context")
    ap.add_argument("--repeat", type=int, default=3, help="fresh processes, each visiting every workspace once")
    ap.add_argument("--settle", type=float, default=6.0, help="seconds the event loop runs after each visit")
    ap.add_argument("--order", default=ORDER)
    ap.add_argument("--collector-as-is", action="store_true",
                    help="leave the cyclic collector as it is (the application freezes the window's objects out of it)")
    ap.add_argument("--one", action="store_true", help=argparse.SUPPRESS)  # a single run, its figures as JSON
    args = ap.parse_args(argv)
    order = [w.strip() for w in args.order.split(",") if w.strip()]
    if args.one:
        print("RESULT " + json.dumps(one_run(args.demo, order, args.settle, not args.collector_as_is)), flush=True)
        os._exit(0)  # no teardown of half-finished worker threads: the figures are out
    runs, load = [], []
    env = dict(os.environ, QT_QPA_PLATFORM=os.environ.get("QT_QPA_PLATFORM", "offscreen"))
    for _ in range(args.repeat):
        with tempfile.TemporaryDirectory() as home:  # no saved settings or layout of the person's own
            env.update(XDG_CONFIG_HOME=home)
            load.append(os.getloadavg()[0])
            done = subprocess.run([sys.executable, __file__, "--one", "--demo", args.demo, "--settle",
                                   str(args.settle), "--order", ",".join(order),
                                   *(["--collector-as-is"] if args.collector_as_is else [])], env=env, capture_output=True,
                                  text=True, timeout=600)
        line = [ln for ln in done.stdout.splitlines() if ln.startswith("RESULT ")]
        if not line:
            sys.stderr.write(done.stderr[-2000:])
            raise SystemExit(f"a run failed (exit status {done.returncode})")
        runs.append(json.loads(line[0][7:]))
    print(f"{args.demo} (T = {runs[0]['T']:,}), {os.cpu_count()} CPUs, load {statistics.median(load):.1f} "
          f"({min(load):.1f}-{max(load):.1f}), {args.repeat} fresh processes: longest GUI-thread gap after the "
          "first visit of each workspace (wall), and the most CPU time the GUI thread spent in one gap (cpu: "
          "the work itself, whatever else the machine runs); over 100: the CPU time of each gap over 100 ms")
    print("| workspace | median ms | largest ms | cpu median ms | cpu largest ms | each run: wall / cpu ms | "
          "each run: cpu ms of the gaps over 100 |\n|---|---|---|---|---|---|---|")
    for name in ["startup", *order]:
        wall = [1000 * r[name][0] for r in runs]
        cpu = [1000 * r[name][1] for r in runs]
        each = ", ".join(f"{w:.0f} / {c:.0f}" for w, c in zip(wall, cpu))
        over = "; ".join(" ".join(f"{1000 * c:.0f}" for c in r[name][2]) or "none" for r in runs)
        print(f"| {name} | {statistics.median(wall):.0f} | {max(wall):.0f} | {statistics.median(cpu):.0f} | "
              f"{max(cpu):.0f} | {each} | {over} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
