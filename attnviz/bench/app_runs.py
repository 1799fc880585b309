"""The window benchmarks (``attnviz-cli bench --app``): scripts of the checkout's ``benchmarks/`` folder run
offscreen, each in its own process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path


# the window benchmarks: (report key, script in benchmarks/, its arguments)
APP_BENCHMARKS = (
    ("startup", "bench_startup.py", ["--json", "--runs", "3"]),
    ("edit_to_pixels_mask", "bench_ui_latency.py", ["--json", "--edit", "mask"]),
    ("edit_to_pixels_seed", "bench_ui_latency.py", ["--json", "--edit", "seed"]),
    ("edit_to_pixels_text", "bench_ui_latency.py", ["--json", "--edit", "text"]),
    ("edit_to_pixels_qk", "bench_ui_latency.py", ["--json", "--edit", "qk"]),
)


def benchmarks_dir() -> Path | None:
    """The repository's ``benchmarks/`` folder (present in a checkout, not in an installed wheel)."""
    d = Path(__file__).resolve().parents[2] / "benchmarks"
    return d if d.is_dir() else None


def run_app_benchmarks(progress, runner=subprocess.run, folder: Path | None = None) -> dict:
    """Run the window benchmarks offscreen, each in its own process; their JSON keyed by name.

    A benchmark that cannot run (no checkout, a failure) is reported under its key as ``{"error": ...}``.
    """
    folder = folder if folder is not None else benchmarks_dir()
    if folder is None:
        return {"error": "the window benchmarks live in the repository's benchmarks/ folder, which this "
                         "installation does not have"}
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen")
    out: dict = {}
    for key, script, argv in APP_BENCHMARKS:
        progress(f"window benchmark {key} ...")
        proc = runner([sys.executable, str(folder / script), *argv], capture_output=True, text=True, env=env,
                      timeout=1800)
        if proc.returncode != 0:
            tail = (proc.stderr or proc.stdout or "").strip().splitlines()[-1:] or ["no output"]
            out[key] = {"error": f"{script} exited {proc.returncode}: {tail[0]}"}
            continue
        try:
            out[key] = json.loads(proc.stdout)
        except ValueError:
            out[key] = {"error": f"{script} did not print JSON"}
    return out
