"""The encoder and vision families against transformers (torch CPU, eager attention), every layer and head.

Tiny checkpoints and goldens written by tools/make_family_goldens.py; tolerance 1e-5 on attention weights.
"""

from __future__ import annotations

import numpy as np
import pytest

from attnviz.checkpoints import load_checkpoint, run_image, run_text

from ckpt_helpers import DATA, golden

DTYPES = [np.float32, np.float64]
TEXT_FAMILIES = {"roberta": "roberta", "xlmr": "xlm-roberta", "electra": "electra", "distilbert": "distilbert"}
VISION_FAMILIES = {"clip_vision": "clip_vision_model", "clip": "clip", "dinov2": "dinov2", "vit_interp": "vit",
                   "deit_interp": "deit"}


@pytest.fixture(scope="module")
def family():
    cache = {}

    def get(name: str):
        if name not in cache:
            cache[name] = load_checkpoint(DATA / f"tiny_{name}")
        return cache[name]

    return get


def _worst(a: np.ndarray, b: np.ndarray) -> str:
    err = np.abs(a.astype(np.float64) - b).max(axis=(2, 3))  # (L, nh)
    return f"worst (layer, head) = {np.unravel_index(err.argmax(), err.shape)}: {err.max():.2e}"


@pytest.mark.parametrize("name", list(TEXT_FAMILIES))
@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
def test_text_family_matches_transformers(family, name, dtype):
    ckpt = family(name)
    assert ckpt.config.model_type == TEXT_FAMILIES[name] and ckpt.kind == "bert"
    g = golden(DATA / f"tiny_{name}" / "golden.npz")
    res = run_text(ckpt, str(g["text"]), dtype=dtype)
    np.testing.assert_array_equal(res.ids, g["input_ids"])
    assert res.attentions.shape == g["attentions"].shape and res.attentions.dtype == dtype
    assert np.abs(res.attentions - g["attentions"]).max() <= 1e-5, _worst(res.attentions, g["attentions"])
    np.testing.assert_allclose(res.hidden, g["last_hidden_state"], atol=1e-4)
    assert res.special[0] and res.special[-1]  # <s> ... </s> or [CLS] ... [SEP]


@pytest.mark.parametrize("name", list(VISION_FAMILIES))
@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
def test_vision_family_matches_transformers(family, name, dtype):
    ckpt = family(name)
    assert ckpt.config.model_type == VISION_FAMILIES[name] and ckpt.kind == "vit"
    g = golden(DATA / f"tiny_{name}" / "golden.npz")
    res = run_image(ckpt, g["image"], dtype=dtype)
    np.testing.assert_allclose(res.pixels, g["pixel_values"], atol=1e-6, rtol=0)
    assert res.attentions.shape == g["attentions"].shape
    assert np.abs(res.attentions - g["attentions"]).max() <= 1e-5, _worst(res.attentions, g["attentions"])
    np.testing.assert_allclose(res.hidden, g["last_hidden_state"], atol=1e-4, rtol=1e-5)
    n_extra = 2 if name == "deit_interp" else 1
    gh, gw = res.grid
    assert res.n_extra_tokens == n_extra and len(res.tokens) == n_extra + gh * gw == res.attentions.shape[-1]


@pytest.mark.parametrize("name", ["dinov2", "vit_interp", "deit_interp"])
def test_position_table_is_interpolated_to_the_processor_grid(family, name):
    ckpt = family(name)
    assert ckpt.config.grid == (4, 4)  # trained table
    res = run_image(ckpt, golden(DATA / f"tiny_{name}" / "golden.npz")["image"])
    assert res.grid == (3, 5)  # 24 x 40 px input


def test_roberta_positions_start_after_padding_index(family):
    from attnviz.checkpoints.encoders import position_ids

    c = family("roberta").config
    assert c.padding_idx == 1 and c.max_tokens == c.max_positions - 2
    np.testing.assert_array_equal(position_ids(c, np.array([0, 7, 9, 2])), [2, 3, 4, 5])
    np.testing.assert_array_equal(position_ids(c, np.array([0, 7, 1, 2])), [2, 3, 1, 4])  # a pad keeps row pad


