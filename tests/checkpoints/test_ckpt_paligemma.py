"""PaliGemma 1 (Gemma) and 2 (Gemma 2) against transformers: ids, token types and pixels as PaliGemmaProcessor
makes them, the prefix-LM mask it applies, every layer and head of the language model as its eager attention
(tools/make_vlm_goldens.py writes the tiny checkpoints), and what is refused."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
from ckpt_helpers import DATA, golden
from PIL import Image

from attnviz.checkpoints import CheckpointError, load_checkpoint
from attnviz.checkpoints.paligemma_processor import process, to_rgb

NAMES = ("tiny_paligemma", "tiny_paligemma2")
MODES = {"grey": "L", "cmyk": "CMYK", "rgba": "RGBA", "one": "RGB"}


@pytest.fixture(scope="module")
def models():
    return {n: load_checkpoint(DATA / n) for n in NAMES}


@pytest.fixture(scope="module")
def picture():
    return Image.open(DATA / "tiny_paligemma" / "image.png")


def _run(models, name, picture, with_suffix: bool, **kw):
    g = golden(DATA / name / "golden.npz")
    suffix = str(g["suffix"]) if with_suffix else None
    return g, models[name].run([picture], str(g["prompt"]), suffix=suffix, **kw)


def _key(with_suffix: bool, what: str) -> str:
    return ("suffix_" if with_suffix else "") + what


# ---- the processor ---------------------------------------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("with_suffix", [False, True])
def test_ids_token_types_and_pixels_are_the_processors(models, picture, name, with_suffix):
    g, res = _run(models, name, picture, with_suffix)
    np.testing.assert_array_equal(res.ids, g[_key(with_suffix, "input_ids")])
    np.testing.assert_array_equal(res.extra["token_type_ids"], g[_key(with_suffix, "token_type_ids")])
    np.testing.assert_array_equal(res.pixels[0], g["pixel_values"])  # stretched 40x56 -> 32x32, bicubic, exact


def test_a_prompt_carrying_the_placeholder_keeps_its_text_around_it(models, picture):
    g = golden(DATA / "tiny_paligemma" / "golden.npz")
    m = models["tiny_paligemma"]
    # "<image>what is <loc0003> this?": <loc0003> is one token, the processor's own (past this model's table)
    odd = process(m.tokenizer, m.spec.processor, picture, str(g["odd_prompt"]), image_token_id=m.spec.image_token_id,
                  max_tokens=100)
    np.testing.assert_array_equal(odd.ids, g["odd_input_ids"])
    mid = m.run([picture], str(g["mid_prompt"]))  # "answer en <image> here": BOS after the image tokens
    np.testing.assert_array_equal(mid.ids, g["mid_input_ids"])
    assert [s.name for s in mid.segments] == ["prefix", "image", "prefix"]
    assert mid.tokens[19] == "<bos>" and mid.mask.all()  # all prefix: every token sees every other


@pytest.mark.parametrize("kind", sorted(MODES))
def test_grey_cmyk_transparent_and_one_pixel_pictures_become_the_processors_pixels(models, kind):
    g = golden(DATA / "tiny_paligemma" / "golden.npz")
    arr = g[f"hostile_{kind}"]
    m = models["tiny_paligemma"]
    res = m.run([Image.fromarray(arr, mode=MODES[kind])], "caption en")
    np.testing.assert_array_equal(res.pixels[0], g[f"hostile_{kind}_pixels"])
    assert res.images[0].shape == (*arr.shape[:2], 3) and np.isfinite(res.attentions).all()
    if kind != "cmyk":  # the same picture as an array (channels last): grey repeated, alpha over white
        np.testing.assert_array_equal(m.run([arr], "caption en").pixels[0], g[f"hostile_{kind}_pixels"])


# ---- the model -------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("with_suffix", [False, True])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_every_layer_and_head_matches_transformers(models, picture, name, with_suffix, dtype):
    g, res = _run(models, name, picture, with_suffix, dtype=dtype)
    ref = g[_key(with_suffix, "attentions")]
    assert res.attentions.shape == ref.shape and res.attentions.dtype == dtype
    assert np.abs(res.attentions - ref).max() <= 1e-5
    np.testing.assert_allclose(res.hidden, g[_key(with_suffix, "last_hidden_state")], atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("name", NAMES)
def test_the_mask_is_the_one_transformers_applies(models, picture, name):
    """transformers' masked cells get weight exactly 0, its allowed cells a positive weight: the golden's zeros
    are its mask. Gemma 2's sliding layers keep the window on the causal part only, the prefix whole."""
    g, res = _run(models, name, picture, True)
    ref = g["suffix_attentions"]  # (L, nh, T, T)
    spec = models[name].spec
    for layer in range(ref.shape[0]):
        seen = (ref[layer] > 0).any(axis=0)  # (T, T)
        assert ((ref[layer] > 0) == seen).all()  # the same cells in every head
        want = res.extra["sliding_mask"] if spec.text.decoder.window(layer) else res.mask
        np.testing.assert_array_equal(seen, want)
        assert (res.attentions[layer][:, ~want] == 0).all()
    prefix = res.extra["token_type_ids"] == 0
    T = res.T
    np.testing.assert_array_equal(res.mask, np.tril(np.ones((T, T), bool)) | np.outer(prefix, prefix))
    if name == "tiny_paligemma2":
        sliding = res.extra["sliding_mask"]
        assert sliding[23, 0] and not sliding[30, 20]  # prefix token 23 sees token 0 beyond the window of 6
        assert "sliding window 6" in " ".join(res.notes)


