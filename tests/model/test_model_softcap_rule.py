"""The softcap score rule (the scaled dot product soft-capped at c tanh(s / c), Gemma 2): its formula
through run(), its cap as a parameter, and session files with and without it."""

import math
from dataclasses import replace

import numpy as np
import pytest

from attnviz.model.compute import ComputeRequest, run
from attnviz.model.demos import build_demo
from attnviz.model.diagnostics.variants import rule_formula
from attnviz.model.frozen import FrozenArray
from attnviz.model.mask.presets import preset
from attnviz.model.score_rules import DEFAULT_CAP, RULES, ScoreRuleConfig, rule_scores, softcap_scores
from attnviz.model.serialize import dump_state, load_state
from attnviz.model.state import ModelConfig, SessionState, ToySource


def state(rule, T=7, scale=3.0, mask=None):
    rng = np.random.default_rng(5)
    src = ToySource("toy", labels=tuple(map(str, range(T))),
                    embeddings=FrozenArray(rng.normal(size=(T, 8)) * scale))  # scores of tens: the cap bites
    kw = {} if mask is None else {"mask": mask}
    return SessionState(sources=(src,), model=ModelConfig(d_model=8, nh=2), score_rule=rule, **kw)


def test_the_rule_is_listed_with_its_formula_and_gemma_2_cap():
    assert "softcap" in RULES
    cfg = ScoreRuleConfig("softcap")
    assert cfg.cap == DEFAULT_CAP == 50.0 and not cfg.engine
    f = rule_formula("softcap")
    assert "tanh" in f.unicode and "√dₖ" in f.unicode and "Gemma 2" in f.title


@pytest.mark.parametrize("cap", [50.0, 2.0, 0.25])
@pytest.mark.parametrize("masked", [False, True])
def test_run_matches_the_formula(cap, masked):
    mask = preset("causal", []) if masked else None
    r = run(ComputeRequest(1, state(ScoreRuleConfig("softcap", cap=cap), mask=mask)))
    assert r.ok and r.path == "numpy"
    hs = r.q.shape[2]
    s = np.einsum("hqd,hkd->hqk", r.q, r.k) / math.sqrt(hs)  # (nh, Tq, Tk)
    capped = cap * np.tanh(s / cap)  # (nh, Tq, Tk)
    allowed = np.tri(7, dtype=bool) if masked else np.ones((7, 7), bool)
    e = np.where(allowed, np.exp(capped - np.where(allowed, capped, -np.inf).max(-1, keepdims=True)), 0.0)
    w = e / e.sum(-1, keepdims=True)
    np.testing.assert_allclose(r.weights, w, atol=1e-12)
    np.testing.assert_allclose(r.output, w @ r.v, atol=1e-10)
    assert np.all(np.abs(r.scores[:, allowed]) <= cap)  # tanh reaches 1.0 in float64 far past the cap


def test_a_large_cap_is_the_scaled_dot_product_and_a_small_one_flattens_the_rows():
    wide = run(ComputeRequest(1, state(ScoreRuleConfig("softcap", cap=1e6))))
    plain = run(ComputeRequest(1, state(ScoreRuleConfig("scaled_dot"))))
    np.testing.assert_allclose(wide.weights, plain.weights, atol=1e-6)
    tight = run(ComputeRequest(1, state(ScoreRuleConfig("softcap", cap=0.5))))
    assert tight.weights.max() < plain.weights.max()
    assert np.all(tight.weights.max(-1) / tight.weights.min(-1) <= math.exp(1.0) * (1 + 1e-9))  # within e^(2c)


def test_rule_scores_and_softcap_scores():
    q = np.array([[[10.0, 0.0]]])  # (1, 1, 2)
    k = np.array([[[10.0, 0.0], [-1.0, 0.0]]])  # (1, 2, 2)
    s = rule_scores(ScoreRuleConfig("softcap", cap=5.0), q, k)
    np.testing.assert_allclose(s[0, 0], 5.0 * np.tanh(np.array([100.0, -10.0]) / math.sqrt(2) / 5.0))
    np.testing.assert_allclose(softcap_scores([0.0, 1e-3, 1e9], 50.0), [0.0, 1e-3, 50.0], rtol=1e-6)


@pytest.mark.parametrize("bad", [0, -1.0, float("inf"), float("nan"), True, "50", 2e6])
def test_bad_caps_are_refused(bad):
    with pytest.raises(ValueError, match="soft cap c must be"):
        ScoreRuleConfig("softcap", cap=bad)


def test_session_files_keep_the_cap_and_older_trees_load_unchanged():
    st = replace(build_demo("river-bank"), score_rule=ScoreRuleConfig("softcap", cap=7.5))
    tree, arrays, blobs = dump_state(st)
    assert tree["score_rule"]["cap"] == 7.5
    assert load_state(tree, arrays, blobs) == st
    plain = build_demo("river-bank")
    tree, arrays, blobs = dump_state(plain)
    assert set(tree["score_rule"]) == {"name", "seed", "hidden"}  # what every earlier version wrote and reads
    assert load_state(tree, arrays, blobs).score_rule == plain.score_rule
    tree["score_rule"]["cap"] = -3
    with pytest.raises(ValueError, match="soft cap c must be"):
        load_state(tree, arrays, blobs)
