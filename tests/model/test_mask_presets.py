"""Mask presets against brute-force definitions, including seed 000's VLA block matrix."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from attnviz.model.mask.design import MaskDesign
from attnviz.model.mask.presets import PRESETS, design_from_ar_mask, preset, vla_roles
from attnviz.model.mask.rules import Rule, make_attn_mask
from attnviz.model.segments import Segment
from mask_oracles import ar_mask_from_design, combine, combine_preset, segments_from_lengths


def vla_brute(roles_per_token: list[str]) -> np.ndarray:
    """Seed 000's S~*_pi cell by cell: rows = queries, columns = keys."""
    T = len(roles_per_token)
    m = np.zeros((T, T), dtype=bool)
    for i, j in itertools.product(range(T), range(T)):
        rq, rk = roles_per_token[i], roles_per_token[j]
        if rq in "IP":
            m[i, j] = rk in "IP"
        elif rq == "A":
            m[i, j] = rk in "IP" or (rk == "A" and j <= i)
        else:  # E
            m[i, j] = rk in "IPE"
    return m


@pytest.mark.parametrize("sizes", [(3, 2, 4, 3), (1, 1, 1, 1), (2, 0, 3, 2), (4, 3, 0, 2), (0, 2, 2, 0), (5, 1, 6, 4)])
def test_vla_reproduces_seed_block_matrix(sizes):
    names = ["image", "prompt", "fast", "expert"]
    segs = segments_from_lengths(sizes, names)
    m = preset("vla", segs).compile(segs)
    roles = [r for r, n in zip("IPAE", sizes) for _ in range(n)]
    np.testing.assert_array_equal(m, vla_brute(roles))


def test_vla_block_structure_in_words():
    segs = segments_from_lengths([2, 2, 3, 2], ["image", "prompt", "fast", "expert"])
    m = preset("vla", segs).compile(segs)
    I, P, A, E = slice(0, 2), slice(2, 4), slice(4, 7), slice(7, 9)
    assert m[I, I].all() and m[I, P].all() and m[P, I].all() and m[P, P].all()
    assert not m[I, A].any() and not m[I, E].any() and not m[P, A].any() and not m[P, E].any()
    assert m[A, I].all() and m[A, P].all() and not m[A, E].any()
    np.testing.assert_array_equal(m[A, A], np.tril(np.ones((3, 3), bool)))
    assert m[E, I].all() and m[E, P].all() and m[E, E].all() and not m[E, A].any()


def test_vla_several_segments_share_a_role_and_explicit_roles():
    segs = segments_from_lengths([3, 2, 1, 3, 2], ["cam0", "text", "robot", "tok", "noise_in"])
    roles = {"cam0": "I", "robot": "P", "tok": "A"}
    assert vla_roles(segs, roles) == {"cam0": "I", "text": "P", "robot": "P", "tok": "A", "noise_in": "E"}
    m = preset("vla", segs, roles=roles).compile(segs)
    np.testing.assert_array_equal(m, vla_brute(list("IIIPPPAAAEE")))


def test_vla_unknown_segment_names_the_segment():
    segs = segments_from_lengths([2, 2], ["image", "mystery"])
    with pytest.raises(ValueError, match="mystery"):
        preset("vla", segs)
    with pytest.raises(ValueError, match="role"):
        preset("vla", segs, roles={"mystery": "X"})


def test_vla_cross_attention_suffix_queries_over_cached_keys():
    # openpi inference: suffix (fast + expert) queries over prefix + suffix keys; bottom-right alignment
    kseg = segments_from_lengths([2, 2, 3, 2], ["image", "prompt", "fast", "expert"])
    qseg = [Segment("fast", 0, 3), Segment("expert", 3, 5)]
    m = preset("vla", qseg, kseg).compile(qseg, kseg)
    full = vla_brute(list("IIPPAAAEE"))
    np.testing.assert_array_equal(m, full[4:])


def brute(name, T, **p):
    i, j = np.meshgrid(np.arange(T), np.arange(T), indexing="ij")
    if name == "none":
        return np.ones((T, T), bool)
    if name == "causal":
        return j <= i
    if name == "prefix_lm":
        return (j < p["L"]) | (j <= i)
    if name == "sliding_window":
        if p.get("causal_window"):
            return (i - j >= 0) & (i - j < p["w"])
        return np.abs(i - j) < p["w"]
    raise AssertionError(name)


@pytest.mark.parametrize("T", [0, 1, 2, 7, 13])
@pytest.mark.parametrize("name,params", [("none", {}), ("causal", {}), ("prefix_lm", {"L": 0}), ("prefix_lm", {"L": 3}),
                                         ("prefix_lm", {"L": 40}), ("sliding_window", {"w": 1}),
                                         ("sliding_window", {"w": 3}), ("sliding_window", {"w": 3, "causal_window": True})])
