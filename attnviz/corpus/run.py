"""Run a corpus through a checkpoint on Dask and write STATS.parquet: the driver.

Only a few partitions per worker are in flight, so the corpus is never read whole, and results are
folded in partition order (early ones wait), so totals and the per-document file come out in corpus
order and identical whatever the scheduler and worker count. Dask is imported only in
:func:`open_client`; problems the user can act on are a :class:`CorpusRunError`.
"""

from __future__ import annotations

import logging
import os
import signal
import time
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from attnviz.checkpoints import CheckpointError, load_checkpoint
from attnviz.corpus.files import (AtomicParquet, StatsFileError, per_document_columns, per_document_schema,
                                  stats_columns, stats_schema, temporary_path)
from attnviz.corpus.stats import HeadSums
from attnviz.corpus.texts import CorpusError, count_documents, partitions
from attnviz.corpus.worker import ModelUnavailable, PartitionJob, model_limit, run_partition

LOCAL_SCHEDULERS = ("threads", "processes")
CONNECT_TIMEOUT_S = 5.0  # how long a scheduler address may take to answer
WORKERS_TIMEOUT_S = 10.0  # how long a scheduler may take to show its first worker
IN_FLIGHT_PER_THREAD = 2  # partitions queued per worker thread: enough to keep it busy, little memory


class CorpusRunError(ValueError):
    """A run that cannot start or had to stop; the message names the input and the reason."""


@dataclass
class Progress:
    """What a progress callback receives after each partition."""

    done: int  # documents finished (ran or failed)
    total: int  # documents in the corpus
    failed: int  # documents that failed so far
    elapsed: float  # seconds since the first partition was sent


@dataclass
class CorpusResult:
    sums: HeadSums
    total: int  # documents in the corpus
    failed: list[tuple[int, str, str]] = field(default_factory=list)  # (index, name, message), corpus order
    elapsed: float = 0.0  # seconds of computing (cluster start not included)
    workers: int = 0  # worker threads the cluster had
    worker_cpu: float = float("nan")  # CPU seconds the worker processes spent during the run (all of them)
    driver_cpu: float = float("nan")  # CPU seconds of this process during the run (streaming, folding, files)


def default_workers() -> int:
    return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1))


@contextmanager
def _sigint_ignored():
    """Worker processes started in here inherit SIGINT ignored: Ctrl+C reaches only this process,
    which then shuts them down itself (instead of each printing its own KeyboardInterrupt)."""
    try:
        old = signal.signal(signal.SIGINT, signal.SIG_IGN)
    except ValueError:  # not the main thread: leave signals alone
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, old)


@contextmanager
def open_client(scheduler: str, workers: int | None = None):
    """A ``distributed.Client`` for ``scheduler``: "threads" (one worker process of the caller, N threads),
    "processes" (N single-threaded workers on 127.0.0.1) or "tcp://HOST:PORT" (a running scheduler).
    """
    try:
        from distributed import Client, LocalCluster
    except ImportError:
        raise CorpusRunError("the corpus command runs on Dask: pip install 'attnviz[corpus]'") from None
    loggers = [logging.getLogger(name) for name in ("distributed", "tornado")]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.CRITICAL)  # connection and shutdown chatter is not the user's concern
    try:
        with _client(Client, LocalCluster, scheduler, workers) as client:
            yield client
    finally:
        for lg, level in zip(loggers, levels):
            lg.setLevel(level)


