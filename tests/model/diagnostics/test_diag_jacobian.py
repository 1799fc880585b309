"""The softmax-Jacobian study of seed 000 and the per-row norms of a head."""

import numpy as np
import pytest

from attnviz.model.diagnostics.jacobian import (
    jacobian_frobenius,
    jacobian_norm_study,
    row_jacobian_norms,
    softmax_jacobian,
)


def test_jacobian_matches_definition_and_finite_differences():
    z = np.array([0.3, -1.2, 2.0, 0.1])
    J = softmax_jacobian(z)
    s = np.exp(z) / np.exp(z).sum()
    assert np.allclose(J, np.diag(s) - np.outer(s, s))
    eps = 1e-6
    for j in range(4):
        dz = np.zeros(4)
        dz[j] = eps
        num = (np.exp(z + dz) / np.exp(z + dz).sum() - np.exp(z - dz) / np.exp(z - dz).sum()) / (2 * eps)
        assert np.allclose(J[:, j], num, atol=1e-8)


def test_closed_form_frobenius_equals_the_built_matrix():
    z = np.random.default_rng(0).normal(size=(6, 50)) * 4
    s = np.exp(z - z.max(1, keepdims=True))
    s /= s.sum(1, keepdims=True)
    assert np.allclose(jacobian_frobenius(s), np.linalg.norm(softmax_jacobian(z), axis=(1, 2)), atol=1e-14)


def test_unscaled_norm_falls_with_dk_and_scaled_stays_flat():
    r = jacobian_norm_study(n_samples=1000, size=50, seed=0)  # the seed's 20-point x 1000-draw study
    assert r.d_k.shape == (20,) and r.d_k[0] == 1 and r.d_k[-1] == pytest.approx(1e4)
    # scaled: flat within a few percent across four decades
    assert r.scaled_mean.max() / r.scaled_mean.min() < 1.05
    # unscaled: an order of magnitude below the scaled curve at d_k = 1e4
    assert r.unscaled_mean[-1] < 0.2 * r.scaled_mean[-1]
    # and falling: each decade beyond d_k = 10 cuts the mean norm by a third or more
    big = r.d_k >= 10
    d, u = r.d_k[big], r.unscaled_mean[big]
    for a in range(len(d)):
        later = np.nonzero(d >= 10 * d[a])[0]
        if later.size:
            assert u[later[0]] < 0.67 * u[a]
    # d_k = 1 is the same draw for both rules
    assert r.unscaled_mean[0] == pytest.approx(r.scaled_mean[0])


def test_study_is_seeded():
    a = jacobian_norm_study([1, 100], n_samples=50, seed=3)
    b = jacobian_norm_study([1, 100], n_samples=50, seed=3)
    c = jacobian_norm_study([1, 100], n_samples=50, seed=4)
    assert np.array_equal(a.unscaled_mean, b.unscaled_mean)
    assert not np.array_equal(a.unscaled_mean, c.unscaled_mean)


def test_row_norms_respect_the_mask_and_scale():
    s = np.array([[1.0, 2.0, 3.0], [5.0, 0.0, 0.0], [0.0, 0.0, 0.0]])
    mask = np.array([[True, True, True], [True, False, False], [False, False, False]])
    n = row_jacobian_norms(s, mask, scale=0.5)
    assert n[1] == 0.0 and n[2] == 0.0  # a single allowed key is a constant softmax; empty row is 0
    assert n[0] == pytest.approx(np.linalg.norm(softmax_jacobian(s[0] * 0.5)))
    heads = row_jacobian_norms(np.stack([s, 10 * s]), mask, scale=1.0)
    assert heads.shape == (2, 3) and heads[1, 0] < heads[0, 0]
    s_inf = np.where(mask, s, -np.inf)
    assert np.array_equal(row_jacobian_norms(s_inf, mask, 0.5), n)


def test_bad_input_raises():
    with pytest.raises(ValueError, match="positive"):
        jacobian_norm_study([0, 10])
    with pytest.raises(ValueError, match="n_samples"):
        jacobian_norm_study(n_samples=0)
    with pytest.raises(ValueError, match="finite"):
        softmax_jacobian([np.inf, 0.0])
