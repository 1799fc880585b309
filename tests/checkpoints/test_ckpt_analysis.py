"""Head summaries, attention rollout and class-token maps on hand-made attention maps with known answers."""

from __future__ import annotations

import math

import numpy as np
import pytest
from ckpt_helpers import TINY, golden

from attnviz.checkpoints import CheckpointError, attention_rollout, cls_attention_maps, head_summaries


def _random_attn(rng, L, nh, T):
    a = rng.random((L, nh, T, T)) ** 3
    return a / a.sum(-1, keepdims=True)  # (L, nh, T, T) rows sum to 1


def test_summaries_of_identity_uniform_and_previous_token_heads():
    T = 5
    eye = np.eye(T)
    uniform = np.full((T, T), 1 / T)
    prev = np.eye(T, k=-1)
    prev[0, 0] = 1.0  # the first token can only attend to itself
    a = np.stack([np.stack([eye, uniform, prev])])  # (1, 3, T, T)
    s = head_summaries(a, tokens=["[CLS]", "a", "b", "c", "[SEP]"])
    np.testing.assert_allclose(s.entropy[0], [0.0, math.log(T), 0.0], atol=1e-12)
    np.testing.assert_allclose(s.to_self[0], [1.0, 1 / T, 1 / T], atol=1e-12)
    np.testing.assert_allclose(s.to_previous[0], [0.0, 1 / T, 1.0], atol=1e-12)
    # special tokens are 0 and 4: identity rows 0 and 4 hit them, uniform gives 2/T, prev only row 0 and row 1
    np.testing.assert_allclose(s.to_special[0], [2 / T, 2 / T, 2 / T], atol=1e-12)


def test_summaries_skip_fully_masked_rows_and_accept_a_mask():
    a = np.zeros((1, 1, 3, 3))
    a[0, 0, 0, 0] = 1.0
    a[0, 0, 1, :2] = [0.5, 0.5]  # row 2 attends to nothing (fully masked)
    s = head_summaries(a, special=np.array([True, False, False]))
    assert s.to_self[0, 0] == pytest.approx((1.0 + 0.5) / 2)
    assert s.to_special[0, 0] == pytest.approx((1.0 + 0.5) / 2)
    assert s.entropy[0, 0] == pytest.approx(math.log(2) / 2)
    assert s.to_previous[0, 0] == pytest.approx(0.5)  # only row 1 is live among rows 1..2


@pytest.mark.parametrize("bad, expected", [
    (np.ones((2, 3, 4)), "layers, heads, T, T"),
    (np.ones((1, 1, 3, 4)), "layers, heads, T, T"),
    (np.full((1, 1, 2, 2), np.nan), "finite"),
])
def test_bad_attentions_are_refused(bad, expected):
    with pytest.raises(CheckpointError, match=expected):
        head_summaries(bad)
    with pytest.raises(CheckpointError, match=expected):
        attention_rollout(bad)


def test_special_mask_must_match_tokens():
    with pytest.raises(CheckpointError, match="T = 3"):
        head_summaries(np.ones((1, 1, 3, 3)) / 3, special=[True, False])


def test_rollout_one_layer_is_half_attention_plus_identity():
    a = _random_attn(np.random.default_rng(0), 1, 4, 6)
    r = attention_rollout(a)
    np.testing.assert_allclose(r.matrix, (a[0].mean(0) + np.eye(6)) / 2, atol=1e-12)
    assert r.cls_map is None


def test_rollout_multiplies_from_the_first_layer_up():
    a = _random_attn(np.random.default_rng(1), 3, 2, 5)
    m = [(a[i].max(0) + np.eye(5)) / 2 for i in range(3)]
    m = [x / x.sum(-1, keepdims=True) for x in m]
    r = attention_rollout(a, head_fusion="max")
    np.testing.assert_allclose(r.matrix, m[2] @ m[1] @ m[0], atol=1e-12)
    assert not np.allclose(r.matrix, m[0] @ m[1] @ m[2])
    np.testing.assert_allclose(r.matrix.sum(-1), 1.0, atol=1e-12)


