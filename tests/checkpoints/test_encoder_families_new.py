"""DINOv2 with registers, ALBERT, MPNet, BEiT and DeBERTa (v1, v2, v3) against transformers 5.24 (torch CPU, eager attention).

Tiny random checkpoints and goldens written by tools/make_encoder_family_goldens.py; every layer and head's
attention weights to 1e-5, token ids equal to AutoTokenizer's, pixel values equal to the image processor's.
"""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from attnviz.checkpoints import CheckpointError, load_checkpoint, run_image, run_text

from ckpt_helpers import DATA, golden

DTYPES = [np.float32, np.float64]
TEXT = {"albert": "albert", "mpnet": "mpnet", "deberta_v3": "deberta-v2", "deberta_v2": "deberta-v2",
        "deberta": "deberta"}
DEBERTA_TERMS = ("content-to-content", "content-to-position", "position-to-content")
VISION = {"dinov2_reg": "dinov2_with_registers", "beit": "beit", "beit_shared": "beit"}


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


@pytest.mark.parametrize("name", list(TEXT))
@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
def test_text_family_matches_transformers(family, name, dtype):
    ckpt = family(name)
    assert ckpt.config.model_type == TEXT[name] and ckpt.kind == "bert"
    g = golden(DATA / f"tiny_{name}" / "golden.npz")
    res = run_text(ckpt, str(g["text"]), dtype=dtype)
    np.testing.assert_array_equal(res.ids, g["input_ids"])  # AutoTokenizer's ids
    assert res.attentions.shape == g["attentions"].shape and res.attentions.dtype == dtype
    assert np.abs(res.attentions - g["attentions"]).max() <= 1e-5, _worst(res.attentions, g["attentions"])
    np.testing.assert_allclose(res.hidden, g["last_hidden_state"], atol=2e-5, rtol=1e-5)
    assert res.special[0] and res.special[-1] and not res.special[1:-1].any()


@pytest.mark.parametrize("name", list(VISION))
@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
def test_vision_family_matches_transformers(family, name, dtype):
    ckpt = family(name)
    assert ckpt.config.model_type == VISION[name] and ckpt.kind == "vit"
    g = golden(DATA / f"tiny_{name}" / "golden.npz")
    res = run_image(ckpt, g["image"], dtype=dtype)
    np.testing.assert_allclose(res.pixels, g["pixel_values"], atol=1e-6, rtol=0)
    assert res.attentions.shape == g["attentions"].shape
    assert np.abs(res.attentions - g["attentions"]).max() <= 1e-5, _worst(res.attentions, g["attentions"])
    np.testing.assert_allclose(res.hidden, g["last_hidden_state"], atol=2e-5, rtol=1e-5)
    gh, gw = res.grid
    assert len(res.tokens) == res.n_extra_tokens + gh * gw == res.attentions.shape[-1]


def test_albert_layers_share_their_groups_weights(family):
    from attnviz.checkpoints.encoders import albert_group

    c = family("albert").config
    assert (c.n_layer, c.n_groups, c.embedding_size, c.d_model) == (5, 2, 8, 12)
    assert [albert_group(c, i) for i in range(5)] == [0, 0, 0, 1, 1]  # int(i / 2.5), as AlbertTransformer
    names = family("albert").weights.keys()
    assert not any("albert_layer_groups.2" in n for n in names)  # two weight sets for five layers


def test_dinov2_registers_sit_between_cls_and_the_patches_and_are_named(family):
    res = run_image(family("dinov2_reg"), golden(DATA / "tiny_dinov2_reg" / "golden.npz")["image"])
    assert res.tokens[:4] == ["[CLS]", "[REG0]", "[REG1]", "[REG2]"] and res.tokens[4] == "0,0"
    assert res.n_extra_tokens == 4 and res.special[:4].all() and not res.special[4:].any()
    assert family("dinov2_reg").config.grid == (4, 4) and res.grid == (3, 5)  # table resized (antialiased)


