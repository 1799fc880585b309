"""GPT-NeoX / Pythia, Phi-1/2, Phi-3, OLMo, OLMo 2, StableLM, Falcon, OPT and BLOOM (and dynamic / longrope
rotary scaling on Llama and Qwen2) against transformers 5.24: every layer's
and head's eager attention within 1e-5 in float32, token ids equal to AutoTokenizer's, greedy ``generate``
ids equal, the logit lens through each family's final norm and head; dynamic and longrope rotary
scaling past the contexts they change at. Goldens: tools/make_decoder_family_goldens.py."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace

import numpy as np
import pytest
from ckpt_helpers import DATA, golden

from attnviz.checkpoints import CheckpointError, load_checkpoint, run_text
from attnviz.checkpoints.config import parse_model_config
from attnviz.checkpoints.decoder import forward_decoder
from attnviz.checkpoints.decoder_config import alibi_slopes
from attnviz.checkpoints.decoder_run import run_decoder
from attnviz.checkpoints.generate import generate, logit_lens, next_distribution
from attnviz.checkpoints.rope import inverse_frequencies

FAMILIES = ["tiny_gpt_neox", "tiny_gpt_neox_dynamic", "tiny_phi", "tiny_phi3", "tiny_olmo", "tiny_olmo2",
            "tiny_stablelm", "tiny_falcon", "tiny_falcon_mq", "tiny_falcon_seq", "tiny_opt", "tiny_opt_plain", "tiny_bloom",
            "tiny_llama_longrope", "tiny_qwen2_dynamic", "tiny_phi3_window"]


@pytest.fixture(scope="module")
def models():
    return {name: load_checkpoint(DATA / name) for name in FAMILIES}


@pytest.mark.parametrize("name", FAMILIES)
def test_every_layer_and_head_matches_transformers(models, name):
    g = golden(DATA / name / "golden.npz")
    res = run_text(models[name], str(g["text"]))
    np.testing.assert_array_equal(res.ids, g["input_ids"])  # as the folder's AutoTokenizer gives them
    assert res.attentions.shape == g["attentions"].shape
    np.testing.assert_allclose(res.attentions, g["attentions"], atol=1e-5, rtol=0)
    np.testing.assert_allclose(res.hidden, g["last_hidden_state"], atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("name", ["tiny_gpt_neox", "tiny_phi3", "tiny_stablelm"])
def test_float64_pass_matches_too(models, name):
    g = golden(DATA / name / "golden.npz")
    res = run_text(models[name], str(g["text"]), dtype=np.float64)
    np.testing.assert_allclose(res.attentions, g["attentions"], atol=1e-5, rtol=0)


@pytest.mark.parametrize("name", ["tiny_gpt_neox", "tiny_gpt_neox_dynamic", "tiny_phi", "tiny_olmo2", "tiny_bloom",
                                  "tiny_opt"])
def test_flash_pass_keeping_q_k_lse_gives_the_same_maps(models, name):
    g = golden(DATA / name / "golden.npz")
    res = run_decoder(models[name], str(g["text"]), mode="qk")
    assert res.mode == "qk"
    for layer in range(g["attentions"].shape[0]):
        for head in range(g["attentions"].shape[1]):
            np.testing.assert_allclose(res.head_map(layer, head), g["attentions"][layer, head], atol=1e-5, rtol=0)


@pytest.mark.parametrize("name", FAMILIES)
def test_greedy_generation_matches_transformers(models, name):
    g = golden(DATA / name / "golden_generate.npz")
    ck = models[name]
    n_new = len(g["greedy_ids"]) - len(g["prompt_ids"])
    res = generate(ck.config, ck.weights, g["prompt_ids"], max_new_tokens=n_new)
    np.testing.assert_array_equal(res.ids, g["greedy_ids"])
    assert res.stopped == "length"


@pytest.mark.parametrize("name", FAMILIES)
def test_logit_lens_and_next_token_through_the_family_norm_and_head(models, name):
    g = golden(DATA / name / "golden_generate.npz")
    ck = models[name]
    lens = logit_lens(ck.config, ck.weights, g["prompt_ids"])
    np.testing.assert_allclose(lens.probs, g["lens_probs"], atol=1e-5, rtol=0)
    np.testing.assert_allclose(next_distribution(ck.config, ck.weights, g["prompt_ids"]), g["lens_probs"][-1],
                               atol=1e-5, rtol=0)


def test_family_specifics_are_read(models):
    neox, phi, phi3 = (models[n].config.decoder for n in ("tiny_gpt_neox", "tiny_phi", "tiny_phi3"))
    assert neox.block == "parallel2" and neox.qkv == "per_head" and neox.rope.partial == 0.25
    assert models["tiny_gpt_neox_dynamic"].config.decoder.block == "sequential"
    assert phi.block == "parallel" and phi.head_bias and phi.qk_norm and "lm_head.bias" in models["tiny_phi"].weights
    assert phi3.qkv == "fused" and phi3.mlp == "fused_gated" and phi3.rope.rope_type == "longrope"
    assert models["tiny_olmo"].config.decoder.clip_qkv == 0.5
    win = models["tiny_phi3_window"].config
    assert [win.decoder.window(i) for i in range(win.n_layer)] == [5, 5]  # every layer slides
    assert models["tiny_olmo2"].config.decoder.qk_norm_kind == "whole"
    assert "parallel attention and MLP" in models["tiny_gpt_neox"].describe()
    falcon = {n: models[n].config.decoder for n in ("tiny_falcon", "tiny_falcon_mq", "tiny_falcon_seq")}
    assert (falcon["tiny_falcon"].qkv, falcon["tiny_falcon"].block, falcon["tiny_falcon"].n_kv_head) == ("grouped", "parallel2", 2)
    assert (falcon["tiny_falcon_mq"].qkv, falcon["tiny_falcon_mq"].block, falcon["tiny_falcon_mq"].n_kv_head) == ("fused", "parallel", 1)
    assert (falcon["tiny_falcon_seq"].qkv, falcon["tiny_falcon_seq"].block) == ("per_head", "sequential")
    opt = models["tiny_opt"]
    assert opt.config.decoder.learned_positions and opt.special_tokens.add_bos  # "</s>" before every text
    assert "learned positions" in opt.describe() and models["tiny_opt_plain"].config.decoder.norm == "plain"


def test_bloom_alibi_slopes_and_their_bias_in_the_maps(models):
    np.testing.assert_allclose(alibi_slopes(8), 2.0 ** -np.arange(1, 9), rtol=1e-15)  # the ALiBi paper's 8 heads
    np.testing.assert_allclose(alibi_slopes(6), [2 ** -2, 2 ** -4, 2 ** -6, 2 ** -8, 2 ** -1, 2 ** -3], rtol=1e-15)
    ck = models["tiny_bloom"]
    g = golden(DATA / "tiny_bloom" / "golden.npz")
    plain = replace(ck.config, decoder=replace(ck.config.decoder, alibi=False))
    without, _ = forward_decoder(plain, ck.weights, g["input_ids"])
    assert np.abs(without - g["attentions"]).max() > 0.1  # the bias shapes the maps: without it they are far off


def test_opt_positions_past_its_table_are_refused(models):
    ck = models["tiny_opt"]
    with pytest.raises(CheckpointError, match="position 66 is outside the model's 64 learned positions"):
        forward_decoder(ck.config, ck.weights, np.array([3, 4, 5]), positions=np.array([10, 65, 66]))
    with pytest.raises(CheckpointError, match="exceed the model's 64 positions"):
        generate(ck.config, ck.weights, list(range(3, 60)), max_new_tokens=10)
    res = generate(ck.config, ck.weights, list(range(3, 60)), max_new_tokens=7)  # 64 positions: the table's last
    assert res.ids.size == 64 and np.isfinite(res.attentions).all()


def test_dynamic_rope_grows_its_base_only_past_the_context(models):
    c = models["tiny_gpt_neox_dynamic"].config
    rope, hd = c.decoder.rope, c.decoder.head_dim
    assert c.max_positions == 36  # 12 positions x factor 3
    short, _ = inverse_frequencies(rope, hd, np.float64, 12)
    long, _ = inverse_frequencies(rope, hd, np.float64, 30)
    dim = int(hd * rope.partial)
    base = 10000.0 * (3 * 30 / 12 - 2) ** (dim / (dim - 2))
    np.testing.assert_allclose(short, 1 / 10000.0 ** (np.arange(0, dim, 2) / dim), rtol=1e-12)
    np.testing.assert_allclose(long, 1 / base ** (np.arange(0, dim, 2) / dim), rtol=1e-12)


def test_longrope_switches_factors_past_the_original_context(models):
    rope = models["tiny_phi3"].config.decoder.rope
    short, af = inverse_frequencies(rope, 16, np.float64, 6)
    long, af2 = inverse_frequencies(rope, 16, np.float64, 7)
    exps = np.arange(0, 12, 2) / 12
    np.testing.assert_allclose(short, 1 / (np.array(rope.short_factor) * 10000.0 ** exps), rtol=1e-12)
    np.testing.assert_allclose(long, 1 / (np.array(rope.long_factor) * 10000.0 ** exps), rtol=1e-12)
    assert af == af2 == pytest.approx(np.sqrt(1 + np.log(64 / 6) / np.log(6)))


def test_gpt_neox_head_read_under_either_name(models, tmp_path):
    from safetensors.numpy import load_file, save_file

    src = DATA / "tiny_gpt_neox"
    d = tmp_path / "pythia"
    shutil.copytree(src, d)
    tensors = load_file(str(d / "model.safetensors"))
    assert "embed_out.weight" in tensors  # how Pythia's files (and transformers 5.24's save) name the head
    tensors["lm_head.weight"] = tensors.pop("embed_out.weight")  # as GPTNeoXForCausalLM names it in memory
    save_file(tensors, str(d / "model.safetensors"))
    ck = load_checkpoint(d)
    g = golden(src / "golden_generate.npz")
    res = generate(ck.config, ck.weights, g["prompt_ids"], max_new_tokens=len(g["greedy_ids"]) - len(g["prompt_ids"]))
    np.testing.assert_array_equal(res.ids, g["greedy_ids"])


BASE = {"hidden_size": 32, "num_attention_heads": 4, "num_hidden_layers": 1, "intermediate_size": 8, "vocab_size": 50}


@pytest.mark.parametrize("cfg, message", [
    ({"model_type": "llama", "partial_rotary_factor": 0.5}, "rotates whole heads"),
    ({"model_type": "gpt_neox", "rotary_pct": 0.1}, "even number"),
    ({"model_type": "phi3", "rope_scaling": {"type": "longrope", "short_factor": [1.0], "long_factor": [1.0]}},
     "4 positive numbers"),
    ({"model_type": "stablelm", "rope_scaling": {"rope_type": "dynamic", "factor": 0.5}}, "dynamic factor"),
    ({"model_type": "olmo", "clip_qkv": -1}, "clip_qkv"),
    ({"model_type": "phi", "hidden_act": "mish"}, "activation"),
    ({"model_type": "falcon", "alibi": True}, "alibi true is not supported"),
    ({"model_type": "falcon", "multi_query": False, "num_kv_heads": 2}, "num_kv_heads = 4"),
    ({"model_type": "opt", "word_embed_proj_dim": 16}, "project_in"),
    ({"model_type": "opt", "do_layer_norm_before": False}, "do_layer_norm_before false"),
    ({"model_type": "bloom", "apply_residual_connection_post_layernorm": True}, "post_layernorm true"),
])
def test_bad_configs_are_one_clear_line(cfg, message):
    with pytest.raises(CheckpointError, match=message) as err:
        parse_model_config(BASE | cfg)
    assert "\n" not in str(err.value) and len(str(err.value)) < 200


@pytest.mark.parametrize("model_type", ["swinv2", "some_new_arch"])
def test_refused_families_say_so_in_one_short_line(model_type):
    with pytest.raises(CheckpointError) as err:
        parse_model_config(BASE | {"model_type": model_type})
    msg = str(err.value)
    assert "not supported" in msg and "\n" not in msg and len(msg) < 200, msg


def test_a_phi_folder_without_its_head_bias_cannot_generate(tmp_path):
    from safetensors.numpy import load_file, save_file

    d = tmp_path / "phi"
    shutil.copytree(DATA / "tiny_phi", d)
    tensors = load_file(str(d / "model.safetensors"))
    del tensors["lm_head.bias"]
    save_file(tensors, str(d / "model.safetensors"))
    ck = load_checkpoint(d)  # the attention maps need no head
    with pytest.raises(CheckpointError, match="lm_head.bias"):
        generate(ck.config, ck.weights, [1, 2, 3], max_new_tokens=1)
    cfg = json.loads((d / "config.json").read_text())
    assert cfg["model_type"] == "phi"
