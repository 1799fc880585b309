"""The formula of every score rule, as text a panel shows next to the rule selector.

Only text lives here; the rules themselves are computed by the model's score rules.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RuleFormula:
    """How one score rule turns a query and keys into weights, in words and symbols."""

    name: str  # the rule's key: scaled_dot, dot, uniform, additive, multiplicative, linear, softcap
    title: str  # a human name for the selector
    unicode: str  # the formula with unicode symbols (ᵀ, √, φ, Σ, subscripts)
    plain: str  # the same in plain ASCII
    weights: str  # how the scores become weights (unicode)
    note: str  # one sentence on what the rule is for


RULE_FORMULAS: dict[str, RuleFormula] = {
    "scaled_dot": RuleFormula(
        "scaled_dot", "Scaled dot product",
        "score(q, k) = q·k / √dₖ",
        "score(q, k) = q.k / sqrt(d_k)",
        "w = softmax over allowed keys of score(qᵢ, kⱼ)",
        "The Transformer's rule: dividing by √dₖ keeps score variance near 1, so the softmax does not saturate."),
    "dot": RuleFormula(
        "dot", "Dot product (no √dₖ)",
        "score(q, k) = q·k",
        "score(q, k) = q.k",
        "w = softmax over allowed keys of score(qᵢ, kⱼ)",
        "Without the scale, scores grow like √dₖ and the softmax collapses towards a hard lookup."),
    "uniform": RuleFormula(
        "uniform", "Uniform",
        "wᵢⱼ = 1 / #{allowed j}",
        "w_ij = 1 / (number of allowed keys j)",
        "scores are ignored: every allowed key gets the same weight",
        "The baseline of a head that selects nothing: every output is the plain average of the allowed values."),
    "additive": RuleFormula(
        "additive", "Additive (Bahdanau)",
        "score(q, k) = vᵀ tanh(W₁q + W₂k)",
        "score(q, k) = v^T tanh(W1 q + W2 k)",
        "w = softmax over allowed keys of score(qᵢ, kⱼ)",
        "A one-hidden-layer network scores each pair; the original alignment model of neural translation."),
    "multiplicative": RuleFormula(
        "multiplicative", "Multiplicative (Luong general)",
        "score(q, k) = qᵀ W k",
        "score(q, k) = q^T W k",
        "w = softmax over allowed keys of score(qᵢ, kⱼ)",
        "A learned bilinear form: the dot product measured through a matrix W."),
    "linear": RuleFormula(
        "linear", "Linear attention",
        "outᵢ = φ(qᵢ)ᵀ Σⱼ φ(kⱼ) vⱼᵀ / φ(qᵢ)ᵀ Σⱼ φ(kⱼ),  φ(x) = elu(x) + 1",
        "out_i = phi(q_i)^T sum_j phi(k_j) v_j^T / phi(q_i)^T sum_j phi(k_j),  phi(x) = elu(x) + 1",
        "wᵢⱼ = φ(qᵢ)·φ(kⱼ) / Σⱼ' φ(qᵢ)·φ(kⱼ') over allowed keys",
        "A positive feature map replaces the softmax, so Σ φ(k) vᵀ is summed once and the cost is linear in T."),
    "softcap": RuleFormula(
        "softcap", "Soft-capped scaled dot (Gemma 2)",
        "score(q, k) = c·tanh((q·k / √dₖ) / c)",
        "score(q, k) = c tanh((q.k / sqrt(d_k)) / c)",
        "w = softmax over allowed keys of score(qᵢ, kⱼ)",
        "Scores pass almost unchanged while |s| ≪ c and never beyond ±c, so no key can take a row's whole weight "
        "(Gemma 2 caps at c = 50)."),
}


def rule_formula(name: str) -> RuleFormula:
    """The formula of one score rule; a clear ValueError for an unknown name."""
    try:
        return RULE_FORMULAS[name]
    except KeyError:
        raise ValueError(f"unknown score rule {name!r}; known rules: {', '.join(RULE_FORMULAS)}") from None
