"""What runs on a Dask worker: one partition of documents through a checkpoint, as exact sums.

Each process loads the checkpoint once (:func:`cached_checkpoint`). A failing document is returned
named with its message (whatever it raised) and does not stop the partition; a checkpoint that does not load raises
:class:`ModelUnavailable`, which stops the run.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from attnviz.checkpoints import Checkpoint, CheckpointError, load_checkpoint, run_text
from attnviz.corpus.batched import batchable, group_sums, length_groups
from attnviz.corpus.stats import HeadSums, document_sums
from attnviz.corpus.texts import Document
from attnviz.sources.errors import SourceError

_lock = threading.Lock()
_cache: dict[tuple, Checkpoint] = {}  # (folder, name, file stamp) -> checkpoint, least recently used first
_loads = 0
MAX_CACHED = 2  # checkpoints a worker keeps between runs


class ModelUnavailable(RuntimeError):
    """The checkpoint did not load on a worker (the message says why and where)."""


@dataclass(frozen=True)
class PartitionJob:
    """One partition: which model, its documents, and what to return."""

    index: int  # partition number, from 0, in corpus order
    folder: str  # checkpoint folder as the workers see it
    name: str | None  # display name of a ready model, else None
    documents: list[Document]
    max_tokens: int | None = None  # documents with more tokens fail (None: the model's own limit)
    per_document: bool = False  # also return each document's means
    driver_pid: int = 0  # process id of the driver: a worker in another process runs one engine thread


@dataclass
class PartitionResult:
    index: int
    sums: HeadSums | None  # None when no document of the partition ran
    failed: list[tuple[int, str, str]] = field(default_factory=list)  # (document index, name, message)
    # per document that ran: (document index, name, tokens, (L, nh, 5) float64 means in STATISTICS order)
    per_document: list[tuple[int, str, int, np.ndarray]] = field(default_factory=list)


def _limit_blas_threads() -> None:
    # One BLAS thread per worker thread: the same computation in every worker, and workers sharing a
    # machine do not oversubscribe its cores.
    from attnviz.engine.runtime import cap_blas_threads

    cap_blas_threads(1)  # for the rest of this process


def _one_engine_thread(driver_pid: int) -> None:
    """In a worker process of its own (not the driver's, whose engine serves the window too): one engine
    thread per worker thread, as BLAS has. numba's pool of two threads on a loaded two-core machine made a
    12-head, 22-token flash call 16 ms instead of 0.5 ms."""
    if driver_pid and os.getpid() != driver_pid:
        from attnviz.engine import get_num_threads, set_num_threads

        if get_num_threads() != 1:
            set_num_threads(1)


def _stamp(folder: Path) -> tuple:
    """(name, size, mtime) of the folder's files: a checkpoint rewritten in place is loaded again."""
    try:
        return tuple(sorted((f.name, st.st_size, st.st_mtime_ns) for f in folder.iterdir()
                            if f.is_file() and (st := f.stat())))
    except OSError:
        return ()


def cached_checkpoint(folder: str, name: str | None) -> Checkpoint:
    """The checkpoint in ``folder``, loaded once per process (the last MAX_CACHED kept, newest first)."""
    global _loads
    path = Path(folder).resolve()
    key = (str(path), name, _stamp(path))
    with _lock:
        ckpt = _cache.pop(key, None)
        if ckpt is None:
            try:
                ckpt = load_checkpoint(folder, name=name)
            except CheckpointError as exc:
                raise ModelUnavailable(f"{exc}") from None
            _limit_blas_threads()
            _loads += 1
        _cache[key] = ckpt  # most recently used last
        while len(_cache) > MAX_CACHED:  # a long-lived cluster running many models keeps only the last ones
            _cache.pop(next(iter(_cache)))
    return ckpt


def load_count() -> int:
    """How many checkpoints this process has loaded (each worker should load a model once)."""
    return _loads


def model_limit(ckpt: Checkpoint) -> int:
    """The most tokens a document may have for ``ckpt`` (its position table, less any offset)."""
    c = ckpt.config
    return int(getattr(c, "max_tokens", c.max_positions))


def document_text(text) -> str:
    """A document's text, or the one line that says why it is none: the reader's error, not text, or empty."""
    if isinstance(text, Exception):
        raise CheckpointError(str(text))
    if not isinstance(text, str):
        raise CheckpointError(f"not text ({type(text).__name__})")
    if not text.strip():
        raise CheckpointError("empty document")
    return text


def _document_attentions(ckpt: Checkpoint, doc: Document, max_tokens: int | None) -> np.ndarray:
    text = document_text(doc.text)
    if max_tokens is not None and ckpt.kind in ("bert", "gpt2"):
        try:  # the tokenizer alone says whether the document fits, before any forward pass (run_text's own call)
            ckpt.tokenizer.encode(text, add_special_tokens=True, max_tokens=max_tokens)
        except SourceError as exc:
            raise CheckpointError(str(exc)) from None
    attentions = run_text(ckpt, text).attentions  # (L, nh, T, T)
    T = attentions.shape[-1]
    if max_tokens is not None and T > max_tokens:  # models whose input pipeline adds tokens of its own
        raise CheckpointError(f"text gives {T:,} tokens, more than the limit of {max_tokens:,}")
    return attentions


def _document_ids(ckpt: Checkpoint, doc: Document, max_tokens: int | None) -> np.ndarray:
    """(T,) token ids of a document for :func:`attnviz.corpus.batched.group_sums`, failing as run_text would."""
    text = document_text(doc.text)
    c = ckpt.config
    try:  # one tokenisation: the limit asked for (its message as is), else the model's (named, as run_text says)
        ids = ckpt.tokenizer.encode(text, add_special_tokens=True,
                                    max_tokens=c.max_tokens if max_tokens is None else max_tokens).ids
    except SourceError as exc:
        raise CheckpointError(str(exc) if max_tokens is not None else f"{ckpt.name}: {exc}") from None
    if ids.max() >= c.vocab_size:
        raise CheckpointError(f"token id {int(ids.max())} is outside the model's {c.vocab_size}-row embedding table")
    return ids


def _one_document(ckpt: Checkpoint, doc: Document, max_tokens: int | None) -> HeadSums:
    return document_sums(_document_attentions(ckpt, doc, max_tokens))


def _failure(exc: BaseException) -> str:
    if isinstance(exc, (CheckpointError, ValueError, MemoryError)):
        return str(exc) or type(exc).__name__
    return f"{type(exc).__name__}: {exc}"  # anything else one document provokes fails that document, not the run


def _sums_of(ckpt: Checkpoint, docs: list[Document], max_tokens: int | None) -> dict[int, HeadSums | str]:
    """Document position in ``docs`` -> its sums, or the message it failed with.

    BERT checkpoints run documents of similar length stacked (:mod:`attnviz.corpus.batched`); a group
    whose stacked pass raises runs again one document at a time, so a failure names its document."""
    out: dict[int, HeadSums | str] = {}
    if not batchable(ckpt):
        for j, doc in enumerate(docs):
            try:
                out[j] = _one_document(ckpt, doc, max_tokens)
            except Exception as exc:
                out[j] = _failure(exc)
        return out
    ids: dict[int, np.ndarray] = {}
    for j, doc in enumerate(docs):
        try:
            ids[j] = _document_ids(ckpt, doc, max_tokens)
        except Exception as exc:
            out[j] = _failure(exc)
    order = list(ids)
    for group in length_groups([len(ids[j]) for j in order]):
        members = [order[g] for g in group]
        try:
            for j, s in zip(members, group_sums(ckpt, [ids[j] for j in members])):
                out[j] = s
        except Exception:  # one document at a time, each failing alone
            for j in members:
                try:
                    out[j] = _one_document(ckpt, docs[j], max_tokens)
                except Exception as exc:
                    out[j] = _failure(exc)
    return out


def prepare(folder: str, name: str | None, driver_pid: int = 0) -> int:
    """Load the checkpoint and the kernels its pass runs, on this worker, before its first partition (the
    run's clock starts after this; a model that does not load stops the run here, ModelUnavailable).
    Returns this process's id."""
    ckpt = cached_checkpoint(folder, name)
    _one_engine_thread(driver_pid)
    try:  # one tiny document through the pass the partitions take: its kernels are loaded (or compiled) now
        if batchable(ckpt):
            group_sums(ckpt, [np.arange(3, dtype=np.int64) % ckpt.config.vocab_size])
        else:
            run_text(ckpt, "a b c")
    except Exception:  # noqa: BLE001 - a first document that fails is reported by its partition, named
        pass
    return os.getpid()


def run_partition(job: PartitionJob) -> PartitionResult:
    """Run every document of ``job``; the sums of those that ran (added in corpus order), and the failures named."""
    ckpt = cached_checkpoint(job.folder, job.name)
    _one_engine_thread(job.driver_pid)
    result = PartitionResult(job.index, None)
    outcome = _sums_of(ckpt, job.documents, job.max_tokens)
    for j, doc in enumerate(job.documents):
        d = outcome[j]
        if isinstance(d, str):
            result.failed.append((doc.index, doc.name, d))
            continue
        result.sums = d if result.sums is None else result.sums + d
        if job.per_document:
            means = np.stack([m for m in d.means().values()], axis=-1)  # (L, nh, 5)
            result.per_document.append((doc.index, doc.name, d.rows, means))
    return result
