"""LLaVA-1.5-style models against transformers: ids and pixels as LlavaProcessor makes them, every layer and
head of the language model as its eager attention (tools/make_vlm_goldens.py writes the tiny checkpoint)."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
from ckpt_helpers import DATA, golden
from PIL import Image

from attnviz.checkpoints import CheckpointError, load_checkpoint
from attnviz.cli import main

FOLDER = DATA / "tiny_llava"


@pytest.fixture(scope="module")
def llava():
    return load_checkpoint(FOLDER)


@pytest.fixture(scope="module")
def picture():
    return np.asarray(Image.open(FOLDER / "image.png").convert("RGB"))


@pytest.mark.parametrize("name", ["tiny_llava", "tiny_llava_full"])
def test_ids_pixels_and_every_map_match_transformers(name):
    """tiny_llava: feature layer -2, class token dropped, Llama with BOS; tiny_llava_full: the class token kept,
    feature layers -3 and -1 concatenated, a projector without biases, Qwen2 (q/k/v biases, no BOS)."""
    folder = DATA / name
    g = golden(folder / "golden.npz")
    ck = load_checkpoint(folder)
    picture = np.asarray(Image.open(folder / "image.png").convert("RGB"))
    res = ck.run([picture], str(g["prompt"]))
    np.testing.assert_array_equal(res.ids, g["input_ids"])  # <image> expanded as LlavaProcessor does
    np.testing.assert_allclose(res.pixels[0], g["pixel_values"], atol=1e-6, rtol=0)
    assert res.attentions.shape == g["attentions"].shape
    np.testing.assert_allclose(res.attentions, g["attentions"], atol=1e-5, rtol=0)
    np.testing.assert_allclose(res.hidden, g["last_hidden_state"], atol=1e-4, rtol=1e-4)
    (group,) = res.patches
    assert len(group.tokens) == ck.spec.grid[0] * ck.spec.grid[1]
    if ck.spec.strategy == "full":  # the class token's feature comes first and is not a patch of the grid
        assert res.labels[0] == "img cls" and group.tokens[0] == 1


def test_float64_pass_matches_too(llava, picture):
    g = golden(FOLDER / "golden.npz")
    res = llava.run([picture], str(g["prompt"]), dtype=np.float64)
    np.testing.assert_allclose(res.attentions, g["attentions"], atol=1e-5, rtol=0)


def test_segments_patches_and_mask(llava, picture):
    g = golden(FOLDER / "golden.npz")
    res = llava.run([picture], str(g["prompt"]))
    T = res.T
    assert [s.name for s in res.segments] == ["text 1", "image", "text 2"]
    img = res.segment("image")
    assert len(img) == 16 and (res.ids[img.start:img.stop] == llava.spec.image_token_id).all()
    (group,) = res.patches
    assert group.grid == (4, 4)
    np.testing.assert_array_equal(group.tokens, np.arange(img.start, img.stop))
    top, left, bottom, right = group.box  # 40 x 56 picture: short side to 32 px, then the centre 32 x 32
    assert (top, bottom) == (0.0, 40.0) and 0 < left < right < 56
    assert res.labels[img.start] == "img 0,0" and res.labels[img.stop - 1] == "img 3,3"
    np.testing.assert_array_equal(res.mask, np.tril(np.ones((T, T), dtype=bool)))
    assert (res.attentions[:, :, ~res.mask] == 0).all()
    share = res.share_to(res.attentions, np.arange(img.stop, T), img.start + np.arange(len(img)))
    assert share.shape == (2,) and ((share > 0) & (share < 1)).all()


@pytest.mark.parametrize("prompt, n_images, message", [
    ("USER: what is in the picture? ASSISTANT:", 1, "no <image> placeholder"),
    ("USER: <image> <image> two? ASSISTANT:", 1, "2 <image> placeholders but 1 image was given"),
    ("USER: <image> what? ASSISTANT:", 0, "1 <image> placeholder but 0 images were given"),
    ("   ", 1, "the prompt is empty"),
])
def test_bad_prompts_are_one_clear_line(llava, picture, prompt, n_images, message):
    with pytest.raises(CheckpointError, match=message):
        llava.run([picture] * n_images, prompt)


def test_two_images_for_a_one_image_model(llava, picture):
    with pytest.raises(CheckpointError, match="takes 1 image per prompt; 2 were given"):
        llava.run([picture, picture], "USER: <image> <image> ASSISTANT:")


@pytest.mark.parametrize("mode", ["L", "CMYK", "RGBA"])
def test_grey_cmyk_and_rgba_pictures_run(tmp_path, llava, picture, mode):
    path = tmp_path / f"p.{'jpg' if mode == 'CMYK' else 'png'}"
    Image.fromarray(picture).convert(mode).save(path)
    out = tmp_path / "o.npz"
    code = main(["model", "inspect", str(FOLDER), "--image", str(path), "--text", "USER: <image>\nwhat? ASSISTANT:",
                 "--npz", str(out)])
    assert code == 0
    with np.load(out) as z:
        assert z["attentions"].shape[2] == z["ids"].shape[0]
        assert np.isfinite(z["attentions"]).all()


def test_an_unknown_processor_setting_is_refused(tmp_path):
    folder = tmp_path / "llava"
    shutil.copytree(FOLDER, folder)
    proc = json.loads((folder / "processor_config.json").read_text())
    proc["vision_feature_select_strategy"] = "pooled"
    (folder / "processor_config.json").write_text(json.dumps(proc))
    with pytest.raises(CheckpointError, match="disagree on vision_feature_select_strategy"):
        load_checkpoint(folder)
    proc["vision_feature_select_strategy"] = "default"
    proc["image_processor"]["size"] = {"longest_edge": 32}
    (folder / "processor_config.json").write_text(json.dumps(proc))
    with pytest.raises(CheckpointError, match="size"):
        load_checkpoint(folder)


def test_cli_writes_the_whole_sequence(tmp_path, llava):
    g = golden(FOLDER / "golden.npz")
    out = tmp_path / "llava.npz"
    code = main(["model", "inspect", str(FOLDER), "--image", str(FOLDER / "image.png"), "--text", str(g["prompt"]),
                 "--npz", str(out)])
    assert code == 0
    with np.load(out) as z:  # no pickle needed
        np.testing.assert_array_equal(z["ids"], g["input_ids"])
        np.testing.assert_allclose(z["attentions"], g["attentions"], atol=1e-5, rtol=0)
        seg = z["segments"]
        assert [str(n) for n in seg["name"]] == ["text 1", "image", "text 2"]
        assert int(seg["stop"][-1]) == len(g["input_ids"])
        T = len(g["input_ids"])
        assert z["mask"].shape == (T, T) and z["mask"].dtype == bool


def test_cli_refuses_policy_options_for_a_vlm(tmp_path, capsys):
    code = main(["model", "inspect", str(FOLDER), "--image", str(FOLDER / "image.png"), "--text", "USER: <image> ASSISTANT:",
                 "--state", "0.1,0.2", "--npz", str(tmp_path / "o.npz")])
    assert code == 1
    assert "takes no state" in capsys.readouterr().err
