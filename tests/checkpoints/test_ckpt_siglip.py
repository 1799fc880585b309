"""SigLIP's vision tower, the CLIP / SigLIP hidden states layer by layer, and Idefics3's SigLIP with
per-image position buckets, against transformers (torch CPU, eager attention), every layer and head.

Tiny checkpoints and goldens written by tools/make_family_goldens.py: ``tiny_siglip_vision`` (its
processor asks for 24 x 40 px, so the 4 x 4 table is interpolated to 3 x 5; its attention-pooling head
is in the file and not read), ``tiny_siglip`` (a whole SiglipModel), ``tiny_idefics3_vision`` (a padded
tile and its patch mask; an unpadded 24 x 40 input) and ``tiny_clip_vision``'s hidden states.
Tolerances: 1e-5 on attention weights, 1e-4 on hidden states, 1e-6 on pixel values.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from attnviz.checkpoints import CheckpointError, attention_rollout, cls_attention_maps, load_checkpoint, run_image
from attnviz.checkpoints.analysis import query_attention_maps, received_attention_maps
from attnviz.checkpoints.families import UNSUPPORTED, family_tensors, siglip_tensors, vision_tower_config
from attnviz.checkpoints.safetensors_file import StoredTensors
from attnviz.checkpoints.vision import (_arange_f32, bucket_position_ids, layers_needed, patch_mask_from_pixels,
                                        post_norm, vision_hidden_states)
from attnviz.checkpoints.weights import expected_tensors, load_weights

from ckpt_helpers import DATA, golden

DTYPES = [np.float32, np.float64]
SIGLIP = {"siglip_vision": "siglip_vision_model", "siglip": "siglip"}
HIDDEN = ["siglip_vision", "siglip", "clip_vision"]


@pytest.fixture(scope="module")
def family():
    cache = {}

    def get(name: str):
        if name not in cache:
            cache[name] = load_checkpoint(DATA / f"tiny_{name}")
        return cache[name]

    return get


@pytest.fixture(scope="module")
def idefics3():
    folder = DATA / "tiny_idefics3_vision"
    c = vision_tower_config(json.loads((folder / "config.json").read_text()))
    return c, load_weights(folder / "model.safetensors", c), golden(folder / "golden.npz")


def _worst(a: np.ndarray, b: np.ndarray) -> str:
    err = np.abs(a.astype(np.float64) - b).max(axis=(2, 3))  # (L, nh)
    return f"worst (layer, head) = {np.unravel_index(err.argmax(), err.shape)}: {err.max():.2e}"


def _close_states(states, want, atol=1e-4):
    assert len(states) == len(want)
    for i, (h, w) in enumerate(zip(states, want)):
        err = np.abs(h.astype(np.float64) - w).max()
        assert err <= atol, f"hidden state {i}: {err:.2e}"


# ---- SigLIP as a family -----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", list(SIGLIP))
@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
def test_siglip_matches_transformers(family, name, dtype):
    ckpt = family(name)
    c = ckpt.config
    assert c.model_type == SIGLIP[name] and ckpt.kind == "vit" and c.n_extra == 0
    assert c.act == "gelu_pytorch_tanh" and c.ln_eps == 1e-6 and c.grid == (4, 4)
    g = golden(DATA / f"tiny_{name}" / "golden.npz")
    res = run_image(ckpt, g["image"], dtype=dtype)
    np.testing.assert_allclose(res.pixels, g["pixel_values"], atol=1e-6, rtol=0)  # the PIL-backend processor's
    assert res.attentions.shape == g["attentions"].shape and res.attentions.dtype == dtype
    assert np.abs(res.attentions - g["attentions"]).max() <= 1e-5, _worst(res.attentions, g["attentions"])
    np.testing.assert_allclose(res.hidden, g["last_hidden_state"], atol=1e-4, rtol=0)  # after post_layernorm
    gh, gw = res.grid
    assert res.n_extra_tokens == 0 and len(res.tokens) == gh * gw == res.attentions.shape[-1]
    assert res.tokens[0] == "0,0" and res.tokens[-1] == f"{gh - 1},{gw - 1}" and not res.special.any()


def test_siglip_position_table_is_interpolated_to_the_processor_grid(family):
    ckpt = family("siglip_vision")
    assert ckpt.image.size == (24, 40) and ckpt.image.resample == 3  # SiglipImageProcessor: bicubic, 0.5 / 0.5
    assert ckpt.image.image_mean == (0.5, 0.5, 0.5) and ckpt.image.image_std == (0.5, 0.5, 0.5)
    assert run_image(ckpt, golden(DATA / "tiny_siglip_vision" / "golden.npz")["image"]).grid == (3, 5)
    assert family("siglip").image.size == (32, 32)  # the whole model runs at its trained grid


def test_the_attention_pooling_head_is_in_the_file_and_not_read(family):
    ckpt = family("siglip_vision")
    stored = StoredTensors([DATA / "tiny_siglip_vision" / "model.safetensors"]).stored_names()
    head = {n for n in stored if n.startswith("head.")}
    assert "head.probe" in head and "head.attention.in_proj_weight" in head
    assert not head & set(ckpt.weights) and set(ckpt.weights) == set(siglip_tensors(ckpt.config))
    whole = StoredTensors([DATA / "tiny_siglip" / "model.safetensors"]).stored_names()
    assert all("vision_model." + n in whole for n in family("siglip").weights)  # a SiglipModel's vision half


def test_siglip_is_no_longer_refused_by_name():
    assert "siglip" not in UNSUPPORTED and "siglip_vision_model" not in UNSUPPORTED


# ---- hidden states, layer by layer --------------------------------------------------------------------------


@pytest.mark.parametrize("name", HIDDEN)
@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
def test_hidden_states_match_output_hidden_states(family, name, dtype):
    ckpt = family(name)
    c = ckpt.config
    g = golden(DATA / f"tiny_{name}" / "golden.npz")
    atts, states = vision_hidden_states(c, ckpt.weights, g["pixel_values"], dtype=dtype)
    assert atts.shape == g["attentions"].shape and atts.dtype == dtype
    assert np.abs(atts - g["attentions"]).max() <= 1e-5, _worst(atts, g["attentions"])
    assert len(states) == c.n_layer + 1 and all(h.dtype == dtype for h in states)
    _close_states(states, g["hidden_states"])
    if c.model_type in ("clip_vision_model", "clip"):
        np.testing.assert_allclose(states[-1], g["last_hidden_state"], atol=1e-4, rtol=0)  # CLIP: no post-norm
    else:
        assert np.abs(states[-1] - g["last_hidden_state"]).max() > 1e-2  # the last entry is before post_layernorm
        np.testing.assert_allclose(post_norm(c, ckpt.weights, states[-1], dtype=dtype), g["last_hidden_state"],
                                   atol=1e-4, rtol=0)


@pytest.mark.parametrize("name", ["siglip", "clip_vision"])
def test_upto_runs_only_the_layers_needed(family, name):
    ckpt = family(name)
    c = ckpt.config
    g = golden(DATA / f"tiny_{name}" / "golden.npz")
    atts, states = vision_hidden_states(c, ckpt.weights, g["pixel_values"], upto=-2)  # LLaVA's vision_feature_layer
    assert atts.shape[0] == c.n_layer - 1 and len(states) == c.n_layer
    np.testing.assert_allclose(states[-1], g["hidden_states"][-2], atol=1e-4, rtol=0)
    assert np.abs(atts - g["attentions"][: c.n_layer - 1]).max() <= 1e-5
    atts, states = vision_hidden_states(c, ckpt.weights, g["pixel_values"], upto=0)
    assert atts.shape[0] == 0 and len(states) == 1
    np.testing.assert_allclose(states[0], g["hidden_states"][0], atol=1e-4, rtol=0)
    assert [layers_needed(c, u) for u in (None, -1, -2, -3, 1, 2)] == [2, 2, 1, 0, 1, 2]
    for bad, match in ((3, "out of range for 3 hidden states"), (-4, "out of range"), (True, "an integer"),
                       (1.5, "an integer")):
        with pytest.raises(CheckpointError, match=match):
            vision_hidden_states(c, ckpt.weights, g["pixel_values"], upto=bad)


def test_weights_are_any_mapping_of_the_canonical_names(family):
    """A vision-language model hands over its tower's tensors with its prefix stripped; exactly the names
    family_tensors lists are read."""
    ckpt = family("siglip")
    c = ckpt.config
    store = StoredTensors([DATA / "tiny_siglip" / "model.safetensors"])
    read: set[str] = set()

    class Prefixed:
        def __getitem__(self, name):
            read.add(name)
            return store["vision_model." + name]

        def __contains__(self, name):
            return "vision_model." + name in store.stored_names()

    store.select({"vision_model." + n: "vision_model." + n for n in family_tensors(c)})
    g = golden(DATA / "tiny_siglip" / "golden.npz")
    atts, states = vision_hidden_states(c, Prefixed(), g["pixel_values"])
    assert np.abs(atts - g["attentions"]).max() <= 1e-5
    post_norm(c, Prefixed(), states[-1])
    assert read == set(family_tensors(c)) == set(expected_tensors(c))


def test_hidden_states_refusals(family):
    ckpt = family("clip_vision")
    c = ckpt.config
    px = golden(DATA / "tiny_clip_vision" / "golden.npz")["pixel_values"]
    with pytest.raises(CheckpointError, match="patch_mask is for SigLIP towers"):
        vision_hidden_states(c, ckpt.weights, px, patch_mask=np.ones((4, 4), dtype=bool))
    with pytest.raises(CheckpointError, match=r"pixels must be \(3, H, W\)"):
        vision_hidden_states(c, ckpt.weights, px[0])
    with pytest.raises(CheckpointError, match="float32 or float64"):
        vision_hidden_states(c, ckpt.weights, px, dtype=np.float16)
    with pytest.raises(CheckpointError, match="kernel 'fast'"):
        vision_hidden_states(c, ckpt.weights, px, kernel="fast")
    dino = load_checkpoint(DATA / "tiny_dinov2")
    with pytest.raises(CheckpointError, match="not model_type 'dinov2'"):
        vision_hidden_states(dino.config, dino.weights, px)


# ---- Idefics3: SigLIP with per-image position buckets and padded patches -------------------------------------


@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
def test_idefics3_padded_tile_matches_transformers(idefics3, dtype):
    c, w, g = idefics3
    assert c.model_type == "idefics3_vision" and c.n_extra == 0 and c.grid == (4, 4)
    mask = patch_mask_from_pixels(g["pixel_attention_mask"], c.patch_size)  # (4, 4)
    np.testing.assert_array_equal(mask, g["patch_attention_mask"])
    assert mask.sum() == 6 and not mask.all()  # 3 x 2 real patches, the rest padding
    atts, states = vision_hidden_states(c, w, g["pixel_values"], dtype=dtype, patch_mask=mask)
    assert atts.shape == g["attentions"].shape and atts.dtype == dtype
    assert np.abs(atts - g["attentions"]).max() <= 1e-5, _worst(atts, g["attentions"])
    assert (atts[..., ~mask.reshape(-1)] == 0).all()  # no query attends to a padded patch
    _close_states(states, g["hidden_states"])
    np.testing.assert_allclose(post_norm(c, w, states[-1], dtype=dtype), g["last_hidden_state"], atol=1e-4, rtol=0)


@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
def test_idefics3_unpadded_input_buckets_its_own_grid(idefics3, dtype):
    c, w, g = idefics3
    atts, states = vision_hidden_states(c, w, g["full_pixel_values"], dtype=dtype)  # 3 x 5 patches, all real
    assert atts.shape == g["full_attentions"].shape == (2, 2, 15, 15)
    assert np.abs(atts - g["full_attentions"]).max() <= 1e-5, _worst(atts, g["full_attentions"])
    _close_states(states, g["full_hidden_states"])
    np.testing.assert_allclose(post_norm(c, w, states[-1], dtype=dtype), g["full_last_hidden_state"], atol=1e-4, rtol=0)


def test_idefics3_positions_are_not_siglips(idefics3):
    """The golden tells the rules apart: SigLIP's bicubic interpolation of the table, or a SigLIP that ignores
    the padding, miss transformers' Idefics3 by far."""
    from dataclasses import replace

    c, w, g = idefics3
    as_siglip = replace(c, model_type="siglip_vision_model")
    atts, _ = vision_hidden_states(as_siglip, w, g["full_pixel_values"])
    assert np.abs(atts - g["full_attentions"]).max() > 1e-3
    atts, _ = vision_hidden_states(as_siglip, w, g["pixel_values"])  # no mask: the padding attended to
    assert np.abs(atts - g["attentions"]).max() > 1e-3
    atts, _ = vision_hidden_states(as_siglip, w, g["pixel_values"], patch_mask=g["patch_attention_mask"])
    assert np.abs(atts - g["attentions"]).max() <= 1e-5  # a patch mask asks for the bucket rule on any SigLIP


