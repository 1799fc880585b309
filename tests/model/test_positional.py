"""Positional encodings: the seed-000 sinusoidal table and its properties, learned tables, RoPE,
ALiBi and the config that selects one."""

from __future__ import annotations

import math

import numpy as np
import pytest

from attnviz.model.positional import (
    KINDS,
    PositionalConfig,
    alibi_bias,
    alibi_slopes,
    apply_rope,
    frequencies,
    learned,
    positional_inputs,
    rope_angles,
    rotation_matrix,
    sinusoidal,
    wavelengths,
)


def test_sinusoidal_matches_the_seed_formula_entry_by_entry():
    T, d = 7, 6
    pe = sinusoidal(T, d)
    assert pe.shape == (T, d) and pe.dtype == np.float64
    for pos in range(T):
        for i in range(d // 2):
            w = 1.0 / 10000 ** (2 * i / d)
            assert pe[pos, 2 * i] == pytest.approx(math.sin(w * pos), abs=1e-15)
            assert pe[pos, 2 * i + 1] == pytest.approx(math.cos(w * pos), abs=1e-15)
    assert np.all(pe[0, 0::2] == 0.0) and np.all(pe[0, 1::2] == 1.0)


def test_sinusoidal_offset_shifts_positions():
    assert np.allclose(sinusoidal(5, 8, offset=3), sinusoidal(8, 8)[3:], atol=1e-14)


def test_odd_d_model_keeps_sin_of_the_last_frequency_and_drops_its_cos():
    pe = sinusoidal(4, 5)
    w = frequencies(5)
    assert w.shape == (3,)
    assert np.allclose(pe[:, 4], np.sin(np.arange(4) * w[2]))
    assert np.allclose(pe[:, :4:2], np.sin(np.arange(4)[:, None] * w[None, :2]))
    with pytest.raises(ValueError, match="even d_model"):
        rotation_matrix(1, 5)


def test_frequencies_and_wavelengths_span_2pi_to_nearly_2pi_base():
    w = frequencies(512)
    lam = wavelengths(512)
    assert w[0] == 1.0 and lam[0] == pytest.approx(2 * math.pi)
    assert np.all(np.diff(lam) > 0)
    assert lam[-1] == pytest.approx(2 * math.pi * 10000 ** (510 / 512))
    assert np.allclose(lam * w, 2 * math.pi)


@pytest.mark.parametrize("k", [1, 3, -2, 17, 250])
def test_rotation_moves_every_position_by_k(k):
    d = 64
    pe = sinusoidal(600, d)
    m = rotation_matrix(k, d)
    lo, hi = max(0, -k), min(600, 600 - k)
    moved = pe[lo:hi] @ m.T  # (n, d) row p is M_k PE(p)
    assert np.max(np.abs(moved - pe[lo + k:hi + k])) < 1e-12


def test_rotation_blocks_are_the_seed_2x2_rotations():
    m = rotation_matrix(2, 4, base=100.0)
    w1 = 100.0 ** (-2 / 4)
    block = m[2:4, 2:4]
    assert np.allclose(block, [[math.cos(2 * w1), math.sin(2 * w1)], [-math.sin(2 * w1), math.cos(2 * w1)]])
    assert np.all(m[:2, 2:] == 0) and np.all(m[2:, :2] == 0)
    assert np.allclose(m @ m.T, np.eye(4), atol=1e-15)


def test_pe_dot_product_depends_only_on_t_minus_s():
    d, T = 32, 80
    pe = sinusoidal(T, d)
    g = pe @ pe.T
    w = frequencies(d)
    t = np.arange(T)
    expected = np.cos((t[:, None] - t[None, :])[..., None] * w).sum(-1)
    assert np.max(np.abs(g - expected)) < 1e-12
    assert np.allclose(g, g.T) and np.allclose(np.diag(g), d / 2)


def test_learned_is_seeded_and_prefix_stable():
    a = learned(10, 8, seed=3)
    assert a.shape == (10, 8)
    assert np.array_equal(a, learned(10, 8, seed=3))
    assert not np.array_equal(a, learned(10, 8, seed=4))
    assert np.array_equal(learned(20, 8, seed=3)[:10], a)
    assert 0.005 < a.std() < 0.05


def test_rope_relative_property_for_q_dot_k():
    rng = np.random.default_rng(0)
    hs = 16
    q, k = rng.normal(size=hs), rng.normal(size=hs)
    pairs = [(0, 0), (5, 5), (40, 40), (3, 1), (10, 8), (102, 100), (1, 7), (50, 56)]
    dots = {}
    for m, n in pairs:
        qm = apply_rope(q[None], [m])[0]
        kn = apply_rope(k[None], [n])[0]
        dots.setdefault(m - n, []).append(qm @ kn)
    for vals in dots.values():
        assert max(vals) - min(vals) < 1e-12
    assert abs(dots[0][0] - q @ k) < 1e-12
    assert abs(dots[2][0] - dots[-6][0]) > 1e-3


def test_rope_pairs_are_interleaved_and_norm_preserving():
    x = np.zeros((2, 4))
    x[:, 0] = 1.0  # pair 0 = (1, 0)
    r = apply_rope(x, [0, 1])
    assert np.allclose(r[0], [1, 0, 0, 0])
    assert np.allclose(r[1], [math.cos(1.0), math.sin(1.0), 0, 0])
    rng = np.random.default_rng(1)
    y = rng.normal(size=(3, 9, 8))
    ry = apply_rope(y)
    assert ry.shape == y.shape
    assert np.allclose(np.linalg.norm(ry, axis=-1), np.linalg.norm(y, axis=-1))
    assert np.allclose(ry[1], apply_rope(y[1]))
    assert rope_angles(np.arange(9), 8).shape == (9, 4)


def test_rope_rejects_odd_head_size_and_wrong_positions():
    with pytest.raises(ValueError, match="even head size"):
        apply_rope(np.ones((3, 5)))
    with pytest.raises(ValueError, match="positions"):
        apply_rope(np.ones((3, 4)), [0, 1])
    with pytest.raises(ValueError, match="shape"):
        apply_rope(np.ones(4))


def test_alibi_slopes_eight_heads_are_powers_of_one_half():
    assert np.allclose(alibi_slopes(8), [2.0 ** -(h + 1) for h in range(8)])
    assert np.allclose(alibi_slopes(4), [2.0 ** -(2 * (h + 1)) for h in range(4)])


def test_alibi_slopes_non_power_of_two_interpolate():
    s = alibi_slopes(6)
    assert s.shape == (6,)
    assert np.allclose(s[:4], alibi_slopes(4))
    assert np.allclose(s[4:], alibi_slopes(8)[0::2][:2])
    assert np.all(s > 0)


def test_alibi_bias_signs_distance_and_alignment():
    b = alibi_bias(2, 3, 3)
    assert b.shape == (2, 3, 3)
    assert np.allclose(np.diagonal(b, axis1=1, axis2=2), 0)
    assert b[0, 2, 0] == pytest.approx(-2 * alibi_slopes(2)[0])
    assert np.all(b <= 0)
    causal = np.tril(np.ones((3, 3), bool))
    i, j = np.nonzero(causal)
    assert np.allclose(b[:, i, j], -alibi_slopes(2)[:, None] * (i - j))
    # two queries over five keys: aligned to the end, so query 1 sits at key 4
    c = alibi_bias(1, 2, 5)
    assert c[0, 1, 4] == 0 and c[0, 0, 3] == 0 and c[0, 0, 0] == pytest.approx(-3 * alibi_slopes(1)[0])
    assert alibi_bias(1, 2, 5, q_offset=0)[0, 0, 0] == 0


@pytest.mark.parametrize("kind", KINDS)
def test_config_round_trip_and_inputs(kind):
    cfg = PositionalConfig(kind=kind, base=500.0, seed=2)
    assert PositionalConfig.from_dict(cfg.to_dict()) == cfg
    x = positional_inputs(cfg, 6, 8)
    assert x.shape == (6, 8)
    if kind == "sinusoidal":
        assert np.array_equal(x, sinusoidal(6, 8, 500.0))
    elif kind == "learned":
        assert np.array_equal(x, learned(6, 8, 2))
        assert np.array_equal(positional_inputs(cfg, 3, 8, offset=2), x[2:5])
    else:
        assert np.all(x == 0)
    assert cfg.additive == (kind in ("sinusoidal", "learned"))


def test_config_rejects_bad_values():
    with pytest.raises(ValueError, match="unknown positional"):
        PositionalConfig(kind="wavelet")
    with pytest.raises(ValueError, match="base"):
        PositionalConfig(kind="sinusoidal", base=1.0)
    with pytest.raises(ValueError, match="seed"):
        PositionalConfig(seed=-1)
    with pytest.raises(ValueError, match="bad positional config"):
        PositionalConfig.from_dict({"kind": "rope", "base": "ten"})
    with pytest.raises(ValueError, match="d_model"):
        sinusoidal(3, 0)
    with pytest.raises(ValueError, match="T must"):
        sinusoidal(-1, 4)
    for bad in (None, "x", 2.5, float("inf")):  # ValueError naming the argument, never TypeError/OverflowError
        with pytest.raises(ValueError, match="T must be a non-negative integer"):
            sinusoidal(bad, 4)
        with pytest.raises(ValueError, match="d_model must be a positive integer"):
            sinusoidal(3, bad)
