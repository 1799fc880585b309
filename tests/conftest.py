"""Test-suite wide settings: Qt offscreen unless a test starts its own X server, hypothesis without
deadlines (first calls JIT-compile numba kernels)."""

from __future__ import annotations

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from hypothesis import HealthCheck, settings  # noqa: E402

settings.register_profile(
    "attnviz", deadline=None, suppress_health_check=[HealthCheck.too_slow], print_blob=True
)
settings.load_profile("attnviz")


# ---------------------------------------------------------------------------------------------
# Leaving the test process once the session is over.
#
# Widget tests leave pyqtgraph views alive until Python's final garbage collection; by then Qt's
# application object is gone and destroying a QGraphicsScene whose items are Python subclasses
# segfaults inside QGraphicsScene::clear (seen with PySide6 6.11 after the whole suite passed).
# The application itself deletes its window before QApplication ends (tested by the smoke and
# end-to-end tests, which run it in a child process and check its exit code); the test process,
# once pytest has reported everything, leaves with pytest's own exit status without running that
# final collection.
_session_status: dict[str, int] = {}


def pytest_sessionfinish(session, exitstatus):
    _session_status["status"] = int(exitstatus)


import pytest  # noqa: E402


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config):
    import sys

    if "PySide6.QtWidgets" in sys.modules and "status" in _session_status:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(_session_status["status"])
