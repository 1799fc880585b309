"""The corpus head sweep on GPT-2 (GPT2LMHeadModel, tests/data/checkpoints/tiny_gpt2), as on the Llama-style
decoders: the KL and logit-difference metrics equal sweeping each document in one process and averaging; the
documents are tokenised as the Pretrained panel tokenises them; the per-head output means feed
``model ablate --means``, whose logits are transformers' with those means put in (the GPT-2 golden of
tools/make_intervention_goldens.py); cancel leaves no file."""

from __future__ import annotations

import numpy as np
import pyarrow.parquet as pq
import pytest
from corpus_helpers import TINY_GPT2, sentences, write_lines

from attnviz.checkpoints import load_checkpoint
from attnviz.checkpoints.intervention_study import sweep
from attnviz.checkpoints.interventions import Edit, kl_divergence, run
from attnviz.checkpoints.run import run_text
from attnviz.cli import main
from attnviz.corpus.files import AtomicParquet
from attnviz.corpus.sweep import CorpusSweep, document_ids, read_sweep, run_sweep, sweep_columns, sweep_schema

TEXTS = ["The river bank was steep.", "Heads look back at it."]  # within tiny_gpt2's 32 positions


def reference(texts, **kw):
    """(mean, std) over the documents of intervention_study.sweep run on each, and the heads' mean output."""
    ck = load_checkpoint(TINY_GPT2)
    c, w = ck.config, ck.weights
    grids, outs = [], []
    for t in texts:
        ids = document_ids(ck, t, None)
        rec: dict = {}
        grids.append(sweep(c, w, ids, record=rec, **kw).grid)
        outs.append(np.stack([rec[i] for i in range(c.n_layer)]).transpose(2, 0, 1, 3).astype(np.float64))
    g = np.stack(grids)
    return g.mean(axis=0), g.std(axis=0), np.concatenate(outs).mean(axis=0)  # (L, nh, hd) over every position


def test_document_ids_are_what_the_pretrained_panel_reads():
    ck = load_checkpoint(TINY_GPT2)
    for t in TEXTS:
        np.testing.assert_array_equal(document_ids(ck, t, None), run_text(ck, t).ids)


def test_kl_sweep_on_gpt2_equals_the_per_document_sweeps(tmp_path):
    path = write_lines(tmp_path / "docs.txt", TEXTS)
    out = tmp_path / "sweep.parquet"
    seen = []
    res = run_sweep(TINY_GPT2, None, path, out, scheduler="threads", workers=2, batch=1, progress=seen.append)
    mean, std, outs = reference(TEXTS)
    assert res.complete and res.documents == 2 and res.metric == "kl" and not res.failed
    assert (res.mean > 0).all()  # every head of the random model moves the prediction
    np.testing.assert_allclose(res.mean, mean, atol=1e-9, rtol=0)
    np.testing.assert_allclose(res.std, std, atol=1e-9, rtol=0)
    np.testing.assert_allclose(res.head_means, outs, atol=1e-9, rtol=0)
    assert seen[-1].done == 2 and seen[-1].total == 2
    back = read_sweep(out)
    assert back.head_means.shape == (2, 2, 8) and back.metadata["metric"] == "kl"
    np.testing.assert_array_equal(back.mean, res.mean)
    assert pq.read_table(out).num_rows == 4


def test_logit_difference_and_mean_ablation_on_gpt2(tmp_path):
    path = write_lines(tmp_path / "docs.txt", TEXTS)
    res = run_sweep(TINY_GPT2, None, path, None, metric="logit_diff", tokens=("#5", "#9"), mode="mean",
                    scheduler="threads", workers=1, batch=2)
    mean, std, _outs = reference(TEXTS, metric="logit_diff", tokens=(5, 9), mode="mean")
    assert res.metric == "logit_diff" and res.mode == "mean" and np.abs(res.mean).max() > 1e-6
    np.testing.assert_allclose(res.mean, mean, atol=1e-9, rtol=0)
    np.testing.assert_allclose(res.std, std, atol=1e-9, rtol=0)


def test_the_means_file_feeds_model_ablate_on_gpt2(tmp_path, capsys):
    path = write_lines(tmp_path / "docs.txt", TEXTS)
    out = tmp_path / "sweep.parquet"
    assert main(["model", "sweep", str(TINY_GPT2), str(path), "--out", str(out), "--scheduler", "threads",
                 "--workers", "1"]) == 0
    assert "2 of 2 documents swept" in capsys.readouterr().out
    means = read_sweep(out).head_means
    npz = tmp_path / "a.npz"
    text = "the bank was steep"
    assert main(["model", "ablate", str(TINY_GPT2), "--text", text, "--heads", "0.1,1.0", "--mode", "mean",
                 "--means", str(out), "--npz", str(npz)]) == 0
    assert "set to their means over" in capsys.readouterr().out
    ck = load_checkpoint(TINY_GPT2)
    ids = document_ids(ck, text, None)
    want = run(ck.config, ck.weights, ids, Edit(ablate={(0, 1): means[0, 1], (1, 0): means[1, 0]})).logits
    own = run(ck.config, ck.weights, ids, Edit(ablate={(0, 1): "mean", (1, 0): "mean"})).logits
    got = np.load(npz)["logits_after"]
    np.testing.assert_allclose(got, want, atol=1e-9, rtol=0)
    assert np.abs(got - own).max() > 1e-4  # the corpus's means, not this text's own
    # a sweep with those means: the head set to them, its KL as one pass with them gives
    single = run_sweep(TINY_GPT2, None, write_lines(tmp_path / "one.txt", TEXTS[:1]), None, mode="mean",
                       means=means, scheduler="threads", workers=1)
    d = document_ids(ck, TEXTS[0], None)
    one = kl_divergence(run(ck.config, ck.weights, d).logits,
                        run(ck.config, ck.weights, d, Edit(ablate={(1, 1): means[1, 1]})).logits)
    assert single.mean[1, 1] == pytest.approx(one, abs=1e-12)


