"""Idefics3 and SmolVLM against transformers: ids and pixel values as the processors make them (PIL image
processor), every layer and head of the language model as its eager attention, in float32 and float64.

tools/make_vlm_goldens.py writes the tiny checkpoints (tiny_idefics3: one picture in 2 x 3 tiles, positions
bucketised from an 8 x 8 table; tiny_smolvlm: two pictures, no BOS) and tiny_idefics3_processor/cases.npz
(the processor alone on grey, CMYK, RGBA, 1 x 1 and 20000 x 10 pictures and on changed settings).
"""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
from ckpt_helpers import DATA, golden
from PIL import Image

from attnviz.checkpoints import CheckpointError, load_checkpoint
from attnviz.checkpoints.idefics3 import pixel_shuffle
from attnviz.checkpoints.idefics3_processor import parse_image_steps, process_images, tokenise
from attnviz.checkpoints.vlm_common import read_processor
from attnviz.cli import main

FOLDERS = {"idefics3": DATA / "tiny_idefics3", "smolvlm": DATA / "tiny_smolvlm"}
PICTURES = {"idefics3": ["image.png"], "smolvlm": ["image.png", "image2.png"]}
CASES = DATA / "tiny_idefics3_processor" / "cases.npz"


@pytest.fixture(scope="module")
def models():
    return {name: load_checkpoint(folder) for name, folder in FOLDERS.items()}


def pictures(name: str) -> list:
    return [Image.open(FOLDERS[name] / f) for f in PICTURES[name]]


@pytest.fixture(scope="module")
def results(models):
    out = {}
    for name, ck in models.items():
        g = golden(FOLDERS[name] / "golden.npz")
        out[name] = (g, ck.run(pictures(name), str(g["prompt"])))
    return out


