"""``attnviz-cli model ablate / patch`` on T5 and Whisper (the encoder-decoders' interventions through the command
line), on Swin and on a SmolVLA policy (their dispatch): each writes what its pass computes, and a flag for another
kind of model is one line."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from attnviz.checkpoints import load_checkpoint
from attnviz.checkpoints.intervention_seq2seq import seq2seq_run, whisper_run
from attnviz.checkpoints.interventions import Edit
from attnviz.checkpoints.whisper import run_whisper
from attnviz.cli import main

DATA = Path(__file__).resolve().parents[1] / "data"
WHISPER = DATA / "checkpoints" / "tiny_whisper"
T5 = DATA / "tiny_t5"


def test_t5_ablate_writes_every_decoder_rows_logits(tmp_path, capsys):
    out = tmp_path / "t5.npz"
    assert main(["model", "ablate", str(T5), "--text", "where is the station?", "--target", "où est la gare ?",
                 "--heads", "0.1,1.3", "--stack", "cross", "--npz", str(out)]) == 0
    z = np.load(out)
    ck = load_checkpoint(T5)
    ref = seq2seq_run(ck, z["ids"], z["decoder_ids"], {"cross": Edit(ablate={(0, 1): "zero", (1, 3): "zero"})})
    np.testing.assert_allclose(z["logits_after"], ref.logits, atol=1e-6)
    assert np.abs(z["logits_after"] - z["logits_before"]).max() > 1e-4
    assert z["attentions_after"].shape == ref.cross.shape
    assert "cross attention" in capsys.readouterr().out


def test_whisper_ablate_and_patch_read_audio_files(tmp_path, capsys):
    clip = WHISPER / "clip.wav"
    samples, rate = sf.read(clip, dtype="float32")
    other = tmp_path / "reversed.wav"
    sf.write(other, samples[::-1].copy(), rate)
    out = tmp_path / "w.npz"
    assert main(["model", "ablate", str(WHISPER), "--audio", str(clip), "--target", "hello world", "--heads", "0.2",
                 "--mode", "mean", "--npz", str(out)]) == 0
    z = np.load(out)
    ck = load_checkpoint(WHISPER)
    run = run_whisper(ck, str(clip), "hello world")
    np.testing.assert_array_equal(z["decoder_ids"], run.decoder_ids)
    ref = whisper_run(ck, run.features, run.decoder_ids, {"encoder": Edit(ablate={(0, 2): "mean"})})
    np.testing.assert_allclose(z["logits_after"], ref.logits, atol=1e-6)
    assert z["attentions_after"].shape == run.encoder_attentions.shape
    out = tmp_path / "p.npz"
    assert main(["model", "patch", str(WHISPER), "--clean", str(clip), "--corrupted", str(other), "--layer", "1",
                 "--head", "1", "--stack", "decoder", "--target", "hello world", "--npz", str(out)]) == 0
    p = np.load(out)
    assert np.abs(p["logits_clean"] - p["logits_corrupted"]).max() > 1e-4
    assert not np.allclose(p["logits_patched"], p["logits_corrupted"])
    capsys.readouterr()


@pytest.mark.parametrize("argv, says", [
    (["--audio", "X.wav", "--heads", "0.9"], "head 9 is out of range"),
    (["--text", "hello", "--heads", "0.1"], "give the audio with --audio"),
    (["--audio", "X.wav", "--heads", "0.1", "--stack", "expert"], "for SmolVLA robot policies"),
    (["--audio", "missing.wav", "--heads", "0.1"], "missing.wav"),
])
def test_whisper_bad_requests_are_one_line(tmp_path, capsys, argv, says):
    argv = [str(WHISPER / "clip.wav") if a == "X.wav" else str(tmp_path / a) if a == "missing.wav" else a for a in argv]
    assert main(["model", "ablate", str(WHISPER), *argv, "--npz", str(tmp_path / "o.npz")]) == 1
    err = capsys.readouterr().err.strip()
    assert says in err and "\n" not in err and "Traceback" not in err
    assert not (tmp_path / "o.npz").exists()


def test_audio_and_robot_flags_on_a_text_model_are_one_line(tmp_path, capsys):
    gpt2 = DATA / "checkpoints" / "tiny_gpt2"
    assert main(["model", "ablate", str(gpt2), "--text", "hi", "--heads", "0.1", "--audio", "a.wav",
                 "--npz", str(tmp_path / "o.npz")]) == 1
    assert "--audio is for Whisper" in capsys.readouterr().err
    assert main(["model", "ablate", str(gpt2), "--text", "hi", "--heads", "0.1", "--state", "1,2",
                 "--npz", str(tmp_path / "o.npz")]) == 1
    assert "--state is for SmolVLA" in capsys.readouterr().err


def test_swin_and_smolvla_reach_their_commands(tmp_path, capsys):
    from PIL import Image

    pic = tmp_path / "p.png"
    Image.fromarray((np.arange(64 * 64 * 3) % 251).reshape(64, 64, 3).astype(np.uint8)).save(pic)
    out = tmp_path / "s.npz"
    assert main(["model", "ablate", str(DATA / "checkpoints" / "tiny_swin_cls"), "--image", str(pic), "--heads", "0.1",
                 "--npz", str(out)]) == 0
    z = np.load(out)
    assert "pooled_before" in z.files and z["cosine"] < 1.0
    capsys.readouterr()
    assert main(["model", "ablate", str(DATA / "checkpoints" / "tiny_swin_cls"), "--image", str(pic), "--heads", "0.7",
                 "--npz", str(out)]) == 1
    assert "out of range" in capsys.readouterr().err
    policy = DATA / "checkpoints" / "tiny_smolvla"
    assert main(["model", "ablate", str(policy), "--heads", "0.1", "--stack", "expert", "--npz", str(out)]) == 1
    err = capsys.readouterr().err.strip()
    assert "robot policy" in err and "--state" in err and "\n" not in err
    with np.load(policy / "golden_interventions.npz") as g:
        text, state = str(g["instruction"]), ",".join(str(v) for v in g["state"])
    out = tmp_path / "v.npz"
    assert main(["model", "ablate", str(policy), "--text", text, "--image", str(policy / "camera0.png"), "--image",
                 str(policy / "camera1.png"), "--state", state, "--heads", "1.1", "--stack", "expert",
                 "--npz", str(out)]) == 0
    v = np.load(out)
    assert v["velocity_before"].shape == v["velocity_after"].shape
    assert np.abs(v["velocity_after"] - v["velocity_before"]).max() > 1e-6