def test_bucket_position_ids_by_hand():
    real = np.zeros((4, 4), dtype=bool)
    real[:3, :2] = True  # 3 real rows, 2 real columns of a 4 x 4 table
    # rows 0, 1/3, 2/3 -> buckets 0, 1, 2; columns 0, 1/2 -> 0, 2 (0.5 sits on a boundary: right=True takes 2)
    want = [[0, 2, 0, 0], [4, 6, 0, 0], [8, 10, 0, 0], [0, 0, 0, 0]]
    np.testing.assert_array_equal(bucket_position_ids(real, 4).reshape(4, 4), want)
    np.testing.assert_array_equal(bucket_position_ids(np.ones((4, 4), bool), 4), np.arange(16))  # the trained grid
    np.testing.assert_array_equal(bucket_position_ids(np.ones((2, 2), bool), 4), [0, 2, 8, 10])


def test_bucket_boundaries_are_torchs_arange_bit_for_bit():
    b = _arange_f32(1 / 19, 1.0, 1 / 19)  # torch.arange(1/19, 1.0, 1/19): 19 values (the last is 1.0)
    assert b.dtype == np.float32 and len(b) == 19 and b[-1] == 1.0
    assert b.view(np.uint32)[11] == 1059172137  # torch's value; float32(1/19 + 11/19) is one ulp lower
    assert np.float32(1 / 19 + (1 / 19) * 11).view(np.uint32) == 1059172136


