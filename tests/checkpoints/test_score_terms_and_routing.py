"""What the Pretrained panel's "Score terms" and "Experts" tabs read: DeBERTa's three disentangled terms of one
head (equal to transformers' goldens, summing to the scores whose softmax is the attention) and a mixture of
experts' routing kept from the same pass as the maps (equal to transformers' router goldens), without changing
the maps."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
from ckpt_helpers import DATA, golden

from attnviz.checkpoints import load_checkpoint, run_text
from attnviz.checkpoints.decoder import forward_decoder
from attnviz.checkpoints.decoder_experts import expert_load, routed_experts, routing_note, run_routing
from attnviz.checkpoints.decoder_run import run_decoder
from attnviz.checkpoints.score_terms import (DEBERTA_TERMS, cell_note, deberta_legend, has_deberta_terms,
                                            head_terms)

MOE = ["tiny_mixtral", "tiny_qwen2_moe", "tiny_qwen3_moe"]


def _softmax(s: np.ndarray) -> np.ndarray:
    w = np.exp(s - s.max(axis=-1, keepdims=True))
    return w / w.sum(axis=-1, keepdims=True)


@pytest.mark.parametrize("name", ["tiny_deberta_v3", "tiny_deberta_v2", "tiny_deberta"])
def test_head_terms_are_transformers_terms_and_sum_to_the_scores(name):
    ckpt = load_checkpoint(DATA / name)
    g = golden(DATA / name / "golden.npz")
    res = run_text(ckpt, str(g["text"]))
    assert has_deberta_terms(res)
    L, nh = res.attentions.shape[:2]
    for layer in range(L):
        for head in range(nh):
            maps = head_terms(res, layer, head, ckpt.config)
            assert [n for n, _, _ in maps.terms] == list(DEBERTA_TERMS) and all(p for _, _, p in maps.terms)
            for j, (term, m, _) in enumerate(maps.terms):
                np.testing.assert_allclose(m, g["terms"][j, layer, head], atol=2e-5, rtol=1e-5, err_msg=term)
            want = sum(g["terms"][j, layer, head].astype(np.float64) for j in range(3))  # transformers' scores
            np.testing.assert_allclose(maps.total, want, atol=5e-5, rtol=1e-5)
            np.testing.assert_allclose(_softmax(maps.total), g["attentions"][layer, head], atol=2e-6)
            lo, hi = maps.levels
            assert lo <= min(m.min() for _, m, _ in maps.terms) and hi >= maps.total.max()


def test_legend_names_the_models_scale_and_a_cell_note_adds_up():
    ckpt = load_checkpoint(DATA / "tiny_deberta_v3")  # head size 4, both position terms: sqrt(3 * 4)
    res = run_text(ckpt, "the river bank")
    legend = deberta_legend(ckpt.config)
    assert "\u221a(3\u00b74) = 3.46" in legend and "softmax" in legend and "\n" not in legend
    maps = head_terms(res, 1, 2, ckpt.config)
    note = cell_note(maps, 2, 0, res.labels[2], res.labels[0])
    c2c, c2p, p2c = (float(m[2, 0]) for _, m, _ in maps.terms)
    assert note.startswith(f"query 2 {res.labels[2]!r} \u2192 key 0 '[CLS]': c2c ")
    assert f"= score {c2c + c2p + p2c:.4g}" in note and f"weight {float(res.attentions[1, 2, 2, 0]):.4g}" in note


def test_a_model_without_one_position_term_says_so(tmp_path):
    folder = tmp_path / "c2p_only"
    shutil.copytree(DATA / "tiny_deberta_v3", folder)
    cfg = json.loads((folder / "config.json").read_text())
    cfg["pos_att_type"] = ["c2p"]
    (folder / "config.json").write_text(json.dumps(cfg))
    ckpt = load_checkpoint(folder)
    res = run_text(ckpt, "the river bank")
    maps = head_terms(res, 0, 1, ckpt.config)
    assert [p for _, _, p in maps.terms] == [True, True, False]
    assert not maps.terms[2][1].any()  # position to content: not computed, all zero
    np.testing.assert_allclose(_softmax(maps.total), res.attentions[0, 1], atol=2e-6)
    legend = deberta_legend(ckpt.config)
    assert "\u221a(2\u00b74)" in legend and "k\u2c7c\u00b7q\u02b3" not in legend
    assert "p2c" not in cell_note(maps, 1, 1)


def test_other_runs_have_no_deberta_terms():
    res = run_text(load_checkpoint(DATA / "tiny_mpnet"), "the river bank")  # terms of its own: content, bias
    assert res.score_terms is not None and not has_deberta_terms(res)
    with pytest.raises(ValueError, match="only DeBERTa"):
        head_terms(res, 0, 0)
    deberta = run_text(load_checkpoint(DATA / "tiny_deberta_v3"), "the river bank")
    with pytest.raises(ValueError, match=r"no head \(2, 0\) in a 2 x 3 model"):
        head_terms(deberta, 2, 0)


@pytest.mark.parametrize("name", MOE)
def test_the_pass_keeps_the_experts_transformers_routers_pick(name):
    ckpt = load_checkpoint(DATA / name)
    g = golden(DATA / name / "golden_experts.npz")
    text = str(golden(DATA / name / "golden.npz")["text"])
    res = run_text(ckpt, text)
    routing = run_routing(res)
    assert routing is not None
    experts, weights = routing
    assert experts.shape == weights.shape == (ckpt.config.n_layer, res.ids.size, 2)
    np.testing.assert_array_equal(experts[g["layers"]], g["experts"])
    np.testing.assert_allclose(weights[g["layers"]], g["weights"], atol=1e-5, rtol=0)
    dense = sorted(set(range(ckpt.config.n_layer)) - set(g["layers"].tolist()))
    assert (experts[dense] == -1).all() and (weights[dense] == 0).all()
    again, again_w = routed_experts(ckpt.config, ckpt.weights, res.ids)  # a pass of its own: the same choices
    np.testing.assert_array_equal(experts, again)
    np.testing.assert_array_equal(weights, again_w)
    plain, _ = forward_decoder(ckpt.config, ckpt.weights, res.ids, keep="weights")  # keeping them changes no map
    np.testing.assert_array_equal(res.attentions, plain)


def test_a_long_input_keeps_the_routing_too():
    ckpt = load_checkpoint(DATA / "tiny_qwen2_moe")
    text = "the river bank was steep after the rain"
    dec = run_decoder(ckpt, text, mode="qk")
    held = run_decoder(ckpt, text, mode="weights")
    assert dec.mode == "qk" and run_routing(dec) is not None
    np.testing.assert_array_equal(dec.experts, held.experts)
    np.testing.assert_allclose(dec.expert_weights, held.expert_weights, atol=1e-6, rtol=0)


def test_routing_notes_and_loads():
    ckpt = load_checkpoint(DATA / "tiny_qwen2_moe")  # layer 1 keeps a dense MLP
    res = run_text(ckpt, "the river bank")
    experts, weights = run_routing(res)
    e, w = experts[0, 2], weights[0, 2]
    assert routing_note(experts, weights, 0, 2, "bank") == (
        f"L0 \u00b7 token 2 'bank': expert {e[0]} ({w[0]:.2f}), expert {e[1]} ({w[1]:.2f})")
    assert routing_note(experts, weights, 1, 0) == "L1 \u00b7 token 0: a dense MLP (no router in this layer)"
    load = expert_load(experts, 0, 4)
    assert load.sum() == 2 * res.ids.size and load.tolist() == [int((experts[0] == k).sum()) for k in range(4)]
    assert not expert_load(experts, 1, 4).any()


def test_dense_decoders_and_encoders_keep_no_routing():
    assert run_routing(run_text(load_checkpoint(DATA / "tiny_llama"), "the river bank")) is None
    assert run_routing(run_text(load_checkpoint(DATA / "tiny_deberta_v3"), "the river bank")) is None
    assert run_routing(None) is None
