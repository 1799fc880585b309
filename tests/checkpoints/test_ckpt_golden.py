"""Our numpy forward passes against transformers (torch CPU, eager attention), every layer and head.

The golden files were written by tools/make_minilm_golden.py; tolerance 1e-5 on attention weights.
"""

from __future__ import annotations

import numpy as np
import pytest

from attnviz.checkpoints import run_image, run_text

from ckpt_helpers import DATA, TINY, golden

DTYPES = [np.float32, np.float64]


@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
def test_minilm_matches_transformers_every_layer_and_head(minilm, dtype):
    g = golden(DATA / "minilm_golden.npz")
    res = run_text(minilm, str(g["text"]), dtype=dtype)
    np.testing.assert_array_equal(res.ids, g["input_ids"])
    assert res.tokens == list(g["tokens"])
    assert res.attentions.shape == g["attentions"].shape == (6, 12, len(res.tokens), len(res.tokens))
    assert res.attentions.dtype == dtype
    err = np.abs(res.attentions.astype(np.float64) - g["attentions"]).max(axis=(2, 3))  # (L, nh)
    assert err.max() <= 1e-5, f"worst (layer, head) = {np.unravel_index(err.argmax(), err.shape)}: {err.max():.2e}"
    np.testing.assert_allclose(res.hidden, g["last_hidden_state"], atol=1e-4)


def test_minilm_special_tokens_are_cls_and_sep(minilm):
    res = run_text(minilm, "river bank")
    assert res.tokens[0] == "[CLS]" and res.tokens[-1] == "[SEP]"
    np.testing.assert_array_equal(res.special, [True] + [False] * (len(res.tokens) - 2) + [True])


@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
def test_tiny_gpt2_matches_transformers(tiny, dtype):
    g = golden(TINY["gpt2"] / "golden.npz")
    res = run_text(tiny["gpt2"], str(g["text"]), dtype=dtype)
    np.testing.assert_array_equal(res.ids, g["input_ids"])
    assert res.tokens[1] == " river" and res.tokens[-1] == "<|endoftext|>"
    assert res.special[-1] and not res.special[:-1].any()
    np.testing.assert_allclose(res.attentions, g["attentions"], atol=1e-5, rtol=0)
    np.testing.assert_allclose(res.hidden, g["last_hidden_state"], atol=1e-5)
    assert np.all(np.triu(res.attentions, k=1) == 0)  # causal: no query sees a later key


@pytest.mark.parametrize("kind", ["vit", "deit"])
@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
def test_tiny_vision_matches_transformers(tiny, kind, dtype):
    g = golden(TINY[kind] / "golden.npz")
    assert g["image"].shape[:2] != (24, 40)  # the model's own resize is part of what is checked
    res = run_image(tiny[kind], g["image"], dtype=dtype)
    np.testing.assert_allclose(res.pixels, g["pixel_values"], atol=1e-6, rtol=0)
    np.testing.assert_allclose(res.attentions, g["attentions"], atol=1e-5, rtol=0)
    np.testing.assert_allclose(res.hidden, g["last_hidden_state"], atol=1e-5)
    n_extra = 1 if kind == "vit" else 2
    assert res.grid == (3, 5) and res.n_extra_tokens == n_extra
    assert res.attentions.shape[-1] == n_extra + 15 == len(res.tokens) == len(res.labels)
    assert res.tokens[n_extra] == "0,0" and res.tokens[-1] == "2,4"
    assert res.special.sum() == n_extra


def test_a_fixed_resize_then_centre_crop_is_applied_as_transformers_does():
    """DeiT's processors resize to a fixed size and then crop the centre (256 -> 224): the pixels and every
    map equal transformers' (tools/make_crop_golden.py), on the crop's own grid, not an interpolated one."""
    from attnviz.checkpoints import load_checkpoint, run_image

    d = DATA / "tiny_deit_crop"
    g = golden(d / "golden.npz")
    ck = load_checkpoint(d)
    assert ck.image.size == (24, 40) and ck.image.resize_to == (32, 48) and ck.image.crop_size == (24, 40)
    res = run_image(ck, g["image"])
    np.testing.assert_allclose(res.pixels, g["pixel_values"], atol=1e-6, rtol=0)
    assert res.attentions.shape == g["attentions"].shape and tuple(res.grid) == (3, 5)
    np.testing.assert_allclose(res.attentions, g["attentions"], atol=1e-5, rtol=0)


def test_the_seen_region_of_a_centre_crop_after_a_fixed_resize():
    from attnviz.checkpoints import load_checkpoint
    from attnviz.checkpoints.preprocess import seen_region

    ic = load_checkpoint(DATA / "tiny_deit_crop").image
    top, left, bottom, right = seen_region((64, 96), ic, (3, 5), (8, 8))
    # resized to 32 x 48 (2 original pixels each), crop 24 x 40 from (4, 4): original rows 8..56, columns 8..88
    assert (top, left, bottom, right) == (8.0, 8.0, 56.0, 88.0)
