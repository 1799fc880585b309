"""Entry script of the frozen attnviz application (PyInstaller runs this file as ``__main__``).

It hands over to the desktop application's ``main``; everything else, including where numba keeps its
compiled kernels (the user cache directory, see ``attnviz.engine.jitcache``), is the package's job.

After ``main`` returns, the window's pending ``deleteLater`` is carried out while Python is still fully
alive: left to interpreter shutdown, PySide6 destroys the remaining Qt objects at exit, the pyqtgraph
items among them call back into Python during that destruction, and the process can crash (seen as a
segmentation fault after a successful ``--smoke-test``).

The packaging tests look inside the bundle with a probe: when ``ATTNVIZ_BUNDLE_PROBE`` names a Python
file, that file runs in the bundle's interpreter instead of the application (no window), and its exit
status is the process's (1 with a traceback when it raises).
"""

import os
import sys


def _delete_pending_objects() -> None:
    from PySide6.QtCore import QCoreApplication, QEvent

    if QCoreApplication.instance() is not None:
        QCoreApplication.sendPostedEvents(None, QEvent.Type.DeferredDelete)


def _run_probe(path: str) -> int:
    import runpy
    import traceback

    try:
        runpy.run_path(path, run_name="__main__")
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:  # noqa: BLE001 - report the probe's failure and stop
        traceback.print_exc()
        return 1
    return 0


if __name__ == "__main__":
    probe = os.environ.get("ATTNVIZ_BUNDLE_PROBE")
    if probe:
        sys.exit(_run_probe(probe))
    from attnviz.ui.app import main

    code = main()
    _delete_pending_objects()
    sys.exit(code)
