"""The corpus's stacked BERT pass (attnviz/corpus/batched.py) and the local workers' memory settings.

The stacked float32 pass must give every document the statistics of its own float64 reference pass
(within 1e-6 of the value), padding or not; a document that fails in a group fails alone; worker
processes start with the malloc settings the corpus chooses, whatever the driver's environment says."""

from __future__ import annotations

import os

import numpy as np
import pytest
from corpus_helpers import sentences

from attnviz.checkpoints import load_checkpoint, run_text
from attnviz.checkpoints.layers import _gelu_erf
from attnviz.corpus import batched
from attnviz.corpus.batched import batchable, group_sums, length_groups
from attnviz.corpus.stats import STATISTICS, document_sums
from attnviz.corpus.texts import Document
from attnviz.engine.activations import gelu_erf
from attnviz.corpus.worker import PartitionJob, run_partition

TOL = 1e-6  # of max(1, |value|): float32 forward against the float64 one


@pytest.fixture(scope="module")
def minilm(minilm_folder):
    return load_checkpoint(minilm_folder, name="all-MiniLM-L6-v2")


def _f64_sums(ckpt, text):
    return document_sums(run_text(ckpt, text, dtype=np.float64, kernel="reference").attentions)


def test_stacked_pass_equals_float64_pass_per_document(minilm):
    assert batchable(minilm)
    texts = sentences(12, seed=3, longest=30) + ["A."]  # lengths 4 .. 32 tokens: padded groups
    ids = [minilm.tokenizer.encode(t, add_special_tokens=True).ids for t in texts]
    got = group_sums(minilm, ids)  # one group, padded to the longest
    assert len({len(x) for x in ids}) > 3
    for text, s in zip(texts, got):
        ref = _f64_sums(minilm, text)
        assert (s.rows, s.prev_rows, s.documents) == (ref.rows, ref.prev_rows, 1)
        m, r = s.means(), ref.means()
        for k in STATISTICS:
            np.testing.assert_allclose(m[k], r[k], rtol=TOL, atol=TOL, err_msg=f"{k}: {text!r}")


def test_partition_through_groups_equals_float64_totals(minilm, minilm_folder):
    texts = sentences(40, seed=5, longest=25)
    docs = [Document(i, f"line {i}", t) for i, t in enumerate(texts)]
    res = run_partition(PartitionJob(0, str(minilm_folder), "all-MiniLM-L6-v2", docs))
    assert res.failed == [] and res.sums.documents == len(texts)
    ref = _f64_sums(minilm, texts[0])
    for t in texts[1:]:
        ref = ref + _f64_sums(minilm, t)
    assert res.sums.rows == ref.rows
    for k in STATISTICS:
        np.testing.assert_allclose(res.sums.means()[k], ref.means()[k], rtol=TOL, atol=TOL, err_msg=k)


def test_a_failing_document_fails_alone_in_its_group(minilm, minilm_folder, monkeypatch):
    texts = sentences(6, seed=1)
    docs = [Document(i, f"line {i}", t) for i, t in enumerate(texts)]
    docs[2] = Document(2, "line 2", "   ")  # fails before any pass
    real = batched.group_sums

    def refuse_groups(ckpt, ids, kernel="auto"):  # every stacked pass fails: each document runs alone
        raise MemoryError("no room")

    monkeypatch.setattr("attnviz.corpus.worker.group_sums", refuse_groups)
    alone = run_partition(PartitionJob(0, str(minilm_folder), "all-MiniLM-L6-v2", docs))
    monkeypatch.setattr("attnviz.corpus.worker.group_sums", real)
    stacked = run_partition(PartitionJob(0, str(minilm_folder), "all-MiniLM-L6-v2", docs))
    for res in (alone, stacked):
        assert res.failed == [(2, "line 2", "empty document")] and res.sums.documents == 5
    for k in STATISTICS:
        np.testing.assert_allclose(alone.sums.means()[k], stacked.sums.means()[k], rtol=TOL, atol=TOL)


def test_length_groups_bound_the_padding():
    lengths = [5, 40, 6, 7, 39, 12, 100, 13, 5, 41]
    groups = length_groups(lengths)
    assert sorted(i for g in groups for i in g) == list(range(len(lengths)))
    for g in groups:
        T = max(lengths[i] for i in g)
        real = sum(lengths[i] ** 2 for i in g)
        assert len(g) * T * T <= (1 + batched.MAX_PAD) * real or len(g) == 1
    assert [lengths[i] for i in groups[-1]] == [100]  # the long one alone
    assert len(length_groups([20] * 100)[0]) == batched.MAX_GROUP


