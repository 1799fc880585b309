"""What the Normalisation tab draws, made without Qt so that a long input's drawing data is ready when it
reaches the GUI thread: each rule's weight map cut to the keys a shown query may attend to (float32, as
the heatmap holds it), its colour levels and fully masked rows; the row-entropy curves with their y range;
the mean entropies of the summary line.

Everything here is plain numpy on the arrays of :func:`attnviz.model.diagnostics.normalisation.compare_modes`
(rows are queries, columns keys, ``mask`` True where the query may attend to the key).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attnviz.model.diagnostics.normalisation import MODES

BAR_LIMIT = 64  # grouped bars up to this many query rows, lines beyond


@dataclass(frozen=True)
class WeightMap:
    """One rule's weight map as the heatmap is handed it."""

    values: np.ndarray  # (rows, cols) float32 C-contiguous weights of the keys drawn
    levels: tuple[float, float]  # colour scale: 0 to the largest allowed weight


@dataclass(frozen=True)
class MapDisplay:
    """The three rules' maps over one (rows, cols) block of keys and its mask."""

    maps: dict  # {mode: WeightMap}
    mask: np.ndarray  # (rows, cols) bool C-contiguous, True = allowed
    cols: int  # keys drawn (see keys_drawn)


@dataclass(frozen=True)
class EntropyCurves:
    """The entropy chart: one series per rule over the query rows."""

    x: np.ndarray  # (rows,) float query index
    entropy: dict  # {mode: (rows,) float64 entropy in nats}
    bars: bool  # grouped bars (few rows) or lines
    y_range: tuple[float, float]  # (low, high) with headroom for the legend
    means: dict  # {mode: mean row entropy}


def weight_levels(weights: np.ndarray, mask: np.ndarray) -> tuple[float, float]:
    """Colour scale of a weight matrix: 0 to its largest allowed weight, as the main heatmap draws
    weights (a fixed 0-1 scale leaves weights of ~0.01, e.g. over 197 image patches, all dark)."""
    hi = float(np.max(weights, where=mask, initial=0.0))
    return 0.0, hi if hi > 0 else 1.0


def keys_drawn(mask: np.ndarray) -> int:
    """Keys the map shows for (rows, Tk) ``mask``: up to the last key a shown query may attend to (the
    first 512 rows of a 2,900-token causal sequence draw a 512 x 512 map, not a strip at the left of a
    512 x 2,900 one); at least one."""
    allowed = np.flatnonzero(np.asarray(mask, dtype=bool).any(axis=0))  # (n,) keys some row may attend to
    return int(allowed[-1]) + 1 if allowed.size else max(1, mask.shape[1])


def entropy_range(modes, rows: int, headroom: float = 0.35) -> tuple[float, float]:
    """y range of the entropy plot: from 0 (bars) or just below the lowest value (lines) to the
    highest value plus ``headroom`` of the span, where the legend sits."""
    vals = np.concatenate([modes[m].entropy_nats for m in MODES])
    top = float(vals.max(initial=0.0))
    bottom = 0.0 if rows <= BAR_LIMIT or not vals.size else float(vals.min())
    span = top - bottom if top > bottom else max(abs(top), 1.0)
    if rows > BAR_LIMIT:
        bottom -= 0.05 * span
    return bottom, top + headroom * span


def map_display(modes, mask: np.ndarray) -> MapDisplay:
    """Each rule's weights of (rows, Tk) ``mask``'s rows, cut to the keys drawn, as float32: the heatmap
    takes them as they are (no conversion or copy of the weights on the GUI thread)."""
    cols = keys_drawn(mask)
    maps = {m: WeightMap(np.ascontiguousarray(modes[m].weights[:, :cols], dtype=np.float32),  # (rows, cols)
                         weight_levels(modes[m].weights, mask)) for m in MODES}
    return MapDisplay(maps, np.ascontiguousarray(mask[:, :cols], dtype=bool), cols)


def entropy_curves(modes, rows: int) -> EntropyCurves:
    """The entropy chart's series of ``rows`` query rows under every rule."""
    entropy = {m: np.asarray(modes[m].entropy_nats, dtype=np.float64) for m in MODES}  # (rows,) each
    return EntropyCurves(np.arange(rows, dtype=float), entropy, rows <= BAR_LIMIT, entropy_range(modes, rows),
                         {m: float(np.mean(entropy[m])) for m in MODES})
