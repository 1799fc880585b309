"""Entry script of the frozen attnviz application (PyInstaller runs this file as ``__main__``).

It hands over to the desktop application's ``main``; everything else, including where numba keeps its
compiled kernels (the user cache directory, see ``attnviz.engine.jitcache``), is the package's job.

After ``main`` returns, the window's pending ``deleteLater`` is carried out while Python is still fully
alive: left to interpreter shutdown, PySide6 destroys the remaining Qt objects at exit, the pyqtgraph
items among them call back into Python during that destruction, and the process can crash (seen as a
segmentation fault after a successful ``--smoke-test``).
"""

import sys


def _delete_pending_objects() -> None:
    from PySide6.QtCore import QCoreApplication, QEvent

    if QCoreApplication.instance() is not None:
        QCoreApplication.sendPostedEvents(None, QEvent.Type.DeferredDelete)


if __name__ == "__main__":
    from attnviz.ui.app import main

    code = main()
    _delete_pending_objects()
    sys.exit(code)
