"""The value every attention kernel returns."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class AttentionResult:
    """Output of one attention call, in the input precision.

    out:     (nh, Tq, hv) attention output per head.
    lse:     (nh, Tq) log-sum-exp of the scaled, allowed scores per query row; -inf for a fully masked row.
    weights: (nh, Tq, Tk) softmax weights when asked for, else None; masked cells are exactly 0.
    """

    out: np.ndarray
    lse: np.ndarray
    weights: np.ndarray | None = None
