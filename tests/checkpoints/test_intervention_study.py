"""The Intervene tab's Qt-free study: a session's interventions as one edit of the pass, checked against the
core interventions (themselves checked against PyTorch forward hooks in test_ckpt_interventions.py) and against
float64 references of what changed; the head-importance sweep, and the messages for bad input."""

from __future__ import annotations

import ast

import numpy as np
import pytest
from ckpt_helpers import DATA, golden

from attnviz.checkpoints import CheckpointError, load_checkpoint
from attnviz.checkpoints.intervention_study import (Sweep, export_code, knockout, residual_change, study, sweep,
                                                    token_id, top_k)
from attnviz.checkpoints.interventions import Edit, ablate, head_importance, kl_divergence, patch_head, run
from attnviz.model.state import Interventions


@pytest.fixture(scope="module")
def llama():
    return load_checkpoint(DATA / "tiny_llama_lm")


@pytest.fixture(scope="module")
def g():
    return golden(DATA / "tiny_llama_lm" / "golden_interventions.npz")


def test_ablation_in_the_study_is_the_core_ablation_and_the_transformers_golden(llama, g):
    c, w = llama.config, llama.weights
    heads = tuple(tuple(int(x) for x in h) for h in g["ablate"])
    for mode in ("zero", "mean"):
        eff = study(c, w, g["clean_ids"], Interventions(heads=heads, mode=mode))
        before, after = ablate(c, w, g["clean_ids"], heads, mode)
        np.testing.assert_array_equal(eff.after.logits, after.logits)
        np.testing.assert_array_equal(eff.before.logits, before.logits)
        np.testing.assert_allclose(eff.after.logits, g[mode], atol=1e-5, rtol=0)
        assert eff.kl == pytest.approx(kl_divergence(before.logits, after.logits)) and eff.kl > 0
        assert eff.applied == (", ".join(f"{a}.{b}" for a, b in sorted(heads)) + f" {mode}-ablated",)
    sh = tuple(int(x) for x in g["scale_head"])
    eff = study(c, w, g["clean_ids"], Interventions(heads=(sh,), mode="scale", factor=float(g["scale"])))
    np.testing.assert_allclose(eff.after.logits, g["scaled"], atol=1e-5, rtol=0)


def test_top_k_logit_difference_and_residual_change_against_float64(llama, g):
    c, w = llama.config, llama.weights
    eff = study(c, w, g["clean_ids"], Interventions(heads=((1, 0), (0, 2)), mode="zero"))
    z = eff.after.logits.astype(np.float64)
    p = np.exp(z - z.max())
    p /= p.sum()
    order = np.argsort(-p)[:5]
    got = eff.top("after")
    assert [t for t, _ in got] == order.tolist()
    np.testing.assert_allclose([q for _, q in got], p[order], rtol=1e-12)
    assert sum(q for _, q in top_k(z, c.vocab_size)) == pytest.approx(1.0)
    a, b = int(order[0]), int(order[1])
    before, after = eff.logit_difference(a, b)
    assert after == pytest.approx(float(z[a]) - float(z[b])) and after >= 0
    assert before == pytest.approx(float(eff.before.logits[a]) - float(eff.before.logits[b]))
    rc = eff.residual_change
    L = c.n_layer
    assert rc.shape == (L + 1,) and rc[0] == 0.0  # the embedding does not change
    ref = [np.linalg.norm(eff.after.stream[i].astype(np.float64) - eff.before.stream[i])
           / np.linalg.norm(eff.before.stream[i].astype(np.float64)) for i in range(L + 1)]
    np.testing.assert_allclose(rc, ref, rtol=1e-10)
    assert rc[1] > 0  # layer 0's head 2 ablated: the stream entering layer 1 moved
    bm, am, dm = eff.attention(1, 0)
    np.testing.assert_array_equal(dm, am - bm)
    np.testing.assert_allclose(np.abs(dm).max(), eff.attention_change()[1, 0])
    assert np.abs(eff.attention(0, 0)[2]).max() == 0  # the first layer's maps come before any edit
    assert residual_change(eff.before, eff.before).max() == 0