def test_roberta_longest_text_is_the_table_minus_the_padding_rows(family):
    from attnviz.checkpoints import CheckpointError

    ckpt = family("roberta")
    with pytest.raises(CheckpointError, match=str(ckpt.config.max_tokens)):
        run_text(ckpt, " river" * 60)


# ---- refusals: a message naming the input and what is missing ----------------------------------------


def _copy(tmp_path, name: str):
    import shutil

    dst = tmp_path / name
    shutil.copytree(DATA / f"tiny_{name}", dst)
    return dst


def _edit(path, **changes):
    import json

    cfg = json.loads(path.read_text())
    for k, v in changes.items():
        if v is None:
            cfg.pop(k, None)
        else:
            cfg[k] = v
    path.write_text(json.dumps(cfg))


@pytest.mark.parametrize("model_type, needs", [
    ("swinv2", "scaled cosine attention"),
])
def test_unsupported_family_is_named_with_what_is_missing(tmp_path, model_type, needs):
    from attnviz.checkpoints import CheckpointError

    d = _copy(tmp_path, "roberta")
    _edit(d / "config.json", model_type=model_type)
    with pytest.raises(CheckpointError, match=f"'{model_type}'.*not supported: it needs .*{needs}") as err:
        load_checkpoint(d)
    assert len(str(err.value)) < 200 and "supported are" not in str(err.value)  # one short line


@pytest.mark.parametrize("name, file, changes, expected", [
    ("clip", "config.json", {"vision_config": [1, 2]}, "vision_config must be a JSON object"),
    ("dinov2", "config.json", {"use_swiglu_ffn": True}, "use_swiglu_ffn=true .* not supported"),
    ("dinov2", "config.json", {"mlp_ratio": -1}, "'mlp_ratio' must be > 0"),
    ("roberta", "config.json", {"pad_token_id": 39}, "pad_token_id 39 leaves no positions"),
    ("electra", "config.json", {"embedding_size": 12}, r"embeddings.word_embeddings.weight.*\(151, 8\).*\(151, 12\)"),
    ("roberta", "config.json", {"position_embedding_type": "relative_key"}, "'relative_key' is not supported"),
    ("clip_vision", "preprocessor_config.json", {"do_center_crop": False}, "shortest-edge resizing is not supported without a centre crop"),
    ("dinov2", "preprocessor_config.json", {"crop_size": {"height": 4, "width": 40}}, r"4x40 px are smaller than one patch"),
])
def test_family_config_problems(tmp_path, name, file, changes, expected):
    from attnviz.checkpoints import CheckpointError

    d = _copy(tmp_path, name)
    _edit(d / file, **changes)
    with pytest.raises(CheckpointError, match=expected):
        load_checkpoint(d)


def test_dinov2_crop_larger_than_the_image_is_padded_black_as_transformers_pads(family):
    from attnviz.checkpoints.preprocess import center_crop

    rgb = np.full((4, 6, 3), 200, dtype=np.uint8)
    out = center_crop(rgb, (6, 4))  # taller than the image, narrower
    assert out.shape == (6, 4, 3)
    assert (out[0] == 0).all() and (out[-1] == 0).all() and (out[1:5] == 200).all()


# ---- transparency: the checkpoint sees what transformers' convert("RGB") gives it ------------------


def test_rgba_picture_is_seen_as_transformers_sees_it(tmp_path):
    from attnviz.sources.image import load_image

    g = golden(DATA / "rgba_vit" / "golden.npz")
    ckpt = load_checkpoint(DATA / "tiny_vit")
    png = DATA / "rgba_vit" / "image.png"
    res = run_image(ckpt, load_image(png, alpha="drop"))
    np.testing.assert_allclose(res.pixels, g["pixel_values"], atol=1e-6, rtol=0)
    assert np.abs(res.attentions - g["attentions"]).max() <= 1e-5
    over_white = run_image(ckpt, load_image(png))  # the session's own image sources composite instead
    assert np.abs(over_white.attentions - g["attentions"]).max() > 1e-2


