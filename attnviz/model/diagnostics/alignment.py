"""The cross-attention alignment table of seed 001: query tokens as rows, key tokens as columns,
each cell a weight, and the key each query attends to most (je -> I, t' -> you, aime -> love).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class AlignmentRow:
    """One query token's row of the table."""

    label: str  # the query token
    weights: tuple[float, ...]  # its weight on every key token, in key order
    best: int  # key with the largest weight, -1 when the row is all zero (fully masked)
    best_label: str  # that key's token, "" when best == -1
    best_weight: float  # that largest weight, 0 for an empty row


@dataclass(frozen=True)
class AlignmentTable:
    """A (Tq, Tk) weight matrix laid out with its token labels."""

    query_labels: tuple[str, ...]  # row headers
    key_labels: tuple[str, ...]  # column headers
    weights: np.ndarray  # (Tq, Tk)
    rows: tuple[AlignmentRow, ...]  # one per query token
    argmax: np.ndarray  # (Tq,) best key per query, -1 for empty rows

    def to_text(self, decimals: int = 2) -> str:
        """The table as aligned plain text, the argmax cell of each row in [brackets]."""
        cells = [[""] + list(self.key_labels)]
        for r in self.rows:
            cells.append([r.label] + [f"[{w:.{decimals}f}]" if c == r.best else f"{w:.{decimals}f}"
                                      for c, w in enumerate(r.weights)])
        width = [max(len(row[c]) for row in cells) for c in range(len(cells[0]))]
        return "\n".join("  ".join(s.rjust(width[c]) for c, s in enumerate(row)).rstrip() for row in cells)


def alignment_table(weights, query_labels, key_labels) -> AlignmentTable:
    """Lay out weights (Tq, Tk) with query labels as rows and key labels as columns."""
    w = np.asarray(weights, dtype=np.float64)
    ql, kl = tuple(str(s) for s in query_labels), tuple(str(s) for s in key_labels)
    if w.ndim != 2 or w.shape != (len(ql), len(kl)):
        raise ValueError(f"weights must be (len(query_labels), len(key_labels)) = ({len(ql)}, {len(kl)}), "
                         f"got shape {w.shape}")
    if not np.all(np.isfinite(w)):
        raise ValueError("weights must be finite")
    empty = ~(w > 0).any(axis=1) if w.shape[1] else np.ones(w.shape[0], dtype=bool)  # (Tq,)
    best = np.where(empty, -1, np.argmax(w, axis=1) if w.shape[1] else -1)  # (Tq,)
    rows = tuple(AlignmentRow(label=ql[i], weights=tuple(float(x) for x in w[i]), best=int(best[i]),
                              best_label=kl[best[i]] if best[i] >= 0 else "",
                              best_weight=float(w[i, best[i]]) if best[i] >= 0 else 0.0)
                 for i in range(w.shape[0]))
    return AlignmentTable(query_labels=ql, key_labels=kl, weights=w, rows=rows, argmax=best)
