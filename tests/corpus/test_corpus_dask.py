"""The corpus run on real Dask clusters: the same numbers as one process, whatever the scheduler and
the partitioning; a checkpoint loaded once per worker; failed documents named; Ctrl+C leaves nothing.

Every cluster here listens on 127.0.0.1 only, and every process a test starts is bounded in time and
stopped by the test."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import psutil
import pyarrow.parquet as pq
import pytest
from corpus_helpers import STATS, TINY_GPT2, reference_stats, sentences, write_lines

from attnviz.cli import main
from attnviz.corpus import read_stats
from attnviz.corpus.run import run_corpus
from attnviz.corpus.worker import load_count

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
# the corpus stacks documents of similar length (attnviz/corpus/batched.py): float32 rounding ~5e-8 from the
# one-document passes of the reference (tests/corpus/test_corpus_batched.py holds both to the float64 pass)
TOL = 1e-6


def _env() -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return env


def _cli(*args, timeout=120, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "attnviz.cli", "corpus", *map(str, args)], capture_output=True,
                          text=True, timeout=timeout, env=_env(), cwd=ROOT, **kw)


def _assert_matches(path, ref):
    means, rows, documents = ref
    st = read_stats(path)
    assert (st.rows, st.documents) == (rows, documents)
    for k in STATS:
        np.testing.assert_allclose(st.values[k], means[k], rtol=0, atol=TOL, err_msg=k)


def _sigint_default() -> None:
    """In the child before exec: SIGINT back to its default. A test run started in the background (a
    shell's `&`) has SIGINT ignored, every process it starts inherits that, and Python then installs no
    Ctrl+C handler: the command would never see the test's Ctrl+C."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _stop(procs) -> None:
    for p in procs:
        if p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
    for p in procs:
        try:
            p.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait(timeout=15)


@pytest.fixture(scope="module")
def minilm_corpus(tmp_path_factory, minilm_folder):
    texts = sentences(23, seed=3)
    path = write_lines(tmp_path_factory.mktemp("corpus") / "docs.txt", texts)
    return path, reference_stats(minilm_folder, texts, name="all-MiniLM-L6-v2"), texts


def test_local_process_cluster_equals_single_process(minilm_folder, minilm_corpus, tmp_path):
    from distributed import Client, LocalCluster

    path, ref, texts = minilm_corpus
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                      dashboard_address="127.0.0.1:0") as cluster, Client(cluster) as client:
        out, per_doc = tmp_path / "stats.parquet", tmp_path / "docs.parquet"
        res = run_corpus(minilm_folder, "all-MiniLM-L6-v2", path, out, scheduler=cluster.scheduler_address,
                         batch=3, per_document=per_doc)
        run_corpus(minilm_folder, "all-MiniLM-L6-v2", path, tmp_path / "again.parquet",
                   scheduler=cluster.scheduler_address, batch=5)
        loads = client.run(load_count)  # worker address -> checkpoints loaded there
    assert res.sums.documents == len(texts) and res.failed == [] and res.workers == 2
    assert sorted(loads.values()) == [1, 1], loads  # once per worker, not once per document or partition
    _assert_matches(out, ref)
    _assert_matches(tmp_path / "again.parquet", ref)
    table = pq.read_table(per_doc)
    assert table.num_rows == len(texts) * 6 * 12
    assert table.column("index").to_pylist()[:: 72] == list(range(len(texts)))  # corpus order
    first, _r, _d = reference_stats(minilm_folder, texts[:1])
    rows0 = table.slice(0, 72)
    for k in STATS:
        np.testing.assert_allclose(np.asarray(rows0.column(k)).reshape(6, 12), first[k], rtol=0, atol=TOL)


@pytest.mark.parametrize("scheduler,workers,batch", [("threads", 2, 1), ("processes", 2, 23), ("processes", 1, 4)])
def test_cli_local_schedulers_equal_single_process(minilm_corpus, tmp_path, scheduler, workers, batch):
    path, ref, texts = minilm_corpus
    out = tmp_path / "stats.parquet"
    r = _cli("all-MiniLM-L6-v2", path, "--out", out, "--scheduler", scheduler, "--workers", workers,
             "--batch", batch)
    assert r.returncode == 0, r.stderr
    assert f"{len(texts)} of {len(texts)} documents ran" in r.stdout
    assert f"{len(texts)}/{len(texts)} documents" in r.stderr  # the progress bar's last line
    _assert_matches(out, ref)


