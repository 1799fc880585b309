"""Permutation equivariance (self-attention) and key-value invariance (cross-attention), seed 001."""

import numpy as np
import pytest

from attnviz.model.diagnostics.permutation import cross_permutation_check, permutation_check
from attnviz.model.positional import PositionalConfig


@pytest.fixture
def inputs():
    rng = np.random.default_rng(7)
    x = rng.normal(size=(10, 16))  # (T, d_model)
    w = [rng.normal(size=(2, 16, 8)) * 0.4 for _ in range(3)]  # (nh, d_model, hs) each
    return x, w


def test_equivariant_without_positional_encoding(inputs):
    x, (wq, wk, wv) = inputs
    c = permutation_check(x, wq, wk, wv, seed=0)
    assert not np.array_equal(c.perm, np.arange(10))
    assert c.max_deviation < 1e-13 and c.equivariant
    assert c.out.shape == (2, 10, 8) and c.deviation_per_head.shape == (2,)
    assert np.abs(c.out - c.out_perm).max() > 1e-3  # the outputs really moved


@pytest.mark.parametrize("kind", ["sinusoidal", "learned", "rope", "alibi"])
def test_positional_encoding_breaks_equivariance(inputs, kind):
    x, (wq, wk, wv) = inputs
    c = permutation_check(x, wq, wk, wv, PositionalConfig(kind=kind), seed=0)
    assert c.positional == kind
    assert c.max_deviation > 1e-3 and not c.equivariant


def test_a_mask_that_stays_with_positions_breaks_it(inputs):
    x, (wq, wk, wv) = inputs
    causal = np.tril(np.ones((10, 10), bool))
    c = permutation_check(x, wq, wk, wv, mask=causal, seed=0)
    assert c.masked and c.max_deviation > 1e-3


def test_explicit_permutation_and_single_head(inputs):
    x, (wq, wk, wv) = inputs
    perm = np.arange(10)[::-1]
    c = permutation_check(x, wq[0], wk[0], wv[0], perm=perm)
    assert np.array_equal(c.perm, perm) and c.out.shape == (1, 10, 8)
    assert c.max_deviation < 1e-13
    with pytest.raises(ValueError, match="permutation"):
        permutation_check(x, wq, wk, wv, perm=[0] * 10)
    with pytest.raises(ValueError, match="w_q"):
        permutation_check(x, wq[:, :5], wk, wv)


def test_cross_attention_equivariant_in_queries_invariant_in_key_value_pairs(inputs):
    x, (wq, wk, wv) = inputs
    xq = np.random.default_rng(1).normal(size=(4, 16))
    c = cross_permutation_check(xq, x, wq, wk, wv, seed=2)
    assert c.out.shape == (2, 4, 8)
    assert c.query_deviation < 1e-13 and c.query_equivariant
    assert c.kv_deviation < 1e-13 and c.kv_invariant
    p = cross_permutation_check(xq, x, wq, wk, wv, PositionalConfig(kind="sinusoidal"), seed=2)
    assert p.kv_deviation > 1e-3 and not p.kv_invariant
