"""dump_state / load_state: complete, strict round trip (hypothesis over generated sessions)."""

import io
import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attnviz.model.compute import ComputeRequest, run
from attnviz.model.demos import build_demo, list_demos
from attnviz.model.frozen import FrozenArray
from attnviz.model.mask.paint import ALLOW, DENY, CellOverrides
from attnviz.model.mask.presets import preset
from attnviz.model.positional import PositionalConfig
from attnviz.model.score_rules import RULES, ScoreRuleConfig
from attnviz.model.serialize import dump_state, load_state
from attnviz.model.state import (CrossConfig, CustomSource, ImageSource, KernelConfig, ModelConfig, QKOverride,
                                 SessionState, TextSource, TokenizerSpec, ToySource, ViewState)


def _png(h, w):
    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (w, h), (10, 200, 90)).save(buf, format="PNG")
    return buf.getvalue()


PNG = _png(16, 24)
D, NH = 8, 2
finite = st.floats(-3, 3, allow_nan=False)


@st.composite
def sources(draw):
    n = draw(st.integers(1, 3))
    out = []
    for i in range(n):
        kind = draw(st.sampled_from(["text", "toy", "custom", "image"]))
        name, color = f"s{i}", draw(st.sampled_from(["#112233", "#abcdef", "#0072b2"]))
        if kind == "text":
            out.append(TextSource(name, color, draw(st.sampled_from(["bank", "by the river", "שלום 🙂"]))))
        elif kind == "toy":
            T = draw(st.integers(1, 3))
            emb = draw(st.lists(finite, min_size=T * D, max_size=T * D))
            out.append(ToySource(name, color, tuple(f"t{j}" for j in range(T)),
                                 FrozenArray(np.reshape(emb, (T, D)))))
        elif kind == "custom":
            gen = draw(st.sampled_from(["zeros", "noise", "file"]))
            count = draw(st.integers(1, 3))
            vals = FrozenArray(np.arange(count * D, dtype=float).reshape(count, D) / 10) if gen == "file" else None
            out.append(CustomSource(name, color, count, gen, draw(st.integers(0, 5)), 0.5, vals))
        else:
            out.append(ImageSource(name, color, PNG, 8, draw(st.sampled_from(["resize", "crop"])),
                                   draw(st.sampled_from([None, (16, 16)])), draw(st.booleans())))
    return tuple(out)


