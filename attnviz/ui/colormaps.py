"""Named colormaps of the application as pyqtgraph ColorMaps and as 256-entry RGBA lookup tables
(the form every image item is drawn with)."""

from __future__ import annotations

from functools import lru_cache

import numpy as np
import pyqtgraph as pg

NAMES = ("viridis", "magma", "cividis", "plasma", "inferno", "gray")
DEFAULT = "viridis"


def check_name(name: str) -> str:
    """Return ``name`` if it is a known colormap, else raise ValueError listing the choices."""
    if name not in NAMES:
        raise ValueError(f"unknown colormap {name!r}; choose one of {', '.join(NAMES)}")
    return name


@lru_cache(maxsize=None)
def colormap(name: str) -> pg.ColorMap:
    """The pyqtgraph ColorMap called ``name`` (one of NAMES)."""
    check_name(name)
    if name == "gray":
        return pg.ColorMap(pos=[0.0, 1.0], color=[(0, 0, 0), (255, 255, 255)], name="gray")
    return pg.colormap.get(name)


@lru_cache(maxsize=None)
def _lut(name: str) -> np.ndarray:
    table = colormap(name).getLookupTable(0.0, 1.0, 256, alpha=True)  # (256, 4)
    table = np.ascontiguousarray(table, dtype=np.uint8)
    table.setflags(write=False)
    return table


def lut(name: str) -> np.ndarray:
    """Read-only (256, 4) uint8 RGBA lookup table of colormap ``name``."""
    return _lut(check_name(name))


def apply_lut(values: np.ndarray, levels: tuple[float, float], table: np.ndarray) -> np.ndarray:
    """RGBA uint8 (..., 4) colours of float ``values`` mapped linearly from ``levels`` onto
    ``table``; values outside the levels are clipped, NaN maps to the lowest entry."""
    lo, hi = float(levels[0]), float(levels[1])
    if not hi > lo:
        raise ValueError(f"levels must satisfy low < high, got {levels}")
    scaled = (np.nan_to_num(np.asarray(values, dtype=np.float64), nan=lo) - lo) / (hi - lo)
    idx = np.clip(np.round(scaled * (len(table) - 1)), 0, len(table) - 1).astype(np.intp)
    return table[idx]  # (..., 4)
