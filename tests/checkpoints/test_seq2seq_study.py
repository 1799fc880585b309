"""The Qt-free side of translation models in the window (attnviz/checkpoints/seq2seq_study.py and the
encoder-decoder part of CheckpointStudy): runs teacher-forced or greedy, the three stacks, the cross-attention
summaries, the alignment of chosen heads against a float64 reference, and every refusal as one message."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from attnviz.checkpoints import CheckpointError, generate_seq2seq, load_checkpoint, run_seq2seq
from attnviz.checkpoints import seq2seq_study as S
from attnviz.checkpoints.seq2seq_t5 import relative_buckets
from attnviz.checkpoints.study import CheckpointStudy
from attnviz.checkpoints.views import DEFAULT_SENTENCE
from attnviz.model.state import SessionState, TextSource

DATA = Path(__file__).resolve().parents[1] / "data"


@pytest.fixture(scope="module")
def marian():
    return load_checkpoint(DATA / "tiny_marian")


@pytest.fixture(scope="module")
def forced(marian):
    return S.run_outcome(marian, "where is the station?", "où est la gare ?")


def test_teacher_forced_outcome_is_run_seq2seq(marian, forced):
    ref = run_seq2seq(marian, "where is the station?", "où est la gare ?")
    assert not forced.generated and forced.finished and forced.text == "où est la gare ?"
    for stack, want in (("encoder", ref.encoder_attentions), ("decoder", ref.decoder_attentions),
                        ("cross", ref.cross_attentions)):
        np.testing.assert_array_equal(S.stack_maps(forced.result, stack), want)
    rows, cols = S.stack_labels(forced.result, "cross")
    assert rows == ref.decoder_tokens and cols == ref.encoder_tokens
    assert S.stack_mask(forced.result, "cross") is None and S.stack_mask(forced.result, "encoder") is None
    np.testing.assert_array_equal(S.stack_mask(forced.result, "decoder"),
                                  np.tril(np.ones((len(ref.decoder_ids),) * 2, dtype=bool)))
    assert forced.written == [marian.tokenizer.piece(int(i), "target") for i in ref.target_ids]
    assert forced.written[-1] == "</s>"
    assert "teacher-forced on the target 'où est la gare ?'" in forced.describe()


def test_empty_target_is_generate_seq2seq(marian):
    out = S.run_outcome(marian, "the cat sat", "", max_new_tokens=7)
    want = generate_seq2seq(marian, "the cat sat", max_new_tokens=7)
    assert out.generated and out.text == want.text
    np.testing.assert_array_equal(out.result.target_ids, want.generated)
    np.testing.assert_array_equal(out.result.cross_attentions, want.attention.cross_attentions)
    assert "greedy translation" in out.describe()
    long = dataclasses.replace(out, text="ab" * 300)  # a long translation is quoted cut
    assert f"'{'ab' * 49}a…'" in long.describe() and "ab" * 60 not in long.describe()


def test_cancel_stops_the_translation(marian):
    asked = []

    def cancel():
        asked.append(1)
        return len(asked) > 2  # stop before the third step

    with pytest.raises(S.Cancelled):
        S.run_outcome(marian, "the cat sat", "", max_new_tokens=50, cancel=cancel)
    assert len(asked) <= 4  # stopped at once, not after 50 steps


@pytest.mark.parametrize("source, target, kw, message", [
    ("", "x", {}, "source text is empty"),
    ("   \n", "", {}, "source text is empty"),
    ("the cat " * 60, "", {}, "reads at most 64"),
    ("the cat", "", {"max_new_tokens": 0}, "1 to 512 tokens"),
    ("the cat", "", {"max_new_tokens": True}, "1 to 512 tokens"),
    ("the cat", "le chat " * 60, {}, "shorten it"),
])
def test_bad_inputs_are_one_line(marian, source, target, kw, message):
    with pytest.raises(CheckpointError) as err:
        S.run_outcome(marian, source, target, **kw)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_cross_summaries_against_a_float64_reference(forced):
    r = forced.result
    s = forced.summaries["cross"]
    p = r.cross_attentions.astype(np.float64)  # (L, nh, Td, Te)
    entropy = -(p * np.log(np.where(p > 0, p, 1.0))).sum(-1).mean(-1)
    np.testing.assert_allclose(s.entropy, entropy, atol=1e-12)
    np.testing.assert_allclose(s.to_special, p[..., r.encoder_special].sum(-1).mean(-1), atol=1e-12)
    assert s.to_self is None and s.to_previous is None  # no meaning between two sequences
    assert forced.summaries["encoder"].to_self.shape == (2, 4)
    assert forced.summaries["decoder"].to_previous.shape == (3, 2)


def test_alignment_is_the_float64_mean_of_the_chosen_heads(forced):
    cross = forced.result.cross_attentions.astype(np.float64)
    every = S.alignment(forced, S.all_heads(forced.result))
    np.testing.assert_allclose(every.weights, cross.mean(axis=(0, 1)), atol=1e-12)
    np.testing.assert_allclose(every.weights.sum(axis=1), 1.0, atol=1e-6)
    np.testing.assert_array_equal(every.path, cross.mean(axis=(0, 1)).argmax(axis=1))
    assert every.what == "the mean of every head (3 layers x 2)"
    some = S.alignment(forced, [(2, 1), (0, 0), (2, 1)])  # a repeated head counts once
    np.testing.assert_allclose(some.weights, (cross[0, 0] + cross[2, 1]) / 2, atol=1e-12)
    assert some.heads == ((0, 0), (2, 1)) and some.what == "the mean of 2 heads"
    assert S.alignment(forced, [(1, 0), (1, 1)]).what == "the mean of layer 1's 2 heads"
    one = S.alignment(forced, [(1, 1)])
    np.testing.assert_array_equal(one.weights, cross[1, 1])
    assert one.what == "layer 1 · head 1"
    assert one.target_labels == tuple(forced.written) and one.source_labels == tuple(forced.result.encoder_tokens)
    with pytest.raises(ValueError, match="at least one head"):
        S.alignment(forced, [])
    with pytest.raises(ValueError, match=r"no head \(3, 0\)"):
        S.alignment(forced, [(3, 0)])


def test_head_view_and_the_bias_term(forced):
    values, mask, rows, cols, title, label = S.head_view(forced, "cross", 2, 1)
    np.testing.assert_array_equal(values, forced.result.cross_attentions[2, 1])
    assert mask is None and label == "weight" and title == "cross · L2 · h1"
    with pytest.raises(ValueError, match="only T5"):
        S.head_view(forced, "encoder", 0, 0, "bias")  # Marian adds positions to its embeddings
    with pytest.raises(ValueError, match="no head"):
        S.head_view(forced, "encoder", 0, 4)
    with pytest.raises(ValueError, match="unknown stack"):
        S.head_view(forced, "both", 0, 0)
    t5 = load_checkpoint(DATA / "tiny_t5")
    out = S.run_outcome(t5, "translate: the house", "das Haus")
    values, _m, _r, _c, title, label = S.head_view(out, "encoder", 1, 2, "bias")
    np.testing.assert_array_equal(values, out.result.position_bias["encoder"][2])
    assert label == "bias" and "position bias" in title
    with pytest.raises(ValueError, match="cross-attention has none"):
        S.head_view(out, "cross", 0, 0, "bias")
    T = len(out.result.decoder_ids)
    np.testing.assert_array_equal(out.buckets["decoder"], relative_buckets(T, T, False, 8, 20))
    assert (t5.spec.buckets, t5.spec.max_distance) == (8, 20)  # tiny_t5's config.json
    assert out.buckets["decoder"][3, 1] == 2 and out.buckets["decoder"][1, 3] == 0  # two back; ahead: bucket 0
    note = S.cell_note(out, "decoder", 2, 1, 3, 1)
    assert note == (f"position bias {out.result.position_bias['decoder'][1, 3, 1]:.4g} added to the score · "
                    "j − i = -2, bucket 2")
    assert S.cell_note(out, "cross", 0, 0, 1, 1) == "" and S.cell_note(forced, "encoder", 0, 0, 1, 1) == ""


def test_study_holds_the_stack_and_offers_a_readable_source(marian, forced):
    study = CheckpointStudy()
    study.loaded(marian)
    long_text = "the cat sat on the mat " * 30
    state = SessionState(sources=(TextSource(name="t", text=long_text),))
    text, note = study.offered_text(state)
    assert text == DEFAULT_SENTENCE and "reads at most 64" in note
    short = SessionState(sources=(TextSource(name="t", text="the cat"),))
    assert study.offered_text(short) == ("the cat", None)
    study.show(forced)
    assert study.seq2seq and study.stack == "cross"
    assert study.grid_maps().shape == (3, 2, 14, 16)
    study.set_stack("encoder")
    assert study.grid_maps().shape == (2, 4, 16, 16) and study.grid_summaries() is forced.summaries["encoder"]
    study.check_head(1, 3)
    with pytest.raises(ValueError):
        study.check_head(2, 0)
    with pytest.raises(ValueError, match="unknown stack"):
        study.set_stack("middle")
    np.testing.assert_array_equal(study.shown_matrix(1, 3), forced.result.encoder_attentions[1, 3])
    study.set_stack("decoder", "bias")  # no bias in Marian: the weights are shown
    np.testing.assert_array_equal(study.shown_matrix(0, 0), forced.result.decoder_attentions[0, 0])
    job = study.seq2seq_job("where is the station?", "où est la gare ?", 5)
    np.testing.assert_array_equal(job().result.cross_attentions, forced.result.cross_attentions)