@pytest.mark.parametrize("mask, match", [
    (np.ones((3, 3), dtype=bool), r"bool \(4, 4\) array"),
    (np.ones((4, 4), dtype=np.int64), r"bool \(4, 4\) array"),
    (np.pad(np.ones((3, 3), dtype=bool), ((0, 1), (1, 0))), "first row or first column"),
])
def test_patch_mask_problems(idefics3, mask, match):
    c, w, g = idefics3
    with pytest.raises(CheckpointError, match=match):
        vision_hidden_states(c, w, g["pixel_values"], patch_mask=mask)


def test_vision_tower_config_reads_a_vlms_vision_config():
    c = vision_tower_config({"model_type": "siglip_vision_model", "num_hidden_layers": 3},
                            defaults={"hidden_size": 1152, "num_attention_heads": 16, "patch_size": 14})
    assert (c.d_model, c.n_head, c.patch_size, c.grid, c.n_layer, c.n_extra) == (1152, 16, (14, 14), (16, 16), 3, 0)
    i3 = vision_tower_config({"model_type": "idefics3_vision", "image_size": 364, "patch_size": 14})
    assert (i3.d_model, i3.n_head, i3.grid, i3.act) == (1152, 16, (26, 26), "gelu_pytorch_tanh")
    clip = vision_tower_config({"model_type": "clip_vision_model", "image_size": 336, "patch_size": 14})
    assert clip.n_extra == 1 and clip.act == "quick_gelu" and "embeddings.class_embedding" in family_tensors(clip)
    with pytest.raises(CheckpointError, match="model_type 'dinov2' is not a supported vision tower"):
        vision_tower_config({"model_type": "dinov2"})
    with pytest.raises(CheckpointError, match="vision_config must be a JSON object"):
        vision_tower_config([1])
    with pytest.raises(CheckpointError, match="not divisible by 5 heads"):
        vision_tower_config({"model_type": "siglip_vision_model", "num_attention_heads": 5})


