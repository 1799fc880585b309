"""What the frozen attnviz bundle leaves out: Python packages, Qt modules and Qt files it never uses.

The PyInstaller spec (``attnviz.spec``) applies these lists; ``tests/packaging`` checks them against the
code (nothing the application imports is excluded, no kept Qt plugin needs a dropped Qt library).
``ATTNVIZ_PACKAGE_KEEP_ALL=1 packaging/build.sh --no-test`` builds without any of this, to measure what
it saves: on PySide6-Essentials 6.11 / PyInstaller 6.22 / scipy 1.17 the bundle takes 514M in 638 files
without, 402M in 392 files with it (``du -sh dist/attnviz``; ``find dist/attnviz -type f | wc -l``).
The lists alone gave 464M in 432 files; the rest went to the three stripped libraries 35.8 MiB, the
GTK3 theme and the 22 libraries only it links 8.2 MiB, scipy.sparse and scipy.fft 8.0 MiB, the AVIF codec 4.8 MiB, the Kerberos libraries
QtNetwork left behind 1.4 MiB, numba's TBB pool 1.0 MiB. Most of what remains is needed: llvmlite's
LLVM (152 MiB stripped), Qt with ICU (95 MB), the BLAS/LAPACK of numpy and scipy (58 MB).

Besides these lists: the shared libraries only dropped files need are dropped with them
(:func:`orphaned`), and the few large libraries in :data:`STRIPPED_FILES` lose their symbol tables
and debug information.
"""

from __future__ import annotations

import posixpath
from fnmatch import fnmatch

# Python packages present in the build environment that the application never imports; some are
# reached through optional imports of its dependencies (pyqtgraph, numba, scipy, Pillow).
EXCLUDED_PACKAGES = (
    "tkinter", "_tkinter", "IPython", "matplotlib", "pandas", "torch", "tensorflow", "jax",
    "sympy", "networkx", "sklearn", "joblib", "pytest", "_pytest", "hypothesis", "pytestqt",
    "PyInstaller", "httpx", "anyio", "pydantic", "rich", "typer", "click",
    "cupy", "numba.cuda", "numba.tests", "llvmlite.tests", "scipy.tests",
    "numpy.tests", "pyqtgraph.examples", "pyqtgraph.opengl", "pyqtgraph.flowchart", "OpenGL",
    "PIL.ImageQt", "PIL.ImageTk", "PIL._imagingtk", "pygments", "setuptools", "distutils", "pkg_resources",
    # scipy is here for the BLAS numba calls (scipy.linalg) and erf (scipy.special) only; the rest is
    # reached through pyqtgraph features the application does not use
    "scipy.optimize", "scipy.stats", "scipy.spatial", "scipy.signal", "scipy.ndimage",
    "scipy.interpolate", "scipy.integrate", "scipy.io", "scipy.cluster", "scipy.odr",
    "scipy.datasets", "scipy.misc", "scipy.fftpack", "scipy.differentiate",
    # never loaded: neither scipy.linalg nor scipy.special imports them, and no demo's smoke test does
    # (tests/packaging/test_frozen_app.py runs every demo in the bundle)
    "scipy.sparse", "scipy.fft",
    # Pillow's text drawing (FreeType, with harfbuzz): only attnviz.show's inline notebook picture labels its
    # grid with ImageDraw.text, which the desktop app never draws (it opens maps files through attnviz.api's
    # checks, not its picture)
    "PIL.ImageFont", "PIL._imagingft",
)

