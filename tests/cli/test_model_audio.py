"""attnviz-cli model inspect --audio on Whisper: teacher-forced with --target (the arrays equal the library's
pass and transformers' golden), the model's own transcript without it (equal to transformers' generate), the
generate entry point; hostile audio and wrong flags are one line and exit 1."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

import attnviz.sources.audio as audio
from attnviz.checkpoints import load_checkpoint
from attnviz.cli import main
from attnviz.cli.model_audio import add_audio_argument, generate_audio

DATA = Path(__file__).resolve().parents[1] / "data" / "checkpoints"
MODEL, EN = DATA / "tiny_whisper", DATA / "tiny_whisper_en"
CLIP = MODEL / "clip.wav"
MAPS = ("encoder_attentions", "decoder_attentions", "cross_attentions")


def _golden(folder: Path) -> dict:
    with np.load(folder / "golden.npz") as z:
        return {k: z[k] for k in z.files}


def test_inspect_with_target_is_teacher_forced(tmp_path, capsys):
    g = _golden(MODEL)
    out = tmp_path / "w.npz"
    assert main(["model", "inspect", str(MODEL), "--audio", str(CLIP), "--target", str(g["target"]),
                 "--npz", str(out)]) == 0
    with np.load(out) as z:
        assert "encoder_ids" not in z.files
        np.testing.assert_array_equal(z["decoder_ids"], g["decoder_input_ids"])
        for key in MAPS:
            np.testing.assert_allclose(z[key], g[key], atol=1e-5, rtol=0, err_msg=key)
        assert z["frame_times"].shape == (100,) and z["frame_times"][-1] == pytest.approx(1.98)
        assert z["input_features"].shape == (80, 200) and float(z["duration"]) == pytest.approx(1.5)
        assert int(z["prompt_length"]) == 3 and str(z["decoder_tokens"][0]) == "<|startoftranscript|>"
        np.testing.assert_array_equal(z["target_ids"][:-1], z["decoder_ids"][1:])
    text = capsys.readouterr().out
    assert "75 of 100 encoder frames" in text and "cross_attentions (2, 2, 19, 100)" in text


@pytest.mark.parametrize("folder", [MODEL, EN])
def test_inspect_without_target_transcribes_greedily(tmp_path, capsys, folder):
    g = _golden(folder)
    out = tmp_path / "t.npz"
    assert main(["model", "inspect", str(folder), "--audio", str(folder / "clip.wav"), "--npz", str(out)]) == 0
    with np.load(out) as z:
        np.testing.assert_array_equal(z["generated"], g["sequences"])
        np.testing.assert_array_equal(z["decoder_ids"][:len(g["prompt"])], g["prompt"])
        assert z["cross_attentions"].shape[2] == len(z["decoder_ids"])
    assert "greedy" in capsys.readouterr().out


def _generate_args(**kw) -> argparse.Namespace:
    """The namespace ``model generate`` parses, with --audio added as add_audio_argument adds it."""
    p = argparse.ArgumentParser()
    p.add_argument("--text", required=True)
    p.add_argument("--max-new-tokens", type=int, default=32)
    p.add_argument("--sample", action="store_true")
    p.add_argument("--lens", type=int)
    p.add_argument("--chat", action="store_true")
    p.add_argument("--npz", type=Path, required=True)
    add_audio_argument(p)
    argv = [x for k, v in kw.items() for x in (f"--{k.replace('_', '-')}", str(v))]
    return p.parse_args(argv)


def test_generate_entry_point(tmp_path, capsys):
    ck = load_checkpoint(MODEL)
    g = _golden(MODEL)
    out = tmp_path / "g.npz"
    assert generate_audio(ck, _generate_args(audio=CLIP, max_new_tokens=3, npz=out)) == 0
    with np.load(out) as z:
        np.testing.assert_array_equal(z["generated"], g["sequences_3"])
        np.testing.assert_array_equal(z["ids"], np.concatenate([g["prompt"], g["sequences_3"]]))
    assert "3 new tokens (length" in capsys.readouterr().out
    from attnviz.cli import CliError

    with pytest.raises(CliError, match="reads --audio, not --text"):
        generate_audio(ck, _generate_args(audio=CLIP, text="hi", npz=out))
    with pytest.raises(CliError, match="--audio is for Whisper"):
        generate_audio(load_checkpoint(DATA / "tiny_gpt2"), _generate_args(audio=CLIP, npz=out))


def _hostile(tmp_path) -> dict[str, str]:
    cases = {}
    (tmp_path / "trunc.wav").write_bytes(CLIP.read_bytes()[:40])
    cases["trunc.wav"] = "not readable audio"
    (tmp_path / "noise.wav").write_bytes(os.urandom(4096))
    cases["noise.wav"] = "not readable audio"
    (tmp_path / "doc.wav").write_text("hello\n" * 100)
    cases["doc.wav"] = "not readable audio"
    sf.write(tmp_path / "zero.wav", np.zeros((0, 1), np.float32), 16_000)
    cases["zero.wav"] = "holds no samples"
    nan = np.zeros(1600, np.float32)
    nan[3] = np.nan
    sf.write(tmp_path / "nan.wav", nan, 16_000, subtype="FLOAT")
    cases["nan.wav"] = "NaN"
    cases["missing.wav"] = "cannot read"
    return cases


def test_hostile_audio_is_one_line(tmp_path, capsys, monkeypatch):
    npz = tmp_path / "x.npz"
    for name, message in _hostile(tmp_path).items():
        assert main(["model", "inspect", str(MODEL), "--audio", str(tmp_path / name), "--npz", str(npz)]) == 1, name
        err = capsys.readouterr().err.strip()
        assert message in err and len(err.splitlines()) == 1 and "Traceback" not in err, (name, err)
    assert not npz.exists()
    eight = np.stack([0.1 * np.sin(np.arange(8000) / (3 + i)) for i in range(8)], axis=1).astype(np.float32)
    sf.write(tmp_path / "eight.wav", eight, 44_100, subtype="FLOAT")
    assert main(["model", "inspect", str(MODEL), "--audio", str(tmp_path / "eight.wav"), "--target", " the",
                 "--npz", str(npz)]) == 0
    assert "8 channels averaged to mono, resampled from 44,100 Hz" in capsys.readouterr().out
    for attr, value, message in (("MAX_SECONDS", 1, "minutes"), ("MAX_BYTES", 1000, "audio files of at most 1,000"),
                                 ("MAX_CHANNELS", 4, "has 8 channels")):
        monkeypatch.setattr(audio, attr, value)  # a "huge" file: longer, larger or wider than the reader takes
        path = tmp_path / "eight.wav" if attr == "MAX_CHANNELS" else CLIP
        assert main(["model", "inspect", str(MODEL), "--audio", str(path), "--npz", str(npz)]) == 1, attr
        err = capsys.readouterr().err.strip()
        assert message in err and len(err.splitlines()) == 1, (attr, err)
        monkeypatch.undo()


def test_wrong_flags_are_one_line(tmp_path, capsys):
    npz = str(tmp_path / "x.npz")
    for argv, message in (
        (["model", "inspect", str(MODEL), "--text", "hi", "--npz", npz], "reads --audio, not --text"),
        (["model", "inspect", str(MODEL), "--audio", str(CLIP), "--chat", "--npz", npz], "--chat is not for Whisper"),
        (["model", "inspect", str(MODEL), "--audio", str(CLIP), "--layer", "0", "--head", "0", "--npz", npz],
         "--layer is not for Whisper"),
        (["model", "inspect", str(DATA / "tiny_gpt2"), "--audio", str(CLIP), "--npz", npz], "--audio is for Whisper"),
        (["model", "inspect", str(MODEL), "--audio", str(CLIP), "--target", " the" * 60, "--npz", npz], "shorten"),
    ):
        assert main(argv) == 1, argv
        err = capsys.readouterr().err.strip()
        assert message in err and len(err.splitlines()) == 1, (argv, err)


def test_model_generate_audio_transcribes_what_inspect_does(tmp_path, capsys):
    g = _golden(MODEL)
    out = tmp_path / "g.npz"
    n = str(len(g["sequences"]))  # the transcript of inspect stops at the model's max_length
    assert main(["model", "generate", str(MODEL), "--audio", str(CLIP), "--max-new-tokens", n, "--npz", str(out)]) == 0
    with np.load(out) as z:
        np.testing.assert_array_equal(z["generated"], g["sequences"])
    capsys.readouterr()
    assert main(["model", "generate", str(MODEL), "--audio", str(CLIP), "--sample", "--npz",
                 str(tmp_path / "s.npz")]) == 1
    assert "greedily" in capsys.readouterr().err
    assert main(["model", "generate", str(DATA / "tiny_llama_lm"), "--npz", str(tmp_path / "n.npz")]) == 1
    assert "--text" in capsys.readouterr().err
    assert main(["model", "generate", str(DATA / "tiny_llama_lm"), "--audio", str(CLIP), "--npz",
                 str(tmp_path / "a.npz")]) == 1
    assert "Whisper" in capsys.readouterr().err


@pytest.mark.slow
def test_language_task_timestamps_and_beams_on_the_command_line(tmp_path, capsys):
    g = _golden(MODEL)
    out = tmp_path / "ts.npz"
    assert main(["model", "generate", str(MODEL), "--audio", str(CLIP), "--timestamps", "--npz", str(out)]) == 0
    printed = capsys.readouterr().out
    with np.load(out) as z:
        np.testing.assert_array_equal(z["sequences"], g["sequences_ts"])
        np.testing.assert_allclose(z["segment_start"], g["ts_start"], atol=1e-9)
        np.testing.assert_allclose(z["segment_end"], g["ts_end"], atol=1e-9)
        assert z["segment_length"].sum() == len(z["sequences"]) and len(z["segment_text"]) == len(g["ts_start"])
        np.testing.assert_array_equal(z["decoder_ids"][:z["prompt_length"]], g["prompt_ts"])
    assert f"[{g['ts_start'][0]:7.2f} -> {g['ts_end'][0]:7.2f}]" in printed
    assert "ids: " + " ".join(map(str, g["sequences_ts"].tolist())) in printed
    out = tmp_path / "fr.npz"
    assert main(["model", "inspect", str(MODEL), "--audio", str(CLIP), "--language", "fr", "--beams", "2", "--npz",
                 str(out)]) == 0
    assert "2 beams" in capsys.readouterr().out
    with np.load(out) as z:
        np.testing.assert_array_equal(z["sequences"], g["sequences_fr_beam2"])
    out = tmp_path / "de.npz"
    assert main(["model", "inspect", str(MODEL), "--audio", str(CLIP), "--language", "de", "--target", " the cat",
                 "--npz", str(out)]) == 0
    with np.load(out) as z:
        np.testing.assert_array_equal(z["decoder_ids"][:z["prompt_length"]], g["prompt_de"])


def test_options_a_model_cannot_take_are_one_line(tmp_path, capsys):
    npz = str(tmp_path / "x.npz")
    for argv, message in (
        (["model", "generate", str(EN), "--audio", str(EN / "clip.wav"), "--language", "en", "--npz", npz],
         "English-only"),
        (["model", "inspect", str(EN), "--audio", str(EN / "clip.wav"), "--task", "translate", "--npz", npz],
         "English-only"),
        (["model", "generate", str(EN), "--audio", str(EN / "clip.wav"), "--timestamps", "--npz", npz],
         "no timestamps"),
        (["model", "generate", str(MODEL), "--audio", str(CLIP), "--language", "klingon", "--npz", npz],
         "not one this model knows"),
        (["model", "generate", str(MODEL), "--audio", str(CLIP), "--task", "summarise", "--npz", npz],
         "not one of transcribe, translate"),
        (["model", "generate", str(MODEL), "--audio", str(CLIP), "--beams", "0", "--npz", npz], "--beams"),
        (["model", "inspect", str(MODEL), "--audio", str(CLIP), "--beams", "2", "--target", "hi", "--npz", npz],
         "--beams is for a transcript"),
        (["model", "generate", str(DATA / "tiny_gpt2"), "--text", "hi", "--beams", "2", "--npz", npz],
         "are for Whisper speech models"),
        (["model", "inspect", str(DATA / "tiny_gpt2"), "--text", "hi", "--language", "fr", "--npz", npz],
         "--language is for Whisper speech models"),
    ):
        assert main(argv) == 1, argv
        err = capsys.readouterr().err.strip()
        assert message in err and len(err.splitlines()) == 1, (argv, err)