def test_an_idefics3_tower_folder_is_not_a_model_of_its_own(tmp_path):
    import shutil

    d = tmp_path / "tower"
    shutil.copytree(DATA / "tiny_idefics3_vision", d)
    with pytest.raises(CheckpointError, match="'idefics3_vision'.*not supported"):
        load_checkpoint(d)


def test_siglip_processor_with_a_bare_number_is_a_short_side_and_needs_a_crop(tmp_path):
    """SiglipImageProcessor builds its size dict with default_to_square=False: a number is the short side."""
    import shutil

    d = tmp_path / "siglip"
    shutil.copytree(DATA / "tiny_siglip", d)
    pp = json.loads((d / "preprocessor_config.json").read_text())
    pp["size"] = 32
    (d / "preprocessor_config.json").write_text(json.dumps(pp))
    with pytest.raises(CheckpointError, match="shortest-edge resizing is not supported without a centre crop"):
        load_checkpoint(d)


# ---- no class token: rollout, per-patch maps -------------------------------------------------------------------


def test_rollout_without_a_class_token_is_the_mean_over_query_rows(family):
    g = golden(DATA / "tiny_siglip" / "golden.npz")
    a = g["attentions"]  # (2, 2, 16, 16)
    r = attention_rollout(a, grid=(4, 4), n_extra=0)
    assert r.cls_map is None and r.rows == "mean over all 16 queries"
    mean = r.matrix.mean(axis=0)  # (16,)
    np.testing.assert_allclose(r.patch_map.reshape(-1), mean / mean.max())
    q = attention_rollout(a, grid=(4, 4), n_extra=0, query=5)
    np.testing.assert_allclose(q.patch_map.reshape(-1), q.matrix[5] / q.matrix[5].max())
    assert q.rows == "token 5"
    vit = golden(DATA / "tiny_vit" / "golden.npz")["attentions"]
    rv = attention_rollout(vit, grid=(3, 5), n_extra=1)
    assert rv.rows == "[CLS]" and rv.patch_map is rv.cls_map
    with pytest.raises(CheckpointError, match="query 16 is not a token index"):
        attention_rollout(a, grid=(4, 4), n_extra=0, query=16)


