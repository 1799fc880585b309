"""Locating bundled resource files (works from a checkout, an installed wheel and a frozen bundle)."""

from __future__ import annotations

from importlib import resources
from pathlib import Path


def resource_path(*parts: str) -> Path:
    """Return the filesystem path of a bundled resource, e.g. ``resource_path("images", "cat.png")``."""
    root = resources.files("attnviz.resources")
    target = root.joinpath(*parts)
    return Path(str(target))
