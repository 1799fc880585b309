"""The positional-encoding views: M_k error, t - s dependence, wavelengths, and RoPE's relative property."""

import math

import numpy as np
import pytest

from attnviz.model.diagnostics.positional_study import (
    diagonal_profile,
    rope_rotation,
    rope_study,
    sinusoidal_study,
)
from attnviz.model.positional import apply_rope


@pytest.mark.parametrize("k", [1, 4, -3, 100])
def test_rotation_error_is_at_rounding_level(k):
    s = sinusoidal_study(512, 128, k=k)
    assert s.rotation.shape == (128, 128)
    assert s.rotation_error_per_pos.shape == (512 - abs(k),)
    assert s.rotation_error < 1e-12


def test_gram_depends_only_on_t_minus_s_and_matches_the_cosine_sum():
    s = sinusoidal_study(300, 64)
    assert s.gram.shape == (300, 300) and s.offsets.shape == (599,)
    assert s.shift_deviation < 1e-12
    assert np.max(np.abs(s.profile - s.profile_formula)) < 1e-12
    centre = 299
    assert s.profile[centre] == pytest.approx(32.0)  # t = s: d_model / 2 pairs of sin^2 + cos^2
    assert np.allclose(s.profile[centre + 5], s.profile[centre - 5])  # symmetric in t - s


def test_diagonal_profile_separates_toeplitz_from_not():
    t = np.arange(5.0)
    toeplitz = (t[:, None] - t[None, :]) ** 2 + 0.5 * (t[:, None] - t[None, :])
    offsets, profile, dev = diagonal_profile(toeplitz)
    assert dev == 0.0
    assert np.array_equal(offsets, np.arange(-4, 5))
    assert np.allclose(profile, offsets ** 2 + 0.5 * offsets)
    _, _, dev2 = diagonal_profile(np.outer(t, t))
    assert dev2 == 16.0  # the main diagonal of t * s holds 0, 1, 4, 9, 16


def test_wavelengths_per_dimension():
    s = sinusoidal_study(8, 6, base=100.0)
    assert s.wavelength_per_dim.shape == (6,)
    assert s.wavelength_per_dim[0] == s.wavelength_per_dim[1] == pytest.approx(2 * math.pi)
    assert s.wavelength_per_dim[4] == pytest.approx(2 * math.pi * 100 ** (4 / 6))


def test_odd_d_model_shows_a_real_deviation_and_rotates_its_pairs():
    s = sinusoidal_study(60, 7, k=2)
    assert s.rotation.shape == (6, 6)
    assert s.rotation_error < 1e-12
    assert s.shift_deviation > 1e-6  # the lone sin column depends on t and s, not only t - s


def test_rope_scores_depend_only_on_relative_position():
    r = rope_study(200, 32, k=3, seed=1)
    assert r.scores.shape == (200, 200)
    assert r.relative_error < 1e-12
    assert r.rotation_error < 1e-12
    assert np.std(r.profile) > 0.1  # the profile is not flat: position does matter
    assert r.profile[199] == pytest.approx(r.q @ r.k_vec)
    assert np.allclose(r.table[:, 0::2], np.cos(r.angles)) and np.allclose(r.table[:, 1::2], np.sin(r.angles))


def test_rope_rotation_moves_by_k():
    x = np.random.default_rng(0).normal(size=(10, 8))
    r = rope_rotation(4, 8)
    a = apply_rope(x, np.arange(10))
    b = apply_rope(x, np.arange(10) + 4)
    assert np.allclose(a @ r.T, b, atol=1e-13)


def test_bad_shift_raises():
    with pytest.raises(ValueError, match="shift"):
        sinusoidal_study(5, 8, k=5)
    with pytest.raises(ValueError, match="even head size"):
        rope_study(5, 7)