def test_patch_maps_without_a_class_token():
    a = golden(DATA / "tiny_siglip" / "golden.npz")["attentions"]  # (2, 2, 16, 16)
    with pytest.raises(CheckpointError, match="no class token"):
        cls_attention_maps(a, layer=-1, grid=(4, 4), n_extra=0)
    m = query_attention_maps(a, -1, (4, 4), 0, 6)  # (nh, 4, 4)
    np.testing.assert_array_equal(m[1], a[1, 1, 6].reshape(4, 4))
    rec = received_attention_maps(a, 0, (4, 4), 0)  # (nh, 4, 4)
    np.testing.assert_allclose(rec[0], a[0, 0].mean(axis=0).reshape(4, 4))
    np.testing.assert_allclose(rec.sum(axis=(1, 2)), 1.0, atol=1e-6)  # every row sums to 1: so does their mean
    vit = golden(DATA / "tiny_vit" / "golden.npz")["attentions"]  # (2, 2, 16, 16) with [CLS]
    np.testing.assert_allclose(received_attention_maps(vit, 1, (3, 5), 1)[0], vit[1, 0, :, 1:].mean(axis=0).reshape(3, 5))


def test_the_cli_inspects_siglip(tmp_path, capsys):
    from PIL import Image

    from attnviz.cli import main

    g = golden(DATA / "tiny_siglip_vision" / "golden.npz")
    Image.fromarray(g["image"]).save(tmp_path / "img.png")
    out = tmp_path / "att.npz"
    assert main(["model", "inspect", str(DATA / "tiny_siglip_vision"), "--image", str(tmp_path / "img.png"),
                 "--npz", str(out)]) == 0
    with np.load(out) as z:
        np.testing.assert_allclose(z["attentions"], g["attentions"], atol=1e-5, rtol=0)
        assert int(z["n_extra_tokens"]) == 0
    printed = capsys.readouterr().out
    assert "siglip_vision_model" in printed and "interpolated from 4x4 to 3x5 patches" in printed


