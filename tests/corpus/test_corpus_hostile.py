"""Hostile inputs of the corpus command: outputs that are not files, documents too long to read,
bad bytes, unbounded or silent arguments, corpora that are not files, temporaries of killed runs.

Each ends in one clear line on stderr and exit status 1 within seconds, with no file changed that
was not named and the work already done kept."""

from __future__ import annotations

import os
import random
import socket
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from corpus_helpers import TINY_GPT2, reference_stats, write_lines

import attnviz.corpus.run as corpus_run
import attnviz.corpus.texts as corpus_texts
from attnviz.cli import main
from attnviz.corpus import read_stats
import attnviz.corpus.files as corpus_files
from attnviz.corpus.run import CorpusRunError, run_corpus
from attnviz.corpus.texts import count_documents, iter_documents

ROOT = Path(__file__).resolve().parents[2]
GOOD = ["the river bank", "a steep bank after the rain", "rain"]


def _run(capsys, *args) -> tuple[int, str]:
    rc = main(["corpus", *map(str, args)])
    return rc, capsys.readouterr().err


def _one_line(err: str) -> str:
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


@pytest.fixture
def no_work(monkeypatch):
    """Any attempt to read the corpus, load the model or start a cluster fails the test."""
    def forbidden(*_a, **_k):
        raise AssertionError("work started for a run that had to be refused")

    monkeypatch.setattr(corpus_run, "count_documents", forbidden)
    monkeypatch.setattr(corpus_run, "check_model", forbidden)
    monkeypatch.setattr(corpus_run, "open_client", forbidden)


def _char_device(path: Path) -> Path:
    try:
        os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(1, 3))  # the null device, inside the test's folder
    except (PermissionError, AttributeError, OSError):
        pytest.skip("creating a device node needs root")
    return path


# 1. outputs that are devices or FIFOs are refused before any work, as session saves refuse them

@pytest.mark.parametrize("option", ["--out", "--per-document"])
@pytest.mark.parametrize("kind", ["fifo", "device", "link to a device"])
def test_output_that_is_a_device_or_fifo_is_refused_and_left_alone(tmp_path, capsys, no_work, option, kind):
    corpus = write_lines(tmp_path / "c.txt", GOOD)
    target = tmp_path / "n"
    if kind == "fifo":
        os.mkfifo(target)
    elif kind == "device":
        _char_device(target)
    else:
        _char_device(tmp_path / "dev")
        target.symlink_to(tmp_path / "dev")
    before = os.lstat(target)
    outs = {"--out": tmp_path / "s.parquet", "--per-document": None}
    outs[option] = target
    args = [TINY_GPT2, corpus, "--out", outs["--out"], "--scheduler", "threads"]
    if outs["--per-document"] is not None:
        args += ["--per-document", outs["--per-document"]]
    rc, err = _run(capsys, *args)
    line = _one_line(err)
    assert rc == 1 and "not a regular file" in line and str(target) in line, line
    after = os.lstat(target)
    assert (after.st_mode, after.st_ino) == (before.st_mode, before.st_ino)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted({"c.txt", "n", *(["dev"] if "link" in kind else [])})


def test_run_corpus_itself_refuses_a_fifo_output(tmp_path, no_work):
    corpus = write_lines(tmp_path / "c.txt", GOOD)
    os.mkfifo(tmp_path / "n")
    with pytest.raises(CorpusRunError, match="named pipe .FIFO., not a regular file"):
        run_corpus(TINY_GPT2, None, corpus, tmp_path / "n", scheduler="threads")
    assert stat.S_ISFIFO(os.lstat(tmp_path / "n").st_mode)


def test_output_through_a_symlink_replaces_the_file_not_the_link(tmp_path, capsys):
    corpus = write_lines(tmp_path / "c.txt", GOOD)
    (tmp_path / "real").mkdir()
    (tmp_path / "link.parquet").symlink_to(tmp_path / "real" / "s.parquet")
    rc, err = _run(capsys, TINY_GPT2, corpus, "--out", tmp_path / "link.parquet", "--scheduler", "threads")
    assert rc == 0, err
    assert (tmp_path / "link.parquet").is_symlink()
    assert read_stats(tmp_path / "real" / "s.parquet").documents == 3