# Packages a dependency imports when present but works without (the import is guarded), with why
# leaving them out is safe.
EXCLUDED_OPTIONAL_IMPORTS = {
    "yaml": "numba.core.config reads an optional .numba_config.yaml; without PyYAML it skips the file",
    "numba.np.ufunc.tbbpool": "numba tries its threading layers tbb, omp, workqueue in turn and skips one "
                              "that fails to import; TBB (libtbb.so.12) is no dependency, the bundle runs omp",
    "PIL.AvifImagePlugin": "Pillow's Image.init imports every format plugin and skips one that fails; attnviz "
                           "reads PNG, JPEG, BMP, GIF, WebP and TIFF only (ui.file_actions.IMAGE_SUFFIXES)",
    "PIL._avif": "the AVIF codec of the plugin above, with libavif (4.9 MB)",
    # present in the build environment when an extra brings them (the corpus extra's dask does)
    "psutil": "only the test helpers of numba, numpy and scipy import it, guarded",
    "toolz": "psygnal imports it for type checking only, and looks it up in sys.modules at run time",
}

# Packages the desktop bundle ships without, even when the build environment has them, although attnviz's
# code imports them where it uses them: the optional extras (pyproject's optional-dependencies) and the
# Hugging Face client. They serve the command-line tools, which the bundle does not hold, and would more
# than double its size (pyarrow alone is 170 MB installed). Code that uses them imports them when needed
# and says what is missing, or does without (tests/packaging: importing the application loads none of them).
EXCLUDED_EXTRAS = {
    "dask": "the corpus extra: `attnviz-cli corpus` runs its documents on a dask cluster",
    "distributed": "the corpus extra (dask's scheduler and workers)",
    "pyarrow": "the corpus extra: Parquet corpora and STATS.parquet files, written by `attnviz-cli corpus`",
    "huggingface_hub": "`attnviz-cli model fetch` downloads through it; the window lists the hub cache from its "
                       "snapshot folders without it (checkpoints.hub_cache.cached_models), and it would bring "
                       "its HTTP stack (httpx, anyio)",
}


# Qt Python modules the application never imports. pyqtgraph imports QtOpenGL, QtOpenGLWidgets and
# QtTest at import time and the SVG export needs QtSvg: those stay, with QtCore, QtGui and QtWidgets.
EXCLUDED_QT_MODULES = tuple(
    "PySide6." + name
    for name in (
        "QtQml", "QtQmlFeatures", "QtQuick", "QtQuickControls2", "QtQuickTest", "QtQuickWidgets",
        "QtLabsStyleKit", "QtDesigner", "QtHelp", "QtUiTools", "QtSql", "QtXml",
        "QtConcurrent", "QtNetwork", "QtDBus", "QtPrintSupport", "QtPdf", "QtPdfWidgets",
        "QtWebEngineCore", "QtWebEngineWidgets", "QtWebEngineQuick", "QtWebChannel", "QtWebSockets",
        "QtMultimedia", "QtMultimediaWidgets", "QtCharts", "QtDataVisualization", "QtGraphs",
        "QtGraphsWidgets", "Qt3DCore", "Qt3DRender", "Qt3DInput", "Qt3DLogic", "Qt3DExtras",
        "Qt3DAnimation", "QtQuick3D", "QtBluetooth", "QtPositioning", "QtLocation", "QtSensors",
        "QtSerialPort", "QtSerialBus", "QtNfc", "QtRemoteObjects", "QtScxml", "QtStateMachine",
        "QtTextToSpeech", "QtSpatialAudio", "QtHttpServer", "QtNetworkAuth",
    )
)

