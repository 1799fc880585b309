"""Start-up: process launch -> the main window on screen -> the first heatmap, in fresh processes.

    QT_QPA_PLATFORM=offscreen .venv/bin/python benchmarks/bench_startup.py [--runs 5] [--variants warm,cold,readonly]
        [--method report|hook] [--rev GIT_REV] [--compare GIT_REV] [--importtime] [--json]

Each run starts ``python -m attnviz`` (the ``river-bank`` demo, offscreen, settings and autosave in a
temporary home) and takes wall-clock marks against the moment the benchmark launched the process:

- ``--method report`` (default): the application's ``--startup-report`` line: ``window`` (MainWindow
  built), ``shown`` (the window's first paint has been flushed), ``response`` (first computed
  result delivered), ``heatmap`` (the heatmap panel has drawn it and repainted) and
  ``engine_heatmap`` (the first result of the engine drawn: later than ``heatmap`` on a first start,
  whose first result comes from the numpy path while the kernels compile);
- ``--method hook``: a callback given to ``attnviz.ui.app.main(argv, on_shown=...)`` (revisions
  before it: the ``ATTNVIZ_TEST_SCRIPT`` variable they read) records ``shown`` when the event loop has
  run once after ``window.show()`` (expose and first paint) and ``response`` when the first result
  arrives; works with revisions that have no ``--startup-report`` (``--rev``), for before/after figures.

Variants (the numba cache always lives in a user cache directory, ``XDG_CACHE_HOME`` of the run):

- ``warm``: the cache was filled beforehand (``attnviz.engine.warmup()`` in the same setting, and the
  record of a complete warm-up the application writes after its own);
- ``cold``: every run starts with an empty cache (the window must not wait for compilation, and the
  first heatmap not for the engine);
- ``readonly``: the package is a copy in a temporary folder with its bytecode compiled, made
  read-only (``chmod -R a-w``, and as root a read-only bind mount in a private mount namespace, since
  root ignores file modes); warm cache in the user cache directory. The report says whether any file
  in the copy changed.

``--rev REV`` runs the package as committed at REV (``git archive``) instead of the working tree;
``--compare REV`` measures REV and the working tree (or ``--rev``) alike with the hook method, their
runs interleaved so a changing machine load affects both the same way (before/after figures).
``--importtime`` adds ``python -X importtime`` of one warm run: the 15 imports with the largest
cumulative time, each marked whether it was loaded when the window first painted (report method).
Medians of ``--runs`` runs; the 1-minute load average before and after is printed with the figures
(a loaded machine stretches every time: compare runs of the same session).
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MARKS = ("window", "shown", "response", "heatmap", "engine_heatmap")
TIMEOUT_S = 300

HOOK_SCRIPT = """
import json, os, time
marks = {"script": time.time()}
app.processEvents()  # the window's expose and first paint
marks["shown"] = time.time()
while ctx.response is None:
    app.processEvents()
    time.sleep(0.002)
marks["response"] = time.time()
with open(os.environ["ATTNVIZ_BENCH_OUT"], "w") as fh:
    json.dump({"marks": marks, "ok": ctx.response.ok}, fh)
quit(0)
"""

# runs HOOK_SCRIPT in the application: through main(on_shown=...), or the environment variable of
# revisions without it
HOOK_LAUNCHER = """
import inspect, os, sys, time
from attnviz.ui import app as _app
_script = open(os.environ["ATTNVIZ_BENCH_HOOK"], encoding="utf-8").read()
def _on_shown(app, window):
    def wait(ms):
        end = time.monotonic() + ms / 1000
        while time.monotonic() < end:
            app.processEvents()
    def quit(code=0):
        window.files.prompts.save_changes = lambda *_a: "discard"
        window.close()
        app.exit(code)
    exec(_script, {"app": app, "window": window, "ctx": window.ctx, "wait": wait, "quit": quit})
if "on_shown" in inspect.signature(_app.main).parameters:
    sys.exit(_app.main([], on_shown=_on_shown))
