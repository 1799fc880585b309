"""The head-importance sweep over a corpus on Dask (attnviz.corpus.sweep, ``attnviz-cli model sweep``): the same
per-head means and standard deviations as sweeping each document in one process, whatever the scheduler and
the partitioning; decoder metrics (KL, logit difference) and an encoder's cosine; cancel and Ctrl+C leave no
file; bad requests are one line.

Every cluster here listens on 127.0.0.1 only, and every process a test starts is bounded in time."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from corpus_helpers import DATA, sentences, write_lines

from attnviz.checkpoints import load_checkpoint
from attnviz.checkpoints.intervention_study import sweep
from attnviz.cli import main
from attnviz.corpus.run import CorpusRunError
from attnviz.corpus.sweep import HeadMoments, document_ids, run_sweep

ROOT = Path(__file__).resolve().parents[2]
QWEN = DATA / "tiny_qwen2"
ROBERTA = DATA / "tiny_roberta"


def reference(folder, texts, **kw):
    """(mean, std, documents) of the per-document sweeps, in one process, with numpy's mean and std."""
    ck = load_checkpoint(folder)
    grids = []
    for t in texts:
        if not t.strip():
            continue
        ids = document_ids(ck, t, None)
        grids.append(sweep(ck.config, ck.weights, ids, **kw).grid)
    g = np.stack(grids)  # (docs, L, nh)
    return g.mean(axis=0), g.std(axis=0), len(grids)


def test_moments_merge_like_numpy():
    rng = np.random.default_rng(0)
    grids = rng.standard_normal((7, 2, 3)) * 3 + 1
    m = HeadMoments.of(grids[0])
    for g in grids[1:4]:
        m = m + HeadMoments.of(g)
    rest = HeadMoments.of(grids[4])
    for g in grids[5:]:
        rest = rest + HeadMoments.of(g)
    m = m + rest
    assert m.n == 7
    np.testing.assert_allclose(m.mean, grids.mean(axis=0), atol=1e-13, rtol=0)
    np.testing.assert_allclose(m.std, grids.std(axis=0), atol=1e-13, rtol=0)


def test_threads_sweep_matches_one_process_and_writes_the_table(tmp_path):
    texts = sentences(6, seed=1, longest=8)
    path = write_lines(tmp_path / "docs.txt", texts[:3] + [""] + texts[3:])  # a blank line fails, named
    out = tmp_path / "sweep.parquet"
    seen = []
    res = run_sweep(QWEN, None, path, out, scheduler="threads", workers=2, batch=2, progress=seen.append)
    mean, std, n = reference(QWEN, texts)
    assert res.complete and res.documents == n == 6 and res.total == 7
    assert [f[1] for f in res.failed] == ["docs.txt:4"] and "empty" in res.failed[0][2]
    np.testing.assert_allclose(res.mean, mean, atol=1e-12, rtol=0)
    np.testing.assert_allclose(res.std, std, atol=1e-12, rtol=0)
    assert seen[-1].done == 7 and seen[-1].failed == 1
    t = pq.read_table(out)
    assert t.column_names == ["layer", "head", "mean", "std", "documents", "rank", "output_mean"]
    L, nh = mean.shape
    assert t.num_rows == L * nh
    layer, head = t.column("layer").to_numpy(), t.column("head").to_numpy()
    np.testing.assert_allclose(t.column("mean").to_numpy(), mean[layer, head], atol=1e-12, rtol=0)
    np.testing.assert_allclose(t.column("std").to_numpy(), std[layer, head], atol=1e-12, rtol=0)
    assert set(t.column("documents").to_pylist()) == {6}
    rank = t.column("rank").to_numpy()
    assert sorted(rank.tolist()) == list(range(1, L * nh + 1))
    best = int(np.argmin(rank))
    assert mean[layer[best], head[best]] == mean.max()
    meta = {k.decode(): v.decode() for k, v in t.schema.metadata.items()}
    assert meta["attnviz.metric"] == "kl" and meta["attnviz.mode"] == "zero" and meta["attnviz.failed"] == "1"


@pytest.mark.slow
def test_processes_and_partitioning_give_the_same_numbers(tmp_path):
    texts = sentences(5, seed=2, longest=6)
    path = write_lines(tmp_path / "docs.txt", texts)
    a = run_sweep(QWEN, None, path, None, mode="mean", scheduler="threads", workers=1, batch=5)
    b = run_sweep(QWEN, None, [path], None, mode="mean", scheduler="processes", workers=2, batch=1)
    mean, std, _n = reference(QWEN, texts, mode="mean")
    for r in (a, b):
        np.testing.assert_allclose(r.mean, mean, atol=1e-12, rtol=0)
        np.testing.assert_allclose(r.std, std, atol=1e-12, rtol=0)
    np.testing.assert_allclose(a.mean, b.mean, atol=1e-12, rtol=0)


