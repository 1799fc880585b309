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
from attnviz.corpus.files import (AtomicParquet, StatsFileError, output_target, per_document_columns,
                                  per_document_schema, remove_stale_parts, stats_columns, stats_schema,
                                  temporary_path)
from attnviz.corpus.screen import PrefixScreen, prefix_stable
from attnviz.corpus.stats import HeadSums
from attnviz.corpus.texts import CorpusError, count_documents, partitions
from attnviz.corpus.worker import ModelUnavailable, PartitionJob, model_limit, prepare, run_partition

LOCAL_SCHEDULERS = ("threads", "processes")
CONNECT_TIMEOUT_S = 5.0  # how long a scheduler address may take to answer (connection and handshake)
WORKERS_PER_CORE = 4  # a local cluster has at most this many workers per usable core
WORKERS_TIMEOUT_S = 10.0  # how long a scheduler may take to show its first worker
MAX_BATCH = 10_000  # documents per partition: a partition is held whole, here and on its worker
IN_FLIGHT_PER_THREAD = 2  # partitions queued per worker thread: enough to keep it busy, little memory
# --batch by default: at least 4 partitions per worker thread (the last ones finish together), within
# [MIN_AUTO_BATCH, MAX_AUTO_BATCH] documents. A BERT partition is run as groups of documents of similar length
# stacked in one pass (attnviz.corpus.batched): of 2,000 short sentences through MiniLM, partitions of 16 cost
# 13.1 ms of CPU per document, of 64 9.5 ms, of 256 8.0 ms (one thread, AMD EPYC).
MIN_AUTO_BATCH, MAX_AUTO_BATCH = 16, 128
PARTITIONS_PER_THREAD = 4


def auto_batch(total: int, threads: int) -> int:
    """Documents per partition for ``total`` documents on ``threads`` worker threads when --batch is not given."""
    share = max(1, total) // (PARTITIONS_PER_THREAD * max(1, threads))
    return min(MAX_AUTO_BATCH, max(MIN_AUTO_BATCH, share))
# glibc malloc of each local worker process, chosen here, not inherited. Dask's nanny starts workers with
# MALLOC_TRIM_THRESHOLD_=65536, and setting any of these variables also fixes glibc's mmap threshold at
# 128 KiB: every array of a pass past that size was mapped and unmapped again, 3,600 page faults and 1.5x
# the CPU per MiniLM sentence instead of 7 (benchmarks/README.md). With both set, freed arrays stay in
# the heap for the next document, as glibc's own adaptive default keeps them.
WORKER_MALLOC = {"MALLOC_TRIM_THRESHOLD_": str(64 << 20), "MALLOC_MMAP_THRESHOLD_": str(32 << 20)}


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
    total: int  # documents in the corpus (those read: more or fewer than counted if it changed meanwhile)
    failed: list[tuple[int, str, str]] = field(default_factory=list)  # (index, name, message), corpus order
    elapsed: float = 0.0  # seconds of computing (cluster start not included)
    workers: int = 0  # worker threads the cluster had
    worker_cpu: float = float("nan")  # CPU seconds the worker processes spent during the run (all of them)
    driver_cpu: float = float("nan")  # CPU seconds of this process during the run (streaming, folding, files)
    counted: int = -1  # documents the corpus held when it was counted, before the run (-1: as ``total``)

    @property
    def changed(self) -> bool:
        """The corpus did not hold as many documents when read as when counted (it changed meanwhile)."""
        return self.counted >= 0 and self.counted != self.total


def default_workers() -> int:
    return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1))


def max_local_workers() -> int:
    return WORKERS_PER_CORE * default_workers()