os.environ["ATTNVIZ_TEST_SCRIPT"] = os.environ["ATTNVIZ_BENCH_HOOK"]
sys.exit(_app.main([]))
"""


def load_average() -> float:
    try:
        return round(os.getloadavg()[0], 2)
    except OSError:
        return float("nan")


def package_copy(dest: Path, rev: str | None) -> Path:
    """A copy of the ``attnviz`` package under ``dest`` (the working tree, or ``rev`` from git), with
    its bytecode compiled as an installed package has it. Returns the folder to put on PYTHONPATH."""
    dest.mkdir(parents=True, exist_ok=True)
    if rev:
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev, "attnviz"], check=True,
                                 capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
    else:
        shutil.copytree(ROOT / "attnviz", dest / "attnviz", ignore=shutil.ignore_patterns("__pycache__"))
    compileall.compile_dir(str(dest / "attnviz"), quiet=1)
    return dest


def make_read_only(path: Path) -> None:
    for p in [path, *path.rglob("*")]:
        if not p.is_symlink():
            p.chmod(p.stat().st_mode & ~0o222)


def make_writable(path: Path) -> None:
    for p in [path, *path.rglob("*")]:
        if not p.is_symlink():
            p.chmod(p.stat().st_mode | 0o200)


def read_only_mount_works() -> bool:
    """Root ignores file modes: a read-only bind mount in a private mount namespace enforces them."""
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        return False
    with tempfile.TemporaryDirectory() as d:
        probe = subprocess.run(["unshare", "-m", "--", "sh", "-c",
                                f"mount --bind {d} {d} && mount -o remount,bind,ro {d} && ! touch {d}/x"],
                               capture_output=True)
        return probe.returncode == 0


def read_only_command(folder: Path, cmd: list[str]) -> list[str]:
    """``cmd`` run with ``folder`` mounted read-only (root only; see :func:`read_only_mount_works`)."""
    script = 'mount --bind "$0" "$0" && mount -o remount,bind,ro "$0" && exec "$@"'
    return ["unshare", "-m", "--", "sh", "-c", script, str(folder), *cmd]


def snapshot(folder: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(folder)): (p.stat().st_mtime_ns, p.stat().st_size) for p in folder.rglob("*")}


class Runner:
    """Starts the application in fresh processes with a private home and collects its marks."""

    def __init__(self, work: Path, method: str, pythonpath: Path | None):
        self.work, self.method, self.pythonpath = work, method, pythonpath
        self.wrap = None  # callable(cmd) -> cmd, e.g. a read-only mount

    def env(self, cache_home: Path, **extra) -> dict:
        env = dict(os.environ)
        env.pop("NUMBA_CACHE_DIR", None)  # the application chooses: the user cache directory
        env.pop("ATTNVIZ_TEST_SCRIPT", None)
        env.update(QT_QPA_PLATFORM="offscreen", XDG_CACHE_HOME=str(cache_home),
                   XDG_CONFIG_HOME=str(self.work / "config"), XDG_DATA_HOME=str(self.work / "data"), **extra)
        if self.pythonpath is not None:
            env["PYTHONPATH"] = str(self.pythonpath)
        return env

    def warm(self, cache_home: Path) -> None:
        # what the application's own warm-up does, the record of a complete one included (a --rev
        # without the record ignores the exception)
        cmd = [sys.executable, "-c", "from attnviz.engine import warmup; warmup()\n"
               "try:\n    from attnviz.engine.jitcache import mark_warm; mark_warm()\nexcept ImportError:\n    pass"]
        subprocess.run(self._wrapped(cmd), env=self.env(cache_home), check=True, cwd=self.work,
                       timeout=TIMEOUT_S)

    def _wrapped(self, cmd):
        return self.wrap(cmd) if self.wrap else cmd

    def run(self, cache_home: Path, importtime: bool = False) -> dict:
        py = [sys.executable] + (["-X", "importtime"] if importtime else [])
        extra = {}
        if self.method == "report":
            cmd = py + ["-m", "attnviz", "--startup-report"]
        else:
            script = self.work / "hook.py"
            script.write_text(HOOK_SCRIPT, encoding="utf-8")
            out = self.work / "hook.json"
            out.unlink(missing_ok=True)
            extra = {"ATTNVIZ_BENCH_HOOK": str(script), "ATTNVIZ_BENCH_OUT": str(out)}
            cmd = py + ["-c", HOOK_LAUNCHER]
        launched = time.time()
        proc = subprocess.run(self._wrapped(cmd), env=self.env(cache_home, **extra), capture_output=True,
                              text=True, cwd=self.work, timeout=TIMEOUT_S)
        if proc.returncode != 0:
            raise RuntimeError(f"the application failed ({proc.returncode}): {proc.stderr[-2000:]}")
        if self.method == "report":
            line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("{")), None)
            if line is None:
                raise RuntimeError(f"no start-up report: {proc.stderr[-2000:]}")
            data = json.loads(line)
        else:
            data = json.loads((self.work / "hook.json").read_text(encoding="utf-8"))
        data["after_launch"] = {k: v - launched for k, v in data["marks"].items()}
        data["stderr"] = proc.stderr
        return data


def medians(runs: list[dict]) -> dict:
    out = {}
    for mark in MARKS:
        values = [r["after_launch"][mark] for r in runs if mark in r["after_launch"]]
        if values:
            out[mark] = {"median_s": round(statistics.median(values), 3),
                         "runs_s": [round(v, 3) for v in values]}
    return out


def importtime_top(stderr: str, loaded_at_show: set[str], n: int = 15) -> list[dict]:
    rows = []
    for line in stderr.splitlines():
        parts = line.split("|")
        if not line.startswith("import time:") or len(parts) != 3:
            continue
        try:
            cumulative = int(parts[1])  # microseconds, the module and everything it imported
        except ValueError:
            continue  # the header line
        name = parts[2].strip()
        depth = (len(parts[2]) - len(parts[2].lstrip(" ")) - 1) // 2
        rows.append({"module": name, "cumulative_ms": round(cumulative / 1000, 1), "depth": depth,
                     "before_show": (name in loaded_at_show) if loaded_at_show else None})
    rows.sort(key=lambda r: -r["cumulative_ms"])
    return rows[:n]


class Variant:
    """One variant (warm, cold or readonly) of one package (the working tree or a git revision)."""

    def __init__(self, name: str, rev: str | None, method: str, work: Path):
        self.name, self.rev, self.method = name, rev, method
        self.work = work / f"{name}-{rev or 'tree'}"
        self.work.mkdir()
        self.package = package_copy(self.work / "site", rev) if (name == "readonly" or rev) else None
        self.runner = Runner(self.work, method, self.package)
        self.info: dict = {"variant": name, "rev": rev or "working tree", "method": method}
        self.runs: list[dict] = []
        self.failures: list[str] = []  # runs whose process failed (exit code and the end of its stderr)
        if name == "readonly":
            make_read_only(self.package)
            if read_only_mount_works():
                self.runner.wrap = lambda cmd: read_only_command(self.package, cmd)
                self.info["read_only"] = "chmod -R a-w + read-only bind mount"
            else:
                self.info["read_only"] = "chmod -R a-w"
            self.before = snapshot(self.package)
        self.cache = self.work / "cache"
        if name != "cold":
            self.runner.warm(self.cache)

    def run_once(self) -> None:
        if self.name == "cold":
            self.cache = self.work / f"cache{len(self.runs) + len(self.failures)}"  # empty: every kernel compiles
        try:
            self.runs.append(self.runner.run(self.cache))
        except RuntimeError as exc:  # counted and shown with the figures, not hidden
            self.failures.append(str(exc)[-300:])

    def finish(self, importtime: bool) -> dict:
        info = self.info
        info["marks"] = medians(self.runs)
        info["failed_runs"] = self.failures
        if self.name == "readonly":
            info["package_files_changed"] = sorted(set(snapshot(self.package).items()) ^ set(self.before.items()))[:10]
            info["numba_cache_files"] = len(list((self.cache / "attnviz" / "numba").rglob("*.nbi")))
            make_writable(self.package)
        if self.method == "report":
            last = self.runs[-1]
            info.update(loaded_at_show=last.get("loaded_at_show"), panels_at_show=last.get("panels_at_show"),
                        heatmap_colours=last.get("heatmap_colours"))
        if self.name == "warm" and importtime:
            data = self.runner.run(self.cache, importtime=True)
            info["importtime_top15"] = importtime_top(data["stderr"], set(data.get("modules_at_show", ())))
        return info


def run_variant(name: str, args, work: Path) -> list[dict]:
    """The variant for the working tree (or --rev), and with --compare also for that revision, their
    runs interleaved so both see the same machine load."""
    if args.compare:
        setups = [Variant(name, args.compare, "hook", work), Variant(name, args.rev, "hook", work)]
    else:
        setups = [Variant(name, args.rev, args.method, work)]
    for _ in range(args.runs):
        for v in setups:
            v.run_once()
    return [v.finish(args.importtime) for v in setups]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--variants", default="warm,cold,readonly")
    p.add_argument("--method", choices=("report", "hook"), default="report")
    p.add_argument("--rev", help="measure the package as committed at this git revision")
    p.add_argument("--compare", metavar="REV", help="also measure REV, runs interleaved (hook method for both)")
    p.add_argument("--importtime", action="store_true")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    args = p.parse_args(argv)
    result = {"method": "hook" if args.compare else args.method, "rev": args.rev or "working tree",
              "compare": args.compare, "runs": args.runs,
              "load_average_1min_before": load_average(), "variants": []}
    with tempfile.TemporaryDirectory(prefix="attnviz-startup-") as tmp:
        for name in args.variants.split(","):
            result["variants"].extend(run_variant(name.strip(), args, Path(tmp)))
    result["load_average_1min_after"] = load_average()
    if args.json:
        print(json.dumps(result, indent=1))
        return 0
    print(f"start-up ({result['method']} method, {result['rev']}), median of {args.runs} runs, seconds after "
          f"launch; load average {result['load_average_1min_before']} -> {result['load_average_1min_after']}")
    for v in result["variants"]:
        cells = "  ".join(f"{m} {v['marks'][m]['median_s']:.2f}" for m in MARKS if m in v["marks"])
        label = f"{v['variant']} ({v['rev']}, {v['method']})" if args.compare else v["variant"]
        print(f"  {label:9s} {cells}")
        if v.get("loaded_at_show"):
            loaded = [m for m, on in v["loaded_at_show"].items() if on]
            print(f"            loaded at first paint: {', '.join(loaded) or '-'}; panels built: "
                  f"{', '.join(v.get('panels_at_show') or [])}")
        if v.get("failed_runs"):
            print(f"            {len(v['failed_runs'])} failed run(s): {v['failed_runs'][0]!r}")
        if "package_files_changed" in v:
            print(f"            read-only ({v['read_only']}): files changed in the package copy: "
                  f"{len(v['package_files_changed'])}; numba cache index files: {v['numba_cache_files']}")
        for row in v.get("importtime_top15", []):
            where = {True: "before show", False: "after show", None: ""}[row["before_show"]]
            print(f"            {row['cumulative_ms']:8.1f} ms  {'  ' * row['depth']}{row['module']}  {where}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
