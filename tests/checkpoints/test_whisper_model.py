"""Whisper against transformers 5.24 (tools/make_whisper_model_goldens.py writes the tiny checkpoints): the
features of the clip, the decoder prompt, every layer's and head's encoder self-attention, decoder
self-attention and cross-attention within 1e-5 of the eager attention, and greedy ids equal to
``generate(input_features, do_sample=False)``; broken folders and hostile audio are one CheckpointError."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
from ckpt_helpers import golden

from attnviz.checkpoints import CheckpointError, load_checkpoint
from attnviz.checkpoints.whisper import (WhisperCheckpoint, decoder_prompt, encode_features, generate_whisper,
                                         input_features, logits, read_audio, run_whisper)
from attnviz.checkpoints.whisper_config import read_whisper_rules

DATA = Path(__file__).resolve().parents[1] / "data" / "checkpoints"
NAMES = ["tiny_whisper", "tiny_whisper_en"]
MAPS = ("encoder_attentions", "decoder_attentions", "cross_attentions")


@pytest.fixture(scope="module")
def models():
    return {n: load_checkpoint(DATA / n) for n in NAMES}


@pytest.mark.parametrize("name", NAMES)
def test_every_map_matches_transformers_teacher_forced(models, name):
    ck = models[name]
    assert isinstance(ck, WhisperCheckpoint) and ck.kind == "whisper"
    g = golden(DATA / name / "golden.npz")
    np.testing.assert_allclose(input_features(ck, read_audio(DATA / name / "clip.wav", ck)), g["input_features"],
                               atol=1e-4, rtol=0)
    res = run_whisper(ck, DATA / name / "clip.wav", str(g["target"]))
    np.testing.assert_array_equal(res.decoder_ids, g["decoder_input_ids"])
    assert res.prompt_length == len(g["prompt"])
    for key in MAPS:
        got = getattr(res, key)
        assert got.shape == g[key].shape and got.dtype == np.float32, key
        np.testing.assert_allclose(got, g[key], atol=1e-5, rtol=0, err_msg=key)
    np.testing.assert_allclose(res.encoder_hidden, g["encoder_hidden"], atol=1e-4, rtol=1e-4)
    np.testing.assert_allclose(res.decoder_hidden, g["decoder_hidden"], atol=1e-4, rtol=1e-4)
    np.testing.assert_allclose(logits(ck, res.decoder_hidden), g["logits"], atol=1e-4, rtol=1e-4)
    T = len(res.decoder_ids)
    assert (res.decoder_attentions[:, :, ~np.tril(np.ones((T, T), dtype=bool))] == 0).all()
    # frames on the time axis: 20 ms each, the 1.5 s clip in the first 75 of 100
    assert res.frame_times.shape == (100,) and res.frame_times[1] == pytest.approx(0.02)
    assert res.duration == pytest.approx(1.5) and res.audio_frames == 75
    assert res.decoder_tokens[0] == "<|startoftranscript|>"


@pytest.mark.parametrize("name", NAMES)
def test_the_golden_features_give_the_same_encoder(models, name):
    """The encoder alone on transformers' own features: the convolutions and positions, not the mel code."""
    g = golden(DATA / name / "golden.npz")
    atts, hidden = encode_features(models[name], g["input_features"])
    np.testing.assert_allclose(atts, g["encoder_attentions"], atol=1e-5, rtol=0)
    np.testing.assert_allclose(hidden, g["encoder_hidden"], atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("name", NAMES)
def test_greedy_transcript_equals_transformers_generate(models, name):
    ck = models[name]
    g = golden(DATA / name / "golden.npz")
    assert g["top2_gap"] > 1e-3  # no near tie a float32 rounding could flip
    out = generate_whisper(ck, DATA / name / "clip.wav")
    np.testing.assert_array_equal(out.generated, g["sequences"])
    np.testing.assert_array_equal(out.attention.decoder_ids[:len(g["prompt"])], g["prompt"])
    assert len(out.attention.decoder_ids) == len(g["prompt"]) + len(g["sequences"]) - 1
    three = generate_whisper(ck, DATA / name / "clip.wav", max_new_tokens=3)
    np.testing.assert_array_equal(three.generated, g["sequences_3"])
    assert not three.finished and isinstance(three.text, str)


def test_multilingual_prompt_detects_the_language_and_english_only_is_forced(models):
    ml, en = models["tiny_whisper"], models["tiny_whisper_en"]
    assert decoder_prompt(en.rules, lambda: pytest.fail("an English-only model detects nothing")) == [301, 307]
    # detection picks the language token; naming one (generation_config "language") replaces detection and adds
    # the transcribe task as transformers does
    assert decoder_prompt(ml.rules, lambda: 303) == [301, 303, 310]
    from dataclasses import replace

    assert decoder_prompt(replace(ml.rules, language="de"), lambda: pytest.fail("named")) == [301, 304, 306, 310]
    assert decoder_prompt(replace(ml.rules, language="fr", task="translate"), lambda: 0) == [301, 303, 305, 310]
    with pytest.raises(CheckpointError, match="not one this model knows"):
        decoder_prompt(replace(ml.rules, language="xx"), lambda: 0)


@pytest.mark.parametrize("key, language, task", [("de", "de", None), ("fr_translate", "fr", "translate")])
def test_a_named_language_and_task_equal_transformers(models, key, language, task):
    from dataclasses import replace

    ck = models["tiny_whisper"]
    g = golden(DATA / "tiny_whisper" / "golden.npz")
    named = replace(ck, rules=replace(ck.rules, language=language, task=task))
    out = generate_whisper(named, DATA / "tiny_whisper" / "clip.wav")
    np.testing.assert_array_equal(out.attention.decoder_ids[:out.attention.prompt_length], g[f"prompt_{key}"])
    np.testing.assert_array_equal(out.generated, g[f"sequences_{key}"])


def test_samples_in_memory_and_a_long_clip(models):
    ck = models["tiny_whisper"]
    x = read_audio(DATA / "tiny_whisper" / "clip.wav", ck)
    a = run_whisper(ck, x, " the")
    b = run_whisper(ck, DATA / "tiny_whisper" / "clip.wav", " the")
    np.testing.assert_array_equal(a.cross_attentions, b.cross_attentions)
    long = run_whisper(ck, np.tile(x, 3), "")  # 4.5 s into a 2 s window: cut, and said
    assert long.audio_frames == 100 and any("first 2 s" in n for n in long.notes)
    assert len(long.decoder_ids) == long.prompt_length  # no target: the prompt alone


def _copy(tmp_path, name="tiny_whisper") -> Path:
    dst = tmp_path / name
    shutil.copytree(DATA / name, dst)
    return dst


def _edit(path: Path, **changes) -> None:
    cfg = json.loads(path.read_text())
    cfg.update(changes)
    path.write_text(json.dumps(cfg))


@pytest.mark.parametrize("file, changes, message", [
    ("preprocessor_config.json", {"chunk_length": 3}, "encoder takes 200"),
    ("preprocessor_config.json", {"feature_size": 128}, "128 mel bands"),
    ("config.json", {"d_model": 25}, "not divisible"),
    ("config.json", {"decoder_start_token_id": 9999}, "outside"),
    ("generation_config.json", {"forced_decoder_ids": [[2, 5]]}, "do not follow"),
    ("generation_config.json", {"suppress_tokens": [1, 99999]}, "token ids below"),
    ("generation_config.json", {"task": "summarise"}, "not in task_to_id"),
])
def test_broken_folders_are_one_message(tmp_path, file, changes, message):
    folder = _copy(tmp_path)
    _edit(folder / file, **changes)
    with pytest.raises(CheckpointError, match=message):
        load_checkpoint(folder)


def test_an_untied_head_needs_its_weights(tmp_path):
    folder = _copy(tmp_path)
    _edit(folder / "config.json", tie_word_embeddings=False)
    with pytest.raises(CheckpointError, match="no proj_out.weight"):
        load_checkpoint(folder)


def test_missing_files_are_named(tmp_path):
    folder = _copy(tmp_path)
    (folder / "preprocessor_config.json").unlink()
    with pytest.raises(CheckpointError, match="preprocessor_config.json not found"):
        load_checkpoint(folder)
    folder = _copy(tmp_path / "b")
    (folder / "tokenizer.json").unlink()
    with pytest.raises(CheckpointError, match="tokenizer.json not found"):
        load_checkpoint(folder)


def test_without_generation_config_the_model_config_rules(tmp_path, models):
    folder = _copy(tmp_path, "tiny_whisper_en")
    (folder / "generation_config.json").unlink()
    # config.json keeps transformers' default begin_suppress_tokens [220, 50256], beyond this tiny vocabulary
    with pytest.raises(CheckpointError, match="begin_suppress_tokens must be token ids below 308"):
        load_checkpoint(folder)
    _edit(folder / "config.json", begin_suppress_tokens=[220, 300])
    ck = load_checkpoint(folder)
    raw = json.loads((folder / "config.json").read_text())
    rules = read_whisper_rules(folder, ck.spec, raw)
    assert rules.max_length == 20 and rules.begin_suppress == (220, 300)  # transformers' default length
    assert ck.rules.start == models["tiny_whisper_en"].rules.start


def test_hostile_audio_is_one_message(tmp_path, models):
    ck = models["tiny_whisper"]
    good = DATA / "tiny_whisper" / "clip.wav"
    (tmp_path / "trunc.wav").write_bytes(good.read_bytes()[:40])
    (tmp_path / "text.wav").write_text("not audio at all\n" * 50)
    sf.write(tmp_path / "empty.wav", np.zeros((0, 1), np.float32), 16_000)
    nan = np.zeros(1600, np.float32)
    nan[10] = np.nan
    sf.write(tmp_path / "nan.wav", nan, 16_000, subtype="FLOAT")
    for name, message in (("trunc.wav", "not readable audio"), ("text.wav", "not readable audio"),
                          ("empty.wav", "no samples"), ("nan.wav", "NaN"), ("missing.wav", "cannot read")):
        with pytest.raises(CheckpointError, match=message):
            run_whisper(ck, tmp_path / name, "")
    eight = np.stack([np.sin(np.arange(8000) / (5 + i)) * 0.1 for i in range(8)], axis=1).astype(np.float32)
    sf.write(tmp_path / "eight.wav", eight, 16_000, subtype="FLOAT")
    res = run_whisper(ck, tmp_path / "eight.wav", "")  # averaged to mono, as librosa and transformers' users do
    assert np.isfinite(res.cross_attentions).all()
    for bad, message in ((np.zeros(0), "no audio"), (np.full(100, np.inf), "NaN or infinite"),
                         (np.zeros((2, 100)), "one channel"), (np.array(["a"]), "one channel")):
        with pytest.raises(CheckpointError, match=message):
            run_whisper(ck, bad, "")
    with pytest.raises(CheckpointError, match="shorten"):
        run_whisper(ck, good, " the" * 60)
    with pytest.raises(CheckpointError, match="max_new_tokens"):
        generate_whisper(ck, good, max_new_tokens=0)
    with pytest.raises(CheckpointError, match="exceed"):
        generate_whisper(ck, good, max_new_tokens=46)


def test_cancel_stops_before_a_step(models):
    ck = models["tiny_whisper"]
    out = generate_whisper(ck, DATA / "tiny_whisper" / "clip.wav", cancel=lambda: True)
    assert out.generated.size == 0 and not out.finished


def test_model_list_names_whisper_supported():
    from attnviz.checkpoints.hub_cache import describe_folder

    item = describe_folder(DATA / "tiny_whisper")
    assert item.supported and item.family == "Whisper" and item.n_params == 44_528  # 42,104 and the 101 timestamp rows of 24