def test_external_scheduler_and_two_workers(minilm_corpus, tmp_path):
    path, ref, texts = minilm_corpus
    sched_file = tmp_path / "scheduler.json"
    common = dict(env=_env(), cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                  start_new_session=True)
    procs = [subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", "127.0.0.1",
                               "--port", "0", "--no-dashboard", "--scheduler-file", str(sched_file)], **common)]
    try:
        deadline = time.monotonic() + 60
        while not sched_file.exists() or not sched_file.read_text().strip().endswith("}"):
            assert procs[0].poll() is None, "dask scheduler exited"
            assert time.monotonic() < deadline, "dask scheduler did not start within 60 s"
            time.sleep(0.2)
        import json

        address = json.loads(sched_file.read_text())["address"]
        r = _cli(TINY_GPT2, path, "--out", tmp_path / "none.parquet", "--scheduler", address, timeout=60)
        assert r.returncode == 1 and f"the Dask scheduler at {address} has no workers" in r.stderr, r.stderr
        for _ in range(2):
            procs.append(subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_worker", "--nthreads", "1",
                                           "--host", "127.0.0.1", "--no-dashboard", "--scheduler-file",
                                           str(sched_file)], **common))
        from distributed import Client

        with Client(address, timeout=30) as client:
            client.wait_for_workers(2, timeout=60)
        out = tmp_path / "stats.parquet"
        r = _cli("all-MiniLM-L6-v2", path, "--out", out, "--scheduler", address, "--batch", 4,
                 "--per-document", tmp_path / "docs.parquet")
        assert r.returncode == 0, r.stderr
        assert "on 2 worker thread(s)" in r.stdout
        _assert_matches(out, ref)
        assert pq.read_table(tmp_path / "docs.parquet").num_rows == len(texts) * 72
    finally:
        _stop(procs)


def test_failed_documents_are_named_and_the_rest_counted(tmp_path):
    good = ["the river bank", "a steep bank after the rain", "the"]
    long_line = " ".join(["bank"] * 40)  # over tiny_gpt2's 32 positions
    path = write_lines(tmp_path / "c.txt", [good[0], "", long_line, good[1], "   ", good[2]])
    out = tmp_path / "stats.parquet"
    r = _cli(TINY_GPT2, path, "--out", out, "--scheduler", "threads", "--workers", 2, "--batch", 2)
    assert r.returncode == 1
    assert "3 of 6 documents ran" in r.stdout
    assert "3 document(s) failed:" in r.stderr
    assert "c.txt:2: empty document" in r.stderr and "c.txt:5: empty document" in r.stderr
    assert re.search(r"c\.txt:3: tiny_gpt2: text gives \d+ tokens, more than the limit of 32", r.stderr)
    assert "Traceback" not in r.stderr
    _assert_matches(out, reference_stats(TINY_GPT2, good))
    assert read_stats(out).metadata["failed"] == "3"


def test_max_tokens_fails_longer_documents(tmp_path):
    path = write_lines(tmp_path / "c.txt", ["the river bank", "the river bank was steep"])
    out = tmp_path / "stats.parquet"
    assert main(["corpus", str(TINY_GPT2), str(path), "--out", str(out), "--scheduler", "threads",
                 "--max-tokens", "4"]) == 1
    _assert_matches(out, reference_stats(TINY_GPT2, ["the river bank"]))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_bad_inputs_give_one_clear_line(tmp_path, capsys):
    def run(*args):
        rc = main(["corpus", *map(str, args)])
        err = capsys.readouterr().err
        assert rc == 1 and "Traceback" not in err
        return err

    out = tmp_path / "s.parquet"
    assert f"corpus not found: {tmp_path / 'nope.txt'}" in run(TINY_GPT2, tmp_path / "nope.txt", "--out", out)
    (tmp_path / "empty.txt").write_text("")
    assert "holds no documents" in run(TINY_GPT2, tmp_path / "empty.txt", "--out", out)
    write_lines(tmp_path / "c.txt", ["the river"])
    assert "checkpoint folder not found" in run(tmp_path / "no_model", tmp_path / "c.txt", "--out", out)
    assert "--max-tokens 99 is outside 1..32, the limit of tiny_gpt2" in run(
        TINY_GPT2, tmp_path / "c.txt", "--out", out, "--max-tokens", 99)
    assert "give threads, processes or a scheduler address" in run(
        TINY_GPT2, tmp_path / "c.txt", "--out", out, "--scheduler", "mpi")
    assert "--workers must be at least 1 (got 0)" in run(TINY_GPT2, tmp_path / "c.txt", "--out", out, "--workers", 0)
    assert "--workers sizes a local cluster" in run(
        TINY_GPT2, tmp_path / "c.txt", "--out", out, "--scheduler", "tcp://127.0.0.1:1", "--workers", 2)
    assert "is the --out file" in run(TINY_GPT2, tmp_path / "c.txt", "--out", out, "--per-document", out)
    assert "--batch must be at least 1" in run(TINY_GPT2, tmp_path / "c.txt", "--out", out, "--batch", 0)
    write_lines(tmp_path / "blank.txt", ["", " "])
    err = run(TINY_GPT2, tmp_path / "blank.txt", "--out", out, "--scheduler", "threads")
    assert "no document of" in err and "2 failed; first blank.txt:1: empty document" in err
    assert not out.exists() and list(tmp_path.glob(".*part")) == []


