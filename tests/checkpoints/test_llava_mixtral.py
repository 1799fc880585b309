"""LLaVA whose language model is Mixtral (top-2 of 4 routed experts) against transformers 5.24's eager
LlavaForConditionalGeneration (tiny checkpoint by tools/make_llava_mixtral_golden.py): ids, pixels, every map of
the language model, greedy generation over the cache."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
from ckpt_helpers import DATA, golden
from PIL import Image

from attnviz.checkpoints import CheckpointError, load_checkpoint
from attnviz.checkpoints.generate import generate_vlm

FOLDER = DATA / "tiny_llava_mixtral"


@pytest.fixture(scope="module")
def llava():
    return load_checkpoint(FOLDER)


@pytest.fixture(scope="module")
def picture():
    return np.asarray(Image.open(FOLDER / "image.png").convert("RGB"))


def test_the_text_model_is_a_mixture_of_experts(llava):
    t = llava.spec.text
    assert t.model_type == "mixtral" and t.decoder.moe is not None and t.decoder.moe.n_experts == 4
    assert "mixtral 2 layers x 4 heads" in llava.describe()


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
def test_ids_pixels_and_every_map_match_transformers(llava, picture, dtype):
    g = golden(FOLDER / "golden.npz")
    res = llava.run([picture], str(g["prompt"]), dtype=dtype)
    np.testing.assert_array_equal(res.ids, g["input_ids"])
    np.testing.assert_allclose(res.pixels[0], g["pixel_values"], atol=1e-6, rtol=0)
    assert res.attentions.shape == g["attentions"].shape == (2, 4, 21, 21)
    assert np.abs(res.attentions - g["attentions"]).max() <= 1e-5
    np.testing.assert_allclose(res.hidden, g["last_hidden_state"], atol=1e-4, rtol=1e-4)
    assert len(res.patches[0].tokens) == 9


def test_greedy_generation_matches_transformers(llava, picture):
    g = golden(FOLDER / "golden_generate.npz")
    n_new = len(g["greedy_ids"]) - len(g["prompt_ids"])
    res = generate_vlm(llava, [picture], str(golden(FOLDER / "golden.npz")["prompt"]), max_new_tokens=n_new)
    np.testing.assert_array_equal(res.ids, g["greedy_ids"])
    np.testing.assert_allclose(res.attentions, g["attentions"], atol=1e-5, rtol=0)
    want = np.take_along_axis(g["probs"], res.top_ids, axis=1)
    np.testing.assert_allclose(res.top_probs, want, atol=1e-5, rtol=0)


def test_missing_experts_are_named(tmp_path):
    from safetensors.numpy import load_file, save_file

    d = tmp_path / "llava"
    shutil.copytree(FOLDER, d)
    w = load_file(d / "model.safetensors")
    w.pop("language_model.model.layers.1.block_sparse_moe.experts.3.w2.weight")
    save_file(w, d / "model.safetensors")
    with pytest.raises(CheckpointError, match=r"lacks LLaVA text tensors .*layers\.1\.block_sparse_moe\.experts\.3\.w2"):
        load_checkpoint(d)


def test_more_experts_per_token_than_experts_is_refused(tmp_path):
    d = tmp_path / "llava"
    shutil.copytree(FOLDER, d)
    cfg = json.loads((d / "config.json").read_text())
    cfg["text_config"]["num_experts_per_tok"] = 5
    (d / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(CheckpointError) as err:
        load_checkpoint(d)
    assert "\n" not in str(err.value) and "5" in str(err.value)