def check_scheduler(scheduler: str, workers: int | None) -> None:
    """CorpusRunError for a scheduler or worker count that cannot work, before anything starts."""
    if workers is not None and workers < 1:
        raise CorpusRunError(f"--workers must be at least 1 (got {workers})")
    if scheduler in LOCAL_SCHEDULERS:
        bound = max_local_workers()
        if workers is not None and workers > bound:
            raise CorpusRunError(f"--workers {workers:,} is more than a local cluster takes here: at most {bound} "
                                 f"({WORKERS_PER_CORE} per usable core)")
        return
    if not scheduler.startswith(("tcp://", "tls://")) or ":" not in scheduler.split("://", 1)[1]:
        raise CorpusRunError(f"--scheduler {scheduler!r}: give threads, processes or a scheduler address tcp://HOST:PORT")
    host, _, port = scheduler.split("://", 1)[1].rpartition(":")
    bracketed = host.startswith("[") and host.endswith("]") and len(host) > 2  # an IPv6 address: [::1]
    if not host or (":" in host and not bracketed) or "[" in host.strip("[]") or not port.isdigit() \
            or not 1 <= int(port) <= 65535:
        raise CorpusRunError(f"--scheduler {scheduler!r}: not an address tcp://HOST:PORT (a host name or address, "
                             "a port 1..65535)")
    if workers is not None:
        raise CorpusRunError(f"--workers sizes a local cluster; the workers of {scheduler} are the ones started "
                             "with 'dask worker'")


def probe_scheduler(address: str, timeout: float | None = None) -> None:
    """Connect to ``address`` and exchange Dask's handshake, all within ``timeout`` seconds; CorpusRunError
    when nothing answers, something that is not a Dask scheduler answers, or TLS is not configured.

    ``Client(address, timeout=...)`` bounds the connection but not the handshake that follows, so a
    server that accepts and never answers would hold it for ever; this runs on its own event loop in
    its own thread and is given up at the deadline."""
    import asyncio
    import threading

    from distributed.comm import connect
    from distributed.security import Security

    timeout = CONNECT_TIMEOUT_S if timeout is None else timeout
    outcome: list = []

    async def handshake():
        comm = await asyncio.wait_for(connect(address, timeout=timeout, **Security().get_connection_args("client")),
                                      timeout)
        comm.abort()

    def run():
        try:
            asyncio.run(handshake())
            outcome.append(None)
        except BaseException as exc:  # reported by the caller
            outcome.append(exc)

    thread = threading.Thread(target=run, name="attnviz-scheduler-probe", daemon=True)
    thread.start()
    thread.join(timeout + 2.0)
    if not outcome:
        exc: BaseException = TimeoutError()
    else:
        exc = outcome[0]
    if exc is None:
        return
    if isinstance(exc, TypeError) and address.startswith("tls://"):
        raise CorpusRunError(f"--scheduler {address}: TLS needs certificates, and none are configured (set "
                             "distributed.comm.tls.ca-file, .client.cert and .client.key in the Dask "
                             "configuration)") from None
    if isinstance(exc, (TimeoutError, asyncio.TimeoutError)):
        raise CorpusRunError(f"no Dask scheduler answers at {address} (waited {timeout:.0f} s)") from None
    from distributed.comm.core import CommClosedError

    if isinstance(exc, OSError) and not isinstance(exc, CommClosedError):
        raise CorpusRunError(f"no Dask scheduler answers at {address} ({exc.strerror or exc})") from None
    raise CorpusRunError(f"{address} did not answer as a Dask scheduler does; is it the address of one? "
                         f"({type(exc).__name__})") from None


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
def worker_malloc():
    """Local worker processes started in here get :data:`WORKER_MALLOC`, whatever this process's environment
    or the Dask configuration says (the nanny reads the variables from both, the environment first, and
    writes them into this process's environment: restored on the way out)."""
    import dask

    saved = {k: os.environ.get(k) for k in WORKER_MALLOC}
    os.environ.update(WORKER_MALLOC)
    try:
        with dask.config.set({f"distributed.nanny.pre-spawn-environ.{k}": v for k, v in WORKER_MALLOC.items()}):
            yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


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
    check_scheduler(scheduler, workers)
    n = default_workers() if workers is None else workers
    if scheduler in LOCAL_SCHEDULERS:
        processes = scheduler == "processes"
        where = {"host": "127.0.0.1"} if processes else {}  # threads: in-process, no network at all
        try:
            with _sigint_ignored() if processes else nullcontext(), worker_malloc() if processes else nullcontext():
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
    probe_scheduler(scheduler)
    try:
        client = Client(scheduler, timeout=CONNECT_TIMEOUT_S)
    except (OSError, TimeoutError, ValueError, TypeError, MemoryError) as exc:
        why = str(exc) or ("it accepted the connection but did not answer" if isinstance(exc, (OSError, TimeoutError))
                           else type(exc).__name__)
        raise CorpusRunError(f"no Dask scheduler answers at {scheduler} (waited {CONNECT_TIMEOUT_S:.0f} s: {why})") from None
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
    if getattr(ckpt, "kind", None) == "vlm" or getattr(ckpt, "config", None) is None:
        family = getattr(ckpt, "family", "")
        raise CorpusRunError(f"{ckpt.name} is a {family + ' ' if family else ''}vision-language model; the corpus "
                             "command runs text checkpoints")
    if getattr(ckpt, "tokenizer", None) is None:
        raise CorpusRunError(f"{ckpt.name} is a {ckpt.config.model_type} image model; the corpus command reads text")
    limit = model_limit(ckpt)
    if max_tokens is not None and not 1 <= max_tokens <= limit:
        raise CorpusRunError(f"--max-tokens {max_tokens} is outside 1..{limit}, the limit of {ckpt.name}")
    return ckpt