@contextmanager
def _client(Client, LocalCluster, scheduler: str, workers: int | None):
    n = default_workers() if workers is None else workers
    if n < 1:
        raise CorpusRunError(f"--workers must be at least 1 (got {n})")
    if scheduler in LOCAL_SCHEDULERS:
        processes = scheduler == "processes"
        where = {"host": "127.0.0.1"} if processes else {}  # threads: in-process, no network at all
        try:
            with _sigint_ignored() if processes else nullcontext():
                cluster = LocalCluster(n_workers=n if processes else 1, threads_per_worker=1 if processes else n,
                                       # None does not turn the dashboard off (dask/distributed#8136): a
                                       # free local port instead of :8787, which a second cluster finds taken
                                       processes=processes, dashboard_address="127.0.0.1:0",
                                       silence_logs=logging.CRITICAL, **where)
        except (RuntimeError, OSError, TimeoutError) as exc:
            raise CorpusRunError(f"the local Dask cluster ({scheduler}, {n} workers) did not start: {exc}") from None
        try:
            with Client(cluster) as client:
                yield client
        finally:
            cluster.close()
        return
    if not scheduler.startswith(("tcp://", "tls://")) or ":" not in scheduler.split("://", 1)[1]:
        raise CorpusRunError(f"--scheduler {scheduler!r}: give threads, processes or a scheduler address tcp://HOST:PORT")
    if workers is not None:
        raise CorpusRunError(f"--workers sizes a local cluster; the workers of {scheduler} are the ones started "
                             "with 'dask worker'")
    try:
        client = Client(scheduler, timeout=CONNECT_TIMEOUT_S)
    except (OSError, TimeoutError, ValueError) as exc:
        raise CorpusRunError(f"no Dask scheduler answers at {scheduler} (waited {CONNECT_TIMEOUT_S:.0f} s: {exc})") from None
    try:
        try:
            client.wait_for_workers(1, timeout=WORKERS_TIMEOUT_S)
        except TimeoutError:
            raise CorpusRunError(f"the Dask scheduler at {scheduler} has no workers "
                                 f"(waited {WORKERS_TIMEOUT_S:.0f} s); start some with: dask worker {scheduler}") from None
        yield client
    finally:
        client.close()


def check_model(folder, name: str | None, max_tokens: int | None):
    """Load the checkpoint here once to fail early with a clear message; returns it."""
    try:
        ckpt = load_checkpoint(folder, name=name)
    except CheckpointError as exc:
        raise CorpusRunError(str(exc)) from None
    if getattr(ckpt, "tokenizer", None) is None:
        raise CorpusRunError(f"{ckpt.name} is a {ckpt.config.model_type} image model; the corpus command reads text")
    limit = model_limit(ckpt)
    if max_tokens is not None and not 1 <= max_tokens <= limit:
        raise CorpusRunError(f"--max-tokens {max_tokens} is outside 1..{limit}, the limit of {ckpt.name}")
    return ckpt


def check_writable(path: Path) -> None:
    """StatsFileError now rather than after the run when ``path`` cannot be written."""
    if path.is_dir():
        raise StatsFileError(f"cannot write {path}: it is a folder; give a file name such as stats.parquet")
    probe = temporary_path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        raise StatsFileError(f"cannot write {path}: {exc}") from None


def run_corpus(folder, name: str | None, texts, out, *, scheduler: str = "processes", workers: int | None = None,
               batch: int = 16, max_tokens: int | None = None, per_document=None,
               progress: Callable[[Progress], None] | None = None) -> CorpusResult:
    """Statistics of every document of ``texts`` through the checkpoint in ``folder``, written to ``out``.

    Nothing is written unless the run completes (an exception, Ctrl+C included, leaves no file);
    CorpusRunError when it cannot start or no document ran.
    """
    texts, out = Path(texts), Path(out)
    try:
        total = count_documents(texts)
    except CorpusError as exc:
        raise CorpusRunError(str(exc)) from None
    if total == 0:
        raise CorpusRunError(f"the corpus {texts} holds no documents")
    if batch < 1:
        raise CorpusRunError(f"--batch must be at least 1 document (got {batch})")
    if per_document is not None and Path(per_document).resolve() == out.resolve():
        raise CorpusRunError(f"--per-document {per_document} is the --out file; give it another name")
    ckpt = check_model(folder, name, max_tokens)
    meta = {"model": ckpt.name, "model_folder": str(Path(folder).resolve()), "layers": ckpt.config.n_layer,
            "heads": ckpt.config.n_head, "corpus": str(texts), "scheduler": scheduler}
    del ckpt  # the workers load their own copy
    files: list[AtomicParquet] = []
    try:
        check_writable(out)  # an unwritable path fails before any work
        doc_file = None
        if per_document is not None:
            doc_file = AtomicParquet(per_document, per_document_schema(meta))
            files.append(doc_file)
        with open_client(scheduler, workers) as client:
            result = _drive(client, str(Path(folder).resolve()), name, texts, total, batch, max_tokens,
                            doc_file, progress)
        if result.sums.documents == 0:
            first = result.failed[0]
            raise CorpusRunError(f"no document of {texts} could be run ({len(result.failed)} failed; "
                                 f"first {first[1]}: {first[2]})")
        meta.update(documents=result.sums.documents, failed=len(result.failed), rows=result.sums.rows)
        stats_file = AtomicParquet(out, stats_schema(meta))
        files.append(stats_file)
        stats_file.write(stats_columns(result.sums))
        for f in files:
            f.commit()
        files.clear()
        return result
    except StatsFileError as exc:
        raise CorpusRunError(str(exc)) from None
    finally:
        for f in files:  # not committed: nothing half written stays behind
            f.discard()


