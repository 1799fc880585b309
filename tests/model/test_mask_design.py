"""MaskDesign: rule layer, splits, painted cells, per-head designs, payload round trips."""

from __future__ import annotations

import json

import numpy as np
import pytest

from attnviz.model.mask.design import BlockSplit, MaskDesign, PresetTerm
from attnviz.model.mask.paint import CellOverrides
from attnviz.model.mask.rules import Rule, make_attn_mask
from attnviz.model.segments import Segment
from mask_oracles import preset_term, segments_from_lengths


def ij(Tq, Tk):
    return np.meshgrid(np.arange(Tq), np.arange(Tk), indexing="ij")


def test_default_allows_everything():
    segs = segments_from_lengths([2, 3])
    m = MaskDesign.default().compile(segs)
    assert m.shape == (5, 5) and m.dtype == bool and m.all()
    assert MaskDesign.default() == MaskDesign()


@pytest.mark.parametrize("kind", ["causal", "anti_causal"])
def test_rule_on_every_pair_composes_to_global_pattern(kind):
    segs = segments_from_lengths([2, 3, 4], ["a", "b", "c"])
    rule = Rule(kind)
    d = MaskDesign(default_rule=Rule.deny(), rules=tuple((p.name, q.name, rule) for p in segs for q in segs))
    i, j = ij(9, 9)
    np.testing.assert_array_equal(d.compile(segs), (j <= i) if kind == "causal" else (j >= i))


def test_cross_attention_causal_is_bottom_right():
    q = segments_from_lengths([3])
    k = segments_from_lengths([5])
    m = MaskDesign(default_rule=Rule.causal()).compile(q, k)
    i, j = ij(3, 5)
    np.testing.assert_array_equal(m, j <= i + 2)  # xformers LowerTriangularFromBottomRightMask
    m2 = MaskDesign(default_rule=Rule.causal()).compile(k, q)
    i, j = ij(5, 3)
    np.testing.assert_array_equal(m2, j <= i - 2)
    assert not m2[:2].any()  # more queries than keys: the first rows see nothing


def test_block_alignment_is_local_and_bottom_right():
    segs = segments_from_lengths([2, 3], ["a", "b"])
    d = MaskDesign(default_rule=Rule.deny(), rules=(("b", "a", Rule.causal(align="block")),))
    m = d.compile(segs)
    # rows 2..4 (nq=3) over keys 0..1 (nk=2): pq = local_i + (2 - 3), pk = local_j
    want = np.zeros((5, 5), bool)
    for li in range(3):
        for lj in range(2):
            want[2 + li, lj] = lj <= li - 1
    np.testing.assert_array_equal(m, want)


def test_sliding_window_symmetric_and_causal():
    segs = segments_from_lengths([7])
    i, j = ij(7, 7)
    np.testing.assert_array_equal(MaskDesign(default_rule=Rule.sliding_window(2)).compile(segs), np.abs(i - j) < 2)
    np.testing.assert_array_equal(MaskDesign(default_rule=Rule.sliding_window(3, causal_window=True)).compile(segs),
                                  (i - j >= 0) & (i - j < 3))


def test_ar_mask_rule_on_a_diagonal_block_and_its_extension():
    segs = segments_from_lengths([2, 4], ["img", "txt"])
    ar, valid = [1, 0, 1, 1], [True, True, True, False]
    d = MaskDesign(default_rule=Rule.deny(), rules=(("txt", "txt", Rule.ar_mask(ar, valid)),))
    m = d.compile(segs)
    np.testing.assert_array_equal(m[2:, 2:], make_attn_mask(ar, valid))
    assert not m[:2].any() and not m[:, :2].any()
    # the block grows by two tokens: they continue the last group (ar = 0) and are valid
    segs2 = segments_from_lengths([2, 6], ["img", "txt"])
    np.testing.assert_array_equal(d.compile(segs2)[2:, 2:], make_attn_mask(ar + [0, 0], valid + [True, True]))


def test_rule_lookup_precedence_and_unknown_names():
    segs = segments_from_lengths([4, 2], ["a", "b"])
    split = BlockSplit("a", (2,), ("a.1", "a.2"))
    d = MaskDesign(default_rule=Rule.deny(), splits=(split,),
                   rules=(("a", "a", Rule.allow()), ("a.2", "a.1", Rule.deny()), ("zzz", "a", Rule.allow())))
    m = d.compile(segs)
    assert m[0:2, 0:4].all()  # a.1 -> a.* inherits (a, a)
    assert not m[2:4, 0:2].any()  # (a.2, a.1) explicit
    assert m[2:4, 2:4].all()  # (a.2, a.2) inherits (a, a)
    assert not m[4:].any()
    blocks = d.blocks(segs)
    assert [(b.name, b.start, b.stop) for b in blocks] == [("a.1", 0, 2), ("a.2", 2, 4), ("b", 4, 6)]
    rule, explicit = d.effective_rule(blocks[1], blocks[0])
    assert rule == Rule.deny() and explicit
    rule, explicit = d.effective_rule(blocks[2], blocks[2])
    assert rule == Rule.deny() and not explicit


