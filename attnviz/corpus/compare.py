"""One input's head statistics beside a corpus's: the same five numbers, checked to be the same model.

:func:`input_statistics` computes, for one forward pass, exactly what the corpus run computes per
document (:func:`~attnviz.corpus.stats.document_sums`), so the two grids compare cell for cell;
:func:`result_statistics` takes them from head summaries that already hold them (a long decoder
input, whose maps are never held whole).
:func:`mismatch` says why a STATS file cannot be set beside a model's input (another model, another
shape), and :func:`shared_levels` gives both grids one colour scale.
"""

from __future__ import annotations

import numpy as np

from attnviz.corpus.files import CorpusStats
from attnviz.corpus.stats import STATISTICS, document_sums


def input_statistics(attentions) -> dict[str, np.ndarray]:
    """Statistic -> (L, nh) mean over the query rows of one input's attentions (L, nh, T, T)."""
    return document_sums(attentions).means()


def result_statistics(result, summaries=None) -> dict[str, np.ndarray] | None:
    """The statistics of one forward pass: from head ``summaries`` that already hold all five (a decoder's,
    computed band by band without the whole maps), else from ``result.attentions``; None without either."""
    if summaries is not None and all(getattr(summaries, f, None) is not None for f in _FROM_SUMMARIES.values()):
        return {name: np.asarray(getattr(summaries, f), dtype=np.float64) for name, f in _FROM_SUMMARIES.items()}
    attentions = getattr(result, "attentions", None)
    return None if attentions is None else input_statistics(attentions)


# statistic -> field of attnviz.checkpoints.HeadSummaries with the same definition
_FROM_SUMMARIES = {"entropy": "entropy", "to_first": "to_first", "to_self": "to_self", "to_prev": "to_previous",
                   "distance": "distance"}


def mismatch(stats: CorpusStats, model: str, shape: tuple[int, int]) -> str | None:
    """Why ``stats`` is not comparable with ``model``'s (layers, heads) ``shape``; None when it is."""
    L, nh = stats.shape
    if (L, nh) != tuple(shape):
        return (f"{stats.path.name} is for {stats.model or 'a model'} with {L} layers x {nh} heads; "
                f"{model} has {shape[0]} x {shape[1]}")
    if stats.model and model and stats.model != model:
        return f"{stats.path.name} is for {stats.model}, not {model}"
    return None


def shared_levels(*grids) -> tuple[float, float]:
    """(low, high) over the finite values of all ``grids`` (a flat range is widened to be drawable)."""
    vals = [g[np.isfinite(g)] for g in grids if g is not None]
    vals = [v for v in vals if v.size]
    if not vals:
        return 0.0, 1.0
    lo = float(min(v.min() for v in vals))
    hi = float(max(v.max() for v in vals))
    if not hi > lo:
        pad = max(abs(lo) * 0.05, 0.5)
        lo, hi = lo - pad, hi + pad
    return lo, hi


__all__ = ["STATISTICS", "input_statistics", "mismatch", "result_statistics", "shared_levels"]
