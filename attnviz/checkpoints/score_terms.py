"""DeBERTa's disentangled score terms of one head, as the Pretrained panel's "Score terms" tab shows them.

A DeBERTa run (:func:`attnviz.checkpoints.encoders._deberta`) keeps its three terms in
``ModelAttention.score_terms``, each already divided by sqrt(d_h (1 + position terms)): content to content,
content to position and position to content. Their sum is the score the softmax takes over the keys.
:func:`head_terms` gives the three (T, T) maps of a head and that total, :func:`deberta_legend` the formula in
one line with the model's own numbers, :func:`cell_note` one cell's terms for a readout.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

DEBERTA_TERMS = ("content-to-content", "content-to-position", "position-to-content")
SHORT = {"content-to-content": "c2c", "content-to-position": "c2p", "position-to-content": "p2c"}
TOTAL = "score (sum)"


@dataclass(frozen=True)
class TermMaps:
    """One head's terms: (name, (T, T) float64 map, whether the model has the term) x 3, then the total."""

    terms: tuple[tuple[str, np.ndarray, bool], ...]
    total: np.ndarray  # (T, T) float64: the sum of the terms, the scores the softmax takes
    weights: np.ndarray  # (T, T) the attention weights of the head

    @property
    def levels(self) -> tuple[float, float]:
        """(low, high) over the terms and the total: one colour scale for the four maps, so they compare."""
        maps = [m for _, m, _ in self.terms] + [self.total]
        lo, hi = min(float(m.min()) for m in maps), max(float(m.max()) for m in maps)
        return (lo - 0.5, hi + 0.5) if not hi > lo else (lo, hi)


def has_deberta_terms(result) -> bool:
    """True when ``result`` (a ModelAttention) carries DeBERTa's three score terms."""
    terms = getattr(result, "score_terms", None)
    return terms is not None and tuple(terms) == DEBERTA_TERMS


def _present(config) -> tuple[bool, bool, bool]:
    """Which terms the model computes: content always, the position terms as its pos_att_type says."""
    spec = getattr(config, "spec", None)
    if spec is None or not hasattr(spec, "c2p"):
        return True, True, True
    return True, bool(spec.relative and spec.c2p), bool(spec.relative and spec.p2c)


def head_terms(result, layer: int, head: int, config=None) -> TermMaps:
    """The three term maps of (``layer``, ``head``) in float64, which of them ``config`` (a DeBERTa CheckpointConfig,
    or None: all) computes, their sum and the head's weights. ValueError without DeBERTa's terms or such a head."""
    if not has_deberta_terms(result):
        raise ValueError("this run keeps no DeBERTa score terms (only DeBERTa's disentangled attention has them)")
    L, nh = result.attentions.shape[:2]
    if not (0 <= layer < L and 0 <= head < nh):
        raise ValueError(f"no head ({layer}, {head}) in a {L} x {nh} model")
    present = _present(config)
    maps = tuple((name, np.asarray(result.score_terms[name][layer, head], dtype=np.float64), p)
                 for name, p in zip(DEBERTA_TERMS, present))
    total = maps[0][1] + maps[1][1] + maps[2][1]  # (T, T)
    return TermMaps(terms=maps, total=total, weights=np.asarray(result.attentions[layer, head]))


def deberta_legend(config=None) -> str:
    """The score's formula in one line, with the model's head size and scale when ``config`` is given."""
    c2c, c2p, p2c = _present(config)
    parts = ["q\u1d62\u00b7k\u2c7c"]
    if c2p:
        parts.append("q\u1d62\u00b7k\u02b3[\u03b4(i,j)]")
    if p2c:
        parts.append("k\u2c7c\u00b7q\u02b3[\u03b4(j,i)]")
    n = 1 + int(c2p) + int(p2c)
    spec = getattr(config, "spec", None)
    hs = getattr(config, "head_size", None)
    if spec is not None and hs is not None:
        scale = f"\u221a({n}\u00b7{hs}) = {np.sqrt(np.float32(hs) * np.float32(n)):.3g}"
    else:
        scale = f"\u221a({n}\u00b7d\u2095)"
    return f"score(i,j) = ({' + '.join(parts)}) / {scale}  \u2192  softmax over keys j"


LEGEND_DETAIL = ("c2c: content to content; c2p: content to position (the query against the key's relative distance "
                 "\u03b4(i,j) = i \u2212 j, log-bucketed far away); p2c: position to content (the key against the "
                 "query's distance). k\u02b3, q\u02b3: the relative-distance embeddings through the key and query "
                 "projections. The three maps and their sum share one colour scale.")


def cell_note(maps: TermMaps, i: int, j: int, row_label: str = "", col_label: str = "") -> str:
    """One cell's terms, their sum and the weight: "query 2 'cat' → key 0 '[CLS]': c2c 0.41 + c2p -0.12 + ..."."""
    who = f"query {i}" + (f" {row_label!r}" if row_label else "") + f" \u2192 key {j}" + (
        f" {col_label!r}" if col_label else "")
    terms = " + ".join(f"{SHORT[name]} {m[i, j]:.4g}" for name, m, p in maps.terms if p)
    return f"{who}: {terms} = score {maps.total[i, j]:.4g} (weight {float(maps.weights[i, j]):.4g})"
