"""Masks to and from code: npy / JSON / ar_mask round trips, the generated FlexAttention mask_mod
(run with numpy standing in for torch), and xformers block-diagonal lengths."""

from __future__ import annotations

import ast
import json
import sys
import types
from unittest import mock

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from attnviz.model.mask.analysis import ar_mask_from_mask, seqlens_from_mask
from attnviz.model.mask.design import BlockSplit, MaskDesign
from attnviz.model.mask.export import (design_from_dense, design_from_json, design_to_json, export_mask,
                                       flex_mask_mod_source, import_mask, load_ar_mask, load_npy)
from attnviz.model.mask.paint import CellOverrides
from attnviz.model.mask.presets import preset
from attnviz.model.mask.rules import Rule, make_attn_mask
from attnviz.model.segments import Segment
from mask_oracles import preset_term, segments_from_lengths

VLA_NAMES = ["image", "prompt", "fast", "expert"]


def run_mask_mod(source: str, Tq: int, Tk: int, nh: int | None = None) -> np.ndarray:
    """Exec the generated source with a stand-in ``torch`` module backed by numpy."""
    fake = types.ModuleType("torch")
    fake.tensor = lambda data, dtype=None: np.array(data, dtype=dtype)
    fake.zeros = lambda shape, dtype=None: np.zeros(shape, dtype=dtype)
    fake.clamp = lambda x, lo, hi: np.minimum(np.maximum(x, lo), hi)
    fake.int8, fake.int64, fake.bool = np.int8, np.int64, np.bool_
    ns: dict = {}
    with mock.patch.dict(sys.modules, {"torch": fake}):
        exec(compile(source, "<mask_mod>", "exec"), ns)
    q = np.arange(Tq)[:, None]
    k = np.arange(Tk)[None, :]
    if nh is None:
        return np.broadcast_to(ns["mask_mod"](np.int64(0), np.int64(0), q, k), (Tq, Tk))
    h = np.arange(nh)[:, None, None]
    return np.broadcast_to(ns["mask_mod"](np.int64(0), h, q[None], k[None]), (nh, Tq, Tk))


def assert_tensor_safe(source: str):
    """No Python ``and`` / ``or`` / ``if`` inside the generated functions (they break on tensors)."""
    tree = ast.parse(source)
    for fn in [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name != "move_tables"]:
        for node in ast.walk(fn):
            assert not isinstance(node, (ast.BoolOp, ast.If, ast.IfExp, ast.While, ast.For)), ast.dump(node)


PRESET_CASES = [
    ("none", {}), ("causal", {}), ("prefix_lm", {"L": 3}), ("block_diagonal", {}),
    ("block_diagonal", {"causal": True}), ("block_diagonal", {"lengths": [2, 5, 1]}),
    ("block_diagonal", {"lengths": [4], "causal": True}), ("sliding_window", {"w": 2}),
    ("sliding_window", {"w": 4, "causal_window": True}), ("vla", {}),
]


@pytest.mark.parametrize("sizes", [(3, 2, 4, 3), (1, 1, 1, 1), (2, 0, 3, 1)])
@pytest.mark.parametrize("name,params", PRESET_CASES)
def test_flex_source_reproduces_every_preset(name, params, sizes):
    segs = segments_from_lengths(sizes, VLA_NAMES)
    d = preset(name, segs, **params)
    src = flex_mask_mod_source(d, segs, verify=False)
    assert_tensor_safe(src)
    T = sum(sizes)
    np.testing.assert_array_equal(run_mask_mod(src, T, T), d.compile(segs))


def test_flex_source_reproduces_painted_and_combined_masks():
    segs = segments_from_lengths([3, 2, 4, 3], VLA_NAMES)
    d = preset("vla", segs)
    ov = CellOverrides.from_cells([0, 0, 0, 5, 11, 11, 20], [9, 10, 11, 0, 4, 5, 1],
                                  ["allow", "allow", "allow", "deny", "allow", "allow", "allow"])
    d = MaskDesign(d.default_rule, d.rules, (BlockSplit("fast", (1,), ("fast.1", "fast.2")),),
                   (preset_term("or", "prefix_lm", L=2),), ov)
    src = flex_mask_mod_source(d, segs, verify=False)
    assert_tensor_safe(src)
    np.testing.assert_array_equal(run_mask_mod(src, 12, 12), d.compile(segs))