def test_gelu_erf_is_as_close_as_float32_erf():
    x = (np.random.default_rng(0).standard_normal(200_000) * 4).astype(np.float32)
    x[:4] = (0.0, -0.0, 30.0, -30.0)
    exact = _gelu_erf(x.astype(np.float64))
    got = gelu_erf(x)
    assert got.dtype == np.float32
    assert np.abs(got - exact).max() <= max(5e-7, np.abs(_gelu_erf(x) - exact).max())
    assert np.all(got[:4] == np.float32([0.0, 0.0, 30.0, -0.0]))


@pytest.mark.slow
def test_local_workers_get_the_chosen_malloc_settings(monkeypatch):
    from attnviz.corpus.run import WORKER_MALLOC, open_client

    monkeypatch.setenv("MALLOC_TRIM_THRESHOLD_", "65536")  # what an outer nanny would have left here
    monkeypatch.delenv("MALLOC_MMAP_THRESHOLD_", raising=False)
    with open_client("processes", 1) as client:
        seen = client.run(lambda: {k: os.environ.get(k) for k in WORKER_MALLOC})
        pids = client.run(os.getpid)
    assert list(pids.values()) != [os.getpid()]  # a process of its own
    assert list(seen.values()) == [WORKER_MALLOC]
    assert os.environ["MALLOC_TRIM_THRESHOLD_"] == "65536"  # this process's environment restored
    assert "MALLOC_MMAP_THRESHOLD_" not in os.environ


def test_the_default_partition_size_fills_stacked_passes_and_every_worker():
    from attnviz.corpus.run import MAX_AUTO_BATCH, MIN_AUTO_BATCH, auto_batch

    assert auto_batch(2_000, 2) == MAX_AUTO_BATCH == 128  # a large corpus: the largest partitions
    assert auto_batch(200, 2) == 25  # four partitions per worker thread
    assert auto_batch(10, 4) == MIN_AUTO_BATCH == 16  # a small one: never below 16
    assert auto_batch(0, 0) == MIN_AUTO_BATCH
    for total in (1, 65, 513, 4_097, 10**6):
        for threads in (1, 2, 3, 8):
            b = auto_batch(total, threads)
            assert MIN_AUTO_BATCH <= b <= MAX_AUTO_BATCH
            if MIN_AUTO_BATCH < b < MAX_AUTO_BATCH:  # then every worker thread gets at least four partitions
                assert -(-total // b) >= 4 * threads


def test_a_worker_is_prepared_once_before_its_first_partition(minilm_folder):
    """run_corpus has every worker load the model and run its pass once before the clock starts; the partitions
    then find the model loaded (one load per process) and the same answer as without the preparation."""
    from attnviz.corpus import worker

    before = worker.load_count()
    assert worker.prepare(str(minilm_folder), None) == os.getpid()
    loaded = worker.load_count()
    assert loaded - before <= 1
    ckpt = worker.cached_checkpoint(str(minilm_folder), None)
    assert worker.prepare(str(minilm_folder), None) == os.getpid() and worker.load_count() == loaded
    docs = [Document(index=i, name=f"d{i}", text=t) for i, t in enumerate(["The river bank.", "A bank loan."])]
    got = worker.run_partition(worker.PartitionJob(index=0, folder=str(minilm_folder), name=None, documents=docs))
    assert worker.load_count() == loaded and not got.failed and got.sums.documents == 2
    assert worker.cached_checkpoint(str(minilm_folder), None) is ckpt


@pytest.mark.parametrize("fault", ["unavailable", "other"])
def test_a_worker_that_cannot_be_prepared_is_one_line(minilm_folder, tmp_path, monkeypatch, fault):
    from attnviz.corpus import run as corpus_run
    from attnviz.corpus.worker import ModelUnavailable

    def broken(*_args):
        if fault == "unavailable":
            raise ModelUnavailable("/models/minilm: no such folder on this worker")
        raise ModuleNotFoundError("No module named 'attnviz'")

    monkeypatch.setattr(corpus_run, "prepare", broken)
    texts = tmp_path / "c.txt"
    texts.write_text("The river bank.\nA bank loan.\n", encoding="utf-8")
    out = tmp_path / "stats.parquet"
    with pytest.raises(corpus_run.CorpusRunError) as err:
        corpus_run.run_corpus(minilm_folder, None, texts, out, scheduler="threads", workers=1)
    text = str(err.value)
    assert "\n" not in text and not out.exists()
    assert ("could not load the model" in text) if fault == "unavailable" else ("No module named 'attnviz'" in text)