@pytest.mark.parametrize("name", ["mpnet", "beit", "beit_shared"])
def test_relative_position_bias_is_its_own_score_term(family, name):
    """The run result keeps the content term q k^T / sqrt(hs) and the position bias apart; the bias equals
    transformers' and the softmax of their sum is the attention."""
    ckpt = family(name)
    g = golden(DATA / f"tiny_{name}" / "golden.npz")
    res = run_text(ckpt, str(g["text"]), dtype=np.float64) if name == "mpnet" else run_image(ckpt, g["image"], dtype=np.float64)
    terms = res.score_terms
    assert set(terms) == {"content", "position bias"}
    bias = terms["position bias"]
    assert bias.shape == res.attentions.shape == terms["content"].shape
    want = g["position_bias"]  # MPNet (nh, T, T) for every layer; BEiT (L, nh, T, T)
    np.testing.assert_allclose(bias, np.broadcast_to(want, bias.shape), atol=1e-6, rtol=0)
    s = terms["content"] + bias
    w = np.exp(s - s.max(axis=-1, keepdims=True))
    w /= w.sum(axis=-1, keepdims=True)
    np.testing.assert_allclose(w, res.attentions, atol=1e-12)
    assert np.abs(bias).max() > 0.1  # the bias moves the scores


@pytest.mark.parametrize("name", ["deberta_v3", "deberta_v2", "deberta"])
@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
def test_deberta_keeps_its_three_disentangled_terms(family, name, dtype):
    """content-to-content, content-to-position and position-to-content each equal transformers' (already divided by
    sqrt(3 hs)), and the softmax of their sum is the attention."""
    g = golden(DATA / f"tiny_{name}" / "golden.npz")
    res = run_text(family(name), str(g["text"]), dtype=dtype)
    assert tuple(res.score_terms) == DEBERTA_TERMS
    for j, term in enumerate(DEBERTA_TERMS):
        got = res.score_terms[term]
        assert got.shape == res.attentions.shape and got.dtype == dtype
        np.testing.assert_allclose(got, g["terms"][j], atol=2e-5, rtol=1e-5, err_msg=term)
        assert np.abs(got).max() > 0.5  # every term moves the scores
    s = sum(res.score_terms[t].astype(np.float64) for t in DEBERTA_TERMS)
    w = np.exp(s - s.max(axis=-1, keepdims=True))
    w /= w.sum(axis=-1, keepdims=True)
    np.testing.assert_allclose(w, res.attentions, atol=2e-6 if dtype == np.float32 else 1e-12)


def test_deberta_log_buckets_and_table_span(family):
    from attnviz.checkpoints.encoders import deberta_relative_positions

    s3 = family("deberta_v3").config.spec
    assert (s3.share_att_key, s3.buckets, s3.span, s3.scale_factor) == (True, 8, 8, 3)
    r = deberta_relative_positions(s3, 40)  # (T, T) i - j, log-bucketed beyond 4
    assert r[10, 10] == 0 and r[12, 10] == 2 and r[10, 13] == -3
    # 39 apart: 4 + ceil(log(39 / 4) / log(63 / 4) * 3) = 4 + ceil(2.48) = 7
    assert r[39, 0] == 7 and r[0, 39] == -7 and r[5, 0] == 5 and r[6, 0] == 5
    assert (np.diff(r[39]) <= 0).all()  # monotone in the distance
    s2 = family("deberta_v2").config.spec
    assert (s2.share_att_key, s2.buckets, s2.span, s2.conv_kernel) == (False, -1, 6, 3)
    s1 = family("deberta").config.spec  # v1: 5 distances either side, fewer than the 38 tokens
    assert (s1.v1, s1.buckets, s1.max_relative, s1.norm_rel) == (True, -1, 5, False)
    assert "encoder.layer.0.attention.self.in_proj.weight" in family("deberta").weights


def test_beit_options_and_a_grid_other_than_the_trained_one(family):
    c = family("beit").config  # per-layer tables, layer scale, mean pooling (no final norm), no position table
    assert (c.rel_bias, c.layer_scale, c.final_norm, c.abs_positions, c.grid) == ("beit", True, False, False, (3, 5))
    c = family("beit_shared").config  # one shared table, a position table, no layer scale, a final LayerNorm
    assert (c.rel_bias, c.layer_scale, c.final_norm, c.abs_positions, c.grid) == ("beit_shared", False, True, True, (4, 4))
    res = run_image(family("beit_shared"), golden(DATA / "tiny_beit_shared" / "golden.npz")["image"])
    assert res.grid == (3, 5)  # the 4 x 4 tables resized to the processor's 24 x 40 crop


