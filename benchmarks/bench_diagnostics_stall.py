"""Edit -> a Diagnostics tab fully drawn on a long sequence, and the longest the GUI thread stalls meanwhile.

    QT_QPA_PLATFORM=offscreen .venv/bin/python benchmarks/bench_diagnostics_stall.py \
        [--demo long-context] [--repeat 5] [--tab normalisation|jacobian|both]

The window's own ``AppContext`` and ``DiagnosticsPanel`` (1024 x 700) on the demo (long-context: 2,900
tokens under a causal sliding window), the tab shown. Each edit is a new model seed; the clock starts at
``ctx.execute`` and stops when the tab has drawn the edit's response completely: its ``present`` ran for
that response, the Normalisation table holds every row (it fills 64 rows per turn of the event loop) and
the tab is repainted.

``stall`` is the longest the GUI thread went without running a 5 ms timer during the edit (what a click
would wait for); the Normalisation tab is also timed on a switch of rule (Scaled / No √dₖ) of the same response; ``present`` is the GUI-thread time inside the tab's ``present`` (the table's later
chunks and the repaints come on top). Medians over ``--repeat`` edits after one untimed warm-up edit.
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
from attnviz.ui.diagnostics.jacobian import JacobianTab  # noqa: E402
from attnviz.ui.diagnostics.normalisation import NormalisationTab  # noqa: E402
from attnviz.ui.panels.diagnostics_panel import DiagnosticsPanel  # noqa: E402

TABS = {"normalisation": NormalisationTab, "jacobian": JacobianTab}


def timed_present(tab, log: list) -> None:
    """Wrap ``tab.present`` to record (response, seconds inside it) of every call."""
    real = tab.present

    def present(numbers, resp, state):
        t0 = time.perf_counter()
        real(numbers, resp, state)
        log.append((resp, time.perf_counter() - t0))

    tab.present = present


def drawn(tab, resp, log) -> bool:
    """True when ``tab`` has presented ``resp`` whole (the Normalisation table filled too)."""
    if not log or log[-1][0] is not resp or tab.computing():
        return False
    rows = getattr(tab, "_table_rows", None)
    return rows is None or tab.rows_filled == len(rows)


def one_edit(ctx, tab, log, seed: int, timeout_s: float = 120.0, edit=None) -> dict:
    """Time ``edit`` (default: a new model seed) until ``tab`` has drawn the newest response whole."""
    loop, t = QEventLoop(), {}
    gaps, last = [], [time.perf_counter()]
    del log[:]

    def tick():
        now = time.perf_counter()
        gaps.append(now - last[0])
        last[0] = now
        resp = ctx.response
        if resp is not None and resp.request_id == ctx.compute.latest_id and drawn(tab, resp, log):
            tab.repaint()
            t["full"] = time.perf_counter()
            loop.quit()

    ticker = QTimer()
    ticker.timeout.connect(tick)
    ticker.start(5)
    QTimer.singleShot(int(timeout_s * 1000), loop.quit)
    t0 = time.perf_counter()
    if edit is None:
        ctx.execute(set_model(seed=seed))
    else:
        edit()
    loop.exec()
    ticker.stop()
    if "full" not in t:
        raise RuntimeError(f"the tab was not drawn within {timeout_s} s")
    return {"full": t["full"] - t0, "stall": max(gaps, default=0.0), "present": sum(s for _, s in log)}


def bench_tab(ctx, panel, cls, repeat: int) -> dict:
    tab = panel.show_tab(cls)
    log: list = []
    timed_present(tab, log)
    rows = [one_edit(ctx, tab, log, 700 + i) for i in range(repeat + 1)][1:]
    med = {k: 1000 * statistics.median(r[k] for r in rows) for k in rows[0]}
    if cls is NormalisationTab:  # a switch of rule on the same response, back and forth
        rules = ["unscaled", "scaled"] * repeat
        switches = [one_edit(ctx, tab, log, 0, edit=lambda r=r: ctx.set_view(normalisation=r)) for r in rules]
        med.update({f"switch_{k}": 1000 * statistics.median(r[k] for r in switches) for k in ("full", "stall")})
    return med


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--demo", default="long-context")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--tab", default="both", choices=[*TABS, "both"])
    args = ap.parse_args(argv)
    app = QApplication.instance() or QApplication(sys.argv[:1])
    ctx = AppContext(Session(build_demo(args.demo)))
    panel = DiagnosticsPanel(ctx)
    panel.resize(1024, 700)
    panel.show()
    names = list(TABS) if args.tab == "both" else [args.tab]
    for name in names:
        med = bench_tab(ctx, panel, TABS[name], args.repeat)
        resp = ctx.response
        print(f"{args.demo} (T = {resp.Tq:,}, {name} tab, {app.platformName()}, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}): edit -> tab drawn "
              f"{med['full']:.0f} ms, longest GUI stall {med['stall']:.0f} ms, present {med['present']:.0f} ms "
              f"(medians of {args.repeat})" + (f"; rule switch -> drawn {med['switch_full']:.0f} ms, stall "
                                                f"{med['switch_stall']:.0f} ms" if "switch_full" in med else ""),
              flush=True)
    panel.shutdown()
    ctx.compute.shutdown(timeout=5)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
