"""attnviz-cli model generate: the ids, the new tokens and every step's attention written; sampling
flags and bad requests reported in one line, never a traceback."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
from ckpt_helpers import DATA

from attnviz.checkpoints import load_checkpoint
from attnviz.checkpoints.decoder_text import encode
from attnviz.checkpoints.generate import Sampling, generate
from attnviz.cli import main
from attnviz.cli.model_generate import eos_ids


def test_greedy_generation_is_written(tmp_path, capsys):
    out = tmp_path / "g.npz"
    folder = DATA / "tiny_llama_lm"
    assert main(["model", "generate", str(folder), "--text", "hello world", "--max-new-tokens", "5",
                 "--npz", str(out)]) == 0
    ck = load_checkpoint(folder)
    ids = encode(ck.tokenizer, ck.special_tokens, "hello world", 64).ids
    want = generate(ck.config, ck.weights, ids, max_new_tokens=5, eos_ids=eos_ids(ck))
    with np.load(out) as z:
        np.testing.assert_array_equal(z["ids"], want.ids)
        np.testing.assert_array_equal(z["generated"], want.generated)
        assert z["ids"][:len(ids)].tolist() == ids.tolist() and len(z["tokens"]) == len(z["ids"])
        np.testing.assert_allclose(z["attentions"], want.attentions, atol=0)
        assert z["top_ids"].shape == (len(want.generated), 10)
    text = capsys.readouterr().out
    assert "prompt tokens + " in text and "greedy" in text


def test_sampling_flags_reach_the_sampler(tmp_path):
    out = tmp_path / "s.npz"
    folder = DATA / "tiny_qwen2"
    args = ["model", "generate", str(folder), "--text", "hello", "--max-new-tokens", "6", "--sample", "--seed", "7",
            "--temperature", "1.3", "--top-k", "30", "--top-p", "0.95", "--npz", str(out)]
    assert main(args) == 0
    ck = load_checkpoint(folder)
    ids = encode(ck.tokenizer, ck.special_tokens, "hello", 64).ids
    want = generate(ck.config, ck.weights, ids, max_new_tokens=6, eos_ids=eos_ids(ck),
                    how=Sampling(sample=True, seed=7, temperature=1.3, top_k=30, top_p=0.95))
    with np.load(out) as z:
        np.testing.assert_array_equal(z["ids"], want.ids)


def test_end_of_sequence_ids_come_from_the_generation_config(tmp_path):
    folder = tmp_path / "m"
    shutil.copytree(DATA / "tiny_llama_lm", folder)
    (folder / "generation_config.json").write_text(json.dumps({"eos_token_id": [5, 9]}))
    assert eos_ids(load_checkpoint(folder)) == [5, 9]
    (folder / "generation_config.json").write_text("{broken")
    assert eos_ids(load_checkpoint(folder)) == [2]  # config.json's


@pytest.mark.parametrize("extra, message", [
    (["--top-k", "3"], "add --sample"),
    (["--sample", "--top-p", "2"], "top-p"),
    (["--sample", "--temperature", "0"], "temperature"),
    (["--max-new-tokens", "1000"], "positions"),
])
def test_bad_requests_get_one_line(tmp_path, capsys, extra, message):
    args = ["model", "generate", str(DATA / "tiny_llama_lm"), "--text", "hi", "--npz", str(tmp_path / "x.npz")]
    assert main(args + extra) == 1
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err and err.count("\n") == 1


def test_not_a_decoder_or_no_text(tmp_path, capsys):
    bert = DATA / "tiny_roberta"
    assert main(["model", "generate", str(bert), "--text", "hi", "--npz", str(tmp_path / "x.npz")]) == 1
    assert "decoder LLMs" in capsys.readouterr().err
    assert main(["model", "generate", str(DATA / "tiny_llama_lm"), "--text", "", "--npz", str(tmp_path / "x.npz")]) == 1
    assert "empty" in capsys.readouterr().err


def test_the_logit_lens_is_written_on_request(tmp_path, capsys):
    from attnviz.checkpoints.generate import logit_lens

    out = tmp_path / "l.npz"
    folder = DATA / "tiny_llama_lm"
    assert main(["model", "generate", str(folder), "--text", "hello", "--max-new-tokens", "3", "--lens", "-2",
                 "--npz", str(out)]) == 0
    ck = load_checkpoint(folder)
    with np.load(out) as z:
        want = logit_lens(ck.config, ck.weights, z["ids"], -2)
        np.testing.assert_array_equal(z["lens_top_ids"], want.top_ids)
        assert z["lens_top_probs"].shape == (3, 10) and int(z["lens_position"]) == len(z["ids"]) - 2
    assert "logit lens at token" in capsys.readouterr().out
    assert main(["model", "generate", str(folder), "--text", "hello", "--lens", "99", "--npz", str(out)]) == 1
    assert "outside" in capsys.readouterr().err


def test_an_encoder_decoder_translates_greedily(tmp_path, capsys):
    from pathlib import Path

    from attnviz.checkpoints.seq2seq_generate import generate_seq2seq

    folder = Path(__file__).resolve().parents[1] / "data" / "tiny_marian"
    out = tmp_path / "t.npz"
    assert main(["model", "generate", str(folder), "--text", "I love you", "--max-new-tokens", "5",
                 "--npz", str(out)]) == 0
    want = generate_seq2seq(load_checkpoint(folder), "I love you", max_new_tokens=5)
    with np.load(out) as z:
        np.testing.assert_array_equal(z["generated"], want.generated)
        for key in ("encoder_ids", "decoder_ids", "cross_attentions", "decoder_attentions", "encoder_attentions"):
            np.testing.assert_array_equal(z[key], getattr(want.attention, key))
        assert z["cross_attentions"].shape[2:] == (len(z["decoder_ids"]), len(z["encoder_ids"]))
    assert main(["model", "generate", str(folder), "--text", "hi", "--sample", "--npz", str(out)]) == 1
    assert "translates greedily" in capsys.readouterr().err