def test_scheduler_that_is_not_there(tmp_path):
    path = write_lines(tmp_path / "c.txt", ["the river"])
    address = f"tcp://127.0.0.1:{_free_port()}"
    r = _cli(TINY_GPT2, path, "--out", tmp_path / "s.parquet", "--scheduler", address, timeout=60)
    assert r.returncode == 1
    assert f"error: no Dask scheduler answers at {address}" in r.stderr
    assert "Traceback" not in r.stderr and not (tmp_path / "s.parquet").exists()


def test_ctrl_c_stops_cleanly_and_writes_nothing(minilm_folder, tmp_path):
    path = write_lines(tmp_path / "c.txt", sentences(3000, seed=5, longest=40))
    outdir = tmp_path / "out"
    log = tmp_path / "stderr.txt"
    with open(log, "w") as err:
        proc = subprocess.Popen([sys.executable, "-m", "attnviz.cli", "corpus", "all-MiniLM-L6-v2", str(path),
                                 "--out", str(outdir / "s.parquet"), "--per-document", str(outdir / "d.parquet"),
                                 "--workers", "2", "--batch", "2"], stdout=subprocess.DEVNULL, stderr=err,
                                env=_env(), cwd=ROOT, start_new_session=True, preexec_fn=_sigint_default)
    try:
        deadline = time.monotonic() + 120
        while "documents" not in log.read_text():  # the first progress line: partitions are done
            assert proc.poll() is None, log.read_text()
            assert time.monotonic() < deadline, "no progress within 120 s"
            time.sleep(0.2)
        children = psutil.Process(proc.pid).children(recursive=True)
        assert children  # the local cluster's worker processes
        os.killpg(proc.pid, signal.SIGINT)  # as a terminal's Ctrl+C: the whole process group
        assert proc.wait(timeout=60) == 130
    finally:
        _stop([proc])
    text = log.read_text()
    assert "interrupted: nothing written" in text and "Traceback" not in text, text
    _gone, alive = psutil.wait_procs(children, timeout=20)
    assert alive == []
    assert not outdir.exists() or list(outdir.iterdir()) == []


def test_sigterm_stops_a_threads_run_cleanly(minilm_folder, tmp_path):
    path = write_lines(tmp_path / "c.txt", sentences(3000, seed=6, longest=40))
    out = tmp_path / "out" / "s.parquet"
    log = tmp_path / "stderr.txt"
    with open(log, "w") as err:
        proc = subprocess.Popen([sys.executable, "-m", "attnviz.cli", "corpus", "all-MiniLM-L6-v2", str(path),
                                 "--out", str(out), "--per-document", str(out.with_name("d.parquet")),
                                 "--scheduler", "threads", "--workers", "2", "--batch", "2"],
                                stdout=subprocess.DEVNULL, stderr=err, env=_env(), cwd=ROOT, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while "documents" not in log.read_text():
            assert proc.poll() is None, log.read_text()
            assert time.monotonic() < deadline, "no progress within 120 s"
            time.sleep(0.2)
        proc.terminate()
        assert proc.wait(timeout=60) == 130
    finally:
        _stop([proc])
    assert "interrupted: nothing written" in log.read_text()
    assert list(out.parent.iterdir()) == []


def test_every_corpus_format_gives_the_same_statistics(tmp_path):
    import json

    import pyarrow as pa

    texts = ["the river bank", "a steep bank after the rain", "rain", "the bank of the river was steep"]
    ref = reference_stats(TINY_GPT2, texts)
    (tmp_path / "folder").mkdir()
    for i, t in enumerate(texts):
        (tmp_path / "folder" / f"{i:02d}.txt").write_text(t, encoding="utf-8")
    pq.write_table(pa.table({"id": list(range(4)), "text": texts}), tmp_path / "c.parquet", row_group_size=3)
    (tmp_path / "c.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in texts), encoding="utf-8")
    for src in (tmp_path / "folder", tmp_path / "c.parquet", tmp_path / "c.jsonl"):
        out = tmp_path / f"{src.name}.stats.parquet"
        assert main(["corpus", str(TINY_GPT2), str(src), "--out", str(out), "--scheduler", "threads",
                     "--batch", "3"]) == 0
        _assert_matches(out, ref)


@pytest.mark.parametrize("family", ["tiny_roberta", "tiny_distilbert", "tiny_llama", "tiny_qwen3"])
def test_other_text_families_equal_single_process(tmp_path, family):
    folder = TINY_GPT2.parent / family
    texts = ["the river bank", "a steep bank after the rain", "rain", "the bank of the river was steep"]
    path = write_lines(tmp_path / "c.txt", texts)
    out = tmp_path / "stats.parquet"
    assert main(["corpus", str(folder), str(path), "--out", str(out), "--scheduler", "threads", "--batch", "3"]) == 0
    _assert_matches(out, reference_stats(folder, texts))


def test_an_image_model_is_refused(tmp_path, capsys):
    path = write_lines(tmp_path / "c.txt", ["the river"])
    assert main(["corpus", str(TINY_GPT2.parent / "tiny_vit"), str(path), "--out", str(tmp_path / "s.parquet")]) == 1
    assert "image model; the corpus command reads text" in capsys.readouterr().err
