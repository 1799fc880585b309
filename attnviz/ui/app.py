"""The ``attnviz`` desktop application: :func:`main` reads the options, opens the demo or a file and
runs the window. Start-up is ordered for a fast first picture: the window paints before numba or the
engine is imported, the first paint starts the first computation, and only its result starts the
kernel warm-up (:class:`KernelWarmup`). How an edit becomes pixels: see docs/architecture.md. The parts
that need no Qt (the options and their checks, --self-test, the start-up clock) are :mod:`attnviz.app_start`.
"""

from __future__ import annotations

import gc
import json
import os
import signal
import sys
import threading

from PySide6.QtCore import QCoreApplication, QEvent, QObject, QTimer, Signal
from PySide6.QtWidgets import QApplication

from attnviz.app_start import (DEFAULT_DEMO, REPORTED_MODULES, SMOKE_TIMEOUT_S, StartupClock, build_parser,
                               check_options, no_display, run_self_test, session_for_file)
from attnviz.ui import collector
from attnviz.ui.messages import Level

WARMUP_FALLBACK_MS = 3000  # warm-up starts after the first result, or this long after the first paint
WARMUP_EXIT_WAIT_S = 60.0  # on exit, wait this long for the warm-up's current dtype (a daemon thread
# stopped inside a numba compile by interpreter shutdown can abort the process)
FIRST_COMPUTE_FALLBACK_MS = 1000  # the first computation starts at the first paint, or after this long


def open_maps_file(window, path: str) -> bool:
    """Show a file of attention maps (attnviz.save, attnviz-cli model inspect --npz) read-only in the Pretrained
    workspace; the panel's message line says what is wrong with a file it cannot read. Once loaded they are the
    session's maps (``ctx.maps``): the Attention workspace shows them too and File ▸ Save keeps them."""
    from attnviz.ui.session_maps import follow_pretrained

    panel = window.panel("pretrained")
    if panel is None or not hasattr(panel, "load_model"):
        window.ctx.report(Level.ERROR, f"cannot open {os.path.basename(path)}: there is no Pretrained workspace")
        return False
    follow_pretrained(window)
    panel.auto_load = False
    window.show_workspace("pretrained")
    panel.load_model(os.path.abspath(path))
    return True


def open_file_argument(window, path: str) -> bool:
    """Open the command line's file in the window; a failure is reported and the demo stays."""
    from attnviz.sources.errors import SourceError
    from attnviz.model.source_files import classify

    files = window.files
    if not os.path.exists(path):
        files.ctx.report(Level.ERROR, f"cannot open {path}: no such file; showing the {DEFAULT_DEMO!r} demo")
        return False
    if not os.path.isfile(path):  # a folder, a FIFO or a device: never read (a FIFO would block the window)
        files.ctx.report(Level.ERROR, f"cannot open {path}: not a regular file; showing the {DEFAULT_DEMO!r} demo")
        return False
    if os.path.splitext(path)[1].lower() in (".npz", ".safetensors"):  # attention maps: the Pretrained workspace
        return open_maps_file(window, path)
    kind = classify(path)
    if kind == "session":
        return files.open_session(path)
    if kind in ("image", "text"):
        try:
            state = session_for_file(path)
        except (SourceError, ValueError) as exc:
            files.ctx.report(Level.ERROR, f"cannot open {os.path.basename(path)}: {exc}")
            return False
        files._replace(state, None, dirty=True)
        files.ctx.report(Level.INFO, f"new session from {os.path.basename(path)}")
        return True
    return files.open_path(path)  # values files and unknown types: added or reported


