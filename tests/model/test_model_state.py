"""SessionState construction: validation messages, immutability, equality and hashing."""

import dataclasses

import numpy as np
import pytest

from attnviz.model.frozen import FrozenArray
from attnviz.model.state import (FIELDS, CrossConfig, CustomSource, ImageSource, KernelConfig, ModelConfig,
                                 QKOverride, SessionState, TextSource, ToySource, ViewState)


def test_top_level_field_names_are_fixed():
    assert FIELDS == ("sources", "tokenizer", "cross", "model", "positional", "score_rule", "kernel", "mask", "view",
                      "interventions")


def test_d_model_not_divisible_by_nh_names_both():
    with pytest.raises(ValueError, match=r"d_model=10 is not divisible by nh=3"):
        ModelConfig(d_model=10, nh=3)
    m = ModelConfig(d_model=10, nh=3, hs=4)  # an explicit head size is allowed
    assert m.head_size == 4 and m.value_size == 4


def test_default_sizes_follow_seed_000():
    m = ModelConfig(d_model=64, nh=8)
    assert m.head_size == 8 and m.value_size == 8 and not m.handset


@pytest.mark.parametrize("make, needle", [
    (lambda: ModelConfig(d_model=0), "d_model"),
    (lambda: ModelConfig(nh=True), "number of heads"),
    (lambda: KernelConfig("cuda"), "unknown kernel"),
    (lambda: KernelConfig(block_m=0), "BLOCK_M"),
    (lambda: ViewState(head="all"), "'mean'"),
    (lambda: ViewState(overlay_opacity=2), "opacity"),
    (lambda: TextSource(""), "non-empty"),
    (lambda: TextSource("a", color="blue"), "#rrggbb"),
    (lambda: ImageSource("i", patch=0), "patch size"),
    (lambda: ImageSource("i", policy="stretch"), "policy"),
    (lambda: CustomSource("c", generator="file"), "needs loaded values"),
    (lambda: CustomSource("c", count=10**7), "a block holds at most 65,536"),  # a hostile file: refused at once
    (lambda: CustomSource("c", count=2, generator="file", values=np.zeros((3, 4))), "one row per token"),
    (lambda: ToySource("t", labels=("a",), embeddings=FrozenArray(np.zeros((2, 4)))), "1 labels but 2"),
    (lambda: ToySource("t", labels=("a",), embeddings=FrozenArray([[np.inf]])), "NaN or infinite"),
    (lambda: CrossConfig((), ("a",)), "at least one query"),
    (lambda: QKOverride("v", 0, 0, 0, 1.0), "'q' or 'k'"),
    (lambda: ModelConfig(d_model=4, nh=1, qk_overrides=(QKOverride("q", 1, 0, 0, 1.0),)), "outside"),
    (lambda: ModelConfig(d_model=4, nh=1, W_o=np.zeros((3, 4))), "W_o must have shape"),
])
def test_invalid_parts_raise_clear_errors(make, needle):
    with pytest.raises(ValueError, match=needle):
        make()


def test_session_level_checks():
    a = TextSource("a", text="x")
    with pytest.raises(ValueError, match="unique; repeated: 'a'"):
        SessionState(sources=(a, a))
    with pytest.raises(ValueError, match="unknown sources: 'b'"):
        SessionState(sources=(a,), cross=CrossConfig(("a",), ("b",)))
    toy = ToySource("t", labels=("x",), embeddings=FrozenArray(np.zeros((1, 3))))
    with pytest.raises(ValueError, match="3-dimensional embeddings but d_model is 64"):
        SessionState(sources=(toy,))


def test_state_is_immutable_comparable_and_hashable():
    emb = np.arange(8.0).reshape(2, 4)
    s1 = SessionState(sources=(ToySource("t", labels=("a", "b"), embeddings=FrozenArray(emb)),),
                      model=ModelConfig(d_model=4, nh=1))
    emb[0, 0] = 99  # the state holds its own copy
    s2 = SessionState(sources=(ToySource("t", labels=("a", "b"), embeddings=FrozenArray(np.arange(8.0).reshape(2, 4))),),
                      model=ModelConfig(d_model=4, nh=1))
    assert s1 == s2 and hash(s1.sources) == hash(s2.sources)
    with pytest.raises(dataclasses.FrozenInstanceError):
        s1.view = ViewState()
    with pytest.raises(ValueError):
        s1.sources[0].embeddings.array[0, 0] = 1.0  # read-only
    s3 = dataclasses.replace(s1, view=ViewState(query=1))
    assert s3 != s1 and s1.index_of("t") == 0 and s1.source("t").labels == ("a", "b")


def test_frozen_array_equality_is_by_value_dtype_and_shape():
    a = FrozenArray([1.0, 2.0])
    assert a == FrozenArray(np.array([1.0, 2.0])) and hash(a) == hash(FrozenArray([1.0, 2.0]))
    assert a != FrozenArray([1.0, 2.5]) and a != FrozenArray([[1.0, 2.0]]) and a != FrozenArray([1, 2], dtype=np.int64)
