"""Properties of attention that every kernel must keep (hypothesis): rows sum to 1, permuting queries
permutes outputs, permuting key-value pairs together changes nothing, scale=0 is uniform."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from attnviz.engine import attention

KERNELS = st.sampled_from(["reference", "naive", "flash"])


@st.composite
def problems(draw):
    nh = draw(st.integers(1, 3))
    Tq = draw(st.integers(1, 40))
    Tk = draw(st.integers(1, 40))
    hs = draw(st.integers(1, 12))
    hv = draw(st.integers(1, 6))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((nh, Tq, hs)) * draw(st.sampled_from([0.1, 1.0, 5.0]))  # (nh, Tq, hs)
    k = rng.standard_normal((nh, Tk, hs))  # (nh, Tk, hs)
    v = rng.standard_normal((nh, Tk, hv))  # (nh, Tk, hv)
    density = draw(st.sampled_from([None, 0.2, 0.6, 1.0]))
    mask = None if density is None else rng.random((nh, Tq, Tk)) < density  # (nh, Tq, Tk)
    blocks = draw(st.sampled_from([(4, 8), (16, 16), (64, 128)]))
    return q, k, v, mask, rng, blocks


def _kw(kernel, blocks):
    return {"block_m": blocks[0], "block_n": blocks[1]} if kernel == "flash" else {}


@settings(max_examples=40)
@given(problems(), KERNELS)
def test_allowed_weights_of_a_row_sum_to_one(problem, kernel):
    q, k, v, mask, _, blocks = problem
    res = attention(q, k, v, mask, kernel=kernel, return_weights=True, **_kw(kernel, blocks))
    sums = res.weights.sum(-1)  # (nh, Tq)
    has_key = np.ones(sums.shape, bool) if mask is None else mask.any(-1)
    np.testing.assert_allclose(sums[has_key], 1.0, atol=1e-12)
    assert np.all(sums[~has_key] == 0)
    if mask is not None:
        assert np.all(res.weights[~mask] == 0)


@settings(max_examples=40)
@given(problems(), KERNELS)
def test_permuting_queries_permutes_outputs(problem, kernel):
    q, k, v, mask, rng, blocks = problem
    perm = rng.permutation(q.shape[1])
    base = attention(q, k, v, mask, kernel=kernel, **_kw(kernel, blocks))
    pm = None if mask is None else mask[:, perm]
    res = attention(q[:, perm], k, v, pm, kernel=kernel, **_kw(kernel, blocks))
    np.testing.assert_allclose(res.out, base.out[:, perm], atol=1e-12)
    np.testing.assert_array_equal(np.isinf(res.lse), np.isinf(base.lse[:, perm]))


@settings(max_examples=40)
@given(problems(), KERNELS)
def test_permuting_key_value_pairs_changes_nothing(problem, kernel):
    q, k, v, mask, rng, blocks = problem
    perm = rng.permutation(k.shape[1])
    base = attention(q, k, v, mask, kernel=kernel, **_kw(kernel, blocks))
    pm = None if mask is None else mask[:, :, perm]
    res = attention(q, k[:, perm], v[:, perm], pm, kernel=kernel, **_kw(kernel, blocks))
    np.testing.assert_allclose(res.out, base.out, atol=1e-12)
    finite = np.isfinite(base.lse)
    np.testing.assert_allclose(res.lse[finite], base.lse[finite], atol=1e-12)


@settings(max_examples=40)
@given(problems(), KERNELS)
def test_scale_zero_is_uniform_over_allowed_keys(problem, kernel):
    q, k, v, mask, _, blocks = problem
    res = attention(q, k, v, mask, scale=0.0, kernel=kernel, return_weights=True, **_kw(kernel, blocks))
    allowed = np.ones(res.weights.shape, bool) if mask is None else mask
    n = allowed.sum(-1, keepdims=True)  # (nh, Tq, 1)
    expected = np.where(allowed, 1.0 / np.maximum(n, 1), 0.0)  # (nh, Tq, Tk)
    np.testing.assert_allclose(res.weights, expected, atol=1e-14)
    mean_v = np.where(n > 0, np.einsum("hqk,hkd->hqd", expected, v), 0.0)  # (nh, Tq, hv)
    np.testing.assert_allclose(res.out, mean_v, atol=1e-12)