# PyInstaller's build warnings (``packaging/build.sh`` keeps them in build/pyinstaller/build.log), each
# matched by a regular expression and answered; tests/packaging fails on a warning not answered here,
# and on an answer no warning needs any more. (The warning that libtbb.so.12, which numba's tbbpool
# links, is missing went away with tbbpool: see EXCLUDED_OPTIONAL_IMPORTS.)
ANSWERED_WARNINGS = {
    r"Hidden import \"scipy\.special\._cdflib\" not found":
        "PyInstaller's scipy.special hook adds _cdflib for scipy >= 1.13; later scipy moved cdflib into its "
        "C++ special functions, and scipy 1.17 has no such module for _ufuncs to import",
    r"Library not found: could not resolve 'lib(gtk|gdk)-3\.so\.0', dependency of .*platformthemes/libqgtk3\.so":
        "the GTK3 platform theme, which PySide6's hook collects and the spec then drops (EXCLUDED_FILES) "
        "with the libraries only it links",
    r"Failed to collect submodules for 'pyqtgraph\.opengl' .*No module named 'OpenGL'":
        "pyqtgraph's hook walks pyqtgraph.opengl, which needs PyOpenGL; attnviz draws no 3-D view and "
        "the bundle excludes pyqtgraph.opengl",
    r"Hidden import \"pyqtgraph\.flowchart\.FlowchartCtrlTemplate_generic\" not found":
        "a template of pyqtgraph's flowchart, which the bundle excludes (attnviz has no flowcharts)",
    r"Library (ole32|shell32) required via ctypes not found":
        "Windows system DLLs that Windows-only code loads with ctypes (platformdirs.windows, pyqtgraph's "
        "app-id call); never reached on Linux",
    r"Hidden import \"pycparser\.(lextab|yacctab)\" not found":
        "cffi (soundfile's binding) imports pycparser's PLY tables inside try/except so freezers collect "
        "them; pycparser 3 generates no such tables, and cffi parses without them",
}

# Collected files dropped from the bundle, matched (fnmatch) against their path inside it.
EXCLUDED_FILES = (
    "PySide6/Qt/translations/*",  # the interface is English only
    "PySide6/Qt/qml/*",
    "PySide6/Qt/plugins/qmltooling/*",
    "PySide6/Qt/plugins/qmllint/*",
    "PySide6/Qt/plugins/designer/*",
    "PySide6/Qt/plugins/vectorimageformats/*",  # Lottie animations for QtQuick
    "PySide6/Qt/plugins/sqldrivers/*",
    "PySide6/Qt/plugins/printsupport/*",
    "PySide6/Qt/plugins/tls/*",
    "PySide6/Qt/plugins/networkinformation/*",
    "PySide6/Qt/plugins/egldeviceintegrations/*",  # only for the eglfs platform, dropped below
    # GTK's file dialogs and theme: GTK itself is not bundled, so on a GTK desktop this plugin would mix
    # the system's GTK with the older cairo, pango, gdk-pixbuf ... it brings; without it Qt uses its own
    # dialogs, or the desktop's through the xdg-desktop-portal plugin
    "PySide6/Qt/plugins/platformthemes/libqgtk3.so",
    "PySide6/Qt/plugins/platforms/libqeglfs.so",  # full-screen embedded platforms
    "PySide6/Qt/plugins/platforms/libqlinuxfb.so",
    "PySide6/Qt/plugins/platforms/libqminimalegl.so",
    "PySide6/Qt/plugins/platforms/libqvnc.so",
    "PySide6/Qt/plugins/platforms/libqvkkhrdisplay.so",
    "PySide6/Qt/plugins/wayland-graphics-integration-server/*",  # for compositors, built on QtQuick
    "PySide6/Qt/plugins/platforminputcontexts/libqtvirtualkeyboardplugin.so",  # a QtQuick keyboard
    "PySide6/Qt/plugins/generic/libqtuiotouchplugin.so",  # TUIO touch events over the network
    "PySide6/Qt/plugins/imageformats/libqpdf.so",  # images are read with Pillow; Qt only draws icons
    "PySide6/Qt/plugins/imageformats/libqtiff.so",
    "PySide6/Qt/plugins/imageformats/libqwebp.so",
    "PySide6/Qt/plugins/imageformats/libqicns.so",
    "PySide6/Qt/plugins/imageformats/libqtga.so",
    "PySide6/Qt/plugins/imageformats/libqwbmp.so",
    "PySide6/Qt/lib/libQt6Pdf.so*",
    "PySide6/Qt/lib/libQt6Qml*.so*",
    "PySide6/Qt/lib/libQt6Quick*.so*",
    "PySide6/Qt/lib/libQt6Network.so*",
    "PySide6/Qt/lib/libQt6VirtualKeyboard*.so*",
    "PySide6/Qt/lib/libQt6EglFS*.so*",  # eglfs platform support (the plugin is dropped above)
    "PySide6/Qt/lib/libQt6EglFs*.so*",
    "PySide6/Qt/lib/libQt6WaylandCompositor*.so*",
    "PySide6/Qt/lib/libQt6WaylandEglCompositor*.so*",
)


