"""What the frozen attnviz bundle leaves out: Python packages, Qt modules and Qt files it never uses.

The PyInstaller spec (``attnviz.spec``) applies these lists; ``tests/packaging`` checks them against the
code (nothing the application imports is excluded, no kept Qt plugin needs a dropped Qt library).
``ATTNVIZ_PACKAGE_KEEP_ALL=1 packaging/build.sh --no-test`` builds without them, to measure what they save:
on PySide6-Essentials 6.11 / PyInstaller 6.22 the bundle went from 524 MB to 464 MB (Qt 108 -> 95 MB,
scipy 43 -> 21 MB; PyYAML, pydantic, hypothesis, pygments, setuptools gone). Most of what remains is
needed: llvmlite's LLVM (171 MB), Qt with ICU (95 MB), the BLAS/LAPACK of numpy and scipy (58 MB).
"""

from __future__ import annotations

from fnmatch import fnmatch

# Python packages present in the build environment that the application never imports; some are
# reached through optional imports of its dependencies (pyqtgraph, numba, scipy, Pillow).
EXCLUDED_PACKAGES = (
    "tkinter", "_tkinter", "IPython", "matplotlib", "pandas", "torch", "tensorflow", "jax",
    "sympy", "networkx", "sklearn", "joblib", "pytest", "_pytest", "hypothesis", "pytestqt",
    "PyInstaller", "huggingface_hub", "httpx", "anyio", "pydantic", "rich", "typer", "click",
    "jinja2", "cupy", "numba.cuda", "numba.tests", "llvmlite.tests", "scipy.tests",
    "numpy.tests", "pyqtgraph.examples", "pyqtgraph.opengl", "pyqtgraph.flowchart", "OpenGL",
    "PIL.ImageQt", "pygments", "setuptools", "distutils", "pkg_resources",
    # scipy is here for the BLAS numba calls (scipy.linalg) and erf (scipy.special) only; the rest is
    # reached through pyqtgraph features the application does not use
    "scipy.optimize", "scipy.stats", "scipy.spatial", "scipy.signal", "scipy.ndimage",
    "scipy.interpolate", "scipy.integrate", "scipy.io", "scipy.cluster", "scipy.odr",
    "scipy.datasets", "scipy.misc", "scipy.fftpack", "scipy.differentiate",
)

# Packages a dependency imports when present but works without (the import is guarded), with why
# leaving them out is safe.
EXCLUDED_OPTIONAL_IMPORTS = {
    "yaml": "numba.core.config reads an optional .numba_config.yaml; without PyYAML it skips the file",
}

# Qt Python modules the application never imports. pyqtgraph imports QtOpenGL and QtOpenGLWidgets at
# import time, the SVG export needs QtSvg and the widget gallery QtTest: those stay, with QtCore, QtGui
# and QtWidgets.
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


def is_excluded_file(bundle_path: str) -> bool:
    """Whether a file at ``bundle_path`` (relative to the bundle's top folder, '/'-separated) is dropped."""
    return any(fnmatch(bundle_path, pattern) for pattern in EXCLUDED_FILES)


def kept(entries):
    """The PyInstaller TOC entries ``(dest, src, typecode)`` whose destination is not dropped."""
    return [e for e in entries if not is_excluded_file(e[0].replace("\\", "/"))]
