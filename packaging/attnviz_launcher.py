"""Entry script of the frozen attnviz application (PyInstaller runs this file as ``__main__``).

It only hands over to the desktop application's ``main``; everything else, including where numba keeps
its compiled kernels (the user cache directory, see ``attnviz.engine.jitcache``), is the package's job.
"""

import sys

from attnviz.ui.app import main

if __name__ == "__main__":
    sys.exit(main())