# Shared libraries whose symbol table and debug information are stripped (``strip --strip-unneeded``;
# the dynamic symbols that loading and ctypes use stay), matched like EXCLUDED_FILES. Sizes before ->
# after, Python 3.11 / llvmlite 0.50 / tokenizers 0.23. Only these: stripping every library breaks
# numpy and scipy, whose OpenBLAS then fails to load ("ELF load command address/offset not
# page-aligned": binutils rewrites its program headers), and the rest would save little.
STRIPPED_FILES = (
    "libpython3*.so*",  # 22.0 -> 5.5 MiB
    "llvmlite/binding/libllvmlite.so",  # 170.5 -> 152.4 MiB
    "tokenizers/tokenizers*.so",  # 10.8 -> 7.6 MiB
)


def _path(dest: str) -> str:
    return dest.replace("\\", "/")


def is_excluded_file(bundle_path: str) -> bool:
    """Whether a file at ``bundle_path`` (relative to the bundle's top folder, '/'-separated) is dropped."""
    return any(fnmatch(bundle_path, pattern) for pattern in EXCLUDED_FILES)


def is_stripped_file(bundle_path: str) -> bool:
    """Whether the bundle strips the file at ``bundle_path`` (see STRIPPED_FILES)."""
    return any(fnmatch(bundle_path, pattern) for pattern in STRIPPED_FILES)


def symlink_target(dest: str, src: str) -> str:
    """Where a SYMLINK entry points, relative to the bundle's top folder (``src`` is relative to the link)."""
    return posixpath.normpath(posixpath.join(posixpath.dirname(_path(dest)), _path(src)))


def kept(entries):
    """The PyInstaller TOC entries ``(dest, src, typecode)`` whose destination is not dropped; a symbolic
    link goes with the file it points at."""
    out = []
    for dest, src, typecode in entries:
        if is_excluded_file(_path(dest)):
            continue
        if typecode == "SYMLINK" and is_excluded_file(symlink_target(dest, src)):
            continue
        out.append((dest, src, typecode))
    return out


def orphaned(entries, dropped, needed) -> set[str]:
    """Destinations of the shared libraries in ``entries`` that only dropped files need.

    ``entries`` are the TOC entries the bundle keeps, ``dropped`` the ones it leaves out, and
    ``needed(src)`` the sonames a file links (its ELF ``DT_NEEDED``). A library counts as orphaned when a
    dropped file needs it, directly or through other orphans, and no other kept file does: the GTK
    libraries behind the GTK platform theme, the Kerberos libraries behind QtNetwork, libavif behind
    Pillow's AVIF codec. A library nothing links (loaded with dlopen or ctypes) is never orphaned.
    """
    files = [(_path(d), s) for d, s, t in entries if t in ("BINARY", "EXTENSION")]
    by_name: dict[str, list[str]] = {}
    for dest, _ in files:
        by_name.setdefault(posixpath.basename(dest), []).append(dest)
    links = {dest: {d for name in needed(src) for d in by_name.get(name, ())} for dest, src in files}

    candidates: set[str] = set()
    todo = [d for _, s, t in dropped if t in ("BINARY", "EXTENSION") for name in needed(s)
            for d in by_name.get(name, ())]
    while todo:  # everything the dropped files reach
        dest = todo.pop()
        if dest not in candidates:
            candidates.add(dest)
            todo.extend(links.get(dest, ()))
    changed = True
    while changed:  # keep what a file outside the candidates needs (a kept library keeps its own needs)
        changed = False
        for dest, _ in files:
            rescued = set() if dest in candidates else links[dest] & candidates
            if rescued:
                candidates -= rescued
                changed = True
    return candidates