def test_flex_source_per_head_and_cross_attention():
    q = [Segment("fast", 0, 3), Segment("expert", 3, 5)]
    k = segments_from_lengths([2, 2, 3, 2], VLA_NAMES)
    d = preset("vla", q, k).with_head(1, MaskDesign(default_rule=Rule.causal(),
                                                     overrides=CellOverrides.from_cells([4], [0], "deny")))
    src = flex_mask_mod_source(d, q, k, nh=3, verify=False)
    expected = d.compile(q, k, nh=3)
    assert expected.shape == (3, 5, 9)
    np.testing.assert_array_equal(run_mask_mod(src, 5, 9, nh=3), expected)


# -- random designs ----------------------------------------------------------------------------
@st.composite
def rules(draw):
    kind = draw(st.sampled_from(["allow", "deny", "causal", "anti_causal", "sliding_window", "ar_mask"]))
    align = draw(st.sampled_from(["global", "block"]))
    if kind == "sliding_window":
        return Rule.sliding_window(draw(st.integers(1, 4)), draw(st.booleans()), align)
    if kind == "ar_mask":
        n = draw(st.integers(1, 6))
        ar = draw(st.lists(st.integers(0, 1), min_size=n, max_size=n))
        valid = draw(st.lists(st.booleans(), min_size=n, max_size=n))
        return Rule.ar_mask(ar, valid, align)
    return Rule(kind, align=align)


@st.composite
def designs(draw):
    lengths = draw(st.lists(st.integers(0, 4), min_size=1, max_size=4))
    names = [f"s{i}" for i in range(len(lengths))]
    segs = segments_from_lengths(lengths, names)
    splits = []
    if draw(st.booleans()):
        splits.append(BlockSplit("s0", (draw(st.integers(1, 5)),), ("s0.a", "s0.b")))
    block_names = names + ["s0.a", "s0.b"]
    pairs = draw(st.lists(st.tuples(st.sampled_from(block_names), st.sampled_from(block_names), rules()), max_size=6))
    presets = []
    for _ in range(draw(st.integers(0, 2))):
        name, params = draw(st.sampled_from(PRESET_CASES[:-1]))
        presets.append(preset_term(draw(st.sampled_from(["and", "or"])), name, **params))
    T = sum(lengths)
    n_paint = draw(st.integers(0, 8))
    cells = draw(st.lists(st.tuples(st.integers(0, T + 2), st.integers(0, T + 2)), min_size=n_paint, max_size=n_paint))
    vals = draw(st.lists(st.sampled_from([1, -1]), min_size=n_paint, max_size=n_paint))
    ov = CellOverrides.from_cells([c[0] for c in cells], [c[1] for c in cells], vals) if cells else CellOverrides()
    d = MaskDesign(draw(rules()), tuple(pairs), tuple(splits), tuple(presets), ov)
    return d, segs


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(designs())
def test_random_designs_flex_json_npy(case):
    d, segs = case
    T = segs[-1].stop
    dense = d.compile(segs)
    src = flex_mask_mod_source(d, segs, verify=False)
    assert_tensor_safe(src)
    np.testing.assert_array_equal(run_mask_mod(src, T, T), dense)
    assert design_from_json(design_to_json(d)) == d
    np.testing.assert_array_equal(design_from_dense(dense).compile(segs), dense)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 1), st.booleans()), min_size=0, max_size=12))
def test_ar_mask_decision_round_trips_every_ar_mask(entries):
    ar = [a for a, _ in entries]
    valid = [v for _, v in entries]
    m = make_attn_mask(ar, valid)
    ar2, valid2 = ar_mask_from_mask(m)
    np.testing.assert_array_equal(make_attn_mask(ar2, valid2), m)


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 6).flatmap(lambda n: st.lists(st.booleans(), min_size=n * n, max_size=n * n)))
def test_ar_mask_decision_is_exact_or_refuses(bits):
    n = int(round(len(bits) ** 0.5))
    m = np.array(bits, bool).reshape(n, n)
    try:
        ar, valid = ar_mask_from_mask(m)
    except ValueError as exc:
        assert str(exc)
    else:
        np.testing.assert_array_equal(make_attn_mask(ar, valid), m)