def test_knockout_with_a_designed_mask_matches_the_golden_and_restricts_chosen_heads(llama, g):
    c, w = llama.config, llama.weights
    ids = g["clean_ids"]
    T = len(ids)
    allowed = np.ones((T, T), bool)
    allowed[int(g["ko_from"]):, int(g["ko_key"])] = False  # the mask designer's "may not see"
    spec = Interventions(knockout_layers=tuple(range(c.n_layer)))
    eff = study(c, w, ids, spec, allowed=allowed)
    np.testing.assert_allclose(eff.after.logits, g["knockout"], atol=1e-5, rtol=0)
    assert np.all(eff.after.attentions[:, :, int(g["ko_from"]):, int(g["ko_key"])] == 0)
    one = study(c, w, ids, Interventions(knockout_layers=(1,), knockout_heads=(2,)), allowed=allowed)
    changed = one.attention_change()  # (L, nh)
    assert changed[1, 2] > 0 and changed[0].max() == 0 and np.delete(changed[1], 2).max() == 0
    ko = knockout(c, allowed, T, (1,), (2,))[1]
    ref = run(c, w, ids, Edit(knockout={1: ko}))
    np.testing.assert_array_equal(one.after.logits, ref.logits)


def test_patches_equal_the_core_patch_and_the_clean_pass(llama, g):
    c, w = llama.config, llama.weights
    clean_ids, corrupted = g["clean_ids"], g["corrupted_ids"]
    layer, head = (int(x) for x in g["patch"])
    eff = study(c, w, corrupted, Interventions(patch="head", patch_layer=layer, patch_head=head), clean_ids=clean_ids)
    _, co, pa = patch_head(c, w, clean_ids, corrupted, layer, head)
    np.testing.assert_array_equal(eff.after.logits, pa.logits)
    np.testing.assert_allclose(eff.after.logits, g["patched"], atol=1e-5, rtol=0)
    np.testing.assert_array_equal(eff.before.logits, co.logits)
    # the residual stream entering layer 0 at every position from the clean prompt: the clean pass itself
    res = study(c, w, corrupted, Interventions(patch="residual", patch_layer=0), clean_ids=clean_ids)
    np.testing.assert_allclose(res.after.logits, res.clean.logits, atol=1e-6)
    np.testing.assert_allclose(res.after.logits, g["plain"], atol=1e-5)


def test_the_sweep_equals_the_core_sweep_ranks_and_stops_when_cancelled(llama, g):
    c, w = llama.config, llama.weights
    ids = g["clean_ids"]
    s = sweep(c, w, ids)
    np.testing.assert_allclose(s.grid, head_importance(c, w, ids), rtol=1e-12)
    assert s.complete and s.done == c.n_layer * c.n_head
    ranking = s.ranking()
    assert [abs(v) for *_x, v in ranking] == sorted((abs(v) for *_x, v in ranking), reverse=True)
    top_layer, top_head, top_value = ranking[0]
    assert s.ranks()[top_layer, top_head] == 1 and top_value == s.grid.max()
    a, b = top_k(run(c, w, ids).logits, 2)
    d = sweep(c, w, ids, metric="logit_diff", tokens=(a[0], b[0]))
    before, after = ablate(c, w, ids, [(1, 1)])
    want = (before.logits[a[0]] - before.logits[b[0]]) - (after.logits[a[0]] - after.logits[b[0]])
    assert d.grid[1, 1] == pytest.approx(float(want))
    seen = []
    part = sweep(c, w, ids, cancelled=lambda: len(seen) >= 2, progress=lambda i, n: seen.append((i, n)))
    assert part.done == 2 and not part.complete and seen == [(1, c.n_layer * c.n_head), (2, c.n_layer * c.n_head)]
    assert Sweep(part.grid, "kl", "zero").ranks().max() == 2