def test_split_survives_shrinking_and_growing_segment():
    split = BlockSplit("a", (2, 5), ("a.1", "a.2", "a.3"))
    d = MaskDesign(default_rule=Rule.deny(), splits=(split,), rules=(("a.3", "a.3", Rule.allow()),))
    small = [Segment("a", 0, 3)]
    assert [(b.name, b.start, b.stop) for b in d.blocks(small)] == [("a.1", 0, 2), ("a.2", 2, 3), ("a.3", 3, 3)]
    assert not d.compile(small).any()  # a.3 is empty now; its rule waits
    big = [Segment("x", 0, 1), Segment("a", 1, 8)]
    assert [(b.name, b.start, b.stop) for b in d.blocks(big)][1:] == [("a.1", 1, 3), ("a.2", 3, 6), ("a.3", 6, 8)]
    assert d.compile(big)[6:8, 6:8].all() and d.compile(big).sum() == 4


def test_painted_cells_override_rules_and_beyond_size_are_ignored():
    segs = segments_from_lengths([4])
    ov = CellOverrides.from_cells([0, 3, 10], [3, 0, 10], ["allow", "deny", "allow"])
    d = MaskDesign(default_rule=Rule.causal(), overrides=ov)
    layers = d.compile_layers(segs)
    i, j = ij(4, 4)
    np.testing.assert_array_equal(layers.rules, j <= i)
    assert layers.overrides[0, 3] == 1 and layers.overrides[3, 0] == -1 and np.count_nonzero(layers.overrides) == 2
    want = (j <= i)
    want[0, 3], want[3, 0] = True, False
    np.testing.assert_array_equal(layers.mask, want)
    np.testing.assert_array_equal(d.compile(segs), want)
    assert d.compile(segments_from_lengths([11]))[10, 10]  # the far cell applies once the sequence is long enough


def test_preset_terms_apply_after_rules_and_before_paint():
    segs = segments_from_lengths([6])
    ov = CellOverrides.from_cells([5], [5], "deny")
    d = MaskDesign(default_rule=Rule.causal(), presets=(preset_term("and", "sliding_window", w=2),),
                   overrides=ov)
    i, j = ij(6, 6)
    want = (j <= i) & (np.abs(i - j) < 2)
    want[5, 5] = False
    np.testing.assert_array_equal(d.compile(segs), want)


def test_per_head_designs():
    segs = segments_from_lengths([5])
    d = MaskDesign(heads=((1, MaskDesign(default_rule=Rule.causal())),))
    assert d.compile(segs).shape == (5, 5) and d.compile(segs).all()  # nh None: the shared mask
    m = d.compile(segs, nh=3)
    assert m.shape == (3, 5, 5)
    i, j = ij(5, 5)
    np.testing.assert_array_equal(m[1], j <= i)
    assert m[0].all() and m[2].all()
    assert d.compile(segs, nh=1).shape == (5, 5)  # head 1 does not exist with one head
    same = MaskDesign(heads=((0, MaskDesign()),))
    assert same.compile(segs, nh=2).shape == (5, 5)  # heads equal -> 2-D
    layers = d.compile_layers(segs, nh=3)
    assert layers.rules.shape == layers.overrides.shape == (3, 5, 5)


def test_empty_segments_and_zero_length():
    assert MaskDesign().compile([], None, 3, 3).all()
    assert MaskDesign().compile([], None, 0, 0).shape == (0, 0)
    with pytest.raises(ValueError, match="segments cover"):
        MaskDesign().compile(segments_from_lengths([3]), None, 4, 4)


def sample_design() -> MaskDesign:
    inner = MaskDesign(default_rule=Rule.sliding_window(2, causal_window=True),
                       overrides=CellOverrides.from_cells([1], [0], "deny"))
    return MaskDesign(
        default_rule=Rule.deny(),
        rules=(("a.1", "b", Rule.causal()), ("b", "b", Rule.ar_mask([1, 0, 1], [1, 1, 0])),
               ("a", "a", Rule.anti_causal(align="block"))),
        splits=(BlockSplit("a", (1,), ("a.1", "a.2")),),
        presets=(preset_term("or", "prefix_lm", L=1), PresetTerm("and", "design", "{}", inner)),
        overrides=CellOverrides.from_cells([0, 2, 7], [4, 1, 9], ["allow", "deny", "allow"]),
        heads=((2, MaskDesign(default_rule=Rule.causal(), overrides=CellOverrides.from_cells([0], [1], "allow"))),),
    )