def test_the_overlays_of_a_model_without_a_class_token(family):
    from attnviz.checkpoints.views import (OverlaySpec, default_overlay, grid_label, overlay_caption, overlay_modes,
                                           vit_overlay)

    ckpt = family("siglip_vision")
    r = run_image(ckpt, golden(DATA / "tiny_siglip_vision" / "golden.npz")["image"])
    assert overlay_modes(r) == ("patch", "received", "rollout") and default_overlay(r) == "received"
    m, levels = vit_overlay(r, OverlaySpec(mode="received", layer=-1, head="mean"))
    np.testing.assert_allclose(m, received_attention_maps(r.attentions, -1, (3, 5), 0).mean(axis=0))
    assert levels == (m.min(), m.max())
    m, _ = vit_overlay(r, OverlaySpec(mode="patch", layer=0, head=1, patch=7))
    np.testing.assert_array_equal(m, r.attentions[0, 1, 7].reshape(3, 5))
    m, levels = vit_overlay(r, OverlaySpec(mode="rollout"))
    np.testing.assert_array_equal(m, attention_rollout(r.attentions, grid=(3, 5), n_extra=0).patch_map)
    assert levels == (0.0, 1.0)
    with pytest.raises(ValueError, match="has no class token; choose one of patch, received, rollout"):
        vit_overlay(r, OverlaySpec(mode="cls"))
    with pytest.raises(ValueError, match="patch 15 is out of range for 15 patches"):
        vit_overlay(r, OverlaySpec(mode="patch", patch=15))
    assert grid_label(r, ckpt.image, (8, 8), (4, 4)).endswith(
        "= 15 tokens (no class token); position embeddings interpolated from 4x4")
    assert overlay_caption(r, OverlaySpec(mode="rollout")).startswith("rollout of the mean over all 15 query rows")
    assert overlay_caption(r, OverlaySpec(mode="patch", layer=1, patch=7)) == (
        "patch 1,2 → patches (click another), layer 1, mean over heads")
    assert "receives over all 15 queries" in overlay_caption(r, OverlaySpec(mode="received", layer=1))
    vit = run_image(load_checkpoint(DATA / "tiny_vit"), golden(DATA / "tiny_siglip_vision" / "golden.npz")["image"])
    assert overlay_modes(vit)[0] == "cls" == default_overlay(vit)
    m, _ = vit_overlay(vit, OverlaySpec(mode="patch", layer=1, head=0, patch=0))
    np.testing.assert_array_equal(m, vit.attentions[1, 0, 1, 1:].reshape(3, 5))  # patch 0 is token 1 after [CLS]