def test_token_presets_against_brute_force(T, name, params):
    segs = segments_from_lengths([T // 3, T - T // 3], ["a", "b"])
    np.testing.assert_array_equal(preset(name, segs, **params).compile(segs), brute(name, T, **params))


@pytest.mark.parametrize("causal", [False, True])
def test_block_diagonal_documents_are_segments(causal):
    lengths = [3, 1, 4, 0, 2]
    segs = segments_from_lengths(lengths)
    doc = np.repeat(np.arange(len(lengths)), lengths)
    i, j = np.meshgrid(np.arange(10), np.arange(10), indexing="ij")
    want = (doc[i] == doc[j]) & ((j <= i) if causal else True)
    np.testing.assert_array_equal(preset("block_diagonal", segs, causal=causal).compile(segs), want)


def test_block_diagonal_documents_grouping_segments():
    segs = segments_from_lengths([2, 2, 3], ["q", "a", "r"])
    m = preset("block_diagonal", segs, documents=[["q", "a"], ["r"]]).compile(segs)
    doc = np.array([0, 0, 0, 0, 1, 1, 1])
    np.testing.assert_array_equal(m, doc[:, None] == doc[None, :])


@pytest.mark.parametrize("causal", [False, True])
def test_block_diagonal_lengths_and_remainder(causal):
    segs = segments_from_lengths([9])
    m = preset("block_diagonal", segs, lengths=[3, 2], causal=causal).compile(segs)
    doc = np.array([0, 0, 0, 1, 1, 2, 2, 2, 2])  # the 4 tokens past the listed lengths form one more document
    i, j = np.meshgrid(np.arange(9), np.arange(9), indexing="ij")
    np.testing.assert_array_equal(m, (doc[i] == doc[j]) & ((j <= i) if causal else True))
    # lengths longer than the sequence are cut
    m2 = preset("block_diagonal", segs, lengths=[4, 10]).compile(segs)
    doc2 = np.array([0] * 4 + [1] * 5)
    np.testing.assert_array_equal(m2, doc2[:, None] == doc2[None, :])


def test_block_diagonal_cross_lengths():
    q = segments_from_lengths([3])
    k = segments_from_lengths([5])
    m = preset("block_diagonal", q, k, q_lengths=[1, 2], kv_lengths=[3, 2]).compile(q, k)
    want = np.array([[1, 1, 1, 0, 0], [0, 0, 0, 1, 1], [0, 0, 0, 1, 1]], bool)
    np.testing.assert_array_equal(m, want)


def test_presets_follow_token_count_changes():
    d = preset("prefix_lm", L=2)
    for T in (1, 4, 9):
        segs = segments_from_lengths([T])
        np.testing.assert_array_equal(d.compile(segs), brute("prefix_lm", T, L=2))
    names = ["image", "prompt", "fast", "expert"]
    d = preset("vla", segments_from_lengths([1, 1, 1, 1], names))
    segs = segments_from_lengths([3, 2, 4, 2], names)
    np.testing.assert_array_equal(d.compile(segs), vla_brute(list("IIIPPAAAAEE")))


@pytest.mark.parametrize("op", ["and", "or"])
def test_combine_is_boolean_op_of_compiles(op):
    segs = segments_from_lengths([3, 2, 4, 3], ["image", "prompt", "fast", "expert"])
    a = preset("vla", segs)
    b = preset("sliding_window", segs, w=3)
    want = (a.compile(segs) & b.compile(segs)) if op == "and" else (a.compile(segs) | b.compile(segs))
    np.testing.assert_array_equal(combine(a, b, op).compile(segs), want)
    np.testing.assert_array_equal(combine_preset(a, "sliding_window", op, w=3).compile(segs), want)


def test_prefix_lm_is_causal_or_prefix_as_in_attention_gym():
    segs = segments_from_lengths([8])
    d = combine_preset(MaskDesign(default_rule=Rule.causal()), "prefix_lm", "or", L=3)
    np.testing.assert_array_equal(d.compile(segs), brute("prefix_lm", 8, L=3))


@pytest.mark.parametrize("ar", [[1, 1, 1, 1], [0, 0, 0, 1, 1, 1], [1, 0, 1, 0, 1, 0, 0, 1, 0, 0]])
def test_ar_mask_design_round_trip(ar):
    segs = segments_from_lengths([len(ar)])
    d = design_from_ar_mask(ar)
    np.testing.assert_array_equal(d.compile(segs), make_attn_mask(ar))
    ar2, valid2 = ar_mask_from_design(d, segs)
    np.testing.assert_array_equal(make_attn_mask(ar2, valid2), make_attn_mask(ar))


def test_bad_preset_parameters_are_clear():
    segs = segments_from_lengths([4])
    with pytest.raises(ValueError, match="unknown mask preset"):
        preset("diagonal", segs)
    with pytest.raises(ValueError, match="prefix length L"):
        preset("prefix_lm", segs, L=-1)
    with pytest.raises(ValueError, match="window w"):
        preset("sliding_window", segs, w=0)
    with pytest.raises(ValueError, match="takes no parameter"):
        preset("causal", segs, w=3)
    with pytest.raises(ValueError, match="either documents"):
        preset("block_diagonal", segs, documents=[["seg0"]], lengths=[2])
    assert set(PRESETS) == {"none", "causal", "prefix_lm", "block_diagonal", "sliding_window", "vla"}


def test_vla_term_denies_a_later_segment_without_role():
    segs = segments_from_lengths([2, 2, 2], ["image", "fast", "expert"])
    d = combine_preset(MaskDesign(), "vla", "and")
    later = segments_from_lengths([2, 2, 2, 3], ["image", "fast", "expert", "notes"])
    m = d.compile(later)
    np.testing.assert_array_equal(m[:6, :6], preset("vla", segs).compile(segs))
    assert not m[6:].any() and not m[:, 6:].any()
