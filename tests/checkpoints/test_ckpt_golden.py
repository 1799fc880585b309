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
