"""Mixtral, Qwen2-MoE and Qwen3-MoE against transformers 5.24: every layer's and head's eager attention within
1e-5 in float32, the last hidden state within 1e-4, token ids equal to AutoTokenizer's, greedy ``generate``
ids equal, the logit lens, and each sparse layer's router picking the experts transformers' router picks.
Goldens: tools/make_moe_goldens.py."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace

import numpy as np
import pytest
from ckpt_helpers import DATA, golden

from attnviz.checkpoints import CheckpointError, load_checkpoint, run_text
from attnviz.checkpoints.config import parse_model_config
from attnviz.checkpoints.decoder import _W, forward_decoder
from attnviz.checkpoints.decoder_config import MoeSpec
from attnviz.checkpoints.decoder_experts import routed_experts
from attnviz.checkpoints.decoder_moe import recording_experts, route
from attnviz.checkpoints.generate import generate, logit_lens
from attnviz.checkpoints.topk import topk_indices, topk_rows
from attnviz.cli import main

MOE = ["tiny_mixtral", "tiny_qwen2_moe", "tiny_qwen3_moe"]


@pytest.fixture(scope="module")
def models():
    return {name: load_checkpoint(DATA / name) for name in MOE}


@pytest.mark.parametrize("name", MOE)
def test_every_layer_and_head_matches_transformers(models, name):
    g = golden(DATA / name / "golden.npz")
    res = run_text(models[name], str(g["text"]))
    np.testing.assert_array_equal(res.ids, g["input_ids"])  # as the folder's AutoTokenizer gives them
    assert res.attentions.shape == g["attentions"].shape
    np.testing.assert_allclose(res.attentions, g["attentions"], atol=1e-5, rtol=0)
    np.testing.assert_allclose(res.hidden, g["last_hidden_state"], atol=1e-4, rtol=0)


def test_float64_pass_matches_too(models):
    g = golden(DATA / "tiny_qwen2_moe" / "golden.npz")
    res = run_text(models["tiny_qwen2_moe"], str(g["text"]), dtype=np.float64)
    np.testing.assert_allclose(res.attentions, g["attentions"], atol=1e-5, rtol=0)
    np.testing.assert_allclose(res.hidden, g["last_hidden_state"], atol=1e-4, rtol=0)


@pytest.mark.parametrize("name", MOE)
def test_greedy_generation_and_logit_lens_match_transformers(models, name):
    g = golden(DATA / name / "golden_generate.npz")
    ck = models[name]
    n_new = len(g["greedy_ids"]) - len(g["prompt_ids"])
    res = generate(ck.config, ck.weights, g["prompt_ids"], max_new_tokens=n_new)
    np.testing.assert_array_equal(res.ids, g["greedy_ids"])
    lens = logit_lens(ck.config, ck.weights, g["prompt_ids"])
    np.testing.assert_allclose(lens.probs, g["lens_probs"], atol=1e-5, rtol=0)


@pytest.mark.parametrize("name", MOE)
def test_routers_pick_the_experts_transformers_picks(models, name):
    ck = models[name]
    g = golden(DATA / name / "golden_experts.npz")
    ids = golden(DATA / name / "golden.npz")["input_ids"]
    experts, weights = routed_experts(ck.config, ck.weights, ids)
    assert experts.shape == (ck.config.n_layer, ids.size, 2)
    np.testing.assert_array_equal(experts[g["layers"]], g["experts"])
    np.testing.assert_allclose(weights[g["layers"]], g["weights"], atol=1e-5, rtol=0)
    dense = sorted(set(range(ck.config.n_layer)) - set(g["layers"].tolist()))
    assert (experts[dense] == -1).all() and (weights[dense] == 0).all()
    assert len(np.unique(experts[g["layers"]])) > 2  # the tokens do not all go to the same two experts
    if ck.config.decoder.moe.norm_topk:
        np.testing.assert_allclose(weights[g["layers"]].sum(-1), 1.0, atol=1e-6)
    else:  # Qwen2-MoE keeps the raw softmax probabilities: the two sum to less than 1
        assert (weights[g["layers"]].sum(-1) < 1 - 1e-3).all()


def test_generation_records_each_chunk_of_routing(models):
    ck = models["tiny_mixtral"]
    prompt = golden(DATA / "tiny_mixtral" / "golden_generate.npz")["prompt_ids"]
    with recording_experts() as rec:
        generate(ck.config, ck.weights, prompt, max_new_tokens=3)
    assert sorted(rec) == [0, 1]
    sizes = [e.shape[0] for e, _ in rec[0]]
    assert sum(sizes) >= prompt.size + 2 and sizes[0] >= prompt.size  # the prompt, then a token at a time


def test_configs_are_read_as_transformers_reads_them(models):
    mix, q2, q3 = (models[n].config for n in MOE)
    assert mix.decoder.moe == MoeSpec(n_experts=4, top_k=2, d_expert=24, norm_topk=True)
    assert [mix.decoder.window(i) for i in range(2)] == [6, 6] and mix.decoder.rope.theta == 1e6
    assert q2.decoder.moe.shared == 20 and not q2.decoder.moe.norm_topk and q2.decoder.qkv_bias
    assert [q2.decoder.moe.sparse(i) for i in range(3)] == [True, False, True]  # mlp_only_layers [1]
    assert [q3.decoder.moe.sparse(i) for i in range(2)] == [False, True]  # decoder_sparse_step 2
    assert q3.decoder.qk_norm and q3.decoder.head_dim == 16 and q3.decoder.moe.n_experts == 4  # num_local_experts
    assert "top-2 of 4 experts + a shared expert on 2 of 3 layers" in models["tiny_qwen2_moe"].describe()
    cfg = json.loads((DATA / "tiny_mixtral" / "config.json").read_text())
    del cfg["rope_parameters"]
    assert parse_model_config(cfg).decoder.rope.theta == 1e6  # MixtralConfig's default base


def test_the_mixture_shapes_the_output(models):
    ck = models["tiny_mixtral"]
    ids = golden(DATA / "tiny_mixtral" / "golden.npz")["input_ids"]
    _, hidden = forward_decoder(ck.config, ck.weights, ids)
    raw = replace(ck.config, decoder=replace(ck.config.decoder, moe=replace(ck.config.decoder.moe, norm_topk=False)))
    _, unnormalised = forward_decoder(raw, ck.weights, ids)
    top1 = replace(ck.config, decoder=replace(ck.config.decoder, moe=replace(ck.config.decoder.moe, top_k=1)))
    _, one = forward_decoder(top1, ck.weights, ids)
    assert np.abs(unnormalised - hidden).max() > 1e-2 and np.abs(one - hidden).max() > 1e-2


def test_tied_probabilities_pick_the_experts_torch_topk_picks(models):
    c = models["tiny_qwen3_moe"].config
    W = _W({"layers.1.mlp.gate.weight": np.zeros((4, 32), np.float32)}, np.float32)
    experts, weights = route(c, W, 1, np.ones((3, 32), np.float32))  # four equal probabilities
    np.testing.assert_array_equal(experts, [[2, 3]] * 3)  # torch.topk's choice, not the lower experts
    np.testing.assert_allclose(weights, 0.5, rtol=1e-6)


# torch.topk(..., k).indices of torch 2.13 on CPU for rows with ties: its nth_element path (k * 64 > n),
# its partial_sort path (k * 64 <= n), NaN above every number, a sort of more than 16
@pytest.mark.parametrize("row, k, want", [
    (np.full(4, 0.25), 2, [2, 3]),
    (np.array([0.1, 0.3, 0.3, 0.3]), 2, [2, 3]),
    (np.full(8, 0.125), 3, [6, 5, 4]),
    (np.full(128, 1 / 128), 8, [84, 87, 86, 85, 82, 81, 88, 83]),
    (np.full(128, 1 / 128), 2, [0, 1]),
    (np.ones(256), 3, [0, 1, 2]),
    (np.array([0.5, np.nan, 0.5, 0.2, 0.5]), 3, [1, 4, 0]),
    (np.ones(40), 20, [29, 20, 32, 31, 33, 36, 37, 38, 39, 35, 30, 28, 27, 26, 25, 24, 23, 22, 21, 34]),
    (np.array([0.1, 0.7, 0.2]), 2, [1, 2]),
])
def test_topk_orders_ties_as_torch(row, k, want):
    row = row.astype(np.float32)
    np.testing.assert_array_equal(topk_indices(row, k), want)
    np.testing.assert_array_equal(topk_rows(np.stack([row, row]), k), [want, want])


@pytest.mark.parametrize("name, tensor", [
    ("tiny_mixtral", "model.layers.1.block_sparse_moe.experts.3.w2.weight"),
    ("tiny_qwen2_moe", "model.layers.2.mlp.shared_expert_gate.weight"),
    ("tiny_qwen3_moe", "model.layers.1.mlp.experts.0.up_proj.weight"),
])
def test_a_checkpoint_missing_an_expert_tensor_is_refused_in_one_line(tmp_path, name, tensor):
    from safetensors.numpy import load_file, save_file

    d = tmp_path / name
    shutil.copytree(DATA / name, d)
    tensors = load_file(str(d / "model.safetensors"))
    del tensors[tensor]
    save_file(tensors, str(d / "model.safetensors"))
    with pytest.raises(CheckpointError) as err:
        load_checkpoint(d)
    msg = str(err.value)
    assert tensor.removeprefix("model.") in msg and "lacks tensors" in msg and "\n" not in msg and len(msg) < 300


@pytest.mark.parametrize("change, message", [
    ({"num_experts_per_tok": 5}, "num_experts_per_tok 5 is more than the 4 experts"),
    ({"mlp_only_layers": "1"}, "mlp_only_layers must be a list"),
    ({"decoder_sparse_step": 0}, "'decoder_sparse_step' must be >= 1"),
    ({"num_experts": 10 ** 9}, "num_experts 1,000,000,000 is more experts than attnviz reads"),
])
def test_bad_moe_fields_are_one_line(change, message):
    cfg = json.loads((DATA / "tiny_qwen2_moe" / "config.json").read_text()) | change
    with pytest.raises(CheckpointError, match=message) as err:
        parse_model_config(cfg)
    assert "\n" not in str(err.value)


def test_cli_lists_and_inspects_them(tmp_path, capsys):
    assert main(["model", "list"] + [str(DATA / n) for n in MOE]) == 0
    out = capsys.readouterr().out
    assert "tiny_mixtral\tMixtral" in out and "tiny_qwen2_moe\tQwen2-MoE" in out and "tiny_qwen3_moe\tQwen3-MoE" in out
    g = golden(DATA / "tiny_qwen3_moe" / "golden.npz")
    npz = tmp_path / "att.npz"
    assert main(["model", "inspect", str(DATA / "tiny_qwen3_moe"), "--text", str(g["text"]), "--npz", str(npz)]) == 0
    with np.load(npz) as z:
        np.testing.assert_allclose(z["attentions"], g["attentions"], atol=1e-5, rtol=0)
    assert "top-2 of 4 experts" in capsys.readouterr().out


def test_a_dense_decoder_routes_nothing():
    ck = load_checkpoint(DATA / "tiny_mistral")
    with pytest.raises(CheckpointError, match="has no mixture of experts"):
        routed_experts(ck.config, ck.weights, np.array([1, 2, 3]))


def test_experts_fused_into_3d_tensors_are_refused_in_one_line(tmp_path):
    """transformers keeps a layer's experts as gate_up_proj (E, 2w, d) and down_proj (E, d, w) in memory, but
    save_pretrained writes them one tensor each; a file holding the fused form is refused, naming what it lacks."""
    from safetensors.numpy import load_file, save_file

    d = tmp_path / "fused"
    shutil.copytree(DATA / "tiny_mixtral", d)
    t = load_file(str(d / "model.safetensors"))
    out = {k.replace("block_sparse_moe", "mlp"): v for k, v in t.items() if ".experts." not in k}
    for i in range(2):
        p = f"model.layers.{i}.block_sparse_moe.experts."
        out[f"model.layers.{i}.mlp.experts.gate_up_proj"] = np.stack(
            [np.concatenate([t[f"{p}{e}.w1.weight"], t[f"{p}{e}.w3.weight"]]) for e in range(4)])
        out[f"model.layers.{i}.mlp.experts.down_proj"] = np.stack([t[f"{p}{e}.w2.weight"] for e in range(4)])
    save_file(out, str(d / "model.safetensors"))
    with pytest.raises(CheckpointError, match=r"lacks tensors .*block_sparse_moe\.experts\.0\.w1\.weight") as err:
        load_checkpoint(d)
    assert "\n" not in str(err.value) and len(str(err.value)) < 300