def test_beit_bias_index_matches_the_published_rule():
    from attnviz.checkpoints.vision import beit_bias_index

    idx = beit_bias_index((2, 3))  # 6 patches + [CLS]; n = 3 * 5 + 3 = 18 rows
    assert idx.shape == (7, 7)
    assert idx[0, 0] == 17 and (idx[0, 1:] == 15).all() and (idx[1:, 0] == 16).all()
    assert idx[1, 1] == (0 + 1) * 5 + (0 + 2)  # same patch: the table's centre
    assert idx[6, 1] == (1 + 1) * 5 + (2 + 2)  # patch (1, 2) looking at (0, 0)


def test_other_families_have_no_score_terms(family):
    assert run_text(family("albert"), "the river").score_terms is None
    assert run_image(family("dinov2_reg"), golden(DATA / "tiny_dinov2_reg" / "golden.npz")["image"]).score_terms is None


def _copy_edit(tmp_path, name: str, **changes):
    d = tmp_path / name
    shutil.copytree(DATA / f"tiny_{name}", d)
    cfg = json.loads((d / "config.json").read_text())
    cfg.update(changes)
    (d / "config.json").write_text(json.dumps(cfg))
    return d


@pytest.mark.parametrize("name, changes, expected", [
    ("albert", {"inner_group_num": 2}, "inner_group_num 2 is not supported"),
    ("albert", {"num_hidden_groups": 9}, "num_hidden_groups 9 is more than the 5 layers"),
    ("albert", {"embedding_size": 10}, r"embeddings.word_embeddings.weight.*shape"),
    ("mpnet", {"relative_attention_num_buckets": 16}, "fewer than the 32 buckets"),
    ("beit", {"use_shared_relative_position_bias": True}, "lacks tensors"),
    ("beit", {"add_fpn": True}, "add_fpn=true"),
    ("deberta_v3", {"pos_att_type": ["c2p", "p2p"]}, "pos_att_type 'p2p' is not supported"),
    ("deberta_v3", {"position_buckets": 200}, "must exceed half the 200 position buckets"),
    ("deberta_v3", {"position_buckets": 6}, r"encoder.rel_embeddings.weight.*\(16, 12\).*\(12, 12\)"),
    ("deberta_v2", {"conv_groups": 5}, "conv_groups 5 does not divide hidden_size 12"),
    ("deberta", {"talking_head": True}, "talking_head=true"),
    ("deberta", {"max_relative_positions": 7}, r"rel_embeddings.weight.*\(10, 12\).*\(14, 12\)"),
    ("dinov2_reg", {"num_register_tokens": 5}, r"register_tokens.*\(1, 3, 16\).*\(1, 5, 16\)"),
])
def test_config_problems_are_one_clear_message(tmp_path, name, changes, expected):
    d = _copy_edit(tmp_path, name, **changes)
    with pytest.raises(CheckpointError, match=expected):
        load_checkpoint(d)


def test_still_refused_families_name_what_they_miss(tmp_path):
    for model_type in ("swinv2",):
        d = _copy_edit(tmp_path / model_type, "mpnet", model_type=model_type)
        with pytest.raises(CheckpointError, match=f"'{model_type}'.*not supported: it needs") as err:
            load_checkpoint(d)
        assert len(str(err.value)) < 200


@pytest.mark.parametrize("size", ["3x9", "11x2", "7x5"])
def test_resizes_match_torch(size):
    """Antialiased bicubic (DINOv2 with registers' position table) and bilinear (BEiT's bias table) resizes equal
    torch.nn.functional.interpolate's, one axis shrinking and the other growing."""
    from attnviz.checkpoints.interpolate import bicubic_resize_aa, bilinear_resize

    g = golden(DATA / "tiny_dinov2_reg" / "golden_resize.npz")
    hw = tuple(int(v) for v in size.split("x"))
    np.testing.assert_allclose(bicubic_resize_aa(g["grid"], hw), g[f"bicubic_aa_{size}"], atol=2e-6, rtol=0)
    np.testing.assert_allclose(bilinear_resize(g["grid"], hw), g[f"bilinear_{size}"], atol=2e-6, rtol=0)


