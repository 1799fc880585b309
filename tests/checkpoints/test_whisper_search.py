"""Whisper's decoding options against transformers 5.24 (tools/make_whisper_model_goldens.py): a named language
and task, timestamps (the prompt without <|notimestamps|>, the timestamp rules, the segments and the windows
they move on to), beam search (ids equal to ``generate(num_beams=N, do_sample=False)``, with beams that finish,
early stopping and a length penalty) and the chosen beam's maps within 1e-5; what a model cannot do is one
CheckpointError."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from ckpt_helpers import golden

from attnviz.checkpoints import CheckpointError, load_checkpoint
from attnviz.checkpoints.whisper import generate_whisper, run_whisper
from attnviz.checkpoints.whisper_search import process, split, written_tokens

DATA = Path(__file__).resolve().parents[1] / "data" / "checkpoints"
ML, EN = "tiny_whisper", "tiny_whisper_en"


@pytest.fixture(scope="module")
def models():
    return {n: load_checkpoint(DATA / n) for n in (ML, EN)}


def _clip(name):
    return DATA / name / "clip.wav"


@pytest.mark.parametrize("language, task, key", [("de", None, "de"), ("FR", "translate", "fr_translate")])
def test_language_and_task_go_into_the_prompt_as_transformers_puts_them(models, language, task, key):
    g = golden(DATA / ML / "golden.npz")
    out = generate_whisper(models[ML], _clip(ML), language=language, task=task)
    np.testing.assert_array_equal(out.attention.decoder_ids[:out.attention.prompt_length], g[f"prompt_{key}"])
    np.testing.assert_array_equal(out.sequences, g[f"sequences_{key}"])
    forced = run_whisper(models[ML], _clip(ML), " the cat", language=language, task=task)
    np.testing.assert_array_equal(forced.decoder_ids[:forced.prompt_length], g[f"prompt_{key}"])


@pytest.mark.parametrize("name, kw, message", [
    (EN, {"language": "en"}, "English-only"),
    (EN, {"task": "translate"}, "English-only"),
    (EN, {"timestamps": True}, "no timestamps"),
    (ML, {"language": "xx"}, "not one this model knows"),
    (ML, {"task": "summarise"}, "not one of transcribe, translate"),
    (ML, {"beams": 0}, "beams must be"),
    (ML, {"beams": 2.5}, "beams must be"),
])
def test_what_the_model_cannot_do_is_one_message(models, name, kw, message):
    with pytest.raises(CheckpointError, match=message) as err:
        generate_whisper(models[name], _clip(name), max_new_tokens=2, **kw)
    assert "\n" not in str(err.value)


def test_choices_say_what_each_model_allows(models):
    assert models[ML].rules.choices() == {"languages": ("de", "en", "fr"), "tasks": ("transcribe", "translate"),
                                          "timestamps": True}
    assert models[EN].rules.choices() == {"languages": (), "tasks": (), "timestamps": False}


def test_timestamps_equal_transformers_return_timestamps(models):
    ck, g = models[ML], golden(DATA / ML / "golden.npz")
    out = generate_whisper(ck, _clip(ML), timestamps=True)
    a = out.attention
    np.testing.assert_array_equal(a.decoder_ids[:a.prompt_length], g["prompt_ts"])
    assert ck.rules.no_timestamps not in a.decoder_ids.tolist()
    np.testing.assert_array_equal(out.sequences, g["sequences_ts"])
    assert out.windows >= 2  # the clip's model does not end in a single timestamp: the next window starts later
    np.testing.assert_allclose([s.start for s in out.segments], g["ts_start"], atol=1e-9)
    np.testing.assert_allclose([s.end for s in out.segments], g["ts_end"], atol=1e-9)
    assert [len(s.ids) for s in out.segments] == g["ts_length"].tolist()
    tb = ck.rules.timestamp_begin
    assert out.generated[0] >= tb and out.generated[0] <= tb + ck.rules.max_initial_timestamp_index
    assert all(t < tb for t in ck.text.encode(out.text, add_special_tokens=False).ids)
    short = generate_whisper(ck, _clip(ML), timestamps=True, language="de", max_new_tokens=3)
    np.testing.assert_array_equal(short.sequences, g["sequences_ts_de"])


@pytest.mark.parametrize("name, beams", [(ML, 2), (ML, 3), (EN, 2), (EN, 3)])
def test_beam_search_equals_transformers(models, name, beams):
    g = golden(DATA / name / "golden.npz")
    out = generate_whisper(models[name], _clip(name), beams=beams)
    np.testing.assert_array_equal(out.sequences, g[f"sequences_beam{beams}"])
    assert out.beams == beams and any("beam search" in n for n in out.attention.notes)


@pytest.mark.parametrize("key, changes", [
    ("eos166", {}), ("beam3_eos166", {}), ("beam3_eos255", {}),
    ("beam3_eos166_early", {"early_stopping": True}),
    ("beam3_eos166_never", {"early_stopping": "never", "length_penalty": 2.0})])
def test_beams_that_finish_equal_transformers(models, key, changes):
    """Another end-of-text token, so that beams finish early: the finished beams' scores, early stopping and
    the length penalty decide."""
    ck, g = models[ML], golden(DATA / ML / "golden.npz")
    eos = 166 if "166" in key else 255
    beams = 3 if key.startswith("beam3") else 1
    named = replace(ck, rules=replace(ck.rules, eos_ids=(eos,), **changes))
    out = generate_whisper(named, _clip(ML), beams=beams)
    np.testing.assert_array_equal(out.sequences, g[f"sequences_{key}"])
    if out.finished:
        assert out.generated[-1] == eos


@pytest.mark.parametrize("name", [ML, EN])
def test_the_chosen_beam_keeps_its_maps(models, name):
    g = golden(DATA / name / "golden.npz")
    out = generate_whisper(models[name], _clip(name), beams=3)
    a = out.attention
    T = len(a.decoder_ids)
    np.testing.assert_array_equal(a.decoder_ids[a.prompt_length:], g["sequences_beam3"][:T - a.prompt_length])
    np.testing.assert_allclose(a.decoder_attentions, g["beam3_decoder_attentions"][:, :, :T, :T], atol=1e-5, rtol=0)
    np.testing.assert_allclose(a.cross_attentions, g["beam3_cross_attentions"][:, :, :T], atol=1e-5, rtol=0)


def _rules(**kw):
    base = dict(begin_suppress=(), suppress=(), timestamps=True, no_timestamps=9, eos=5, eos_ids=(5,),
                timestamp_begin=10, max_initial_timestamp_index=2, pad=5)
    return SimpleNamespace(**(base | kw))


def test_the_timestamp_rules():
    r, flat = _rules(), np.zeros(16, dtype=np.float32)
    first = process(r, [1, 2], flat, 2)  # the first written token: a timestamp no later than <|0.04|>
    assert np.isfinite(first).nonzero()[0].tolist() == [10, 11, 12]
    wordy = np.zeros(16, dtype=np.float32)
    wordy[5:9] = 5.0  # text far more likely than the timestamps
    lone = process(r, [1, 2, 10, 3, 11], wordy, 2)  # after a lone timestamp: another (not earlier), or end of text
    assert np.isfinite(lone).nonzero()[0].tolist() == [5, 6, 7, 8] + list(range(11, 16))
    opening = process(r, [1, 2, 11], wordy, 2)  # the opening timestamp alone is followed by text
    assert np.isfinite(opening)[10:].sum() == 0
    pair = process(r, [1, 2, 10, 3, 12, 12], flat, 2)  # after a pair: text only
    assert np.isfinite(pair)[10:].sum() == 0 and np.isfinite(pair[:9]).all()
    text = process(r, [1, 2, 11, 3], flat, 2)  # after text, timestamps go on from the last one + 1
    assert np.isfinite(text)[10:].nonzero()[0].tolist() == [2, 3, 4, 5]
    likely = np.zeros(16, dtype=np.float32)
    likely[10:] = 1.0  # together the timestamps outweigh any text token: a timestamp comes
    assert np.isfinite(process(r, [1, 2, 11, 3], likely, 2))[:10].sum() == 0


def test_segments_and_where_the_next_window_starts():
    tb = 10
    segs, move = split([10, 3, 4, 12, 12, 6, 15], tb, 0.0, 200)  # ends in a single timestamp: the whole window
    assert [(s.start, s.end, s.ids) for s in segs] == [(0.0, 0.04, (10, 3, 4, 12)), (0.04, 0.1, (12, 6, 15))]
    assert move == 200
    segs, move = split([10, 3, 12, 12, 6, 14, 14, 7], tb, 1.0, 200)  # ends after a pair: from its timestamp
    assert [(round(s.start, 6), round(s.end, 6)) for s in segs] == [(1.0, 1.04), (1.04, 1.08)]
    assert move == 8 and segs[-1].ids == (12, 6, 14, 14)
    segs, move = split([3, 4], tb, 0.0, 200)  # no timestamps: one segment over the window
    assert [(s.start, s.end, s.ids) for s in segs] == [(0.0, 2.0, (3, 4))] and move == 200
    r = _rules()
    assert written_tokens(r, [1, 2, 3, 5, 5, 5], 2) == [3]  # padding (the end of text) and the end of text off