@pytest.mark.parametrize("ar", [[1, 1, 1, 1], [0, 0, 0, 1, 1, 1], [1, 0, 1, 0, 1, 0, 0, 1, 0, 0]])
def test_reference_ar_mask_examples(ar):
    m = make_attn_mask(ar)
    if ar == [1, 1, 1, 1]:
        np.testing.assert_array_equal(m, np.tril(np.ones((4, 4), bool)))
    if ar == [0, 0, 0, 1, 1, 1]:
        i, j = np.meshgrid(np.arange(6), np.arange(6), indexing="ij")
        np.testing.assert_array_equal(m, (j < 3) | (j <= i))
    ar2, valid2 = ar_mask_from_mask(m)
    np.testing.assert_array_equal(make_attn_mask(ar2, valid2), m)
    assert valid2.all()


def test_ar_mask_refusals_say_why():
    m = np.tril(np.ones((8, 8), bool))
    m[5, 7], m[5, 6] = True, False
    with pytest.raises(ValueError, match="row 5 sees key 7 but not key 6: not a block-causal pattern"):
        ar_mask_from_mask(m)
    with pytest.raises(ValueError, match="square"):
        ar_mask_from_mask(np.ones((2, 3), bool))
    m = np.ones((3, 3), bool)
    m[1, 1] = False
    with pytest.raises(ValueError, match="token 1 does not see itself"):
        ar_mask_from_mask(m)
    m = np.array([[1, 1, 0], [1, 1, 1], [1, 1, 1]], bool)  # 0 and 1 see each other but 1 sees more
    with pytest.raises(ValueError, match="must see the same keys"):
        ar_mask_from_mask(m)
    m = np.array([[1, 0, 0], [1, 1, 0], [1, 0, 1]], bool)
    with pytest.raises(ValueError, match="not a block-causal pattern"):
        ar_mask_from_mask(m)
    with pytest.raises(ValueError, match="heads' masks differ"):
        ar_mask_from_mask(np.stack([np.eye(3, dtype=bool), np.ones((3, 3), bool)]))


def test_seqlens_for_block_diagonal_and_refusals():
    segs = segments_from_lengths([3, 1, 4, 2])
    s = seqlens_from_mask(preset("block_diagonal", segs).compile(segs))
    assert s == {"q_seqlen": [3, 1, 4, 2], "kv_seqlen": [3, 1, 4, 2], "causal": False}
    s = seqlens_from_mask(preset("block_diagonal", segs, causal=True).compile(segs))
    assert s == {"q_seqlen": [3, 1, 4, 2], "kv_seqlen": [3, 1, 4, 2], "causal": True}
    q, k = segments_from_lengths([3]), segments_from_lengths([5])
    s = seqlens_from_mask(preset("block_diagonal", q, k, q_lengths=[1, 2], kv_lengths=[3, 2]).compile(q, k))
    assert s["q_seqlen"] == [1, 2] and s["kv_seqlen"] == [3, 2]
    vla = segments_from_lengths([2, 2, 3, 2], VLA_NAMES)
    with pytest.raises(ValueError, match="not block-diagonal"):
        seqlens_from_mask(preset("vla", vla).compile(vla))
    with pytest.raises(ValueError, match="sees no key"):
        seqlens_from_mask(np.zeros((2, 2), bool))
    mixed = preset("block_diagonal", segments_from_lengths([2, 2])).compile(segments_from_lengths([2, 2]))
    mixed[1, 1] = True
    mixed[0, 1] = False
    mixed[2:, 2:] = True
    with pytest.raises(ValueError, match="mix full and causal"):
        seqlens_from_mask(mixed)


