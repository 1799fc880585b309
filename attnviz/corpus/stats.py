"""Per-head attention statistics of a corpus, as exact float64 sums that combine in any order.

Partitions computed anywhere add up (``a + b``) to the same totals up to float rounding, and
:meth:`HeadSums.means` divides once at the end, so every query row of every document weighs the
same (row-weighted, not a mean of per-document means).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attnviz.engine.softmax import row_entropy

# For query row i of weights w (rows queries): entropy -sum_j w_ij ln w_ij in nats (0 ln 0 = 0);
# to_first w_i0; to_self w_ii; to_prev w_i,i-1 (rows i >= 1 only); distance sum_j w_ij |i - j| in tokens.
STATISTICS = ("entropy", "to_first", "to_self", "to_prev", "distance")
# statistic -> (label in menus and titles, short label on colour bars)
LABELS = {
    "entropy": ("entropy (nats)", "entropy"),
    "to_first": ("attention to the first token", "to first"),
    "to_self": ("attention to self", "to self"),
    "to_prev": ("attention to the previous token", "to previous"),
    "distance": ("mean distance to the keys (tokens)", "distance"),
}


@dataclass(frozen=True, eq=False)
class HeadSums:
    """Sums over query rows, per (layer, head); add two to combine their documents."""

    sums: np.ndarray  # (L, nh, 5) float64, columns in STATISTICS order
    rows: int  # query rows summed (every row of every document)
    prev_rows: int  # rows with a previous token (i >= 1): the denominator of to_prev
    documents: int  # documents summed

    @classmethod
    def zeros(cls, n_layer: int, n_head: int) -> "HeadSums":
        return cls(np.zeros((n_layer, n_head, len(STATISTICS))), 0, 0, 0)

    @property
    def shape(self) -> tuple[int, int]:
        """(layers, heads)."""
        return self.sums.shape[0], self.sums.shape[1]

    def __add__(self, other: "HeadSums") -> "HeadSums":
        if self.shape != other.shape:
            raise ValueError(f"cannot add statistics of a {self.shape[0]} x {self.shape[1]} model "
                             f"and a {other.shape[0]} x {other.shape[1]} model")
        return HeadSums(self.sums + other.sums, self.rows + other.rows, self.prev_rows + other.prev_rows,
                        self.documents + other.documents)

    def means(self) -> dict[str, np.ndarray]:
        """Statistic name -> (L, nh) float64 mean over rows (NaN when no row was summed)."""
        out = {}
        for k, name in enumerate(STATISTICS):
            n = self.prev_rows if name == "to_prev" else self.rows
            out[name] = self.sums[..., k] / n if n else np.full(self.shape, np.nan)  # (L, nh)
        return out


def document_sums(attentions) -> HeadSums:
    """Row sums of one document's attentions (L, nh, T, T) (rows queries, columns keys)."""
    att = np.asarray(attentions)  # (L, nh, T, T), any float dtype
    if att.ndim != 4 or att.shape[2] != att.shape[3] or 0 in att.shape:
        raise ValueError(f"attentions must be (layers, heads, T, T) with T > 0 (got shape {att.shape})")
    L, nh, T, _ = att.shape
    pos = np.arange(T)  # (T,)
    dist = np.abs(pos[:, None] - pos[None, :]).astype(np.float64)  # (T, T) |i - j|
    sums = np.empty((L, nh, len(STATISTICS)))  # (L, nh, 5)
    for layer in range(L):  # one layer in float64 at a time
        a = att[layer].astype(np.float64)  # (nh, T, T)
        sums[layer, :, 0] = row_entropy(a).sum(axis=-1)  # (nh,)
        sums[layer, :, 1] = a[:, :, 0].sum(axis=-1)  # (nh,) Σ_i w_i0
        sums[layer, :, 2] = np.diagonal(a, axis1=-2, axis2=-1).sum(axis=-1)  # (nh,) Σ_i w_ii
        sums[layer, :, 3] = np.diagonal(a, offset=-1, axis1=-2, axis2=-1).sum(axis=-1)  # (nh,) Σ_{i>=1} w_i,i-1
        sums[layer, :, 4] = (a * dist).sum(axis=(-2, -1))  # (nh,) Σ_i Σ_j w_ij |i - j|
    return HeadSums(sums, rows=T, prev_rows=T - 1, documents=1)