def test_without_a_suffix_the_whole_sequence_is_one_bidirectional_prefix(models, picture):
    _, res = _run(models, "tiny_paligemma", picture, False)
    assert res.mask.all() and [s.name for s in res.segments] == ["image", "prefix"]


def test_segments_patches_labels(models, picture):
    g, res = _run(models, "tiny_paligemma", picture, True)
    assert [(s.name, s.start, s.stop) for s in res.segments] == [("image", 0, 16), ("prefix", 16, 24),
                                                                  ("suffix", 24, 32)]
    (group,) = res.patches
    assert group.grid == (4, 4) and group.box == (0.0, 0.0, 40.0, 56.0)  # stretched: the whole picture
    np.testing.assert_array_equal(group.tokens, np.arange(16))
    assert res.labels[0] == "img 0,0" and res.labels[15] == "img 3,3" and res.labels[17] == "answer"
    assert res.tokens[:16] == ["<image>"] * 16 and res.tokens[16] == "<bos>" and res.tokens[-1] == "<eos>"
    assert res.labels[23].endswith("↵")  # "\n" closes the prefix
    assert res.special[:17].all() and res.special[-1] and not res.special[17:-1].any()
    assert res.kv_group == 4 and res.vision_attentions.shape == (1, 2, 4, 16, 16)
    assert res.family == "paligemma" and res.images[0].shape == (40, 56, 3)


def test_describe_names_the_parts(models):
    assert "SigLIP 2 layers x 4 heads (32x32 px, 16 image tokens) + Gemma: 2 layers" in models["tiny_paligemma"].describe()
    assert "Gemma 2: 2 layers x 4 heads (2 kv)" in models["tiny_paligemma2"].describe()


@pytest.mark.parametrize("layout", ["old", "memory"])
def test_older_weight_names_give_the_same_maps(tmp_path, picture, layout):
    from safetensors.numpy import load_file, save_file

    src = DATA / "tiny_paligemma2"
    dst = tmp_path / "pg"
    shutil.copytree(src, dst)
    w = load_file(src / "model.safetensors")
    ren = {"old": [("vision_tower.", "vision_tower.vision_model.")],
           "memory": [("vision_tower.", "model.vision_tower.vision_model."),
                      ("multi_modal_projector.", "model.multi_modal_projector."),
                      ("language_model.model.", "model.language_model.")]}[layout]

    def rename(k):
        for a, b in ren:
            if k.startswith(a):
                return b + k[len(a):]
        return k

    out = {rename(k): v for k, v in w.items()}
    head = "lm_head.weight" if layout == "memory" else "language_model.lm_head.weight"
    out[head] = w["language_model.model.embed_tokens.weight"]  # a saved (tied) head, which is not read
    save_file(out, str(dst / "model.safetensors"))
    g = golden(src / "golden.npz")
    res = load_checkpoint(dst).run([picture], str(g["prompt"]), suffix=str(g["suffix"]))
    assert np.abs(res.attentions - g["suffix_attentions"]).max() <= 1e-5


# ---- refusals: one line each ------------------------------------------------------------------------


def _one_line(exc_info) -> str:
    msg = str(exc_info.value)
    assert "\n" not in msg and msg
    return msg


@pytest.mark.parametrize("images, match", [
    ("two", "takes 1 image"), ("none", "one picture"), ("float", "uint8"), ("five", "channels last"),
    ("empty", "empty"),
])
def test_bad_pictures_are_refused(models, picture, images, match):
    rgb = np.asarray(picture.convert("RGB"))
    given = {"two": [rgb, rgb], "none": [], "float": [rgb.astype(np.float32)],
             "five": [np.zeros((4, 4, 5), np.uint8)], "empty": [np.zeros((0, 3, 3), np.uint8)]}[images]
    with pytest.raises(CheckpointError, match=match) as e:
        models["tiny_paligemma"].run(given, "caption en")
    _one_line(e)


@pytest.mark.parametrize("prompt, suffix, match", [
    ("<image> a <image> b", None, "2 <image> placeholders"),
    ("caption en", "a <image>", "suffix contains <image>"),
    ("where is <loc0001>?", None, "outside the language model's 142-row embedding table"),
    ("caption en", 3, "suffix must be text"),
])
def test_bad_prompts_are_refused(models, picture, prompt, suffix, match):
    with pytest.raises(CheckpointError, match=match) as e:
        models["tiny_paligemma"].run([picture], prompt, suffix=suffix)
    _one_line(e)


