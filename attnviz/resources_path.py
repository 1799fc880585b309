"""Locating bundled resource files: in a checkout or editable install they live in the repository's
top-level ``resources/``; in a wheel they are the ``attnviz.resources`` package; in a frozen bundle
they sit in ``resources/`` beside the executable's modules."""

from __future__ import annotations

import sys
from functools import lru_cache
from pathlib import Path


@lru_cache(maxsize=1)
def resources_root() -> Path:
    """The directory holding the bundled resources."""
    candidates = [Path(__file__).resolve().parent / "resources",  # wheel: attnviz/resources
                  Path(__file__).resolve().parents[1] / "resources"]  # checkout / editable install
    frozen = getattr(sys, "_MEIPASS", None)
    if frozen:
        candidates.insert(0, Path(frozen) / "resources")
    for c in candidates:
        if c.is_dir():
            return c
    raise FileNotFoundError("attnviz's bundled resources folder was not found; the installation is incomplete")


def resource_path(*parts: str) -> Path:
    """Return the filesystem path of a bundled resource, e.g. ``resource_path("images", "river.png")``."""
    return resources_root().joinpath(*parts)