def check_writable(path: Path) -> None:
    """StatsFileError now rather than after the run when ``path`` cannot be written: not a regular file
    (a folder, a device, a FIFO: never replaced) or a folder that refuses files. Removes the temporaries
    that killed runs left beside it."""
    target = output_target(path)
    probe = temporary_path(target)
    missing = [d for d in target.parents if not d.exists()]  # folders the run will create, made here only to try
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        remove_stale_parts(target)
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        raise StatsFileError(f"cannot write {path}: {exc}") from None
    finally:
        for d in missing:  # innermost first: a run refused later leaves no empty folder behind
            try:
                d.rmdir()
            except OSError:
                break


def run_corpus(folder, name: str | None, texts, out, *, scheduler: str = "processes", workers: int | None = None,
               batch: int | None = None, max_tokens: int | None = None, per_document=None,
               progress: Callable[[Progress], None] | None = None) -> CorpusResult:
    """Statistics of every document of ``texts`` through the checkpoint in ``folder``, written to ``out``.

    Nothing is written unless the run completes (an exception, Ctrl+C included, leaves no file);
    CorpusRunError when it cannot start or no document ran. ``batch``: documents per partition (None:
    :func:`auto_batch` of the corpus size and the cluster's threads).
    """
    texts, out = Path(texts), Path(out)
    # arguments and outputs first: nothing is read or computed for a run that could not be written
    if batch is not None and batch < 1:
        raise CorpusRunError(f"--batch must be at least 1 document (got {batch})")
    if batch is not None and batch > MAX_BATCH:
        raise CorpusRunError(f"--batch {batch:,} is more than {MAX_BATCH:,} documents per partition (each partition "
                             "is held whole in memory, here and on its worker)")
    check_scheduler(scheduler, workers)
    if per_document is not None and Path(per_document).resolve() == out.resolve():
        raise CorpusRunError(f"--per-document {per_document} is the --out file; give it another name")
    for option, path in (("--out", out), ("--per-document", per_document)):
        if path is not None and Path(path).resolve() == texts.resolve():
            raise CorpusRunError(f"{option} {path} is the corpus; give it another name")
    try:
        check_writable(out)
        if per_document is not None:
            check_writable(Path(per_document))
    except StatsFileError as exc:
        raise CorpusRunError(str(exc)) from None
    try:
        total = count_documents(texts)
    except CorpusError as exc:
        raise CorpusRunError(str(exc)) from None
    if total == 0:
        raise CorpusRunError(f"the corpus {texts} holds no documents")
    ckpt = check_model(folder, name, max_tokens)
    meta = {"model": ckpt.name, "model_folder": str(Path(folder).resolve()), "layers": ckpt.config.n_layer,
            "heads": ckpt.config.n_head, "corpus": str(texts), "scheduler": scheduler}
    screen = _screen(ckpt, max_tokens)
    del ckpt  # the workers load their own copy (the driver keeps its tokenizer only)
    files: list[AtomicParquet] = []
    try:
        doc_file = None
        if per_document is not None:
            doc_file = AtomicParquet(per_document, per_document_schema(meta))
            files.append(doc_file)
        with open_client(scheduler, workers) as client:
            result = _drive(client, str(Path(folder).resolve()), name, texts, total, batch, max_tokens,
                            doc_file, progress, screen)
        if result.sums.documents == 0:
            if not result.failed:  # the corpus changed between counting and reading
                raise CorpusRunError(f"no document of {texts} was read (it held {total:,} when counted)")
            first = result.failed[0]
            raise CorpusRunError(f"no document of {texts} could be run ({len(result.failed)} failed; "
                                 f"first {first[1]}: {first[2]})")
        meta.update(documents=result.sums.documents, failed=len(result.failed), rows=result.sums.rows)
        stats_file = AtomicParquet(out, stats_schema(meta))
        stats_file.write(stats_columns(result.sums))
        stats_file.commit()  # the statistics first: they stay even if the per-document file fails
        if doc_file is not None:
            files.remove(doc_file)
            try:
                doc_file.commit()
            except StatsFileError as exc:
                raise CorpusRunError(f"statistics written to {out}, but not the per-document file: {exc}") from None
        return result
    except StatsFileError as exc:
        raise CorpusRunError(str(exc)) from None
    finally:
        for f in files:  # not committed: nothing half written stays behind
            f.discard()