@st.composite
def states(draw):
    srcs = draw(sources())
    names = [s.name for s in srcs]
    cross = None
    if len(srcs) > 1 and draw(st.booleans()):
        cross = CrossConfig((names[0],), tuple(names[1:]))
    hand = {}
    if draw(st.booleans()):
        hand["W_q"] = FrozenArray(np.full((NH, D, D // NH), 0.1))
    if draw(st.booleans()):
        hand["W_o"] = FrozenArray(np.eye(D))
    ov = ()
    if draw(st.booleans()):
        ov = (QKOverride("q", 1, 0, 2, draw(finite)), QKOverride("k", 0, 0, 0, 1.5))
    model = ModelConfig(D, NH, None, None, draw(st.integers(0, 9)), draw(st.integers(0, 9)), qk_overrides=ov, **hand)
    pos = PositionalConfig(draw(st.sampled_from(["none", "sinusoidal", "learned", "rope", "alibi"])),
                           seed=draw(st.integers(0, 3)))
    rule = ScoreRuleConfig(draw(st.sampled_from(RULES)), draw(st.integers(0, 3)), draw(st.sampled_from([None, 3])))
    kernel = KernelConfig(draw(st.sampled_from(["flash", "naive", "reference"])), draw(st.sampled_from([4, 16])),
                          draw(st.sampled_from([4, 8])))
    mask = draw(st.sampled_from([preset("none", []), preset("causal", []), preset("sliding_window", w=2),
                                 preset("prefix_lm", L=2)]))
    if draw(st.booleans()):
        from dataclasses import replace

        mask = replace(mask, overrides=CellOverrides.from_cells([0, 1, 1], [1, 0, 2], [ALLOW, DENY, DENY]))
    tok = TokenizerSpec() if not draw(st.booleans()) else TokenizerSpec(_default_json(), "copy.json")
    view = ViewState(draw(st.sampled_from([0, 1, "mean"])), draw(st.sampled_from([None, 0])), None,
                     "magma", draw(st.booleans()), draw(st.sampled_from(["scaled", "uniform"])),
                     draw(st.sampled_from(["weights", "mask"])), 0.25, "layout-1")
    return SessionState(srcs, tok, cross, model, pos, rule, kernel, mask, view)


_JSON = []


def _default_json():
    if not _JSON:
        from attnviz.sources.text import BpeTokenizer

        _JSON.append(BpeTokenizer.default().to_json_str())
    return _JSON[0]


def _roundtrip(s):
    tree, arrays, blobs = dump_state(s)
    tree = json.loads(json.dumps(tree, allow_nan=False))  # the tree is plain JSON
    return load_state(tree, arrays, blobs)


@settings(max_examples=40)
@given(states())
def test_roundtrip_gives_equal_state_and_identical_attention(s):
    back = _roundtrip(s)
    assert back == s
    a, b = run(ComputeRequest(1, s)), run(ComputeRequest(1, back))
    assert a.ok == b.ok and a.error == b.error
    if a.ok:
        for name in ("weights", "output", "lse", "combined", "mask", "q", "k", "v"):
            np.testing.assert_array_equal(getattr(a, name), getattr(b, name))
        assert a.query_labels == b.query_labels


@pytest.mark.parametrize("name", [n for n, _ in list_demos()])
def test_every_demo_roundtrips(name):
    s = build_demo(name)
    assert _roundtrip(s) == s


def _good():
    return dump_state(build_demo("vla-mask"))


@pytest.mark.parametrize("mutate, needle", [
    (lambda t, a, b: t.update(extra=1), "unknown key"),
    (lambda t, a, b: t.pop("view"), "missing key"),
    (lambda t, a, b: t["model"].update(nh=3), "not divisible"),
    (lambda t, a, b: t["model"].update(d_model="64"), "must be an integer"),
    (lambda t, a, b: t["sources"][0].update(kind="video"), "unknown source kind"),
    (lambda t, a, b: t["sources"][0].pop("image"), "missing key"),
    (lambda t, a, b: b.pop("sources/0/image"), "missing"),
    (lambda t, a, b: b.update(stray=b"x"), "not referred to"),
    (lambda t, a, b: t["kernel"].update(name="cuda"), "unknown kernel"),
    (lambda t, a, b: t["view"].update(overlay_opacity=float("nan")), "finite number"),
    (lambda t, a, b: t["positional"].update(kind="spiral"), "unknown positional"),
    (lambda t, a, b: t["sources"][2].update(count=-1), "token count"),
])
def test_invalid_payloads_raise_value_error(mutate, needle):
    t, a, b = _good()
    mutate(t, a, b)
    with pytest.raises(ValueError, match=needle):
        load_state(t, a, b)


def test_wrong_array_shape_and_dtype_are_refused():
    t, a, b = dump_state(build_demo("river-bank"))
    a2 = dict(a, **{"model/W_q": np.zeros((1, 4, 3))})
    with pytest.raises(ValueError, match="W_q must have shape"):
        load_state(t, a2, b)
    a3 = dict(a, **{"sources/0/embeddings": np.array([["a"] * 4] * 4)})
    with pytest.raises(ValueError, match="must hold numbers"):
        load_state(t, a3, b)
    a4 = dict(a, **{"sources/0/embeddings": np.full((4, 4), np.nan)})
    with pytest.raises(ValueError, match="NaN"):
        load_state(t, a4, b)
