"""Score rules: how a query and a key make a score, and how scores become weights.

The dot-product family (scaled_dot, dot, uniform) is softmax(q k^T * scale) with scale 1/sqrt(hs), 1
or 0, so it runs on the engine's kernels; additive, multiplicative, linear and softcap (the scaled dot
product soft-capped at c tanh(s / c), as Gemma 2) materialise the (nh, Tq, Tk) scores on the float64
numpy path here. The formulas are in :mod:`attnviz.model.diagnostics.variants`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from attnviz.model.diagnostics.variants import RULE_FORMULAS

RULES = ("scaled_dot", "dot", "uniform", "additive", "multiplicative", "linear", "softcap")
DOT_FAMILY = ("scaled_dot", "dot", "uniform")
DEFAULT_CAP = 50.0  # the softcap rule's c, as Gemma 2's attn_logit_softcapping
MAX_CAP = 1e6  # beyond this the cap changes no score a session can make

#: the formula of each rule as one line of text (tooltips, notes); the text itself lives with the
#: other descriptions of each rule in :mod:`attnviz.model.diagnostics.variants`
FORMULAS = {name: f.unicode for name, f in RULE_FORMULAS.items()}


@dataclass(frozen=True)
class ScoreRuleConfig:
    """Which score rule a session uses, and the seed of that rule's own parameters."""

    name: str = "scaled_dot"  # one of RULES
    seed: int = 0  # seed of the additive / multiplicative parameters
    hidden: int | None = None  # additive attention's hidden width da; None: the head size
    cap: float = DEFAULT_CAP  # the softcap rule's c: scaled scores s become c tanh(s / c)

    def __post_init__(self):
        if self.name not in RULES:
            raise ValueError(f"unknown score rule {self.name!r}; choose one of {', '.join(RULES)}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, (int, np.integer)) or self.seed < 0:
            raise ValueError(f"score rule seed must be a non-negative integer, got {self.seed!r}")
        if self.hidden is not None and (isinstance(self.hidden, bool) or not isinstance(self.hidden, (int, np.integer))
                                        or not 1 <= self.hidden <= 4096):
            raise ValueError(f"additive hidden width must be an integer in 1..4096, got {self.hidden!r}")
        if (isinstance(self.cap, bool) or not isinstance(self.cap, (int, float, np.integer, np.floating))
                or not 0 < float(self.cap) <= MAX_CAP):
            raise ValueError(f"soft cap c must be a number in (0, {MAX_CAP:g}], got {self.cap!r}")
        object.__setattr__(self, "cap", float(self.cap))

    @property
    def engine(self) -> bool:
        """True when the rule runs on the engine kernels (the dot-product family)."""
        return self.name in DOT_FAMILY


def dot_scale(name: str, hs: int) -> float:
    """The softmax scale of a dot-family rule: 1/sqrt(hs), 1 or 0."""
    if name == "scaled_dot":
        return 1.0 / math.sqrt(hs)
    if name == "dot":
        return 1.0
    if name == "uniform":
        return 0.0
    raise ValueError(f"{name!r} is not a dot-product score rule")


def rule_params(config: ScoreRuleConfig, nh: int, hs: int) -> dict[str, np.ndarray]:
    """The seeded parameters of ``config``'s rule for nh heads of size hs (empty for the others).

    Drawn per head in a fixed order, scaled so that unit q and k components give scores of about unit variance.
    """
    rng = np.random.default_rng(int(config.seed))
    if config.name == "additive":
        da = int(config.hidden or hs)
        W1 = rng.normal(0.0, 1.0 / math.sqrt(hs), size=(nh, hs, da))  # (nh, hs, da)
        W2 = rng.normal(0.0, 1.0 / math.sqrt(hs), size=(nh, hs, da))  # (nh, hs, da)
        v = rng.normal(0.0, 1.0 / math.sqrt(da), size=(nh, da))  # (nh, da)
        return {"W1": W1, "W2": W2, "v": v}
    if config.name == "multiplicative":
        return {"W": rng.normal(0.0, 1.0 / hs, size=(nh, hs, hs))}  # (nh, hs, hs)
    return {}


def _elu1(x: np.ndarray) -> np.ndarray:
    """phi(x) = elu(x) + 1: x + 1 for x > 0, exp(x) otherwise (always > 0)."""
    return np.where(x > 0, x + 1.0, np.exp(np.minimum(x, 0.0)))


def rule_scores(config: ScoreRuleConfig, q: np.ndarray, k: np.ndarray, params: dict | None = None,
                head: int | None = None) -> np.ndarray:
    """Scores of a numpy-path rule. q (nh, Tq, hs), k (nh, Tk, hs) -> (nh, Tq, Tk) float64.

    ``head`` selects one head's parameters (drawn for all heads with :func:`rule_params`) when q and k
    hold that head only (nh = 1).
    For ``linear`` the "scores" are the positive kernel values phi(q_i) . phi(k_j); for ``softcap`` they are
    c tanh(s / c) of the scaled dot products s = q . k / sqrt(hs).
    """
    q = np.asarray(q, dtype=np.float64)  # (nh, Tq, hs)
    k = np.asarray(k, dtype=np.float64)  # (nh, Tk, hs)
    nh, Tq, hs = q.shape
    Tk = k.shape[1]
    if params is None:
        if head is not None:
            raise ValueError("pass the rule's parameters for all heads when scoring one head")
        params = rule_params(config, nh, hs)
    sel = slice(None) if head is None else slice(head, head + 1)
    if config.name == "multiplicative":
        W = params["W"][sel]  # (nh, hs, hs)
        return (q @ W) @ k.transpose(0, 2, 1)  # (nh, Tq, Tk)
    if config.name == "linear":
        return _elu1(q) @ _elu1(k).transpose(0, 2, 1)  # (nh, Tq, Tk)
    if config.name == "softcap":
        return softcap_scores(q @ k.transpose(0, 2, 1) / math.sqrt(hs), config.cap)  # (nh, Tq, Tk)
    if config.name == "additive":
        W1, W2, v = params["W1"][sel], params["W2"][sel], params["v"][sel]
        a = q @ W1  # (nh, Tq, da)
        b = k @ W2  # (nh, Tk, da)
        da = a.shape[-1]
        s = np.empty((nh, Tq, Tk), dtype=np.float64)  # (nh, Tq, Tk)
        rows = max(1, (1 << 22) // max(1, Tk * da))  # keep each (rows, Tk, da) slab near 32 MB
        for h in range(nh):
            for i0 in range(0, Tq, rows):
                t = np.tanh(a[h, i0:i0 + rows, None, :] + b[h, None, :, :])  # (rows, Tk, da)
                s[h, i0:i0 + rows] = t @ v[h]  # (rows, Tk)
        return s
    raise ValueError(f"score rule {config.name!r} runs on the engine, not on the numpy path")


def softcap_scores(scaled, cap: float) -> np.ndarray:
    """c tanh(s / c) of scaled scores s, float64: about s while |s| << c, never beyond +-c."""
    c = float(cap)
    return c * np.tanh(np.asarray(scaled, dtype=np.float64) / c)


def masked_softmax(scores, mask) -> tuple[np.ndarray, np.ndarray]:
    """(weights, lse) of the softmax rules: :func:`attnviz.engine.masked_softmax`, imported on first use
    (the session model loads without the engine and numba)."""
    from attnviz.engine.softmax import masked_softmax as engine_masked_softmax

    return engine_masked_softmax(scores, mask)


def linear_normalise(kvals: np.ndarray, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Linear attention weights from positive kernel values: (weights, lse), float64.

    w_ij = m_ij s_ij / sum_j m_ij s_ij; lse = log of that sum (-inf for a fully masked row, weights 0),
    so w_ij = s_ij / exp(lse_i) as for softmax rules. Under a causal mask this is exactly causal linear
    attention (its running sums); any other mask applies cell by cell.
    """
    s = np.asarray(kvals, dtype=np.float64)  # (nh, Tq, Tk)
    m_ = np.broadcast_to(np.asarray(mask, dtype=bool), s.shape)  # (nh, Tq, Tk)
    p = np.where(m_, s, 0.0)  # (nh, Tq, Tk)
    z = p.sum(axis=-1)  # (nh, Tq)
    has = m_.any(axis=-1) & (z > 0)  # (nh, Tq)
    w = p / np.where(has, z, 1.0)[..., None]  # (nh, Tq, Tk)
    w = np.where(has[..., None], w, 0.0)  # (nh, Tq, Tk)
    with np.errstate(divide="ignore"):
        lse = np.where(has, np.log(np.where(has, z, 1.0)), -np.inf)  # (nh, Tq)
    return w, lse
