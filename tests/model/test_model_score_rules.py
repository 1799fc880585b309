"""Score rules: additive, multiplicative and linear attention against their formulas, through run()."""

import numpy as np
import pytest

from attnviz.model.compute import ComputeRequest, run
from attnviz.model.frozen import FrozenArray
from attnviz.model.mask.presets import preset
from attnviz.model.score_rules import (ScoreRuleConfig, dot_scale, linear_normalise, masked_softmax,
                                       rule_params)
from attnviz.model.state import ModelConfig, SessionState, ToySource


def state(rule, T=6, mask=None):
    rng = np.random.default_rng(11)
    src = ToySource("toy", labels=tuple(map(str, range(T))), embeddings=FrozenArray(rng.normal(size=(T, 8))))
    kw = {} if mask is None else {"mask": mask}
    return SessionState(sources=(src,), model=ModelConfig(d_model=8, nh=2), score_rule=rule, **kw)


def softmax(s):
    e = np.exp(s - s.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def test_unknown_rule_is_refused():
    with pytest.raises(ValueError, match="unknown score rule"):
        ScoreRuleConfig("cosine")


def test_dot_scales():
    assert dot_scale("scaled_dot", 16) == 0.25 and dot_scale("dot", 16) == 1 and dot_scale("uniform", 16) == 0


def test_additive_matches_bahdanau_formula():
    cfg = ScoreRuleConfig("additive", seed=5, hidden=3)
    r = run(ComputeRequest(1, state(cfg)))
    assert r.ok and r.path == "numpy"
    p = rule_params(cfg, 2, 4)
    for h in range(2):
        for i in range(6):
            for j in range(6):
                s = p["v"][h] @ np.tanh(r.q[h, i] @ p["W1"][h] + r.k[h, j] @ p["W2"][h])
                assert r.scores[h, i, j] == pytest.approx(s, abs=1e-12)
        np.testing.assert_allclose(r.weights[h], softmax(r.scores[h]), atol=1e-12)
        np.testing.assert_allclose(r.output[h], r.weights[h] @ r.v[h], atol=1e-12)


def test_multiplicative_matches_luong_general():
    cfg = ScoreRuleConfig("multiplicative", seed=2)
    r = run(ComputeRequest(1, state(cfg)))
    W = rule_params(cfg, 2, 4)["W"]
    for h in range(2):
        np.testing.assert_allclose(r.scores[h], r.q[h] @ W[h] @ r.k[h].T, atol=1e-12)
        np.testing.assert_allclose(r.weights[h], softmax(r.scores[h]), atol=1e-12)


def test_linear_attention_causal_equals_prefix_sum_recurrence():
    r = run(ComputeRequest(1, state(ScoreRuleConfig("linear"), mask=preset("causal", []))))
    assert r.ok
    phi = lambda x: np.where(x > 0, x + 1, np.exp(x))  # noqa: E731
    for h in range(2):
        S = np.zeros((4, 4))
        z = np.zeros(4)
        for i in range(6):
            fk = phi(r.k[h, i])
            S += np.outer(fk, r.v[h, i])
            z += fk
            fq = phi(r.q[h, i])
            np.testing.assert_allclose(r.output[h, i], fq @ S / (fq @ z), atol=1e-12)
    np.testing.assert_allclose(r.weights.sum(-1), 1.0, atol=1e-12)
    assert np.all(r.weights[:, np.triu_indices(6, 1)[0], np.triu_indices(6, 1)[1]] == 0)


def test_rule_params_are_seeded_and_reproducible():
    a = rule_params(ScoreRuleConfig("additive", seed=1), 2, 4)
    b = rule_params(ScoreRuleConfig("additive", seed=1), 2, 4)
    c = rule_params(ScoreRuleConfig("additive", seed=2), 2, 4)
    np.testing.assert_array_equal(a["W1"], b["W1"])
    assert not np.allclose(a["W1"], c["W1"])


def test_fully_masked_rows_in_numpy_helpers_are_zero_not_nan():
    s = np.array([[[1.0, 2.0], [3.0, 4.0]]])
    m = np.array([[True, False], [False, False]])
    w, lse = masked_softmax(s, m)
    assert w[0, 0].tolist() == [1.0, 0.0] and np.all(w[0, 1] == 0) and np.isneginf(lse[0, 1])
    w, lse = linear_normalise(np.abs(s) + 1, m)
    assert np.all(np.isfinite(w)) and np.all(w[0, 1] == 0) and np.isneginf(lse[0, 1])