@pytest.mark.parametrize("call, message", [
    (lambda c, w, ck: study(c, w, [1, 2, 3], Interventions(knockout_layers=(0,)), allowed=np.ones((4, 4), bool)),
     r"the mask is 4 x 4 tokens, the prompt has 3"),
    (lambda c, w, ck: study(c, w, [1, 2, 3], Interventions(knockout_layers=(0,))), "no mask"),
    (lambda c, w, ck: study(c, w, [1, 2, 3], Interventions(heads=((0, 9),))), "head 9 is out of range"),
    (lambda c, w, ck: study(c, w, [1, 2, 3], Interventions(heads=((5, 0),))), "layer 5 is out of range"),
    (lambda c, w, ck: study(c, w, [1, 2, 3], Interventions(patch="head"), clean_ids=[1, 2]), "same length"),
    (lambda c, w, ck: study(c, w, [1, 2, 3], Interventions(patch="head")), "needs the clean prompt"),
    (lambda c, w, ck: study(c, w, [1, 2, 3], Interventions(patch="residual", patch_positions=(7,)),
                            clean_ids=[3, 2, 1]), "position 7 is out of range"),
    (lambda c, w, ck: study(c, w, [], Interventions()), "at least one token"),
    (lambda c, w, ck: sweep(c, w, [1, 2, 3], metric="logit_diff"), "two tokens"),
    (lambda c, w, ck: token_id(ck, "#999999"), "out of range"),
])
def test_bad_input_is_one_clear_line(llama, call, message):
    with pytest.raises(CheckpointError, match=message):
        call(llama.config, llama.weights, llama)


def test_token_names_and_the_map_budget(llama, monkeypatch):
    from attnviz.checkpoints import intervention_study

    tok = llama.tokenizer
    ids = tok.encode(" bank", add_special_tokens=False).ids
    if len(ids) == 1:
        assert token_id(llama, " bank") == ids[0]
    piece = tok.id_to_piece(7)
    assert token_id(llama, "#7") == 7 and token_id(llama, piece) == 7
    monkeypatch.setattr(intervention_study, "MAPS_BUDGET", 1000)
    with pytest.raises(CheckpointError, match="too many for an intervention"):
        study(llama.config, llama.weights, list(range(1, 20)), Interventions(heads=((0, 0),)))


def test_exported_code_is_the_verified_script_or_says_why_not(llama, g):
    import hashlib

    c = llama.config
    ids = g["clean_ids"]
    T = len(ids)
    allowed = np.ones((T, T), bool)
    allowed[int(g["ko_from"]):, int(g["ko_key"])] = False
    heads = tuple(tuple(int(x) for x in h) for h in g["ablate"])
    code = export_code("tests/data/checkpoints/tiny_llama_lm", ids,
                       Interventions(heads=heads, knockout_layers=tuple(range(c.n_layer))), c, allowed=allowed)
    ast.parse(code["pytorch"])
    assert "attention_mask=mask" in code["pytorch"] and not code["pytorch_problem"]
    assert "attention_mask=mask" in code["lens"] and not code["lens_problem"]  # TransformerLens 4 takes the mask
    plain = export_code("m", ids, Interventions(heads=heads), c)
    ast.parse(plain["lens"])
    assert "hook_z" in plain["lens"] and "o_proj" in plain["pytorch"]
    # the script the golden maker ran (sha256 in the golden) comes out of the study for the same edits
    from attnviz.checkpoints.intervention_code import pytorch_script
    sh = tuple(int(x) for x in g["scale_head"])
    ko = ~allowed
    ref = pytorch_script("tests/data/checkpoints/tiny_llama_lm", ids, ablate={h: "zero" for h in heads},
                         scale={sh: float(g["scale"])}, knockout={0: ko, 1: ko}, n_layer=c.n_layer)
    assert hashlib.sha256(ref.encode()).hexdigest() == str(g["script_sha256"])
    some = export_code("m", ids, Interventions(knockout_layers=(0,)), c, allowed=allowed)
    assert some["pytorch"] == "" and "some layers only" in some["pytorch_problem"]
    patch = export_code("m", ids, Interventions(patch="head"), c)
    assert patch["pytorch"] == patch["lens"] == "" and "patching" in patch["pytorch_problem"]
