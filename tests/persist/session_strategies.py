"""Hypothesis strategies for whole sessions (every kind of source, hand-set or seeded weights, every
positional encoding, score rule and kernel, mask rules, presets, painted cells and per-head designs,
view state), and a check that two computed responses are the same."""

from __future__ import annotations

import io

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from attnviz.model.compute import ComputeRequest, run
from attnviz.model.frozen import FrozenArray
from attnviz.model.mask.design import MaskDesign
from attnviz.model.mask.paint import CellOverrides
from attnviz.model.mask.rules import Rule
from attnviz.model.positional import KINDS, PositionalConfig
from attnviz.model.score_rules import RULES, ScoreRuleConfig
from attnviz.model.state import (KERNEL_NAMES, NORMALISATIONS, PALETTE, VIEW_MATRICES, CrossConfig,
                                 CustomSource, ImageSource, KernelConfig, ModelConfig, QKOverride,
                                 SessionState, TextSource, TokenizerSpec, ToySource, ViewState)
from mask_oracles import preset_term


def _tiny_png(seed: int) -> bytes:
    from PIL import Image

    rng = np.random.default_rng(seed)
    img = Image.fromarray(rng.integers(0, 256, (24, 40, 3), dtype=np.uint8), "RGB")  # (H, W, C)
    buf = io.BytesIO()
    img.save(buf, format="PNG")
    return buf.getvalue()


IMAGES = [_tiny_png(0), _tiny_png(1)]
_finite = st.floats(-3, 3, allow_nan=False, allow_infinity=False, width=64)
_label = st.text(st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")), min_size=1, max_size=5)


def _weights(shape):
    return arrays(np.float64, shape, elements=_finite).map(FrozenArray)


@st.composite
def _source(draw, i: int, d_model: int):
    name = f"s{i} " + draw(_label)
    color = draw(st.sampled_from(PALETTE))
    kind = draw(st.sampled_from(["toy", "text", "custom", "image"]))
    if kind == "toy":
        n = draw(st.integers(1, 4))
        labels = tuple(draw(st.lists(_label, min_size=n, max_size=n)))
        return ToySource(name, color, labels, draw(_weights((n, d_model))))
    if kind == "text":
        text = draw(st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=24))
        return TextSource(name, color, text)
    if kind == "custom":
        gen = draw(st.sampled_from(["zeros", "noise", "file"]))
        count = draw(st.integers(1, 3))
        values = draw(_weights((count, d_model))) if gen == "file" else None
        return CustomSource(name, color, count, gen, draw(st.integers(0, 2**31)), draw(st.floats(0, 2)), values)
    patch = draw(st.sampled_from([8, 16]))
    return ImageSource(name, color, draw(st.sampled_from(IMAGES)), patch, draw(st.sampled_from(["resize", "crop"])),
                       draw(st.sampled_from([None, (16, 32), (32, 16)])), draw(st.booleans()))


@st.composite
def _mask(draw, names: list[str], nh: int):
    design = MaskDesign(default_rule=draw(st.sampled_from(
        [Rule.allow(), Rule.causal(), Rule.anti_causal(), Rule.sliding_window(2), Rule.sliding_window(3, True)])))
    for _ in range(draw(st.integers(0, 2))):
        q, k = draw(st.sampled_from(names)), draw(st.sampled_from(names))
        design = design.with_rule(q, k, draw(st.sampled_from([Rule.deny(), Rule.causal("block"), Rule.allow()])))
    if draw(st.booleans()):
        term = draw(st.sampled_from([preset_term("or", "prefix_lm", L=2), preset_term("and", "causal")]))
        design = MaskDesign(design.default_rule, design.rules, design.splits, (term,), design.overrides)
    n = draw(st.integers(0, 6))
    if n:
        rows = draw(st.lists(st.integers(0, 12), min_size=n, max_size=n))
        cols = draw(st.lists(st.integers(0, 12), min_size=n, max_size=n))
        vals = draw(st.lists(st.sampled_from(["allow", "deny"]), min_size=n, max_size=n))
        design = MaskDesign(design.default_rule, design.rules, design.splits, design.presets,
                            CellOverrides().set(rows, cols, vals))
    if nh > 1 and draw(st.booleans()):
        design = design.with_head(nh - 1, MaskDesign(default_rule=Rule.causal()))
    return design