def test_a_means_file_gives_transformers_logits_on_gpt2(tmp_path):
    """A sweep file holding the golden's given means: ``model ablate --means`` matches transformers' GPT-2 with
    those means put in by a forward pre-hook on ``attn.c_proj``."""
    g = np.load(TINY_GPT2 / "golden_interventions.npz")
    means = g["means"]  # (L, nh, hd)
    L, nh = means.shape[:2]
    res = CorpusSweep(mean=np.zeros((L, nh)), std=np.zeros((L, nh)), documents=1, total=1, metric="kl",
                      mode="zero", complete=True, head_means=means, positions=1)
    out = tmp_path / "given.parquet"
    f = AtomicParquet(out, sweep_schema({"model": "tiny_gpt2"}))
    f.write(sweep_columns(res))
    f.commit()
    ck = load_checkpoint(TINY_GPT2)
    text = "!%)#'+$("  # the golden's clean ids, one byte each
    np.testing.assert_array_equal(document_ids(ck, text, None), g["clean_ids"])
    npz = tmp_path / "a.npz"
    heads = ",".join(f"{a}.{b}" for a, b in g["ablate"])
    assert main(["model", "ablate", str(TINY_GPT2), "--text", text, "--heads", heads, "--mode", "mean",
                 "--means", str(out), "--npz", str(npz)]) == 0
    got = np.load(npz)
    np.testing.assert_allclose(got["logits_after"], g["means_logits"], atol=1e-5, rtol=0)
    np.testing.assert_allclose(got["logits_before"], g["plain"], atol=1e-5, rtol=0)
    assert np.abs(g["means_logits"] - g["plain"]).max() > 1e-3


def test_cancel_on_gpt2_writes_nothing(tmp_path):
    path = write_lines(tmp_path / "docs.txt", sentences(8, seed=3, longest=5))
    out = tmp_path / "s.parquet"
    seen = []
    res = run_sweep(TINY_GPT2, None, path, out, scheduler="threads", workers=1, batch=1, progress=seen.append,
                    cancelled=lambda: len(seen) >= 2)
    assert not res.complete and 2 <= res.documents < 8 and np.isfinite(res.mean).all()
    assert not out.exists()


def test_cosine_is_refused_on_gpt2_in_one_line(tmp_path, capsys):
    path = write_lines(tmp_path / "docs.txt", ["a b c"])
    out = tmp_path / "s.parquet"
    assert main(["model", "sweep", str(TINY_GPT2), str(path), "--out", str(out), "--scheduler", "threads",
                 "--metric", "cosine"]) != 0
    err = capsys.readouterr().err
    assert "is measured by kl or logit_diff" in err and len(err.strip().splitlines()) == 1, err
    assert not out.exists()


@pytest.mark.slow
def test_ctrl_c_stops_a_gpt2_sweep_in_one_line(tmp_path):
    import os
    import signal
    import subprocess
    import sys
    import time
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    path = write_lines(tmp_path / "c.txt", sentences(20000, seed=7, longest=5))
    out = tmp_path / "s.parquet"
    log = tmp_path / "stderr.txt"
    with open(log, "w") as err:
        proc = subprocess.Popen([sys.executable, "-m", "attnviz.cli", "model", "sweep", str(TINY_GPT2), str(path),
                                 "--out", str(out), "--scheduler", "threads", "--workers", "1", "--batch", "1"],
                                stdout=subprocess.DEVNULL, stderr=err, env=dict(os.environ, PYTHONPATH=str(root)),
                                cwd=root, start_new_session=True,
                                preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        deadline = time.monotonic() + 120
        while "documents" not in log.read_text():  # the first progress line
            assert proc.poll() is None, log.read_text()
            assert time.monotonic() < deadline, "no progress within 120 s"
            time.sleep(0.2)
        os.killpg(proc.pid, signal.SIGINT)
        assert proc.wait(timeout=60) == 130
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=15)
    text = log.read_text()
    lines = [ln for ln in text.splitlines() if "interrupted" in ln]
    assert len(lines) == 1 and "nothing written to" in lines[0] and "Traceback" not in text, text
    assert not out.exists()