# 2. a document over the byte limit fails unread and never travels to a worker

def test_a_document_over_the_byte_limit_fails_unread(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(corpus_texts, "MAX_DOCUMENT_BYTES", 2000)
    monkeypatch.setattr(corpus_texts, "_CHUNK", 512)  # the long line spans many reads
    corpus = tmp_path / "c.txt"
    corpus.write_bytes(("\n".join([GOOD[0], "bank " * 1000, GOOD[1], GOOD[2]]) + "\n").encode())
    shipped = []
    job = corpus_run.PartitionJob

    def recording(**kw):  # what the driver sends the workers
        shipped.extend(len(d.text) if isinstance(d.text, str) else 0 for d in kw["documents"])
        return job(**kw)

    monkeypatch.setattr(corpus_run, "PartitionJob", recording)
    out = tmp_path / "s.parquet"
    rc, err = _run(capsys, TINY_GPT2, corpus, "--out", out, "--scheduler", "threads", "--max-tokens", 16)
    assert rc == 1 and "Traceback" not in err
    assert "1 document(s) failed:" in err
    assert "c.txt:2: 5,000 bytes, over the limit of 2,000 bytes for one document" in err, err
    assert len(shipped) == 4 and max(shipped) < 100  # the long line's text was never sent
    assert read_stats(out).documents == 3


def test_long_lines_are_read_in_bounded_pieces(tmp_path, monkeypatch):
    monkeypatch.setattr(corpus_texts, "MAX_DOCUMENT_BYTES", 100)
    monkeypatch.setattr(corpus_texts, "_CHUNK", 1000)
    p = tmp_path / "c.txt"
    p.write_bytes(b"x" * 300_000 + b"\nshort\n" + b"y" * 101)
    held = []
    for raw, size in corpus_texts._raw_lines(p, 100):
        held.append((None if raw is None else len(raw), size))
    assert held == [(None, 300_000), (5, 5), (None, 101)]
    docs = list(iter_documents(p))
    assert [d.name for d in docs] == ["c.txt:1", "c.txt:2", "c.txt:3"] and docs[1].text == "short"
    assert isinstance(docs[0].text, ValueError) and "300,000 bytes" in str(docs[0].text)


def test_folder_and_jsonl_documents_over_the_limit_fail_unread(tmp_path, monkeypatch):
    monkeypatch.setattr(corpus_texts, "MAX_DOCUMENT_BYTES", 50)
    (tmp_path / "f").mkdir()
    (tmp_path / "f" / "a.txt").write_text("short")
    (tmp_path / "f" / "b.txt").write_text("z" * 51)
    docs = list(iter_documents(tmp_path / "f"))
    assert docs[0].text == "short" and "51 bytes, over the limit of 50" in str(docs[1].text)
    (tmp_path / "c.jsonl").write_text('{"text": "ok"}\n{"text": "' + "w" * 60 + '"}\n')
    docs = list(iter_documents(tmp_path / "c.jsonl"))
    assert docs[0].text == "ok" and "over the limit of 50" in str(docs[1].text)


def test_parquet_texts_over_the_limit_fail(tmp_path, monkeypatch):
    import pyarrow as pa

    monkeypatch.setattr(corpus_texts, "MAX_DOCUMENT_BYTES", 50)
    pq.write_table(pa.table({"text": ["ok", "q" * 80, None]}), tmp_path / "c.parquet")
    docs = list(iter_documents(tmp_path / "c.parquet"))
    assert docs[0].text == "ok" and "80 bytes, over the limit of 50" in str(docs[1].text) and docs[2].text is None


def test_a_jsonl_line_nested_too_deeply_is_one_failed_document(tmp_path):
    p = tmp_path / "c.jsonl"
    p.write_text('{"text": "ok"}\n' + "[" * 200_000 + "\n" + '{"text": "after"}\n')
    docs = list(iter_documents(p))
    assert [d.text for d in docs][::2] == ["ok", "after"]
    assert str(docs[1].text) == "not a JSON object (nested too deeply)"


# 7. outputs checked before the run; a bad line is one failed document named by its line

def test_per_document_onto_a_folder_is_refused_before_the_run(tmp_path, capsys, no_work):
    corpus = write_lines(tmp_path / "c.txt", GOOD)
    (tmp_path / "docs").mkdir()
    rc, err = _run(capsys, TINY_GPT2, corpus, "--out", tmp_path / "s.parquet", "--per-document",
                   tmp_path / "docs", "--scheduler", "threads")
    line = _one_line(err)
    assert rc == 1 and "it is a directory" in line and str(tmp_path / "docs") in line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.txt", "docs"]
    with pytest.raises(CorpusRunError, match="it is a folder, not a regular file"):
        run_corpus(TINY_GPT2, None, corpus, tmp_path / "s.parquet", scheduler="threads",
                   per_document=tmp_path / "docs")


@pytest.mark.parametrize("option", ["--out", "--per-document"])
def test_an_output_that_is_the_corpus_is_refused(tmp_path, capsys, no_work, option):
    corpus = write_lines(tmp_path / "c.txt", GOOD)
    before = corpus.read_bytes()
    args = {"--out": tmp_path / "s.parquet", "--per-document": tmp_path / "d.parquet"}
    args[option] = corpus
    rc, err = _run(capsys, TINY_GPT2, corpus, *[x for kv in args.items() for x in kv], "--scheduler", "threads")
    assert rc == 1 and f"{option} {corpus} is the corpus; give it another name" in _one_line(err)
    assert corpus.read_bytes() == before and sorted(p.name for p in tmp_path.iterdir()) == ["c.txt"]


def test_statistics_are_kept_when_the_per_document_file_fails_at_the_end(tmp_path):
    corpus = write_lines(tmp_path / "c.txt", GOOD)
    docs = tmp_path / "docs.parquet"

    def progress(_p):  # something takes the per-document path while the run is going
        docs.mkdir(exist_ok=True)

    with pytest.raises(CorpusRunError, match="statistics written to .*s.parquet, but not the per-document file"):
        run_corpus(TINY_GPT2, None, corpus, tmp_path / "s.parquet", scheduler="threads", per_document=docs,
                   progress=progress)
    assert read_stats(tmp_path / "s.parquet").documents == 3
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.txt", "docs.parquet", "s.parquet"]


def test_a_line_that_is_not_utf8_is_one_failed_document(tmp_path, capsys):
    corpus = tmp_path / "c.txt"
    corpus.write_bytes(b"the river bank\nok \xff\xfe broken\na steep bank after the rain\nrain\n")
    out = tmp_path / "s.parquet"
    rc, err = _run(capsys, TINY_GPT2, corpus, "--out", out, "--scheduler", "threads", "--batch", 1)
    assert rc == 1 and "Traceback" not in err
    assert "1 document(s) failed:" in err
    assert "c.txt:2: line 2 is not UTF-8 text (invalid start byte at byte 3 of the line)" in err, err
    st = read_stats(out)
    ref = reference_stats(TINY_GPT2, ["the river bank", "a steep bank after the rain", "rain"])
    assert (st.rows, st.documents) == ref[1:]


@pytest.mark.parametrize("family", ["tiny_llava", "tiny_smolvlm"])
def test_a_vision_language_model_is_refused_in_one_line(tmp_path, capsys, family):
    corpus = write_lines(tmp_path / "c.txt", GOOD)
    rc, err = _run(capsys, TINY_GPT2.parent / family, corpus, "--out", tmp_path / "s.parquet", "--scheduler", "threads")
    assert rc == 1 and "vision-language model; the corpus command runs text checkpoints" in _one_line(err)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.txt"]


def test_a_document_that_crashes_the_forward_pass_fails_alone(tmp_path, capsys, monkeypatch):
    import attnviz.corpus.worker as corpus_worker

    real = corpus_worker.run_text

    def run_text(ckpt, text):
        if "steep" in text:
            raise IndexError("index 7 is out of bounds")  # a bug one input provokes
        return real(ckpt, text)

    monkeypatch.setattr(corpus_worker, "run_text", run_text)
    corpus = write_lines(tmp_path / "c.txt", GOOD)
    out = tmp_path / "s.parquet"
    rc, err = _run(capsys, TINY_GPT2, corpus, "--out", out, "--scheduler", "threads", "--batch", 3)
    assert rc == 1 and "c.txt:2: IndexError: index 7 is out of bounds" in err and "Traceback" not in err, err
    assert read_stats(out).documents == 2


# 8. unbounded or silent arguments

def test_a_huge_worker_count_is_refused_with_its_bound(tmp_path, capsys, no_work):
    corpus = write_lines(tmp_path / "c.txt", GOOD)
    t = time.monotonic()
    rc, err = _run(capsys, TINY_GPT2, corpus, "--out", tmp_path / "s.parquet", "--workers", 1_000_000_000)
    line = _one_line(err)
    bound = corpus_run.max_local_workers()
    assert rc == 1 and f"--workers 1,000,000,000 is more than a local cluster takes here: at most {bound}" in line
    assert time.monotonic() - t < 5


def test_a_huge_batch_is_refused_with_its_bound(tmp_path, capsys, no_work):
    corpus = write_lines(tmp_path / "c.txt", GOOD)
    rc, err = _run(capsys, TINY_GPT2, corpus, "--out", tmp_path / "s.parquet", "--batch", 1_000_000_000)
    assert rc == 1 and "--batch 1,000,000,000 is more than 10,000 documents per partition" in _one_line(err)


def _server(answer: bytes | None):
    """A TCP server on 127.0.0.1 that accepts and then says nothing (None) or answers ``answer``."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    conns = []

    def serve():
        while True:
            try:
                c, _ = srv.accept()
            except OSError:
                return
            conns.append(c)
            if answer is not None:
                try:
                    c.recv(4096)
                    c.sendall(answer)
                except OSError:
                    pass

    threading.Thread(target=serve, daemon=True).start()
    return srv, conns, f"tcp://127.0.0.1:{srv.getsockname()[1]}"


@pytest.mark.timeout(60)
@pytest.mark.parametrize("answer,expect", [
    (None, "no Dask scheduler answers at {address} (waited 2 s)"),
    (b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
     "{address} did not answer as a Dask scheduler does"),
])
def test_a_tcp_address_that_is_not_a_dask_scheduler(tmp_path, capsys, monkeypatch, answer, expect):
    monkeypatch.setattr(corpus_run, "CONNECT_TIMEOUT_S", 2.0)
    corpus = write_lines(tmp_path / "c.txt", GOOD)
    srv, conns, address = _server(answer)
    try:
        t = time.monotonic()
        rc, err = _run(capsys, TINY_GPT2, corpus, "--out", tmp_path / "s.parquet", "--scheduler", address)
        took = time.monotonic() - t
    finally:
        srv.close()
        for c in conns:
            c.close()
    line = _one_line(err)
    assert rc == 1 and expect.format(address=address) in line, line
    assert took < 15
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.txt"]


@pytest.mark.parametrize("address", ["tcp://127.0.0.1:abc", "tcp://127.0.0.1:99999", "tcp://:8786", "tcp://[::1:1",
                                     "tls://127.0.0.1:0", "tcp://::1:8786"])
def test_a_malformed_scheduler_address_is_refused_at_once(tmp_path, capsys, no_work, address):
    corpus = write_lines(tmp_path / "c.txt", GOOD)
    t = time.monotonic()
    rc, err = _run(capsys, TINY_GPT2, corpus, "--out", tmp_path / "s.parquet", "--scheduler", address)
    assert rc == 1 and f"--scheduler {address!r}: not an address tcp://HOST:PORT" in _one_line(err)
    assert time.monotonic() - t < 2


def test_tls_without_certificates_is_one_clear_line(tmp_path, capsys):
    corpus = write_lines(tmp_path / "c.txt", GOOD)
    rc, err = _run(capsys, TINY_GPT2, corpus, "--out", tmp_path / "s.parquet", "--scheduler", "tls://127.0.0.1:1")
    line = _one_line(err)
    assert rc == 1 and "TLS needs certificates, and none are configured" in line, line


@pytest.mark.timeout(60)
@pytest.mark.parametrize("kind", ["fifo", "dev_zero", "device"])
def test_a_corpus_that_is_not_a_file_is_refused_at_once(tmp_path, capsys, kind):
    if kind == "fifo":
        corpus = tmp_path / "c.txt"
        os.mkfifo(corpus)
        expect = "is a named pipe (FIFO), not a file or a folder"
    elif kind == "dev_zero":
        corpus = Path("/dev/zero")
        expect = "is a character device, not a file or a folder"
    else:
        corpus = _char_device(tmp_path / "c.jsonl")
        expect = "is a character device, not a file or a folder"
    t = time.monotonic()
    rc, err = _run(capsys, TINY_GPT2, corpus, "--out", tmp_path / "s.parquet", "--scheduler", "threads")
    line = _one_line(err)
    assert rc == 1 and f"the corpus {corpus} {expect}" in line, line
    assert time.monotonic() - t < 10 and not (tmp_path / "s.parquet").exists()


@pytest.mark.timeout(60)
def test_a_file_that_becomes_a_fifo_after_the_check_does_not_hang(tmp_path, monkeypatch):
    (tmp_path / "f").mkdir()
    (tmp_path / "f" / "a.txt").write_text("first")
    os.mkfifo(tmp_path / "f" / "b.txt")
    monkeypatch.setattr(corpus_texts, "_folder_files", lambda p: sorted(p.glob("*.txt")))  # listed as a file
    docs = list(iter_documents(tmp_path / "f"))
    assert docs[0].text == "first" and "it is now a named pipe (FIFO), not a file" in str(docs[1].text)
    os.mkfifo(tmp_path / "c.txt")
    monkeypatch.setattr(corpus_texts, "corpus_kind", lambda p: "lines")  # checked when it was still a file
    with pytest.raises(corpus_texts.CorpusError, match="it is now a named pipe"):
        count_documents(tmp_path / "c.txt")
    with pytest.raises(corpus_texts.CorpusError, match="it is now a named pipe"):
        list(iter_documents(tmp_path / "c.txt"))


# 9. the corpus from /dev/stdin

def _env() -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return env


@pytest.mark.timeout(120)
def test_corpus_from_a_piped_stdin_is_refused(tmp_path):
    r = subprocess.run([sys.executable, "-m", "attnviz.cli", "corpus", str(TINY_GPT2), "/dev/stdin", "--out",
                        str(tmp_path / "s.parquet"), "--scheduler", "threads"], input="the river bank\nrain\n",
                       capture_output=True, text=True, timeout=100, env=_env(), cwd=tmp_path)
    line = _one_line(r.stderr)
    assert r.returncode == 1 and "the corpus /dev/stdin is a named pipe (FIFO)" in line, line
    assert list(tmp_path.iterdir()) == []


def test_no_document_read_is_a_clear_error_not_an_index_error(tmp_path, monkeypatch):
    corpus = write_lines(tmp_path / "c.txt", GOOD)
    monkeypatch.setattr(corpus_run, "partitions", lambda *_a: iter(()))  # emptied between count and read
    with pytest.raises(CorpusRunError, match=r"no document of .*c.txt was read \(it held 3 when counted\)"):
        run_corpus(TINY_GPT2, None, corpus, tmp_path / "s.parquet", scheduler="threads")


def test_a_run_refused_after_the_output_check_creates_no_folder(tmp_path, capsys):
    out = tmp_path / "new" / "deeper" / "s.parquet"
    rc, err = _run(capsys, TINY_GPT2, tmp_path / "missing.txt", "--out", out, "--per-document",
                   tmp_path / "other" / "d.parquet")
    assert rc == 1 and "corpus not found" in _one_line(err)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("counted", [2, 5])
def test_a_corpus_that_changes_during_the_run_is_reported(tmp_path, capsys, monkeypatch, counted):
    corpus = write_lines(tmp_path / "c.txt", GOOD)
    monkeypatch.setattr(corpus_run, "count_documents", lambda _p: counted)  # as if lines came or went meanwhile
    out = tmp_path / "s.parquet"
    rc, err = _run(capsys, TINY_GPT2, corpus, "--out", out, "--scheduler", "threads")
    line = [ln for ln in err.splitlines() if ln.startswith("error:")]
    assert rc == 1 and line == [f"error: {corpus} changed during the run: it held {counted} documents when counted "
                                "and 3 when read"], err
    assert read_stats(out).documents == 3  # what was read is kept


# 11. temporaries of killed runs; CR-only line endings

def _dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def test_the_temporaries_of_a_killed_run_are_removed_by_the_next(tmp_path, capsys):
    corpus = write_lines(tmp_path / "c.txt", GOOD)
    dead = _dead_pid()
    stale = [tmp_path / f".docs.parquet.{dead}.part", tmp_path / f".s.parquet.{dead}.part"]
    for p in stale:
        p.write_bytes(b"PAR1 half written")
    other = tmp_path / f".other.parquet.{dead}.part"  # not one of this run's files: left alone
    other.write_bytes(b"x")
    rc, err = _run(capsys, TINY_GPT2, corpus, "--out", tmp_path / "s.parquet", "--per-document",
                   tmp_path / "docs.parquet", "--scheduler", "threads")
    assert rc == 0, err
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["c.txt", "s.parquet", "docs.parquet", other.name])


def test_a_temporary_being_written_is_not_taken_for_a_stale_one(tmp_path):
    target = tmp_path / "docs.parquet"
    live = corpus_files.AtomicParquet(target, corpus_files.per_document_schema({}))
    old = time.time() - 3600
    os.utime(live.tmp, (old, old))  # old and of a running PID: only its lock says it is live
    assert corpus_files.remove_stale_parts(target) == [] and live.tmp.exists()
    live.discard()
    assert list(tmp_path.iterdir()) == []


def test_cr_only_line_endings_count_as_they_run(tmp_path):
    corpus = tmp_path / "c.txt"
    corpus.write_bytes(b"\r".join(t.encode() for t in GOOD * 10))
    assert count_documents(corpus) == 30 == len(list(iter_documents(corpus)))
    seen = []
    res = run_corpus(TINY_GPT2, None, corpus, tmp_path / "s.parquet", scheduler="threads", batch=4,
                     progress=lambda p: seen.append((p.done, p.total)))
    assert res.total == 30 and res.sums.documents == 30
    assert seen[-1] == (30, 30) and all(done <= total == 30 for done, total in seen)


@pytest.mark.parametrize("chunk", [1, 2, 3, 7, 1 << 20])
def test_counting_and_reading_split_lines_alike(tmp_path, monkeypatch, chunk):
    monkeypatch.setattr(corpus_texts, "_CHUNK", chunk)
    monkeypatch.setattr(corpus_texts, "MAX_DOCUMENT_BYTES", 4)
    rng = random.Random(chunk)
    p = tmp_path / "c.txt"
    for trial in range(150):
        data = bytes(rng.choice(b"abb\r\n") for _ in range(rng.randint(0, 40)))
        p.write_bytes(data)
        want = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n").split(b"\n")
        if want[-1] == b"":
            want.pop()
        got = [d.text if isinstance(d.text, str) else None for d in iter_documents(p)]  # None: over the limit
        assert got == [w.decode() if len(w) <= 4 else None for w in want], (trial, data)
        assert count_documents(p) == len(want), (trial, data)


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_a_run_killed_midway_leaves_a_temporary_the_next_run_removes(tmp_path):
    import signal

    from corpus_helpers import sentences

    big = write_lines(tmp_path / "big.txt", sentences(20000, seed=9))
    out, docs = tmp_path / "out" / "s.parquet", tmp_path / "out" / "perdoc.parquet"
    log = tmp_path / "stderr.txt"
    with open(log, "w") as err:
        proc = subprocess.Popen([sys.executable, "-m", "attnviz.cli", "corpus", str(TINY_GPT2), str(big), "--out",
                                 str(out), "--per-document", str(docs), "--scheduler", "threads", "--batch", "1"],
                                stdout=subprocess.DEVNULL, stderr=err, env=_env(), cwd=tmp_path,
                                start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while "documents" not in log.read_text():  # the first progress line: the run is under way
            assert proc.poll() is None, log.read_text()
            assert time.monotonic() < deadline, "no progress within 120 s"
            time.sleep(0.1)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
    left = sorted(p.name for p in out.parent.iterdir())
    assert left == [f".perdoc.parquet.{proc.pid}.part"], left
    small = write_lines(tmp_path / "small.txt", GOOD)
    r = subprocess.run([sys.executable, "-m", "attnviz.cli", "corpus", str(TINY_GPT2), str(small), "--out", str(out),
                        "--per-document", str(docs), "--scheduler", "threads"], capture_output=True, text=True,
                       timeout=120, env=_env(), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert sorted(p.name for p in out.parent.iterdir()) == ["perdoc.parquet", "s.parquet"]