def test_file_round_trips(tmp_path):
    segs = segments_from_lengths([3, 2, 4, 3], VLA_NAMES)
    d = preset("vla", segs)
    d = MaskDesign(d.default_rule, d.rules, overrides=CellOverrides.from_cells([0, 1], [11, 0], ["allow", "deny"]))
    dense = d.compile(segs)
    export_mask(d, "npy", tmp_path / "m.npy", segs)
    np.testing.assert_array_equal(load_npy(tmp_path / "m.npy"), dense)
    np.testing.assert_array_equal(import_mask(tmp_path / "m.npy").compile(segs), dense)
    export_mask(d, "npy", tmp_path / "mask.bin", segs)  # the file is written where asked, nothing appended
    assert not (tmp_path / "mask.bin.npy").exists()
    np.testing.assert_array_equal(load_npy(tmp_path / "mask.bin"), dense)
    export_mask(d, "json", tmp_path / "m.json", segs)
    assert import_mask(tmp_path / "m.json") == d
    assert json.loads((tmp_path / "m.json").read_text())["context"]["Tq"] == 12
    export_mask(d, "flex", tmp_path / "m.py", segs)
    np.testing.assert_array_equal(run_mask_mod((tmp_path / "m.py").read_text(), 12, 12), dense)
    with pytest.raises(ValueError, match="not a block-causal pattern|see the same keys"):
        export_mask(d, "ar-mask", tmp_path / "ar.json", segs)
    with pytest.raises(ValueError, match="not block-diagonal"):
        export_mask(d, "seqlens", tmp_path / "s.json", segs)
    # prefix-LM is an ar_mask; block diagonal has seqlens
    p = preset("prefix_lm", segs, L=5)
    for name in ("ar.json", "ar.npz"):
        export_mask(p, "ar-mask", tmp_path / name, segs)
        ar, valid = load_ar_mask(tmp_path / name)
        np.testing.assert_array_equal(make_attn_mask(ar, valid), p.compile(segs))
        np.testing.assert_array_equal(import_mask(tmp_path / name).compile(segs), p.compile(segs))
    export_mask(preset("block_diagonal", segs), "seqlens", tmp_path / "s.json", segs)
    doc = json.loads((tmp_path / "s.json").read_text())
    assert doc["q_seqlen"] == [3, 2, 4, 3] and "from_seqlens" in doc["xformers"]


def test_bad_import_files(tmp_path):
    (tmp_path / "bad.npy").write_bytes(b"not numpy")
    with pytest.raises(ValueError, match="not a readable"):
        import_mask(tmp_path / "bad.npy")
    np.save(tmp_path / "v.npy", np.arange(3))
    with pytest.raises(ValueError, match="2-D"):
        import_mask(tmp_path / "v.npy")
    np.save(tmp_path / "f.npy", np.full((2, 2), 0.5))
    with pytest.raises(ValueError, match="booleans or 0/1"):
        import_mask(tmp_path / "f.npy")
    (tmp_path / "x.json").write_text("{nope")
    with pytest.raises(ValueError, match="not .npy and not valid JSON"):
        import_mask(tmp_path / "x.json")
    (tmp_path / "y.json").write_text(json.dumps({"format": "other"}))
    with pytest.raises(ValueError, match="not an attnviz mask design"):
        import_mask(tmp_path / "y.json")
    (tmp_path / "a.json").write_text(json.dumps({"ar_mask": [0, 2]}))
    with pytest.raises(ValueError, match="0/1"):
        import_mask(tmp_path / "a.json")
    (tmp_path / "b.json").write_text(json.dumps({"ar_mask": [0, 1], "valid": [True]}))
    with pytest.raises(ValueError, match="one boolean per"):
        import_mask(tmp_path / "b.json")
    with pytest.raises(ValueError, match="unknown mask export format"):
        export_mask(MaskDesign(), "csv", tmp_path / "o", segments_from_lengths([2]))


def test_dense_import_prefers_simple_structure():
    T = 6
    causal = np.tril(np.ones((T, T), bool))
    d = design_from_dense(causal)
    assert len(d.overrides) == 0
    rect = np.ones((3, 5), bool)
    rect[0, 4] = False
    d = design_from_dense(rect)
    assert d.default_rule == Rule.allow() and len(d.overrides) == 1
    heads = np.stack([causal, ~causal | np.eye(T, dtype=bool)])
    d = design_from_dense(heads)
    np.testing.assert_array_equal(d.compile([], None, T, T, nh=2), heads)


def test_flex_source_for_a_vla_term_with_a_segment_without_role():
    from mask_oracles import combine_preset

    segs = segments_from_lengths([2, 2, 2, 3], ["image", "fast", "expert", "notes"])
    d = combine_preset(MaskDesign(default_rule=Rule.sliding_window(3)), "vla", "or")
    src = flex_mask_mod_source(d, segs, verify=False)
    np.testing.assert_array_equal(run_mask_mod(src, 9, 9), d.compile(segs))