@pytest.mark.parametrize("kernel", ["reference", "naive", "flash"])
def test_biased_families_run_on_every_kernel(family, kernel):
    for name in ("mpnet", "deberta_v3"):
        g = golden(DATA / f"tiny_{name}" / "golden.npz")
        res = run_text(family(name), str(g["text"]), kernel=kernel)
        assert np.abs(res.attentions - g["attentions"]).max() <= 1e-5, (name, _worst(res.attentions, g["attentions"]))
    g = golden(DATA / "tiny_beit" / "golden.npz")
    res = run_image(family("beit"), g["image"], kernel=kernel)
    assert np.abs(res.attentions - g["attentions"]).max() <= 1e-5, _worst(res.attentions, g["attentions"])


@pytest.mark.parametrize("name", ["mpnet", "albert", "deberta_v3"])
def test_text_longer_than_the_position_table_is_one_message(family, name):
    ckpt = family(name)
    with pytest.raises(CheckpointError, match=str(ckpt.config.max_tokens)):
        run_text(ckpt, "the river bank " * 200)
    assert ckpt.config.max_tokens == ckpt.config.max_positions - (2 if name == "mpnet" else 0)


@pytest.mark.parametrize("name, crop, expected", [
    ("dinov2_reg", {"height": 4, "width": 40}, "smaller than one patch"),
    ("beit", {"height": 16, "width": 40}, "non-square grid is not supported"),  # a 3 x 5 trained grid
])
def test_processor_sizes_the_model_cannot_take_are_one_message(tmp_path, name, crop, expected):
    d = _copy_edit(tmp_path, name)
    pp = json.loads((d / "preprocessor_config.json").read_text())
    pp["crop_size"] = crop
    (d / "preprocessor_config.json").write_text(json.dumps(pp))
    with pytest.raises(CheckpointError, match=expected) as err:
        load_checkpoint(d)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("name", ["albert", "mpnet", "deberta_v3", "beit", "dinov2_reg"])
def test_interventions_reach_the_new_families(family, name):
    """A knockout leaving each token only itself in layer 0 gives that layer identity maps (the biases do not
    leak past the mask), and zero-ablating every head of layer 0 changes the hidden state."""
    from attnviz.checkpoints.encoders import forward_encoder
    from attnviz.checkpoints.interventions import Edit
    from attnviz.checkpoints.vision import forward_vision

    ckpt = family(name)
    g = golden(DATA / f"tiny_{name}" / "golden.npz")
    c = ckpt.config
    if c.kind == "vit":
        res = run_image(ckpt, g["image"])

        def run(edit):
            return forward_vision(c, ckpt.weights, res.pixels, edit=edit)[:2]
    else:
        res = run_text(ckpt, str(g["text"]))

        def run(edit):
            return forward_encoder(c, ckpt.weights, res.ids, edit=edit)
    T = res.attentions.shape[-1]
    atts, _ = run(Edit(knockout={0: ~np.eye(T, dtype=bool)}))
    np.testing.assert_allclose(atts[0], np.broadcast_to(np.eye(T), atts[0].shape), atol=1e-6)
    assert atts.shape == res.attentions.shape
    _, hidden = run(Edit(ablate={(0, h): "zero" for h in range(c.n_head)}))
    assert np.abs(hidden - res.hidden).max() > 1e-3


@pytest.mark.parametrize("name, prefix", [("albert", "albert."), ("mpnet", "mpnet."), ("deberta_v3", "deberta."),
                                          ("dinov2_reg", "dinov2_with_registers.")])
def test_a_task_models_prefixed_tensors_load_as_the_base_models(tmp_path, name, prefix):
    """AlbertForMaskedLM and the like save the base model under their prefix (and a head attnviz skips)."""
    from safetensors.numpy import load_file, save_file

    src = DATA / f"tiny_{name}"
    dst = tmp_path / name
    shutil.copytree(src, dst)
    tensors = load_file(str(src / "model.safetensors"))
    renamed = {prefix + k: v for k, v in tensors.items()}
    renamed["classifier.weight"] = np.zeros((2, 4), dtype=np.float32)  # a task head beside the base model
    save_file(renamed, str(dst / "model.safetensors"))
    a, b = load_checkpoint(src), load_checkpoint(dst)
    g = golden(src / "golden.npz")
    if name in VISION:
        img = np.random.default_rng(0).integers(0, 255, (40, 40, 3), dtype=np.uint8)
        np.testing.assert_array_equal(run_image(a, img).attentions, run_image(b, img).attentions)
    else:
        np.testing.assert_array_equal(run_text(a, str(g["text"])).attentions, run_text(b, str(g["text"])).attentions)