@st.composite
def sessions(draw) -> SessionState:
    d_model = draw(st.sampled_from([4, 8]))
    nh = draw(st.sampled_from([n for n in (1, 2, 4) if d_model % n == 0]))
    hs = d_model // nh
    sources = tuple(draw(_source(i, d_model)) for i in range(draw(st.integers(1, 3))))
    names = [s.name for s in sources]
    cross = None
    if len(sources) > 1 and draw(st.booleans()):
        cut = draw(st.integers(1, len(sources) - 1))
        cross = CrossConfig(tuple(names[:cut]), tuple(names[cut:]))
    hand = {}
    if draw(st.booleans()):
        hand = {"W_q": draw(_weights((nh, d_model, hs))), "W_k": draw(_weights((nh, d_model, hs))),
                "W_v": draw(_weights((nh, d_model, hs))), "W_o": draw(_weights((nh * hs, d_model)))}
    overrides = ()
    if draw(st.booleans()):
        overrides = (QKOverride(draw(st.sampled_from("qk")), draw(st.integers(0, nh - 1)), draw(st.integers(0, 3)),
                                draw(st.integers(0, hs - 1)), draw(_finite)),)
    model = ModelConfig(d_model, nh, seed=draw(st.integers(0, 1000)), embed_seed=draw(st.integers(0, 1000)),
                        qk_overrides=overrides, **hand)
    tokenizer = TokenizerSpec()
    if draw(st.integers(0, 9)) == 0:  # now and then an embedded tokenizer.json (the bundled one)
        from attnviz.resources_path import resource_path

        tokenizer = TokenizerSpec(resource_path("tokenizer", "tokenizer.json").read_text(encoding="utf-8"),
                                  "tokenizer.json")
    positional = PositionalConfig(draw(st.sampled_from(KINDS)), draw(st.sampled_from([10000.0, 100.0])),
                                  draw(st.integers(0, 99)), draw(st.sampled_from([0.02, 0.5])))
    score_rule = ScoreRuleConfig(draw(st.sampled_from(RULES)), draw(st.integers(0, 99)),
                                 draw(st.sampled_from([None, 3])))
    kernel = KernelConfig(draw(st.sampled_from(KERNEL_NAMES)), draw(st.sampled_from([2, 16, 64])),
                          draw(st.sampled_from([3, 16, 64])))
    view = ViewState(draw(st.sampled_from([0, "mean"])), draw(st.sampled_from([None, 0, 2])),
                     draw(st.sampled_from([None, 1])), draw(st.sampled_from(["viridis", "magma"])),
                     draw(st.booleans()), draw(st.sampled_from(NORMALISATIONS)), draw(st.sampled_from(VIEW_MATRICES)),
                     draw(st.floats(0, 1)), draw(st.sampled_from(["", "default", "mask-designer"])))
    return SessionState(sources, tokenizer, cross, model, positional, score_rule, kernel,
                        draw(_mask(names, nh)), view)


RESULT_FIELDS = ("mask", "scores", "weights", "output", "lse", "combined", "X", "q", "k", "v")


def compute(state: SessionState):
    return run(ComputeRequest(0, state))


def assert_same_attention(a, b) -> None:
    """Two responses are identical: same success or the same error, and bit-equal arrays."""
    assert a.ok == b.ok and a.error == b.error
    assert a.query_labels == b.query_labels and a.key_labels == b.key_labels
    for name in RESULT_FIELDS:
        x, y = getattr(a, name), getattr(b, name)
        assert (x is None) == (y is None), name
        if x is not None:
            assert x.dtype == y.dtype and x.shape == y.shape, name
            assert np.array_equal(x, y), name  # -inf in lse compares equal to -inf
