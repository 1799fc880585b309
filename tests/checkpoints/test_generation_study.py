"""GenerationStudy: the steps of a generation as they arrive, and the view's questions answered from them —
a step's attention row equals the row of the whole final sequence (as generate() returns it, itself checked
against transformers), the top-k is the step's, the logit lens from the cached stream equals logit_lens()
over the final ids (checked against transformers' hidden states)."""

from __future__ import annotations

import numpy as np
import pytest
from ckpt_helpers import DATA

from attnviz.checkpoints import CheckpointError, load_checkpoint
from attnviz.checkpoints.generate import Sampling, generate, logit_lens
from attnviz.checkpoints.generation_study import (GenerationStudy, can_generate, eos_ids, parse_sampling)


@pytest.fixture(scope="module")
def llama():
    return load_checkpoint(DATA / "tiny_llama_lm")


def run(study, n=6, how=Sampling(), eos=(), cancelled=None):
    res = study.job(n, how, eos, cancelled=cancelled, on_progress=study.add)()
    study.finish(res)
    return res


@pytest.mark.parametrize("name", ["tiny_llama_lm", "tiny_gemma2", "tiny_qwen3"])
def test_rows_tops_and_lens_are_the_final_sequences(name):
    ck = load_checkpoint(DATA / name)
    study = GenerationStudy.for_text(ck, "the river bank")
    res = run(study, 6)
    assert study.n_steps == 6 and study.T == res.ids.size and np.array_equal(study.ids, res.ids)
    np.testing.assert_array_equal(study.attentions(), res.attentions)
    L, nh = study.shape
    for step in range(study.n_steps):
        p = study.position(step)
        for layer in range(L):
            for head in range(nh):
                np.testing.assert_array_equal(study.row(step, layer, head), res.attentions[layer, head, p, :p + 1])
        assert study.strip(step).shape == (L * nh, p + 1)
        np.testing.assert_array_equal(study.strip(step)[nh + 1], study.row(step, 1, 1))
        top = study.top(step)
        assert top.token == res.generated[step] and top.chosen_rank == 0  # greedy: the most probable
        np.testing.assert_array_equal(top.top_ids, res.top_ids[step])
        np.testing.assert_allclose(top.top_probs, res.top_probs[step])
    for position in (0, study.n_prompt - 1, study.T - 1):
        want = logit_lens(ck.config, ck.weights, res.ids, position, k=5)
        got = study.lens(position, k=5)
        np.testing.assert_allclose(got.probs, want.probs, atol=1e-5, rtol=0)
        np.testing.assert_array_equal(got.top_ids[-1], want.top_ids[-1])
    assert len(study.lens_labels()) == L + 1 and study.describe().endswith("(max new tokens)")
    assert len(study.pieces()) == study.T and study.text() == ck.tokenizer.tokenizer.decode(
        [int(t) for t in res.generated], skip_special_tokens=True)


def test_sampled_steps_mark_the_chosen_token_among_the_top(llama):
    study = GenerationStudy.for_text(llama, "hello world")
    how = parse_sampling(True, 1.8, 6, 1.0, 3)
    res = run(study, 10, how)
    tops = [study.top(s) for s in range(study.n_steps)]
    assert all(t.chosen_rank is not None for t in tops) and any(t.chosen_rank > 0 for t in tops)  # not the argmax
    assert all(t.chosen_prob == t.top_probs[t.chosen_rank] for t in tops)
    want = generate(llama.config, llama.weights, study.prompt_ids, max_new_tokens=10, how=how)
    np.testing.assert_array_equal(res.ids, want.ids)
    # without top-k a hot draw may fall outside the ten kept: no rank, its own probability still said
    hot = GenerationStudy.for_text(llama, "hello world")
    run(hot, 30, parse_sampling(True, 3.0, 0, 1.0, 1))
    outside = [hot.top(s) for s in range(hot.n_steps) if hot.top(s).chosen_rank is None]
    assert outside and all(0 < t.chosen_prob < t.top_probs[-1] + 1e-12 for t in outside)


def test_cancel_keeps_the_steps_written(llama):
    study = GenerationStudy.for_text(llama, "hello world")
    res = run(study, 50, cancelled=lambda: study.n_steps >= 3)
    assert res.stopped == "cancelled" and study.n_steps == 3 and study.describe().endswith("(stopped)")


def test_steps_arrive_in_order_and_bad_questions_are_messages(llama):
    study = GenerationStudy.for_text(llama, "hello world")
    chunks = []
    study.job(3, on_progress=chunks.append)()
    with pytest.raises(CheckpointError, match="arrived after"):
        study.add(chunks[1])
    for c in chunks:
        study.add(c)
    for bad in (-1, 3, 1.5, True):
        with pytest.raises(CheckpointError, match="not one of"):
            study.row(bad, 0, 0)
    with pytest.raises(CheckpointError, match="outside the model"):
        study.row(0, 9, 0)
    with pytest.raises(CheckpointError, match="outside the"):
        study.lens(study.T)
    for bad in (0, 4097, 2.0):
        with pytest.raises(CheckpointError, match="max new tokens"):
            study.job(bad)


def test_what_cannot_generate_says_why(llama, tmp_path):
    assert can_generate(llama) is None
    assert "Load a decoder" in can_generate(None)
    assert "vision-language" in can_generate(load_checkpoint(DATA / "tiny_llava"))
    assert "Generate tab runs decoder" in can_generate(load_checkpoint(DATA / "tiny_roberta"))
    with pytest.raises(CheckpointError, match="prompt is empty"):
        GenerationStudy.for_text(llama, "   ")
    with pytest.raises(CheckpointError, match="vision-language"):
        GenerationStudy.for_text(load_checkpoint(DATA / "tiny_llava"), "hi")
    with pytest.raises(CheckpointError, match="temperature"):
        parse_sampling(True, 0.0, 0, 1.0, 0)
    assert parse_sampling(False, 0.0, -5, 7.0, 0) == Sampling()  # greedy reads none of them
    assert eos_ids(llama) == [2]
