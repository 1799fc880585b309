"""Pure numpy construction of the RGBA images the matrix widgets draw besides their value image:
hatched masked-cell overlays, segment bands, and the left strip with fully-masked-row markers."""

from __future__ import annotations

from typing import Sequence

import numpy as np

from attnviz.model.display.pooling import pool_edges
from attnviz.model.segments import Segment

# largest side, in image pixels, an upsampled overlay may reach (memory bound of the hatch)
OVERLAY_BUDGET = 1536
# sub-pixels per cell at most: enough for a fine hatch or outline inside a large cell
MAX_FACTOR = 16


def hex_rgba(colour: str, alpha: int = 255) -> tuple[int, int, int, int]:
    """(r, g, b, a) of a ``#rrggbb`` colour."""
    s = colour.lstrip("#")
    if len(s) != 6:
        raise ValueError(f"colour must look like #rrggbb, got {colour!r}")
    try:
        return int(s[0:2], 16), int(s[2:4], 16), int(s[4:6], 16), int(alpha)
    except ValueError:
        raise ValueError(f"colour must look like #rrggbb, got {colour!r}") from None


def overlay_factor(shape, budget: int = OVERLAY_BUDGET, max_factor: int = MAX_FACTOR) -> int:
    """Sub-pixels per cell for an overlay of a (H, W) cell image: as many as fit the budget."""
    return int(max(1, min(max_factor, budget // max(int(shape[0]), int(shape[1]), 1))))


HATCH_CLEAR, HATCH_BASE, HATCH_STRIPE = 0, 1, 2  # codes of a hatch image


def upsample(cells: np.ndarray, factor: int) -> np.ndarray:
    """(H*f, W*f) copy of a (H, W) array with every cell repeated f x f times."""
    a = np.asarray(cells)
    f = int(factor)
    if f == 1:
        return np.array(a)
    H, W = a.shape
    return np.broadcast_to(a[:, None, :, None], (H, f, W, f)).reshape(H * f, W * f)  # (H*f, W*f)


def hatch_codes(masked: np.ndarray, factor: int) -> np.ndarray:
    """uint8 (H*f, W*f) codes: HATCH_BASE on masked cells, HATCH_STRIPE on their diagonal lines
    (when ``factor`` >= 3: one per cell, two per cell from 8 sub-pixels), HATCH_CLEAR elsewhere."""
    m = np.asarray(masked, dtype=bool)
    f = int(factor)
    codes = upsample(m.view(np.uint8), f)  # (H*f, W*f) 0/1
    if f >= 3:
        period = f if f < 8 else f // 2
        width = max(1, period // 4)
        yy, xx = np.indices((period, period), sparse=True)
        tile = (((yy + xx) % period) < width).astype(np.uint8)  # (period, period): the pattern repeats
        Hf, Wf = codes.shape
        lines = np.tile(tile, (-(-Hf // period), -(-Wf // period)))[:Hf, :Wf]  # (H*f, W*f)
        codes += codes & lines
    return codes


def code_lut(colours: Sequence[tuple[int, int, int, int]]) -> np.ndarray:
    """(256, 4) uint8 RGBA table with ``colours[c]`` at code c (transparent beyond): an image of
    small integer codes drawn through it needs no per-pixel colour work in numpy."""
    table = np.zeros((256, 4), dtype=np.uint8)  # (256, 4)
    table[: len(colours)] = np.asarray(colours, dtype=np.uint8).reshape(len(colours), 4)
    return table


def hatch_lut(base: str, stripe: str) -> np.ndarray:
    """(256, 4) table of a hatch image: clear, ``base``, ``stripe``."""
    return code_lut([(0, 0, 0, 0), hex_rgba(base), hex_rgba(stripe)])




def segment_colors(segments: Sequence[Segment], n: int, alpha: int = 255) -> np.ndarray:
    """(n, 4) uint8 colour per token: its segment's colour, transparent outside every segment."""
    out = np.zeros((n, 4), dtype=np.uint8)  # (n, 4)
    for s in segments:
        if s.stop > n:
            raise ValueError(f"segment {s.name!r} ends at {s.stop}, beyond the {n} tokens shown")
        out[s.start:s.stop] = hex_rgba(s.color, alpha)
    return out


def segment_at(segments: Sequence[Segment], index: int) -> Segment | None:
    """The segment containing token ``index`` (the first, if they overlap)."""
    for s in segments:
        if s.start <= index < s.stop:
            return s
    return None


# longest strip/band image: Qt's raster painter crashed drawing a 65536-long one (32768+ pixels)
MAX_STRIP = 4096


def _bins(n: int, max_len: int) -> np.ndarray:
    return pool_edges(n, min(n, max_len))[:-1]  # (m,) first cell of each display bin


def strip_rgba(n: int, segments: Sequence[Segment], flagged: np.ndarray | None, marker: str,
               max_len: int = MAX_STRIP) -> np.ndarray:
    """Left strip (m, 2, 4), m = min(n, max_len): column 0 the marker of flagged (fully masked)
    rows — a bin is marked if any of its rows is —, column 1 the segment band."""
    starts = _bins(n, max_len)
    out = np.zeros((len(starts), 2, 4), dtype=np.uint8)  # (m, 2, 4)
    if flagged is not None:
        f = np.asarray(flagged, dtype=bool)
        if f.shape != (n,):
            raise ValueError(f"row flags must have shape ({n},), got {f.shape}")
        out[np.logical_or.reduceat(f, starts), 0] = hex_rgba(marker)
    out[:, 1] = segment_colors(segments, n)[starts]
    return out


def band_rgba(n: int, segments: Sequence[Segment], max_len: int = MAX_STRIP) -> np.ndarray:
    """Top band (1, m, 4), m = min(n, max_len), in the segments' colours."""
    return np.ascontiguousarray(segment_colors(segments, n)[_bins(n, max_len)][None])  # (1, m, 4)
