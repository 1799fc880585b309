"""Formula text of each score rule."""

import pytest

from attnviz.model.diagnostics.variants import RULE_FORMULAS, rule_formula


def test_every_rule_has_its_formula():
    assert set(RULE_FORMULAS) == {"scaled_dot", "dot", "uniform", "additive", "multiplicative", "linear", "softcap"}
    assert rule_formula("additive").unicode == "score(q, k) = vᵀ tanh(W₁q + W₂k)"
    assert "√dₖ" in rule_formula("scaled_dot").unicode and "√" not in rule_formula("dot").unicode
    assert "qᵀ W k" in rule_formula("multiplicative").unicode
    assert "elu(x) + 1" in rule_formula("linear").unicode
    assert "c·tanh((q·k / √dₖ) / c)" in rule_formula("softcap").unicode
    for name, f in RULE_FORMULAS.items():
        assert f.name == name and f.title and f.note
        assert f.plain.isascii(), name


def test_unknown_rule():
    with pytest.raises(ValueError, match="unknown score rule"):
        rule_formula("cosine")