def test_logit_difference_and_encoder_cosine(tmp_path):
    texts = sentences(3, seed=4, longest=6)
    path = write_lines(tmp_path / "docs.txt", texts)
    res = run_sweep(QWEN, None, path, None, metric="logit_diff", tokens=("#5", "#9"), scheduler="threads", workers=1)
    mean, _std, _n = reference(QWEN, texts, metric="logit_diff", tokens=(5, 9))
    np.testing.assert_allclose(res.mean, mean, atol=1e-12, rtol=0)
    assert res.metric == "logit_diff"
    enc = run_sweep(ROBERTA, None, path, None, scheduler="threads", workers=1)
    mean, std, _n = reference(ROBERTA, texts, metric="cosine")
    assert enc.metric == "cosine" and (enc.mean > 0).all()
    np.testing.assert_allclose(enc.mean, mean, atol=1e-12, rtol=0)
    np.testing.assert_allclose(enc.std, std, atol=1e-12, rtol=0)


def test_cancel_returns_a_partial_result_and_writes_nothing(tmp_path):
    path = write_lines(tmp_path / "docs.txt", sentences(12, seed=5, longest=6))
    out = tmp_path / "sweep.parquet"
    seen = []
    res = run_sweep(QWEN, None, path, out, scheduler="threads", workers=1, batch=1, progress=seen.append,
                    cancelled=lambda: len(seen) >= 2)
    assert not res.complete and 2 <= res.documents < 12 and np.isfinite(res.mean).all()
    assert not out.exists() and list(tmp_path.iterdir()) == [path]


@pytest.mark.parametrize("args, message", [
    (["--metric", "cosine"], "is measured by kl or logit_diff"),
    (["--metric", "logit_diff"], "needs two tokens"),
    (["--metric", "logit_diff", "--tokens", "#5", "#999999"], "out of range"),
    (["--tokens", "#5", "#6"], "--tokens is for --metric logit_diff"),
    (["--workers", "0"], "--workers must be at least 1"),
    (["--batch", "0"], "--batch must be 1 to"),
])
def test_bad_requests_are_one_line(tmp_path, capsys, args, message):
    path = write_lines(tmp_path / "docs.txt", ["a b c"])
    out = tmp_path / "s.parquet"
    assert main(["model", "sweep", str(QWEN), str(path), "--out", str(out), "--scheduler", "threads", *args]) != 0
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert not out.exists()


def test_models_and_corpora_that_cannot_be_swept(tmp_path, capsys):
    path = write_lines(tmp_path / "docs.txt", ["a b c"])
    assert main(["model", "sweep", str(DATA / "tiny_vit"), str(path), "--out", str(tmp_path / "s.parquet")]) != 0
    assert "image model" in capsys.readouterr().err
    assert main(["model", "sweep", str(QWEN), str(tmp_path / "missing.txt"), "--out", str(tmp_path / "s.parquet")]) != 0
    assert "corpus not found" in capsys.readouterr().err
    assert main(["model", "sweep", str(QWEN), str(path), "--out", str(tmp_path)]) != 0
    assert "it is a directory" in capsys.readouterr().err
    with pytest.raises(CorpusRunError, match="give at least one corpus"):
        run_sweep(QWEN, None, [], None)


def test_cli_prints_the_ranking(tmp_path, capsys):
    path = write_lines(tmp_path / "docs.txt", sentences(2, seed=6, longest=5))
    out = tmp_path / "s.parquet"
    assert main(["model", "sweep", str(QWEN), str(path), "--out", str(out), "--scheduler", "threads",
                 "--workers", "1", "--mode", "mean"]) == 0
    text = capsys.readouterr().out
    assert "2 of 2 documents swept" in text and "mean-ablated" in text and "most important: " in text
    t = pq.read_table(out)
    top = int(np.argmin(t.column("rank").to_numpy()))
    assert f"{t.column('layer')[top].as_py()}.{t.column('head')[top].as_py()} " in text.split("most important: ")[1]


def _sigint_default() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)  # a test run in the background has SIGINT ignored


@pytest.mark.slow
def test_ctrl_c_stops_in_one_line_and_writes_nothing(tmp_path):
    path = write_lines(tmp_path / "c.txt", sentences(400, seed=7, longest=30))
    out = tmp_path / "out" / "s.parquet"
    log = tmp_path / "stderr.txt"
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    with open(log, "w") as err:
        proc = subprocess.Popen([sys.executable, "-m", "attnviz.cli", "model", "sweep", str(QWEN), str(path),
                                 "--out", str(out), "--scheduler", "threads", "--workers", "1", "--batch", "1"],
                                stdout=subprocess.DEVNULL, stderr=err, env=env, cwd=ROOT, start_new_session=True,
                                preexec_fn=_sigint_default)
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
    assert not out.exists() and (not out.parent.exists() or list(out.parent.iterdir()) == [])


