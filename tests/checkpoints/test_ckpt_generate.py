"""Generation over a key/value cache against transformers' ``generate`` on the tiny decoders: greedy ids
equal, every attention row of the final sequence within 1e-5 of the eager forward over it, and the
next-token distribution after temperature, top-k and top-p within 1e-5 at every step.
Goldens: tools/make_generate_goldens.py."""

from __future__ import annotations

import numpy as np
import pytest
from ckpt_helpers import DATA, f32_map_atol, golden

from attnviz.checkpoints import CheckpointError, load_checkpoint
from attnviz.checkpoints.generate import Sampling, generate, next_distribution

FAMILIES = ["tiny_llama", "tiny_mistral", "tiny_qwen2", "tiny_qwen3", "tiny_gemma", "tiny_gemma2", "tiny_gemma3",
            "tiny_llama_lm"]


@pytest.fixture(scope="module")
def models():
    return {name: load_checkpoint(DATA / name) for name in FAMILIES}


@pytest.mark.parametrize("name", FAMILIES)
def test_greedy_ids_and_cached_attention_match_transformers(models, name):
    g = golden(DATA / name / "golden_generate.npz")
    ck = models[name]
    n_new = len(g["greedy_ids"]) - len(g["prompt_ids"])
    res = generate(ck.config, ck.weights, g["prompt_ids"], max_new_tokens=n_new)
    np.testing.assert_array_equal(res.ids, g["greedy_ids"])
    np.testing.assert_array_equal(res.generated, g["greedy_ids"][len(g["prompt_ids"]):])
    assert res.stopped == "length" and res.attentions.shape == g["attentions"].shape
    np.testing.assert_allclose(res.attentions, g["attentions"], atol=f32_map_atol(name), rtol=0)
    assert res.top_ids.shape == (n_new, 10) and np.all(res.top_ids[:, 0] == res.generated)


@pytest.mark.parametrize("name", FAMILIES)
def test_sampling_distribution_matches_transformers_warpers(models, name):
    g = golden(DATA / name / "golden_generate.npz")
    ck = models[name]
    how = Sampling(sample=True, temperature=float(g["temperature"]), top_k=int(g["top_k"]), top_p=float(g["top_p"]))
    n0 = len(g["prompt_ids"])
    for step, want in enumerate(g["probs"]):
        got = next_distribution(ck.config, ck.weights, g["greedy_ids"][:n0 + step], how)
        np.testing.assert_allclose(got, want, atol=1e-5, rtol=0)
        assert set(np.flatnonzero(got > 0)) == set(np.flatnonzero(want > 0))  # the same tokens filtered out


def test_seeded_sampling_repeats_and_differs_by_seed(models):
    ck = models["tiny_llama"]
    how = Sampling(sample=True, temperature=1.5, seed=4)
    a = generate(ck.config, ck.weights, [1, 5, 9], max_new_tokens=12, how=how)
    b = generate(ck.config, ck.weights, [1, 5, 9], max_new_tokens=12, how=how)
    c = generate(ck.config, ck.weights, [1, 5, 9], max_new_tokens=12, how=Sampling(sample=True, temperature=1.5, seed=5))
    np.testing.assert_array_equal(a.ids, b.ids)
    assert not np.array_equal(a.ids, c.ids)


def test_stops_at_end_of_sequence_with_its_own_rows(models):
    ck = models["tiny_llama"]
    first = generate(ck.config, ck.weights, [1, 5, 9], max_new_tokens=5)
    eos = int(first.generated[2])  # make the third greedy token the end of the sequence
    res = generate(ck.config, ck.weights, [1, 5, 9], max_new_tokens=5, eos_ids=[eos])
    assert res.stopped == "eos" and list(res.generated) == list(first.generated[:3])
    np.testing.assert_allclose(res.attentions, first.attentions[:, :, :6, :6], atol=1e-6)
    np.testing.assert_allclose(res.attentions.sum(-1), 1.0, atol=1e-5)  # every row, the eos token's too


def test_cancel_returns_what_was_written(models):
    ck = models["tiny_llama"]
    steps = []
    res = generate(ck.config, ck.weights, [1, 5, 9], max_new_tokens=10, cancelled=lambda: len(steps) >= 3,
                   on_step=lambda i, t: steps.append((i, t)))
    assert res.stopped == "cancelled" and len(res.generated) == 3 and [t for _, t in steps] == list(res.generated)


@pytest.mark.parametrize("kwargs, message", [
    ({"max_new_tokens": -1}, "max new tokens"),
    ({"max_new_tokens": 10_000}, "positions"),
    ({"how": None}, None),
])
def test_bad_requests_are_refused_clearly(models, kwargs, message):
    ck = models["tiny_llama"]
    if message is None:
        for bad in ({"temperature": 0.0}, {"top_k": -2}, {"top_p": 0.0}, {"top_p": 1.5}, {"temperature": float("nan")}):
            with pytest.raises(CheckpointError):
                Sampling(sample=True, **bad)
        with pytest.raises(CheckpointError, match="at least one"):
            generate(ck.config, ck.weights, [], max_new_tokens=2)
        return
    with pytest.raises(CheckpointError, match=message):
        generate(ck.config, ck.weights, [1, 2], **kwargs)


def test_a_base_model_without_a_head_cannot_generate(models, tmp_path):
    import json
    import shutil

    src = DATA / "tiny_llama"
    dst = tmp_path / "untied_base"
    shutil.copytree(src, dst)
    cfg = json.loads((dst / "config.json").read_text())
    cfg["tie_word_embeddings"] = False
    (dst / "config.json").write_text(json.dumps(cfg))
    ck = load_checkpoint(dst)
    with pytest.raises(CheckpointError, match="no language-model head"):
        generate(ck.config, ck.weights, [1, 2], max_new_tokens=2)


@pytest.mark.parametrize("name", FAMILIES)
def test_logit_lens_matches_transformers_hidden_states_through_norm_and_head(models, name):
    from attnviz.checkpoints.generate import logit_lens

    g = golden(DATA / name / "golden_generate.npz")
    ck = models[name]
    lens = logit_lens(ck.config, ck.weights, g["prompt_ids"], position=-1, k=5)
    assert lens.probs.shape == (ck.config.n_layer + 1, ck.config.vocab_size) and lens.position == len(g["prompt_ids"]) - 1
    np.testing.assert_allclose(lens.probs, g["lens_probs"], atol=1e-5, rtol=0)
    # the last row is the model's own next-token distribution: its top token is the greedy choice
    assert lens.top_ids[-1, 0] == g["greedy_ids"][len(g["prompt_ids"])]
    assert np.all(np.diff(lens.top_probs, axis=1) <= 0)


def test_logit_lens_refuses_a_position_outside(models):
    from attnviz.checkpoints.generate import logit_lens

    ck = models["tiny_llama"]
    for bad in (3, -4, 1.5):
        with pytest.raises(CheckpointError, match="outside"):
            logit_lens(ck.config, ck.weights, [1, 2, 3], position=bad)


def test_maps_that_would_not_fit_in_memory_are_refused_before_any_work(models, monkeypatch):
    import attnviz.checkpoints.generate as gen

    ck = models["tiny_llama"]
    monkeypatch.setattr(gen, "available_memory", lambda: 10_000)  # 2 x 4 x 13^2 x 4 bytes = 5,408 > 5,000
    with pytest.raises(CheckpointError, match="more than half the available memory"):
        generate(ck.config, ck.weights, [1, 2, 3], max_new_tokens=10)