@pytest.mark.parametrize("name", sorted(FOLDERS))
def test_ids_pixels_and_every_map_match_transformers(results, name):
    g, res = results[name]
    np.testing.assert_array_equal(res.ids, g["input_ids"])  # the processor's expansion, BOS as the tokenizer adds it
    assert res.pixels.shape == g["pixel_values"].shape
    np.testing.assert_allclose(res.pixels, g["pixel_values"], atol=1e-6, rtol=0)
    assert g["pixel_attention_mask"].all()
    assert res.attentions.shape == g["attentions"].shape
    np.testing.assert_allclose(res.attentions, g["attentions"], atol=1e-5, rtol=0)
    np.testing.assert_allclose(res.hidden, g["last_hidden_state"], atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("name", sorted(FOLDERS))
def test_float64_pass_matches_too(models, name):
    g = golden(FOLDERS[name] / "golden.npz")
    res = models[name].run(pictures(name), str(g["prompt"]), dtype=np.float64)
    assert res.attentions.dtype == np.float64
    np.testing.assert_allclose(res.attentions, g["attentions"], atol=1e-5, rtol=0)


def test_arrays_give_what_pil_images_give(models, results):
    g, res = results["smolvlm"]
    arrays = [np.asarray(p.convert("RGB")) for p in pictures("smolvlm")]
    again = models["smolvlm"].run(arrays, str(g["prompt"]))
    np.testing.assert_array_equal(again.ids, res.ids)
    np.testing.assert_array_equal(again.attentions, res.attentions)


def test_bos_follows_the_tokenizer(models, results):
    assert models["idefics3"].special_tokens.add_bos  # Llama-style: <s> in front
    assert not models["smolvlm"].special_tokens.add_bos  # GPT-2 class: the prompt's own <|im_start|> only
    assert results["idefics3"][1].tokens[0] == "<s>"


@pytest.mark.parametrize("name", sorted(FOLDERS))
def test_segments_cover_the_sequence_and_patch_groups_hold_image_tokens(models, results, name):
    g, res = results[name]
    spec = models[name].spec
    T = res.T
    assert res.segments[0].start == 0 and res.segments[-1].stop == T
    assert all(a.stop == b.start for a, b in zip(res.segments, res.segments[1:]))
    is_image = res.ids == spec.image_token_id
    for group in res.patches:
        assert group.grid == (2, 2)
        assert is_image[group.tokens].all()
        H, W = res.images[group.image].shape[:2]
        top, left, bottom, right = group.box
        assert 0 <= top < bottom <= H and 0 <= left < right <= W
    np.testing.assert_array_equal(np.sort(res.image_tokens()), np.flatnonzero(is_image))  # every image token once
    assert res.special[is_image].all() and res.special[res.ids == spec.image_token_id - 1].all()  # <fake_token...>
    np.testing.assert_array_equal(res.mask, np.tril(np.ones((T, T), dtype=bool)))
    assert (res.attentions[:, :, ~res.mask] == 0).all()
    for s in res.segments:  # an image segment is the whole block: it opens and closes with the marker
        if s.name.startswith("image"):
            assert res.tokens[s.start] == res.tokens[s.stop - 1] == "<fake_token_around_image>"


def test_idefics3_layout(results):
    _, res = results["idefics3"]
    assert [s.name for s in res.segments] == ["text 1", "image", "text 2"]
    names = [p.name for p in res.patches]
    assert names == ["tile 1,1", "tile 1,2", "tile 1,3", "tile 2,1", "tile 2,2", "tile 2,3", "global image"]
    tile = res.patches[5]  # row 2, column 3 of a 40 x 72 picture resized to 64 x 96: the bottom-right sixth
    assert tile.box == (20.0, 48.0, 40.0, 72.0)
    assert res.patches[-1].box == (0.0, 0.0, 40.0, 72.0)
    assert res.labels[tile.tokens[1]] == "img r2c3 0,1" and res.labels[res.patches[-1].tokens[3]] == "img g 1,1"
    start = res.segment("image").start
    assert res.tokens[start + 1] == "<row_1_col_1>" and res.labels[start + 1] == "<row_1_col_1>"


def test_smolvlm_two_pictures(results):
    _, res = results["smolvlm"]
    assert [s.name for s in res.segments] == ["text 1", "image 1", "text 2", "image 2", "text 3"]
    assert [(p.image, p.name) for p in res.patches] == [
        (0, "tile 1,1"), (0, "tile 2,1"), (0, "global image"),
        (1, "tile 1,1"), (1, "tile 1,2"), (1, "tile 2,1"), (1, "tile 2,2"), (1, "global image")]
    assert res.labels[res.patches[4].tokens[0]] == "img2 r1c2 0,0"
    # <row_1_col_1> is an added token that is not special in this tokenizer: special here as a marker of the block
    first = res.segment("image 1").start + 1
    assert res.tokens[first] == "<row_1_col_1>" and res.special[first]


def test_pixel_shuffle_is_transformers_order():
    x = np.arange(16 * 3, dtype=np.float32).reshape(16, 3)  # a 4 x 4 grid of 3-wide patches
    y = pixel_shuffle(x, 2)  # (4, 12)
    # token (0, 1) of the 2 x 2 result holds patches (0, 2), (0, 3), (1, 2), (1, 3), as transformers' view/permute
    # give it (checked with torch: [6, 7, 8, 9, 10, 11, 18, ..., 23])
    np.testing.assert_array_equal(y[1], np.concatenate([x[2], x[3], x[6], x[7]]))


# ---- the processor alone ----------------------------------------------------------------------------------


def _case_names():
    with np.load(CASES) as z:
        return sorted({k.split(".")[0] for k in z.files})


def _case_pictures(g: dict, name: str) -> list:
    out, i = [], 0
    while f"{name}.image{i}" in g:
        arr, mode = g[f"{name}.image{i}"], str(g[f"{name}.mode{i}"])
        out.append(arr if mode == "array" else Image.fromarray(arr, mode))
        i += 1
    return out


@pytest.mark.parametrize("case", _case_names())
def test_processor_cases_match_transformers(models, case):
    g = golden(CASES)
    ck = models["idefics3"]
    _, pp = read_processor(FOLDERS["idefics3"])
    steps = parse_image_steps({**pp, **json.loads(str(g[f"{case}.overrides"]))})
    processed = process_images(_case_pictures(g, case), steps)
    pt = tokenise(ck.spec.prompt, ck.tokenizer, ck.special_tokens, str(g[f"{case}.prompt"]), processed, 8192)
    np.testing.assert_array_equal(pt.tokens.ids, g[f"{case}.input_ids"])
    assert processed.pixel_values.shape == g[f"{case}.pixel_values"].shape
    np.testing.assert_allclose(processed.pixel_values, g[f"{case}.pixel_values"], atol=1e-6, rtol=0)
    np.testing.assert_array_equal(processed.pixel_mask, g[f"{case}.pixel_attention_mask"].astype(bool))


@pytest.mark.parametrize("case", ["grey", "cmyk", "rgba", "rgba_array", "one_pixel", "long"])
def test_hostile_pictures_run_the_whole_model(models, case):
    g = golden(CASES)
    res = models["idefics3"].run(_case_pictures(g, case), str(g[f"{case}.prompt"]))
    np.testing.assert_array_equal(res.ids, g[f"{case}.input_ids"])
    assert np.isfinite(res.attentions).all() and res.attentions.shape[2] == res.T
    assert res.images[0].dtype == np.uint8 and res.images[0].shape[2] == 3


def test_text_alone(models):
    res = models["idefics3"].run([], "User:what is a river bank?")
    assert [s.name for s in res.segments] == ["text"] and res.patches == () and res.pixels is None
    assert res.tokens[0] == "<s>" and res.attentions.shape == (2, 4, res.T, res.T)


# ---- refusals: one clear line ------------------------------------------------------------------------------


@pytest.mark.parametrize("prompt, n, message", [
    ("User:what is in the picture?", 1, "no <image> placeholder but 1 picture was given"),
    ("User:<image><image>two?", 1, "2 <image> placeholders but 1 picture was given"),
    ("User:<image>what?", 0, "1 <image> placeholder but no picture was given"),
    ("User:<image>and<image><image>?", 2, "3 <image> placeholders but 2 pictures were given"),
    ("", 0, "the prompt is empty"),
])
def test_placeholder_count_is_transformers_rule(models, prompt, n, message):
    with pytest.raises(CheckpointError, match=message):
        models["smolvlm"].run(pictures("smolvlm")[:1] * n, prompt)


@pytest.mark.parametrize("picture, message", [
    (np.zeros((4, 4, 3), dtype=np.float32), "uint8"),
    (np.zeros((0, 4, 3), dtype=np.uint8), "empty"),
    (np.zeros((4, 4, 2), dtype=np.uint8), r"\(H, W\)"),
    (np.zeros((2, 4, 4, 3), dtype=np.uint8), r"\(H, W\)"),
    ("image.png", "uint8"),
])
def test_bad_pictures(models, picture, message):
    with pytest.raises(CheckpointError, match=message):
        models["idefics3"].run([picture], "User:<image>?")


def test_too_many_pictures(models):
    picture = pictures("idefics3")[0]
    with pytest.raises(CheckpointError, match="takes 8 images per prompt; 9 were given"):
        models["idefics3"].run([picture] * 9, "<image>" * 9)


def _edited(tmp_path, name: str, edit) -> object:
    folder = tmp_path / name
    shutil.copytree(FOLDERS[name], folder)
    edit(folder)
    return folder


def _set_image_processor(**changes):
    def edit(folder):
        proc = json.loads((folder / "processor_config.json").read_text())
        for k, v in changes.items():
            if v is None:
                proc["image_processor"].pop(k, None)
            else:
                proc["image_processor"][k] = v
        (folder / "processor_config.json").write_text(json.dumps(proc))
    return edit


def _set_json(file: str, path: tuple, value):
    def edit(folder):
        data = json.loads((folder / file).read_text())
        node = data
        for k in path[:-1]:
            node = node[k]
        node[path[-1]] = value
        (folder / file).write_text(json.dumps(data))
    return edit


@pytest.mark.parametrize("edit, message", [
    (_set_image_processor(resample=7), "resample 7 is not a PIL resampling code"),
    (_set_image_processor(resample="lanczos"), "resample 'lanczos' is not a PIL resampling code"),
    (_set_image_processor(do_image_splitting="yes"), "'do_image_splitting' must be true or false"),
    (_set_image_processor(do_image_splitting=1), "'do_image_splitting' must be true or false"),
    (_set_image_processor(do_center_crop=True), "'do_center_crop' is a step the Idefics3 image processor does not have"),
    (_set_image_processor(size=364), "'size' must be an object with 'longest_edge'"),
    (_set_image_processor(size={"shortest_edge": 32}), "has neither 'longest_edge' nor 'height' and 'width'"),
    (_set_image_processor(max_image_size={"height": 32}), "'max_image_size' must be an object with 'longest_edge'"),
    (_set_image_processor(max_image_size={"longest_edge": 48}), "image_seq_len 4 does not match the 9 features"),
    (_set_image_processor(max_image_size={"longest_edge": 24}), "3 x 3 patches of 8 px, which the pixel shuffle"),
    (_set_image_processor(image_std=[0.5, 0, 0.5]), "has a zero"),
    (_set_image_processor(image_mean=[0.5, 0.5]), "one number or three"),
    (_set_json("processor_config.json", ("image_seq_len",), 169), "image_seq_len 169 does not match the 4 features"),
    (_set_json("config.json", ("image_token_id",), 5), "image_token_id 5 is not the tokenizer's <image>"),
    (_set_json("config.json", ("vision_config", "model_type"), "clip_vision_model"), "is not the SigLIP tower"),
    (_set_json("config.json", ("text_config", "num_hidden_layers"), 3), "lacks Idefics3 text tensors"),
    (_set_json("config.json", ("scale_factor",), "2"), "'scale_factor' must be a whole number"),
])
def test_checkpoint_problems_are_one_clear_line(tmp_path, edit, message):
    folder = _edited(tmp_path, "idefics3", edit)
    with pytest.raises(CheckpointError, match=message) as info:
        load_checkpoint(folder)
    assert "\n" not in str(info.value)


def test_missing_processor_files(tmp_path):
    folder = _edited(tmp_path, "smolvlm", lambda f: (f / "processor_config.json").unlink())
    with pytest.raises(CheckpointError, match="no image processor settings"):
        load_checkpoint(folder)
    folder = _edited(tmp_path / "b", "smolvlm", lambda f: (f / "tokenizer.json").unlink())
    with pytest.raises(CheckpointError, match="tokenizer is missing"):
        load_checkpoint(folder)


def test_a_picture_that_vanishes_into_zeros_is_refused(tmp_path):
    folder = _edited(tmp_path, "idefics3", _set_image_processor(do_normalize=False))
    ck = load_checkpoint(folder)
    black = np.zeros((20, 30, 3), dtype=np.uint8)
    with pytest.raises(CheckpointError, match="all zero"):
        ck.run([black], "User:<image>?")


def test_unknown_bookkeeping_keys_are_noted_not_refused(tmp_path):
    folder = _edited(tmp_path, "idefics3", _set_image_processor(video_sampling={"fps": 1}, vendor_note="x"))
    ck = load_checkpoint(folder)
    res = ck.run(pictures("idefics3"), "User:<image>?")
    assert any("vendor_note" in n for n in res.notes)


# ---- the command line --------------------------------------------------------------------------------------


def test_cli_inspects_two_pictures(tmp_path):
    g = golden(FOLDERS["smolvlm"] / "golden.npz")
    out = tmp_path / "smolvlm.npz"
    args = ["model", "inspect", str(FOLDERS["smolvlm"]), "--text", str(g["prompt"]), "--npz", str(out)]
    for f in PICTURES["smolvlm"]:
        args += ["--image", str(FOLDERS["smolvlm"] / f)]
    assert main(args) == 0
    with np.load(out) as z:
        np.testing.assert_array_equal(z["ids"], g["input_ids"])
        np.testing.assert_allclose(z["attentions"], g["attentions"], atol=1e-5, rtol=0)
        assert [str(n) for n in z["segments"]["name"]] == ["text 1", "image 1", "text 2", "image 2", "text 3"]