@pytest.mark.parametrize("name", ["roberta", "distilbert", "clip", "dinov2"])
def test_cli_inspect_accepts_the_families(name, tmp_path, capsys):
    from attnviz.cli import main

    folder = DATA / f"tiny_{name}"
    g = golden(folder / "golden.npz")
    out = tmp_path / "att.npz"
    if "image" in g:
        from PIL import Image

        Image.fromarray(g["image"]).save(tmp_path / "img.png")
        src = ["--image", str(tmp_path / "img.png")]
    else:
        src = ["--text", str(g["text"])]
    assert main(["model", "inspect", str(folder), *src, "--npz", str(out)]) == 0
    with np.load(out) as z:
        np.testing.assert_allclose(z["attentions"], g["attentions"], atol=1e-5, rtol=0)
    printed = capsys.readouterr().out
    assert f"tiny_{name}: " in printed
    assert ("interpolated from 4x4 to 3x5 patches" in printed) == (name == "dinov2")


def test_cli_inspect_rgba_image_drops_alpha_like_transformers(tmp_path, capsys):
    from attnviz.cli import main

    out = tmp_path / "att.npz"
    assert main(["model", "inspect", str(DATA / "tiny_vit"), "--image", str(DATA / "rgba_vit" / "image.png"),
                 "--npz", str(out)]) == 0
    with np.load(out) as z:
        np.testing.assert_allclose(z["attentions"], golden(DATA / "rgba_vit" / "golden.npz")["attentions"], atol=1e-5, rtol=0)


def test_cli_refuses_an_unsupported_family_by_name(tmp_path, capsys):
    import shutil

    from attnviz.cli import main

    d = tmp_path / "swinv2"
    shutil.copytree(DATA / "tiny_roberta", d)
    _edit(d / "config.json", model_type="swinv2")
    assert main(["model", "inspect", str(d), "--text", "river", "--npz", str(tmp_path / "x.npz")]) == 1
    err = capsys.readouterr().err
    assert "'swinv2'" in err and "scaled cosine attention" in err and "Traceback" not in err


def test_clip_processor_with_bare_numbers_resizes_the_short_side(tmp_path, family):
    """openai/clip-vit-* store ``"size": 224, "crop_size": 224``: a short side and a square crop."""
    d = _copy(tmp_path, "clip")
    _edit(d / "preprocessor_config.json", size=32, crop_size=32, image_processor_type=None,
          feature_extractor_type="CLIPFeatureExtractor")
    ic = load_checkpoint(d).image
    assert ic.shortest_edge == 32 and ic.crop_size == (32, 32) == ic.size
    g = golden(DATA / "tiny_clip" / "golden.npz")
    assert np.abs(run_image(load_checkpoint(d), g["image"]).attentions - g["attentions"]).max() <= 1e-5


def test_seen_region_is_the_centre_crop_in_original_pixels(family):
    from attnviz.checkpoints.preprocess import seen_region

    ic = family("clip").image  # short side 32, crop 32 x 32
    assert seen_region((32, 96), ic, (4, 4), (8, 8)) == (0.0, 32.0, 32.0, 64.0)
    vit = load_checkpoint(DATA / "tiny_vit").image  # stretched to 24 x 40: all of it
    assert seen_region((30, 52), vit, (3, 5), (8, 8)) == (0.0, 0.0, 30.0, 52.0)


@pytest.mark.parametrize("changes, expected", [
    ({"crop_size": {"height": 4000, "width": 4000}}, r"4000x4000 px give 250001 tokens.*GiB \(limit 2 GiB\)"),
    ({"crop_size": {"height": 100000, "width": 1000}}, "100000x1000 px are more than 40 MP"),
])
def test_processor_sizes_that_would_not_fit_are_refused_at_load(tmp_path, changes, expected):
    from attnviz.checkpoints import CheckpointError

    d = _copy(tmp_path, "dinov2")
    _edit(d / "preprocessor_config.json", **changes)
    with pytest.raises(CheckpointError, match=expected):
        load_checkpoint(d)


def test_an_elongated_image_is_refused_before_its_short_side_is_resized(family):
    from attnviz.checkpoints import CheckpointError

    sliver = np.zeros((1, 2_000_000, 3), dtype=np.uint8)  # 2 MP, but 40 x 80 M after the resize
    with pytest.raises(CheckpointError, match=r"1x2000000 px.*40x80000000 px, more than 40 MP"):
        run_image(family("dinov2"), sliver)