def _drive(client, folder: str, name, texts: Path, total: int, batch: int, max_tokens, doc_file,
           progress) -> CorpusResult:
    from distributed import as_completed

    n_threads = max(1, sum(client.nthreads().values()))
    cpu0 = _worker_cpu(client)
    driver0 = time.process_time()
    parts = partitions(texts, batch)
    pending = as_completed()
    futures = set()
    waiting: dict[int, object] = {}  # partition index -> result that arrived before its turn
    next_fold = 0
    sums: HeadSums | None = None
    failed: list[tuple[int, str, str]] = []
    done = n_failed = 0
    t0 = time.perf_counter()

    def submit_more() -> None:
        while len(futures) < IN_FLIGHT_PER_THREAD * n_threads:
            part = next(parts, None)
            if part is None:
                return
            job = PartitionJob(index=part[0].index // batch, folder=folder, name=name, documents=part,
                               max_tokens=max_tokens, per_document=doc_file is not None)
            fut = client.submit(run_partition, job, pure=False, key=f"attnviz-corpus-{os.getpid()}-{job.index}")
            futures.add(fut)
            pending.add(fut)

    try:
        submit_more()
        for fut in pending:
            futures.discard(fut)
            if fut.status == "cancelled":
                raise CorpusRunError(f"a partition of {texts} was cancelled by the cluster")
            if fut.status != "finished":
                exc = fut.exception()
                if isinstance(exc, ModelUnavailable):
                    raise CorpusRunError(f"a worker could not load the model: {exc}")
                raise CorpusRunError(f"a partition of {texts} failed on the cluster: {type(exc).__name__}: {exc}")
            res = fut.result()
            fut.release()
            waiting[res.index] = res
            done += len(res.failed) + (res.sums.documents if res.sums is not None else 0)
            n_failed += len(res.failed)
            while next_fold in waiting:
                r = waiting.pop(next_fold)
                next_fold += 1
                if r.sums is not None:
                    sums = r.sums if sums is None else sums + r.sums
                failed.extend(r.failed)
                if doc_file is not None and r.per_document:
                    doc_file.write(per_document_columns(r.per_document))
            submit_more()
            if progress is not None:
                progress(Progress(done=done, total=total, failed=n_failed, elapsed=time.perf_counter() - t0))
    except CorpusError as exc:
        raise CorpusRunError(str(exc)) from None
    finally:
        if futures:
            client.cancel(list(futures))
    if sums is None:
        sums = HeadSums.zeros(1, 1)
    elapsed = time.perf_counter() - t0
    worker_cpu = _worker_cpu(client, cpu0)
    return CorpusResult(sums=sums, total=total, failed=failed, elapsed=elapsed, workers=n_threads,
                        worker_cpu=worker_cpu, driver_cpu=time.process_time() - driver0)


def _worker_cpu(client, before: dict | None = None):
    """Per-worker CPU seconds now (``before`` None), else the total spent since ``before``."""
    try:
        now = client.run(time.process_time)  # worker address -> CPU seconds of its process
    except Exception:  # a scheduler that refuses run(): the figure is informative only
        return {} if before is None else float("nan")
    if before is None:
        return now
    if set(now) != set(before) or len(set(client.run(os.getpid).values())) != len(now):
        return float("nan")  # workers came or went, or share a process (threads): not per worker
    return sum(now[w] - before[w] for w in now)