def test_an_unknown_option_is_refused_by_name(models, picture):
    with pytest.raises(CheckpointError, match="takes no state") as e:
        models["tiny_paligemma"].run([picture], "caption en", state=[1.0])
    _one_line(e)


def _edit(path, fn):
    cfg = json.loads(path.read_text())
    fn(cfg)
    path.write_text(json.dumps(cfg))


@pytest.mark.parametrize("change, match", [
    (lambda p: p["image_processor"].update(image_processor_type="CLIPImageProcessor"), "CLIPImageProcessor"),
    (lambda p: p.update(processor_class="LlavaProcessor"), "LlavaProcessor"),
    (lambda p: p["image_processor"].update(do_center_crop=True, crop_size={"height": 32, "width": 32}), "do_center_crop"),
    (lambda p: p["image_processor"].update(size={"shortest_edge": 32}), "stretches every picture"),
    (lambda p: p["image_processor"].update(size={"height": 48, "width": 48}), "does not interpolate"),
    (lambda p: p["image_processor"].pop("image_seq_length"), "no image_seq_length"),
    (lambda p: p["image_processor"].update(image_seq_length=256), "image_seq_length 256 differs"),
])
def test_a_processor_config_the_code_does_not_know_is_refused(tmp_path, change, match):
    dst = tmp_path / "pg"
    shutil.copytree(DATA / "tiny_paligemma", dst)
    _edit(dst / "processor_config.json", change)
    with pytest.raises(CheckpointError, match=match) as e:
        load_checkpoint(dst)
    _one_line(e)


@pytest.mark.parametrize("change, match", [
    (lambda c: c["text_config"].update(model_type="llama"), "not a PaliGemma language model"),
    (lambda c: c["vision_config"].update(model_type="clip_vision_model"), "SigLIP tower"),
    (lambda c: c.update(projection_dim=24), "projection_dim 24 differs"),
    (lambda c: c.update(image_token_index=5), "image_token_index is 5"),
    (lambda c: c["text_config"].update(num_hidden_layers=3), "lacks PaliGemma text tensors"),
])
def test_a_config_that_does_not_fit_is_refused(tmp_path, change, match):
    dst = tmp_path / "pg"
    shutil.copytree(DATA / "tiny_paligemma", dst)
    _edit(dst / "config.json", change)
    with pytest.raises(CheckpointError, match=match) as e:
        load_checkpoint(dst)
    _one_line(e)


def test_older_folders_with_preprocessor_config_json_open(tmp_path, picture):
    dst = tmp_path / "pg"
    shutil.copytree(DATA / "tiny_paligemma", dst)
    proc = json.loads((dst / "processor_config.json").read_text())
    image = proc.pop("image_processor")
    image["image_processor_type"] = "SiglipImageProcessor"
    image["do_convert_rgb"] = None  # what older files say: the class default
    image["processor_class"] = "PaliGemmaProcessor"
    (dst / "preprocessor_config.json").write_text(json.dumps(image))
    (dst / "processor_config.json").unlink()
    g = golden(DATA / "tiny_paligemma" / "golden.npz")
    res = load_checkpoint(dst).run([picture], str(g["prompt"]))
    np.testing.assert_array_equal(res.ids, g["input_ids"])
    np.testing.assert_array_equal(res.pixels[0], g["pixel_values"])


def test_to_rgb_of_arrays_and_pillow_agree_on_transparency():
    rng = np.random.default_rng(3)
    rgba = rng.integers(0, 256, size=(5, 6, 4), dtype=np.uint8)
    np.testing.assert_array_equal(to_rgb(rgba), to_rgb(Image.fromarray(rgba, mode="RGBA")))
    la = Image.fromarray(rgba[:, :, [0, 3]], mode="LA")  # grey with alpha: composited too
    assert to_rgb(la).shape == (5, 6, 3)


def test_model_inspect_writes_the_maps_the_mask_and_the_segments(tmp_path, capsys):
    from attnviz.cli import main

    folder = DATA / "tiny_paligemma2"
    g = golden(folder / "golden.npz")
    out = tmp_path / "pg.npz"
    assert main(["model", "inspect", str(folder), "--image", str(folder / "image.png"), "--text", str(g["prompt"]),
                 "--suffix", str(g["suffix"]), "--npz", str(out)]) == 0
    with np.load(out, allow_pickle=True) as z:
        assert np.abs(z["attentions"] - g["suffix_attentions"]).max() <= 1e-5
        np.testing.assert_array_equal(z["ids"], g["suffix_input_ids"])
        np.testing.assert_array_equal(z["token_type_ids"], g["suffix_token_type_ids"])
        assert [tuple(r) for r in z["segments"]] == [("image", 0, 16), ("prefix", 16, 24), ("suffix", 24, 32)]
        assert z["mask"][23, 0] and z["sliding_mask"][23, 0] and not z["sliding_mask"][30, 20]
    assert "sliding window 6 on layer 0" in capsys.readouterr().out
