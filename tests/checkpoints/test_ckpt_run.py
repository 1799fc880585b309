"""run_text / run_image: what the views receive, and clear errors for the wrong input."""

from __future__ import annotations

import json

import numpy as np
import pytest
from ckpt_helpers import TINY, golden

from attnviz.checkpoints import CheckpointError, load_checkpoint, run_image, run_text


def test_text_result_is_consistent(tiny):
    res = run_text(tiny["gpt2"], "the river\tbank")
    L, nh, T, _ = res.shape
    assert (L, nh) == (2, 2) and T == len(res.tokens) == len(res.labels) == len(res.ids) == len(res.spans)
    assert res.hidden.shape == (T, 16) and res.grid is None and res.n_extra_tokens == 0
    assert "⇥" in "".join(res.labels) and "\t" in "".join(res.tokens)
    assert "".join(res.tokens) == "the river\tbank"  # byte-level pieces tile the text
    np.testing.assert_allclose(res.attentions.sum(-1), 1.0, atol=1e-6)


def test_wrong_modality_is_refused(tiny):
    with pytest.raises(CheckpointError, match="image model: give it an image"):
        run_text(tiny["vit"], "hello")
    with pytest.raises(CheckpointError, match="text model: give it text"):
        run_image(tiny["gpt2"], np.zeros((8, 8, 3), np.uint8))


@pytest.mark.parametrize("text, expected", [("", "empty"), ("   ", "whitespace"), ("bank " * 40, "limit of 32")])
def test_bad_text(tiny, text, expected):
    with pytest.raises(CheckpointError, match=expected):
        run_text(tiny["gpt2"], text)


def test_dtype_and_kernel_are_checked(tiny):
    with pytest.raises(CheckpointError, match="float32 or float64"):
        run_text(tiny["gpt2"], "bank", dtype=np.float16)
    with pytest.raises(CheckpointError, match="float32 or float64"):
        run_text(tiny["gpt2"], "bank", dtype="nonsense")
    with pytest.raises(CheckpointError, match="float32 or float64"):
        run_text(tiny["gpt2"], "bank", dtype=None)
    with pytest.raises(CheckpointError, match="kernel 'turbo' is not available.*reference"):
        run_text(tiny["gpt2"], "bank", kernel="turbo")
    assert run_text(tiny["gpt2"], "bank", dtype="float64").attentions.dtype == np.float64


def test_grey_and_rgba_images_are_read_as_rgb(tiny):
    rng = np.random.default_rng(5)
    grey = rng.integers(0, 256, (24, 40), dtype=np.uint8)
    rgb = np.repeat(grey[:, :, None], 3, axis=2)
    rgba = np.concatenate([rgb, np.full((24, 40, 1), 7, np.uint8)], axis=2)
    want = run_image(tiny["vit"], rgb).attentions
    np.testing.assert_array_equal(run_image(tiny["vit"], grey).attentions, want)
    np.testing.assert_array_equal(run_image(tiny["vit"], rgba).attentions, want)


def test_image_of_the_model_size_is_not_resampled(tiny):
    rgb = np.random.default_rng(6).integers(0, 256, (24, 40, 3), dtype=np.uint8)
    res = run_image(tiny["vit"], rgb)
    mean, std = np.array([0.5, 0.4, 0.3]), np.array([0.2, 0.25, 0.3])
    np.testing.assert_allclose(res.pixels, ((rgb / 255 - mean) / std).transpose(2, 0, 1), atol=1e-5)


@pytest.mark.parametrize("image, expected", [
    (np.zeros((8, 8, 3), np.float32), "uint8"),
    (np.zeros((8, 8, 2), np.uint8), "got shape"),
    (np.zeros((0, 8, 3), np.uint8), "empty"),
    (np.zeros((2, 8, 8, 3), np.uint8), "got shape"),
])
def test_bad_images(tiny, image, expected):
    with pytest.raises(CheckpointError, match=expected):
        run_image(tiny["vit"], image)


def test_model_without_resize_needs_its_size(tiny_copy):
    d = tiny_copy("vit")
    pp = json.loads((d / "preprocessor_config.json").read_text())
    pp["do_resize"] = False
    (d / "preprocessor_config.json").write_text(json.dumps(pp))
    ck = load_checkpoint(d)
    with pytest.raises(CheckpointError, match="needs 24x40 pixels"):
        run_image(ck, golden(TINY["vit"] / "golden.npz")["image"])
    assert run_image(ck, np.zeros((24, 40, 3), np.uint8)).grid == (3, 5)