def test_the_sweep_collects_each_heads_mean_output_for_mean_ablation(tmp_path, capsys):
    from attnviz.checkpoints.interventions import Edit, run
    from attnviz.corpus.sweep import read_sweep

    texts = sentences(4, seed=8, longest=7)
    path = write_lines(tmp_path / "docs.txt", texts)
    out = tmp_path / "sweep.parquet"
    res = run_sweep(QWEN, None, path, out, scheduler="threads", workers=2, batch=1)
    ck = load_checkpoint(QWEN)
    c, w = ck.config, ck.weights
    outs = []  # every position's head outputs, (T, L, nh, hd) per document, recorded in one process
    for t in texts:
        rec = {}
        run(c, w, document_ids(ck, t, None), Edit(record=rec))
        outs.append(np.stack([rec[i] for i in range(c.n_layer)]).transpose(2, 0, 1, 3).astype(np.float64))
    ref = np.concatenate(outs).mean(axis=0)  # (L, nh, hd) over every position of every document
    np.testing.assert_allclose(res.head_means, ref, atol=1e-12, rtol=0)
    back = read_sweep(out)
    np.testing.assert_array_equal(back.head_means, res.head_means)
    np.testing.assert_array_equal(back.mean, res.mean)
    assert back.documents == 4 and back.rank.min() == 1
    # model ablate --means: the heads set to the corpus means, not to this text's own
    npz = tmp_path / "a.npz"
    text = "the bank"
    assert main(["model", "ablate", str(QWEN), "--text", text, "--heads", "0.1,1.0", "--mode", "mean",
                 "--means", str(out), "--npz", str(npz)]) == 0
    assert "set to their means over" in capsys.readouterr().out
    ids = document_ids(ck, text, None)
    want = run(c, w, ids, Edit(ablate={(0, 1): ref[0, 1], (1, 0): ref[1, 0]})).logits
    own = run(c, w, ids, Edit(ablate={(0, 1): "mean", (1, 0): "mean"})).logits
    got = np.load(npz)["logits_after"]
    np.testing.assert_allclose(got, want, atol=1e-9, rtol=0)
    assert np.abs(got - own).max() > 1e-4
    # a sweep with the corpus means: every head set to them, one at a time
    again = run_sweep(QWEN, None, path, None, mode="mean", means=back.head_means, scheduler="threads", workers=1)
    before = run(c, w, document_ids(ck, texts[0], None))
    after = run(c, w, document_ids(ck, texts[0], None), Edit(ablate={(1, 1): ref[1, 1]}))
    one = intervention_kl(before, after)
    single = run_sweep(QWEN, None, write_lines(tmp_path / "one.txt", texts[:1]), None, mode="mean",
                       means=back.head_means, scheduler="threads", workers=1)
    assert single.mean[1, 1] == pytest.approx(one, abs=1e-12)
    assert np.abs(again.mean - res.mean).max() > 0


def intervention_kl(before, after) -> float:
    from attnviz.checkpoints.interventions import kl_divergence

    return kl_divergence(before.logits, after.logits)


@pytest.mark.parametrize("args, message", [
    (["--mode", "zero"], "use it with --mode mean"),
    (["--mode", "mean", "--means", "missing.parquet"], "sweep file not found"),
])
def test_bad_means_are_one_line(tmp_path, capsys, args, message):
    args = [a if a != "missing.parquet" else str(tmp_path / a) for a in args]
    if "--means" not in args:
        args += ["--means", str(tmp_path / "x.parquet")]
    assert main(["model", "ablate", str(QWEN), "--text", "the bank", "--heads", "0.1", *args,
                 "--npz", str(tmp_path / "a.npz")]) != 0
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1, err


def test_means_of_another_model_are_refused(tmp_path, capsys):
    path = write_lines(tmp_path / "docs.txt", ["the bank"])
    out = tmp_path / "enc.parquet"
    run_sweep(ROBERTA, None, path, out, scheduler="threads", workers=1)
    assert main(["model", "ablate", str(QWEN), "--text", "the bank", "--heads", "0.1", "--mode", "mean",
                 "--means", str(out), "--npz", str(tmp_path / "a.npz")]) != 0
    err = capsys.readouterr().err
    assert "they come from another model" in err and len(err.strip().splitlines()) == 1, err
    (tmp_path / "bad.parquet").write_text("not parquet")
    assert main(["model", "sweep", str(QWEN), str(path), "--mode", "mean", "--means", str(tmp_path / "bad.parquet"),
                 "--out", str(tmp_path / "s.parquet"), "--scheduler", "threads"]) != 0
    assert "not a readable Parquet file" in capsys.readouterr().err
