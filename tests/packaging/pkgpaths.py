"""Paths and names the packaging tests share: the repository's packaging folder, the application id,
the session mime type, the icon sizes, and loaders for the scripts in ``packaging/`` (that folder is not
a Python package, and its name belongs to a PyPI distribution)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGING = ROOT / "packaging"
LINUX = PACKAGING / "linux"
BUNDLE = ROOT / "dist" / "attnviz"
EXECUTABLE = BUNDLE / "attnviz"
APP_ID = "io.github.attnviz.attnviz"
MIME_TYPE = "application/x-attnviz-session"
ICON_SIZES = (16, 32, 48, 64, 128, 256)


def load_script(name: str):
    """``packaging/<name>.py`` as a module."""
    spec = importlib.util.spec_from_file_location(f"attnviz_packaging_{name}", PACKAGING / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
