"""attnviz-cli model ablate / model patch: the logits written equal the library's interventions; bad
heads and unequal lengths are one line."""

from __future__ import annotations

import numpy as np
from ckpt_helpers import DATA

from attnviz.checkpoints import load_checkpoint
from attnviz.checkpoints.decoder_text import encode
from attnviz.checkpoints.interventions import ablate, patch_head
from attnviz.cli import main

MODEL = DATA / "tiny_llama_lm"


def _ids(ck, text):
    return encode(ck.tokenizer, ck.special_tokens, text, 64).ids


def test_ablate_writes_logits_before_and_after(tmp_path, capsys):
    out = tmp_path / "a.npz"
    assert main(["model", "ablate", str(MODEL), "--text", "the river bank", "--heads", "0.1,1.3", "--mode", "mean",
                 "--npz", str(out)]) == 0
    ck = load_checkpoint(MODEL)
    before, after = ablate(ck.config, ck.weights, _ids(ck, "the river bank"), [(0, 1), (1, 3)], "mean")
    with np.load(out) as z:
        np.testing.assert_array_equal(z["logits_before"], before.logits)
        np.testing.assert_array_equal(z["logits_after"], after.logits)
        assert z["attentions_after"].shape == after.attentions.shape and float(z["kl"]) > 0
        assert z["logits_after"].shape == (ck.config.vocab_size,)
    assert "mean-ablated 0.1, 1.3" in capsys.readouterr().out


def test_patch_writes_the_three_passes(tmp_path):
    out = tmp_path / "p.npz"
    assert main(["model", "patch", str(MODEL), "--clean", "the river bank", "--corrupted", "a river bank",
                 "--layer", "1", "--head", "2", "--npz", str(out)]) == 0
    ck = load_checkpoint(MODEL)
    a, b = _ids(ck, "the river bank"), _ids(ck, "a river bank")
    assert a.size == b.size and not np.array_equal(a, b)
    clean, corrupted, patched = patch_head(ck.config, ck.weights, a, b, 1, 2)
    with np.load(out) as z:
        for k, p in (("logits_clean", clean), ("logits_corrupted", corrupted), ("logits_patched", patched)):
            np.testing.assert_array_equal(z[k], p.logits)


def test_gpt2_ablate_and_patch_write_the_librarys_logits(tmp_path):
    model = DATA / "tiny_gpt2"
    ck = load_checkpoint(model)

    def ids(text):
        return ck.tokenizer.encode(text, add_special_tokens=True, max_tokens=ck.config.max_tokens).ids

    out = tmp_path / "a.npz"
    assert main(["model", "ablate", str(model), "--text", "the river bank", "--heads", "0.1,1.0", "--npz", str(out)]) == 0
    before, after = ablate(ck.config, ck.weights, ids("the river bank"), [(0, 1), (1, 0)], "zero")
    with np.load(out) as z:
        np.testing.assert_array_equal(z["logits_after"], after.logits)
        assert z["logits_before"].shape == (ck.config.vocab_size,) and float(z["kl"]) > 0
    a, b = ids("the river bank"), ids("a river bank")
    assert a.size == b.size and not np.array_equal(a, b)
    out = tmp_path / "p.npz"
    assert main(["model", "patch", str(model), "--clean", "the river bank", "--corrupted", "a river bank",
                 "--layer", "1", "--head", "1", "--npz", str(out)]) == 0
    _clean, corrupted, patched = patch_head(ck.config, ck.weights, a, b, 1, 1)
    with np.load(out) as z:
        np.testing.assert_array_equal(z["logits_patched"], patched.logits)
        assert not np.array_equal(z["logits_patched"], z["logits_corrupted"])


def test_bad_requests_are_one_line(tmp_path, capsys):
    npz = str(tmp_path / "x.npz")
    for argv, message in (
        (["model", "ablate", str(MODEL), "--text", "hi", "--heads", "5.0", "--npz", npz], "layer 5 is out of range"),
        (["model", "ablate", str(MODEL), "--text", "hi", "--heads", "0-1", "--npz", npz], "not a head"),
        (["model", "patch", str(MODEL), "--clean", "the river bank", "--corrupted", "the money bank", "--layer", "0", "--head", "0",
          "--npz", npz], "same length"),
        (["model", "ablate", str(DATA / "tiny_whisper"), "--text", "hi", "--heads", "0.0", "--npz", npz],
         "give the audio with --audio"),
        (["model", "patch", str(DATA / "tiny_whisper"), "--clean", "hi", "--corrupted", "ho", "--layer", "0", "--head",
          "0", "--npz", npz], "hi"),  # Whisper's clean and corrupted inputs are audio files: "hi" is not one
        (["model", "ablate", str(DATA / "tiny_gpt2"), "--text", "hi", "--heads", "0.2", "--npz", npz],
         "head 2 is out of range"),
    ):
        assert main(argv) == 1
        err = capsys.readouterr().err
        assert message in err and "Traceback" not in err and err.count("\n") == 1


def test_an_encoder_decoders_heads_are_ablated_and_patched_per_attention(tmp_path, capsys):
    from attnviz.checkpoints.intervention_seq2seq import patch_seq2seq_head, seq2seq_run
    from attnviz.checkpoints.interventions import Edit
    from attnviz.checkpoints.seq2seq_run import run_seq2seq

    model = DATA.parent / "tiny_marian"
    ck = load_checkpoint(model)
    r = run_seq2seq(ck, "hello world", "bonjour")
    out = tmp_path / "s.npz"
    assert main(["model", "ablate", str(model), "--text", "hello world", "--target", "bonjour", "--stack", "cross",
                 "--heads", "0.1,2.0", "--npz", str(out)]) == 0
    after = seq2seq_run(ck, r.encoder_ids, r.decoder_ids, {"cross": Edit(ablate={(0, 1): "zero", (2, 0): "zero"})})
    with np.load(out) as z:
        np.testing.assert_array_equal(z["logits_after"], after.logits)
        assert z["logits_before"].shape == (r.decoder_ids.size, ck.spec.dec_vocab_size) and float(z["kl"]) > 0
    assert "cross heads 0.1, 2.0" in capsys.readouterr().out
    clean, bad = run_seq2seq(ck, "hello world", "bonjour"), run_seq2seq(ck, "hello wordl", "bonjour")
    assert clean.encoder_ids.size == bad.encoder_ids.size
    assert main(["model", "patch", str(model), "--clean", "hello world", "--corrupted", "hello wordl", "--target",
                 "bonjour", "--stack", "encoder", "--layer", "1", "--head", "1", "--npz", str(out)]) == 0
    _c, _k, patched = patch_seq2seq_head(ck, clean.encoder_ids, bad.encoder_ids, clean.decoder_ids, "encoder", 1, 1)
    with np.load(out) as z:
        np.testing.assert_array_equal(z["logits_patched"], patched.logits)
    npz = str(tmp_path / "x.npz")
    for argv, message in (
        (["model", "ablate", str(model), "--text", "hi", "--stack", "cross", "--heads", "0.5", "--npz", npz],
         "head 5 is out of range"),
        (["model", "ablate", str(DATA / "tiny_gpt2"), "--text", "hi", "--stack", "cross", "--heads", "0.1", "--npz",
          npz], "for encoder-decoders"),
        (["model", "ablate", str(DATA.parent / "tiny_t5"), "--text", "hi", "--heads", "0.4", "--npz", npz],
         "head 4 is out of range"),
    ):
        assert main(argv) == 1
        err = capsys.readouterr().err
        assert message in err and "Traceback" not in err and err.count("\n") == 1