def _distinct_colours(widget, limit: int = 64) -> int:
    """How many colours a widget's current picture holds (sampled), to show the heatmap is not blank."""
    from attnviz.ui.export import capture

    img = capture(widget)
    seen = set()
    step_x, step_y = max(1, img.width() // 97), max(1, img.height() // 89)
    for y in range(0, img.height(), step_y):
        for x in range(0, img.width(), step_x):
            seen.add(img.pixel(x, y))
            if len(seen) >= limit:
                return len(seen)
    return len(seen)


def _schedule_first_work(window, ctx, clock: StartupClock, warmup: KernelWarmup | None) -> None:
    """After the window's first paint: the first computation; after its result: the kernel warm-up
    (none for the smoke test, which exits after the first result).

    A first start (no complete warm-up recorded in the kernel cache, ``ctx.engine_mode`` "when-compiled")
    gets its first result from the float64 numpy path at once; the same state is then computed again
    on the engine ("naive-until-warm"), whose naive kernel stands in for flash on a small input (it
    compiles in about 3 s, flash in about 20); the warm-up of every other kernel follows that result, and
    when it has compiled the float64 kernels flash computes the state once more and takes over."""
    state = {"computed": False, "warm": False}

    def first_compute():
        if not state["computed"]:
            state["computed"] = True
            clock.mark("compute")
            ctx.recompute(now=True)

    def warm():
        if not state["warm"] and warmup is not None:
            state["warm"] = True
            clock.mark("warmup")
            warmup.start()

    def on_painted():
        clock.mark("shown")
        clock.loaded_at_show.update({m: m in sys.modules for m in REPORTED_MODULES})
        clock.panels_at_show[:] = sorted(window.panels)
        clock.modules_at_show[:] = sorted(sys.modules)
        clock.threads_at_show[:] = sorted(t.name for t in threading.enumerate())
        first_compute()
        if warmup is not None and ctx.engine_mode == "when-compiled":
            warmup.start_first_view()
        QTimer.singleShot(WARMUP_FALLBACK_MS, lambda: warm() if ctx.response is None else None)

    def on_response(resp):
        clock.mark("response")
        if resp.ok and resp.path.startswith("engine:"):
            clock.mark("engine")
        if resp.ok and resp.stand_in and ctx.engine_mode == "when-compiled":
            ctx.engine_mode = "naive-until-warm"  # from now on the engine, compiling on first use
            ctx.recompute(now=True)
            return
        QTimer.singleShot(0, warm)

    def on_compiled(dtype: str):
        if dtype == "float64" and ctx.engine_mode == "naive-until-warm":
            ctx.engine_mode = "always"  # flash is compiled: it takes over from the naive kernel
            if ctx.response is not None and ctx.response.kernel_stand_in:
                ctx.recompute(now=True)

    if warmup is not None:
        warmup.compiled.connect(on_compiled)
    window.first_painted.connect(on_painted)
    ctx.response_changed.connect(on_response)
    QTimer.singleShot(FIRST_COMPUTE_FALLBACK_MS, first_compute)  # never painted (e.g. minimised): compute anyway


def _install_facts() -> dict:
    """Where this copy found its parts (the start-up report; a frozen bundle is checked with it)."""
    from attnviz.resources_path import resources_root
    from attnviz.ui.panels import PANELS, panel_modules

    numba = sys.modules.get("numba")
    return {"frozen": bool(getattr(sys, "frozen", False)), "meipass": getattr(sys, "_MEIPASS", None),
            "resources": str(resources_root()), "panel_modules": panel_modules(),
            "panels": sorted(s.id for s in PANELS),
            "numba_cache": numba.config.CACHE_DIR if numba is not None else None}


def _check_first_result(app, window, ctx, clock: StartupClock, report: bool) -> None:
    """--smoke-test / --startup-report: exit 0 once the first result is computed (and, for the report,
    drawn in the heatmap), 1 when it fails or takes longer than SMOKE_TIMEOUT_S.

    The report marks ``heatmap`` when the first result is drawn and ``engine_heatmap`` when the first
    result of the engine is (later on a first start, whose first result comes from the numpy path
    while the kernels compile), and exits after the latter."""
    heatmap = window.panels.get("heatmap")
    rendered = getattr(heatmap, "rendered", None)

    done = []
    first_path: list[str] = []  # the path of the first result drawn

    def finish(resp):
        if done:
            return
        done.append(resp)
        if report:
            extra = {"T": resp.Tq, "path": resp.path, "first_path": first_path[0] if first_path else resp.path,
                     "gc_frozen": gc.get_freeze_count(),
                     "heatmap_colours": _distinct_colours(heatmap) if heatmap is not None else 0,
                     "install": _install_facts()}
            print(json.dumps(clock.report(**extra)), flush=True)
        else:
            print(f"attnviz smoke test: ok (T = {resp.Tq}, {resp.path})")
        app.exit(0)

    def on_drawn():
        clock.mark("heatmap")
        resp = ctx.response
        if not first_path:
            first_path.append(resp.path)
        if not resp.stand_in:  # the engine's result, or a rule the engine does not run
            clock.mark("engine_heatmap")
            finish(resp)

    def on_response(resp):
        if not resp.ok:
            sys.stderr.write(f"attnviz smoke test: the computation failed: {resp.error}\n")
            app.exit(1)
        elif not report or rendered is None:
            finish(resp)

    def on_rendered():
        if ctx.response is not None and ctx.response.ok:
            QTimer.singleShot(0, on_drawn)  # after the paint the redraw asked for

    def on_timeout():
        sys.stderr.write(f"attnviz smoke test: no result within {SMOKE_TIMEOUT_S:.0f} s\n")
        app.exit(1)

    ctx.response_changed.connect(on_response)
    if report and rendered is not None:
        rendered.connect(on_rendered)
    QTimer.singleShot(int(SMOKE_TIMEOUT_S * 1000), on_timeout)


class _WarmupSignals(QObject):
    compiled = Signal(str)


class KernelWarmup:
    """Compiles (or loads from the cache) every engine kernel on a background job (the window's one job
    primitive, :class:`~attnviz.ui.latest_job.LatestJob`), one dtype at a time, so that :meth:`stop` at exit
    waits for at most one dtype's kernels. When every dtype is done the cache is marked warm
    (:func:`attnviz.engine.jitcache.mark_warm`): later starts go to the engine at once. A failed warm-up only
    means kernels compile on first use: the job's message is not shown."""

    DTYPES = ("float64", "float32")  # the lab's sessions run float64 first: its flash takes over first

    def __init__(self, parent=None):
        from attnviz.ui.latest_job import LatestJob

        self._stop = threading.Event()
        self.job = LatestJob("attnviz-warmup", parent, expected=())
        self._signals = _WarmupSignals(self.job)
        self.compiled = self._signals.compiled  # (dtype) on the GUI thread: that dtype's kernels are ready
        self._started = False

    def start(self) -> None:
        if not self._started and not self._stop.is_set():
            self._started = True
            self.job.submit(self._work)

    def start_first_view(self) -> None:
        """On a first start, while the numpy path computes the first result: compile the naive kernel that
        gives the engine's first result (the full warm-up follows that result, :meth:`start`)."""
        if not self._started and not self._stop.is_set():
            self.job.submit(self._first_view)

    @staticmethod
    def _first_view() -> None:
        from attnviz.engine import jitcache
        from attnviz.engine.warmup import warmup_first_view

        if not jitcache.is_warm():  # asked here, off the GUI thread: the engine's import loads numba
            warmup_first_view()

    def _work(self) -> None:
        from attnviz.cancel import Cancelled
        from attnviz.engine import jitcache
        from attnviz.engine.warmup import warmup

        for dtype in self.DTYPES:
            if self._stop.is_set():
                raise Cancelled
            warmup(dtypes=(dtype,))
            self._signals.compiled.emit(dtype)  # queued to the GUI thread
        jitcache.mark_warm()

    def wait(self, timeout: float = 30.0) -> bool:
        """Block until the warm-up has ended (or never ran); False when it is still compiling after ``timeout``."""
        return self.job.wait_idle(timeout)

    def stop(self, timeout: float = WARMUP_EXIT_WAIT_S) -> bool:
        """Stop after the current dtype and wait for it; True when the warm-up has ended (or never ran)."""
        self._stop.set()
        self.job.shutdown(timeout)
        return not self.job.working


class _ExceptionReporter:
    """sys.excepthook / threading.excepthook that show bugs in the window instead of a console traceback."""

    def __init__(self, window):
        self.window = window
        self._old = sys.excepthook
        self._old_thread = threading.excepthook
        self.count = 0

    def install(self) -> None:
        sys.excepthook = self
        threading.excepthook = self._thread_hook

    def uninstall(self) -> None:
        sys.excepthook = self._old
        threading.excepthook = self._old_thread

    def __call__(self, exc_type, exc, tb) -> None:
        if issubclass(exc_type, KeyboardInterrupt):
            QApplication.instance().quit()
            return
        self.count += 1
        try:
            self.window.show_exception(exc_type, exc, tb)
        except Exception:  # noqa: BLE001 - the window itself is broken: fall back to one line
            sys.stderr.write(f"attnviz: unexpected error: {exc_type.__name__}: {exc}\n")

    def _thread_hook(self, args) -> None:
        # a worker thread's bug: report it on the GUI thread
        QTimer.singleShot(0, lambda: self(args.exc_type, args.exc_value, args.exc_traceback))


def _set_icon(app: QApplication) -> None:
    """The window icon from the bundled SVG (the same drawing the desktop entry installs)."""
    from PySide6.QtGui import QIcon

    from attnviz.resources_path import resource_path

    try:
        path = resource_path("icons", "attnviz.svg")
    except FileNotFoundError:  # a copy of the package without its resources: no icon, still runs
        return
    if path.is_file():
        app.setWindowIcon(QIcon(str(path)))


def _start_rendering(app, window, renderer, on_shown) -> None:
    """--screenshot: run the embedding's preparation, then wait for the final picture; a failing
    preparation ends the run with status 1 and its traceback (no picture of a half-prepared window)."""
    try:
        target = on_shown(app, window) if on_shown is not None else None
    except Exception:  # noqa: BLE001 - whatever the caller's code raised
        import traceback

        traceback.print_exc(file=sys.stderr)
        app.exit(1)
        return
    renderer.start(target)


def _check_window_options(args) -> str | None:
    """The message of the first bad --workspace / --size / --screenshot / --model value, else None (values
    set)."""
    from attnviz.ui.render import check_workspace

    if args.workspace is not None:
        try:
            check_workspace(args.workspace)
        except ValueError as exc:
            return str(exc)
    return check_options(args)


def _early_problem(given: list[str]) -> int | None:
    """The options checked before Qt starts, so that a bad one is said on stderr without a display too
    (creating the QApplication aborts there); the exit status of a problem, else None. Skipped when a
    single-dash word may be one of Qt's own options (-platform, -style ...), which only Qt takes out."""
    if any(a.startswith("-") and not a.startswith("--") and a != "-" for a in given):
        return None
    try:
        args = build_parser().parse_args(given)
    except SystemExit as exc:  # argparse printed why
        return int(exc.code or 0)
    problem = _check_window_options(args) or _no_display()
    if problem is not None:
        sys.stderr.write(f"attnviz: {problem}\n")
        return 1
    return None


def _no_display() -> str | None:
    """Why no window can open (:func:`~attnviz.app_start.no_display`), unless a QApplication already runs."""
    return None if QApplication.instance() else no_display()


def main(argv: list[str] | None = None, on_shown=None) -> int:
    """Run the application; returns its exit code. ``on_shown(app, window)`` is called once the window
    is shown, the file opened and the workspace chosen; with --screenshot the picture is taken once
    everything it started has finished, of the window or of the widget it returned (a dialog, given
    the window's size); tools/make_screenshots.py makes the docs' pictures this way."""
    clock = StartupClock()
    clock.mark("main")
    given = sys.argv[1:] if argv is None else list(argv)
    if "--self-test" in given:
        return run_self_test()  # no window, so no Qt platform needed (works over ssh)
    if "-h" in given or "--help" in given:
        build_parser().print_help()  # before Qt: the help needs no display
        return 0
    early = _early_problem(given)
    if early is not None:
        return early
    app = QApplication.instance()
    if app is None:
        app = QApplication([sys.argv[0]] + list(argv) if argv is not None else sys.argv)
        args_list = app.arguments()[1:]  # Qt has taken its own options (-platform ...) out of these
    else:
        args_list = list(argv) if argv is not None else app.arguments()[1:]
    app.setApplicationName("attnviz")
    app.setOrganizationName("attnviz")
    app.setApplicationDisplayName("attnviz")
    app.setDesktopFileName("io.github.attnviz.attnviz")  # matches packaging/linux's desktop entry
    _set_icon(app)
    try:
        args = build_parser().parse_args(args_list)
    except SystemExit as exc:  # --help or a bad option: argparse printed why
        return int(exc.code or 0)
    problem = _check_window_options(args)
    if problem is not None:
        sys.stderr.write(f"attnviz: {problem}\n")
        return 1

    from attnviz.model.demos import build_demo
    from attnviz.model.session import Session
    from attnviz.persist import AutosaveStore, SessionError
    from attnviz.ui.context import AppContext
    from attnviz.ui.main_window import MainWindow
    from attnviz.ui.settings import AppSettings
    from attnviz.ui.theme import apply_theme

    clock.mark("imported")
    checking = args.smoke_test or args.startup_report  # open, compute once, exit; touch no autosave
    rendering = args.screenshot is not None  # the default layout; no saved layout, settings or autosave
    settings = AppSettings()
    apply_theme(app, args.theme or settings.theme())
    ctx = AppContext(Session(build_demo(args.demo)))
    autosave = None
    if not checking and not rendering:
        autosave = AutosaveStore()
        try:
            autosave.mark_running()
        except SessionError as exc:
            autosave = None
            ctx.report(Level.WARNING, f"autosave is off: {exc}")
    window = MainWindow(ctx, settings=settings, autosave=autosave,
                        autosave_interval_ms=int(max(0.05, args.autosave_interval) * 1000),
                        restore=not rendering, hint=not rendering)
    clock.mark("window")
    window.files.demo = args.demo  # the name Save as… offers until the session has a file
    reporter = _ExceptionReporter(window)
    reporter.install()
    if args.file:
        errors: list[str] = []
        keep = lambda level, text: errors.append(text) if level == Level.ERROR else None  # noqa: E731
        ctx.message.connect(keep)
        opened = open_file_argument(window, args.file)
        ctx.message.disconnect(keep)
        if not opened and (checking or rendering):
            # a picture or a check of a file that did not open would be of the demo: say why and fail
            why = errors[-1] if errors else f"cannot open {args.file}"
            sys.stderr.write(f"attnviz: {why.split('; showing the')[0]}; nothing written\n")
            window.stop_workers()
            return 1
    # until the kernels are compiled (a first start), results come from the numpy path at once; the
    # smoke test checks the engine itself
    ctx.engine_mode = "always" if args.smoke_test or rendering else "when-compiled"
    warmup = None if args.smoke_test or rendering else KernelWarmup()
    _schedule_first_work(window, ctx, clock, warmup)
    window.first_painted.connect(collector.enable)  # the window's objects out of the collector's full passes
    if args.size is not None:
        window.resize(*args.size)
        window.reset_layout()  # the default layout at this size
    if args.workspace is not None:
        try:
            window.show_workspace(args.workspace)
        except ValueError as exc:  # NAME/TAB with a tab the workspace does not have
            sys.stderr.write(f"attnviz: --workspace {args.workspace}: {exc}\n")
            window.stop_workers()
            return 1
    if args.model is not None:
        from attnviz.ui.model_view.cli_options import apply

        apply(window, args)
    window.show()
    result = {"code": 0}

    if checking:
        _check_first_result(app, window, ctx, clock, report=args.startup_report)
    elif rendering:
        from attnviz.ui.render import Renderer

        window.release_panels()  # the shown workspace's panels at once: the picture waits for them anyway
        renderer = Renderer(app, window, args.screenshot, args.size or (window.width(), window.height()))
        QTimer.singleShot(0, lambda: _start_rendering(app, window, renderer, on_shown))
    else:
        QTimer.singleShot(0, window.files.offer_recovery)
    if on_shown is not None and not rendering:
        QTimer.singleShot(0, lambda: on_shown(app, window))

    # Python's cyclic garbage collection only on the GUI thread, on a timer: run on a worker thread (a
    # computation allocating), it can destroy a Qt object the GUI thread made, which deadlocks or crashes
    from pyqtgraph.util.garbage_collector import GarbageCollector  # the window has loaded pyqtgraph

    gc_was_enabled = gc.isenabled()
    gc_timer = GarbageCollector(interval=0.5)
    # Ctrl+C in the terminal closes the window like Quit (Python only sees signals between events)
    previous_sigint = signal.signal(signal.SIGINT, lambda *_: window.close())
    heartbeat = QTimer()
    heartbeat.timeout.connect(lambda: None)
    heartbeat.start(250)
    try:
        result["code"] = app.exec()
    finally:
        heartbeat.stop()
        signal.signal(signal.SIGINT, previous_sigint)
        if window.isVisible():  # quit without closing the window (app.exit)
            if not checking and not rendering:
                window.save_layout()
                window.files.shutdown()
            window.stop_workers()
        reporter.uninstall()
        # delete the window while the QApplication still exists: left to interpreter shutdown, Qt
        # objects may be destroyed after the application and crash the process on exit
        window.hide()
        window.deleteLater()
        QCoreApplication.sendPostedEvents(None, QEvent.Type.DeferredDelete.value)
        app.processEvents()
        if warmup is not None:
            warmup.stop()
        gc_timer.timer.stop()
        if gc_was_enabled:
            gc.enable()
    return int(result["code"])


if __name__ == "__main__":
    raise SystemExit(main())