def _screen(ckpt, max_tokens: int | None) -> PrefixScreen | None:
    """The driver's check of long documents against the token limit (``max_tokens``, else the model's),
    or None for a checkpoint whose tokenizer a prefix says nothing about (see :mod:`attnviz.corpus.screen`)."""
    tok = getattr(getattr(ckpt, "tokenizer", None), "tokenizer", None)
    if tok is None or not hasattr(tok, "encode") or not prefix_stable(tok):
        return None
    if max_tokens is not None:
        return PrefixScreen(tok, max_tokens)
    return PrefixScreen(tok, model_limit(ckpt), option="")


def _drive(client, folder: str, name, texts: Path, total: int, batch: int, max_tokens, doc_file,
           progress, screen: PrefixScreen | None = None) -> CorpusResult:
    from distributed import as_completed

    n_threads = max(1, sum(client.nthreads().values()))
    if batch is None:
        batch = auto_batch(total, n_threads)
    try:  # every worker loads the model and its kernels first: the rate measured is of documents alone
        client.run(prepare, folder, name, os.getpid())
    except ModelUnavailable as exc:
        raise CorpusRunError(f"a worker could not load the model: {exc}") from None
    except Exception as exc:  # noqa: BLE001 - a worker without attnviz, a lost connection: one line, no traceback
        raise CorpusRunError(f"the cluster's workers could not be prepared: {type(exc).__name__}: {exc}") from None
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
            if screen is not None:  # a long document with too many tokens fails here, its text not sent
                part = [screen(doc) for doc in part]
            job = PartitionJob(index=part[0].index // batch, folder=folder, name=name, documents=part,
                               max_tokens=max_tokens, per_document=doc_file is not None,
                               driver_pid=os.getpid())
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
                progress(Progress(done=done, total=max(total, done), failed=n_failed, elapsed=time.perf_counter() - t0))
    except CorpusError as exc:
        raise CorpusRunError(str(exc)) from None
    finally:
        if futures:
            client.cancel(list(futures))
    if sums is None:
        sums = HeadSums.zeros(1, 1)
    elapsed = time.perf_counter() - t0
    worker_cpu = _worker_cpu(client, cpu0)
    return CorpusResult(sums=sums, total=done, counted=total, failed=failed, elapsed=elapsed, workers=n_threads,
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


def completion_queue():
    """An empty ``distributed.as_completed`` to add futures to, for drivers of other corpus runs (the head sweep
    of :mod:`attnviz.corpus.sweep`): Dask is imported here only."""
    from distributed import as_completed

    return as_completed()