def test_payload_round_trip_through_json():
    d = sample_design()
    payload, arrays = d.to_payload()
    text = json.dumps(payload)  # JSON-able
    back = MaskDesign.from_payload(json.loads(text), {k: np.array(v) for k, v in arrays.items()})
    assert back == d
    segs = segments_from_lengths([3, 3], ["a", "b"])
    np.testing.assert_array_equal(back.compile(segs, nh=3), d.compile(segs, nh=3))


@pytest.mark.parametrize("mutate,match", [
    (lambda p: p.update(version=99), "newer"),
    (lambda p: p.update(default={"kind": "sometimes"}), "unknown mask rule"),
    (lambda p: p["rules"].append({"q": "a", "k": 3, "rule": {"kind": "allow"}}), "block names"),
    (lambda p: p["splits"].append({"segment": "b", "offsets": [2, 1], "names": ["x", "y", "z"]}), "increasing"),
    (lambda p: p.update(overrides="missing"), "missing array"),
    (lambda p: p["presets"].append({"op": "xor", "name": "causal", "params": {}}), "'and' or 'or'"),
    (lambda p: p["presets"].append({"op": "and", "name": "prefix_lm", "params": {}}), "prefix length"),
    (lambda p: p.update(rules="nope"), "must be a list"),
    (lambda p: p.update(extra=1), "unknown fields"),
    (lambda p: p["heads"].append({"head": -1, "design": {}}), "head index"),
    (lambda p: p.update(default={"kind": "sliding_window", "window": 0}), "w >= 1"),
    (lambda p: p.update(default={"kind": "ar_mask", "ar": [2]}), "0 or 1"),
])
def test_invalid_payloads_raise_value_error(mutate, match):
    payload, arrays = sample_design().to_payload()
    mutate(payload)
    with pytest.raises(ValueError, match=match):
        MaskDesign.from_payload(payload, arrays)


def test_invalid_painted_array_raises():
    payload, arrays = sample_design().to_payload()
    key = payload["overrides"]
    with pytest.raises(ValueError, match=r"\(n, 3\)"):
        MaskDesign.from_payload(payload, {**arrays, key: np.zeros((2, 2))})
    with pytest.raises(ValueError, match="1 \\(allow\\) or -1"):
        MaskDesign.from_payload(payload, {**arrays, key: np.array([[0, 0, 5]])})
    with pytest.raises(ValueError, match="out of range|>= 0|range"):
        MaskDesign.from_payload(payload, {**arrays, key: np.array([[-1, 0, 1]])})


def test_cell_overrides_set_get_clear_runs():
    ov = CellOverrides.from_cells([2, 0, 0, 0, 2], [5, 1, 2, 4, 5], ["allow", "allow", "allow", "deny", "deny"])
    assert len(ov) == 4 and ov.get([2, 0, 9], [5, 4, 9]).tolist() == [-1, -1, 0]  # the later (2, 5) wins
    assert ov.runs() == [(0, 1, 3, 1), (0, 4, 5, -1), (2, 5, 6, -1)]
    assert ov.set([0], [1], "erase").get([0], [1]).tolist() == [0]
    assert ov.cleared(rows=[0]) == CellOverrides.from_cells([2], [5], "deny")
    assert ov.cleared(cols=[5, 1]).to_array().tolist() == [[0, 2, 1], [0, 4, -1]]
    assert ov.cleared() == CellOverrides() and not CellOverrides()
    assert CellOverrides.from_array(ov.to_array()) == ov and hash(CellOverrides.from_array(ov.to_array())) == hash(ov)
    dense = ov.dense(1, 3)
    assert dense.tolist() == [[0, 1, 1]]
    with pytest.raises(ValueError, match="integers"):
        ov.set([0.5], [1], "allow")


def test_deeply_nested_payload_is_refused():
    d = MaskDesign()
    for _ in range(12):
        d = MaskDesign(presets=(PresetTerm("and", "design", "{}", d),))
    payload, arrays = d.to_payload()
    with pytest.raises(ValueError, match="deep"):
        MaskDesign.from_payload(payload, arrays)


def test_payload_fuzz_only_raises_value_error():
    from hypothesis import given, settings
    from hypothesis import strategies as st

    leaf = st.one_of(st.none(), st.booleans(), st.integers(-3, 2**70), st.text(max_size=4), st.floats())
    tree = st.recursive(leaf, lambda c: st.one_of(st.lists(c, max_size=3),
                                                  st.dictionaries(st.sampled_from(
                                                      ["q", "k", "rule", "kind", "window", "ar", "valid", "segment",
                                                       "offsets", "names", "op", "name", "params", "design", "head"]),
                                                      c, max_size=4)), max_leaves=12)
    keys = st.sampled_from(["default", "rules", "splits", "presets", "heads", "overrides"])

    @settings(max_examples=150, deadline=None)
    @given(st.dictionaries(keys, tree, max_size=4))
    def run(payload):
        try:
            MaskDesign.from_payload(payload, {"a": np.zeros((1, 3))})
        except ValueError:
            pass

    run()