def test_rollout_fusions_differ_and_min_is_elementwise_min():
    a = _random_attn(np.random.default_rng(2), 1, 3, 4)
    mn = (a[0].min(0) + np.eye(4)) / 2
    np.testing.assert_allclose(attention_rollout(a, head_fusion="min").matrix, mn / mn.sum(-1, keepdims=True), atol=1e-12)
    fused = {f: attention_rollout(a, head_fusion=f).matrix for f in ("mean", "max", "min")}
    assert not np.allclose(fused["mean"], fused["max"]) and not np.allclose(fused["mean"], fused["min"])


def test_discard_keeps_cls_to_cls_even_when_lowest():
    a = np.array([[[[0.1, 0.9], [0.6, 0.4]]]])  # (1, 1, 2, 2): 0.1 is CLS -> CLS, the lowest entry
    r = attention_rollout(a, discard_ratio=0.5)  # the 2 lowest: 0.1 (kept, index 0) and 0.4 (zeroed)
    np.testing.assert_allclose(r.matrix, [[0.55, 0.45], [0.375, 0.625]], atol=1e-12)


def test_discard_zeroes_the_requested_share():
    a = _random_attn(np.random.default_rng(3), 1, 1, 10)
    fused = a[0, 0].copy()
    r = attention_rollout(a, discard_ratio=0.3)
    kept = fused.copy()
    lowest = np.argsort(fused, axis=None, kind="stable")[:30]
    kept.reshape(-1)[lowest[lowest != 0]] = 0.0
    m = (kept + np.eye(10)) / 2
    np.testing.assert_allclose(r.matrix, m / m.sum(-1, keepdims=True), atol=1e-12)


def test_rollout_cls_map_on_a_non_square_grid():
    g = golden(TINY["vit"] / "golden.npz")
    r = attention_rollout(g["attentions"], grid=(3, 5), n_extra=1)
    assert r.cls_map.shape == (3, 5) and r.cls_map.max() == pytest.approx(1.0)
    np.testing.assert_allclose(r.cls_map, r.matrix[0, 1:].reshape(3, 5) / r.matrix[0, 1:].max())
    d = golden(TINY["deit"] / "golden.npz")
    rd = attention_rollout(d["attentions"], grid=(3, 5), n_extra=2)
    np.testing.assert_allclose(rd.cls_map.reshape(-1), rd.matrix[0, 2:] / rd.matrix[0, 2:].max())


@pytest.mark.parametrize("kwargs, expected", [
    ({"head_fusion": "median"}, "head fusion 'median'"),
    ({"discard_ratio": 1.0}, r"\[0, 1\)"),
    ({"discard_ratio": -0.1}, r"\[0, 1\)"),
    ({"discard_ratio": "lots"}, "must be a number"),
    ({"grid": (4, 4)}, "needs T = 17 tokens, the attentions have T = 16"),
    ({"grid": "big"}, "rows, columns"),
])
def test_rollout_argument_errors(kwargs, expected):
    a = golden(TINY["vit"] / "golden.npz")["attentions"]
    with pytest.raises(CheckpointError, match=expected):
        attention_rollout(a, **kwargs)


def test_cls_attention_maps_per_head():
    a = golden(TINY["vit"] / "golden.npz")["attentions"]  # (2, 2, 16, 16)
    maps = cls_attention_maps(a, layer=-1, grid=(3, 5))
    assert maps.shape == (2, 3, 5)
    np.testing.assert_array_equal(maps[1], a[1, 1, 0, 1:].reshape(3, 5))
    assert maps[1, 2, 4] == a[1, 1, 0, 15]  # patch (2, 4) is token 1 + 2 * 5 + 4
    with pytest.raises(CheckpointError, match="layer 2 is out of range for 2 layers"):
        cls_attention_maps(a, layer=2, grid=(3, 5))
    with pytest.raises(CheckpointError, match="needs T"):
        cls_attention_maps(a, layer=0, grid=(3, 5), n_extra=2)
