"""Head importance over a corpus, on Dask: every head ablated in turn over each document, ranked.

For each document every head of the checkpoint is ablated alone (``mode`` zero or mean over the document's
positions) and its effect measured as in :func:`attnviz.checkpoints.intervention_study.sweep`: for a decoder
LLM (GPT-2 included) the KL divergence of the last position's next-token distribution (``kl``, nats) or the
drop of the logit difference of two tokens (``logit_diff``); for a text encoder ``cosine``, 1 - the cosine of
the class token's output before and after. The per-document effects are folded into a mean and a standard deviation per head
(count, mean and sum of squared deviations, merged partition by partition in corpus order, so the numbers do
not depend on the scheduler or the number of workers) and written to Parquet: one row per (layer, head) with
``mean``, ``std`` (over the documents, ddof 0), ``documents`` and ``rank`` (1 = the largest mean effect).

The same run collects, from each document's plain pass, every head's output (before the output projection)
summed over the positions: ``output_mean`` is each head's mean output over every position of every document
swept (a list of head-size numbers per row), the corpus means a mean ablation can use instead of one input's
(``means=`` here, ``attnviz-cli model ablate --means`` / ``model sweep --means``; :func:`read_sweep`).

The documents are scheduled as the corpus command schedules them (:mod:`attnviz.corpus.run`: its schedulers,
a few partitions per worker in flight, a checkpoint loaded once per worker process). Nothing is written
unless every document was swept (an interrupted or cancelled sweep leaves no file, its partial means are
returned as not complete); a document that fails is named and left out.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

from attnviz.checkpoints import CheckpointError
from attnviz.corpus.files import AtomicParquet, StatsFileError, _pa, head_rows, output_target
from attnviz.corpus.run import (IN_FLIGHT_PER_THREAD, MAX_BATCH, CorpusRunError, Progress, check_model,
                                check_scheduler, check_writable, completion_queue, open_client)
from attnviz.corpus.texts import CorpusError, Document, count_documents, partitions
from attnviz.corpus.worker import ModelUnavailable, cached_checkpoint, document_text

MODES = ("zero", "mean")
SCHEMA_VERSION = "1"
DEFAULT_BATCH = 4  # documents per partition: each costs layers x heads + 1 forward passes


@dataclass
class HeadMoments:
    """Per-head count, mean and sum of squared deviations of a metric over documents (Chan et al.'s merge)."""

    n: int
    mean: np.ndarray  # (L, nh) float64
    m2: np.ndarray  # (L, nh) float64

    @classmethod
    def of(cls, grid: np.ndarray) -> "HeadMoments":
        g = np.asarray(grid, dtype=np.float64)
        return cls(1, g.copy(), np.zeros_like(g))

    def __add__(self, other: "HeadMoments") -> "HeadMoments":
        n = self.n + other.n
        delta = other.mean - self.mean
        mean = self.mean + delta * (other.n / n)
        m2 = self.m2 + other.m2 + delta * delta * (self.n * other.n / n)
        return HeadMoments(n, mean, m2)

    @property
    def std(self) -> np.ndarray:
        return np.sqrt(np.maximum(self.m2 / self.n, 0.0))


@dataclass(frozen=True)
class SweepJob:
    """One partition of the corpus sweep."""

    index: int
    folder: str
    name: str | None
    documents: list[Document]
    mode: str = "zero"
    metric: str = "kl"
    tokens: tuple[int, int] | None = None  # logit_diff: the two token ids
    max_tokens: int | None = None
    means: np.ndarray | None = None  # (L, nh, hd) with mode "mean": heads set to these (a corpus's) means


@dataclass
class SweepPartResult:
    index: int
    moments: HeadMoments | None  # None when no document of the partition ran
    failed: list[tuple[int, str, str]] = field(default_factory=list)  # (document index, name, message)
    output_sum: np.ndarray | None = None  # (L, nh, hd) float64: the heads' outputs summed over every position
    positions: int = 0  # positions summed


def document_ids(ckpt, text, max_tokens: int | None) -> np.ndarray:
    """The token ids a document gives the checkpoint, as the Pretrained panel tokenises it: a decoder LLM's text
    encoded with its special tokens (no chat template); GPT-2's and an encoder's through the checkpoint's
    tokenizer with its special tokens (:func:`attnviz.checkpoints.run.run_text`)."""
    from attnviz.sources.errors import SourceError

    text = document_text(text)
    c = ckpt.config
    try:
        if ckpt.kind == "decoder":
            from attnviz.checkpoints.decoder_text import encode

            limit = c.max_positions or (1 << 20)
            ids = encode(ckpt.tokenizer, ckpt.special_tokens, text, min(limit, max_tokens or limit)).ids
        else:
            ids = ckpt.tokenizer.encode(text, add_special_tokens=True, max_tokens=max_tokens or c.max_tokens).ids
    except SourceError as exc:
        raise CheckpointError(str(exc)) from None
    ids = np.asarray(ids, dtype=np.int64)
    if max_tokens is not None and ids.size > max_tokens:
        raise CheckpointError(f"text gives {ids.size:,} tokens, more than the limit of {max_tokens:,}")
    return ids


def sweep_partition(job: SweepJob) -> SweepPartResult:
    """Sweep every head over each document of ``job`` (on a worker); the failures named."""
    from attnviz.checkpoints.intervention_study import sweep

    ckpt = cached_checkpoint(job.folder, job.name)
    result = SweepPartResult(job.index, None)
    for doc in job.documents:
        try:
            ids = document_ids(ckpt, doc.text, job.max_tokens)
            record: dict = {}
            grid = sweep(ckpt.config, ckpt.weights, ids, mode=job.mode, metric=job.metric, tokens=job.tokens,
                         means=job.means, record=record).grid
            if not np.isfinite(grid).all():
                raise CheckpointError("the effect is not a finite number for every head")
            outs = np.stack([record[i].astype(np.float64).sum(axis=1) for i in range(len(record))])  # (L, nh, hd)
        except (CheckpointError, ValueError, MemoryError) as exc:
            result.failed.append((doc.index, doc.name, str(exc) or type(exc).__name__))
            continue
        except Exception as exc:  # anything else one document provokes fails that document, not the run
            result.failed.append((doc.index, doc.name, f"{type(exc).__name__}: {exc}"))
            continue
        m = HeadMoments.of(grid)
        result.moments = m if result.moments is None else result.moments + m
        result.output_sum = outs if result.output_sum is None else result.output_sum + outs
        result.positions += int(ids.size)
    return result


@dataclass
class CorpusSweep:
    """What a corpus sweep found: per-head mean and std of the metric over the documents swept."""

    mean: np.ndarray  # (L, nh) float64; NaN when no document ran
    std: np.ndarray  # (L, nh)
    documents: int  # documents swept
    total: int  # documents in the corpus (counted)
    metric: str
    mode: str
    complete: bool  # every document was read (not cancelled); a file is written only then
    failed: list[tuple[int, str, str]] = field(default_factory=list)
    elapsed: float = 0.0
    workers: int = 0
    head_means: np.ndarray | None = None  # (L, nh, hd) each head's mean output over every position swept
    positions: int = 0

    def ranks(self) -> np.ndarray:
        """(L, nh) rank of each head by its mean effect, 1 = largest (ties: lower layer, then head, first)."""
        L, nh = self.mean.shape
        order = sorted(((layer, h) for layer in range(L) for h in range(nh)),
                       key=lambda lh: (-self.mean[lh] if np.isfinite(self.mean[lh]) else np.inf, lh))
        out = np.zeros((L, nh), dtype=np.int64)
        for r, lh in enumerate(order, start=1):
            out[lh] = r
        return out

    def as_sweep(self):
        """The mean as an :class:`~attnviz.checkpoints.intervention_study.Sweep` (the window's importance grid)."""
        from attnviz.checkpoints.intervention_study import Sweep

        return Sweep(np.array(self.mean), self.metric, self.mode)


def sweep_schema(meta: dict):
    pa, _pq = _pa()

    fields = [pa.field("layer", pa.int32()), pa.field("head", pa.int32()), pa.field("mean", pa.float64()),
              pa.field("std", pa.float64()), pa.field("documents", pa.int64()), pa.field("rank", pa.int64()),
              pa.field("output_mean", pa.list_(pa.float64()))]
    md = {f"attnviz.{k}": str(v) for k, v in meta.items()}
    md["attnviz.schema"] = f"sweep-{SCHEMA_VERSION}"
    return pa.schema(fields, metadata=md)


def sweep_columns(res: CorpusSweep) -> dict:
    L, nh = res.mean.shape
    layer, head = np.meshgrid(np.arange(L), np.arange(nh), indexing="ij")  # (L, nh) each
    return {"layer": layer.ravel().astype(np.int32), "head": head.ravel().astype(np.int32),
            "mean": res.mean.ravel(), "std": res.std.ravel(),
            "documents": np.full(L * nh, res.documents, dtype=np.int64), "rank": res.ranks().ravel(),
            "output_mean": [list(map(float, v)) for v in res.head_means.reshape(L * nh, -1)]}


@dataclass(frozen=True, eq=False)
class SweepFile:
    """A sweep file read back (:func:`read_sweep`)."""

    path: Path
    mean: np.ndarray  # (L, nh)
    std: np.ndarray  # (L, nh)
    rank: np.ndarray  # (L, nh)
    documents: int
    head_means: np.ndarray  # (L, nh, hd) each head's mean output over the corpus
    metadata: dict


def read_sweep(path) -> SweepFile:
    """Read a file written by ``attnviz-cli model sweep``; StatsFileError says what is wrong with it."""
    _pa_mod, pq = _pa()
    p = Path(path)
    if not p.is_file():
        raise StatsFileError(f"sweep file not found: {p}")
    try:
        table = pq.read_table(p)
    except Exception as exc:  # ArrowInvalid / OSError: not Parquet
        raise StatsFileError(f"{p} is not a readable Parquet file: {exc}") from None
    layer, head, L, nh = head_rows(p, table, ("layer", "head", "mean", "std", "documents", "rank", "output_mean"),
                                   "a head sweep file (attnviz-cli model sweep)")
    outs = table.column("output_mean").to_pylist()
    sizes = {len(v) if v is not None else -1 for v in outs}
    if len(sizes) != 1 or min(sizes) < 1:
        raise StatsFileError(f"{p}: the output means are not one list of the same length per head")
    grids = {}
    for name in ("mean", "std", "rank"):
        g = np.full((L, nh), np.nan)
        g[layer, head] = table.column(name).to_numpy(zero_copy_only=False).astype(np.float64)
        grids[name] = g
    means = np.full((L, nh, sizes.pop()), np.nan)
    means[layer, head] = np.asarray(outs, dtype=np.float64)
    if not np.isfinite(means).all():
        raise StatsFileError(f"{p}: the output means are not all finite numbers")
    raw = table.schema.metadata or {}
    meta = {k.decode()[len("attnviz."):]: v.decode() for k, v in raw.items() if k.decode().startswith("attnviz.")}
    return SweepFile(path=p, mean=grids["mean"], std=grids["std"], rank=grids["rank"].astype(np.int64),
                     documents=int(table.column("documents")[0].as_py()), head_means=means, metadata=meta)


def _check_metric(ckpt, metric: str | None, tokens) -> tuple[str, tuple[int, int] | None]:
    from attnviz.checkpoints.intervention_study import default_metric, token_id

    metric = metric or default_metric(ckpt.config)
    if ckpt.kind == "vit":
        raise CorpusRunError(f"{ckpt.name} is an image model; the corpus sweep reads text")
    encoder = ckpt.kind == "bert"
    allowed = ("cosine",) if encoder else ("kl", "logit_diff")
    if metric not in allowed:
        raise CorpusRunError(f"--metric {metric}: {ckpt.name} is measured by {' or '.join(allowed)}")
    if metric != "logit_diff":
        if tokens:
            raise CorpusRunError("--tokens is for --metric logit_diff")
        return metric, None
    if not tokens or len(tokens) != 2:
        raise CorpusRunError("--metric logit_diff needs two tokens: --tokens A B (a piece, a one-token word, or #ID)")
    try:
        return metric, tuple(token_id(ckpt, t) if isinstance(t, str) else int(t) for t in tokens)
    except CheckpointError as exc:
        raise CorpusRunError(str(exc)) from None


def run_sweep(folder, name: str | None, corpora, out=None, *, mode: str = "zero", metric: str | None = None,
              tokens=None, scheduler: str = "processes", workers: int | None = None, batch: int = DEFAULT_BATCH,
              max_tokens: int | None = None, progress: Callable[[Progress], None] | None = None,
              cancelled: Callable[[], bool] | None = None, means=None) -> CorpusSweep:
    """Sweep every head over every document of ``corpora`` (one path or several) through the checkpoint in
    ``folder``; the result, written to ``out`` (when given) only if the sweep completed.

    ``cancelled()`` is asked after each partition: when true the sweep stops (the partitions in flight are
    cancelled) and its partial result is returned with ``complete`` False, nothing written. Ctrl+C
    (KeyboardInterrupt) stops it the same way but propagates. ``means`` (L, nh, hd), with mode "mean": every
    head is set to these means (another sweep's ``output_mean``) instead of its mean over the document.
    CorpusRunError for everything a person can fix."""
    corpora = [Path(corpora)] if isinstance(corpora, (str, os.PathLike)) else [Path(p) for p in corpora]
    if not corpora:
        raise CorpusRunError("give at least one corpus")
    if mode not in MODES:
        raise CorpusRunError(f"--mode {mode!r}: choose {' or '.join(MODES)}")
    if batch < 1 or batch > MAX_BATCH:
        raise CorpusRunError(f"--batch must be 1 to {MAX_BATCH:,} documents (got {batch:,})")
    check_scheduler(scheduler, workers)
    if out is not None:
        out = Path(out)
        if any(out.resolve() == p.resolve() for p in corpora):
            raise CorpusRunError(f"--out {out} is a corpus; give it another name")
        try:
            output_target(out)
            check_writable(out)
        except StatsFileError as exc:
            raise CorpusRunError(str(exc)) from None
    try:
        counts = [count_documents(p) for p in corpora]
    except CorpusError as exc:
        raise CorpusRunError(str(exc)) from None
    total = sum(counts)
    if total == 0:
        raise CorpusRunError(f"the corpus {' '.join(map(str, corpora))} holds no documents")
    ckpt = check_model(folder, name, max_tokens)
    metric, token_ids = _check_metric(ckpt, metric, tokens)
    if means is not None:
        from attnviz.checkpoints.intervention_study import check_means

        if mode != "mean":
            raise CorpusRunError("--means sets each head to a corpus's means: use it with --mode mean")
        try:
            means = check_means(ckpt.config, means)
        except CheckpointError as exc:
            raise CorpusRunError(str(exc)) from None
    L, nh = ckpt.config.n_layer, ckpt.config.n_head
    meta = {"model": ckpt.name, "model_folder": str(Path(folder).resolve()), "layers": L, "heads": nh,
            "corpus": " ".join(map(str, corpora)), "metric": metric, "mode": mode,
            "tokens": "" if token_ids is None else f"{token_ids[0]},{token_ids[1]}", "scheduler": scheduler,
            "means": "corpus" if means is not None else "document"}
    del ckpt  # the workers load their own copy
    with open_client(scheduler, workers) as client:
        res = _drive(client, str(Path(folder).resolve()), name, corpora, total, batch, max_tokens, mode, metric,
                     token_ids, (L, nh), progress, cancelled, means)
    if res.complete and res.documents == 0:
        first = res.failed[0] if res.failed else None
        raise CorpusRunError(f"no document could be swept ({len(res.failed)} failed"
                             + (f"; first {first[1]}: {first[2]})" if first else ")"))
    if out is not None and res.complete:
        meta.update(documents=res.documents, failed=len(res.failed))
        try:
            f = AtomicParquet(out, sweep_schema(meta))
            try:
                f.write(sweep_columns(res))
                f.commit()
            except BaseException:
                f.discard()
                raise
        except StatsFileError as exc:
            raise CorpusRunError(str(exc)) from None
    return res


def _drive(client, folder, name, corpora, total, batch, max_tokens, mode, metric, tokens, shape, progress,
           cancelled, means=None) -> CorpusSweep:
    n_threads = max(1, sum(client.nthreads().values()))

    def jobs():
        index = 0
        for path in corpora:
            for part in partitions(path, batch):
                yield SweepJob(index=index, folder=folder, name=name, documents=part, mode=mode, metric=metric,
                               tokens=tokens, max_tokens=max_tokens, means=means)
                index += 1

    parts = jobs()
    pending = completion_queue()
    futures: set = set()
    waiting: dict[int, SweepPartResult] = {}
    next_fold = 0
    moments: HeadMoments | None = None
    output_sum: np.ndarray | None = None
    positions = 0
    failed: list[tuple[int, str, str]] = []
    done = n_failed = 0
    complete = True
    t0 = time.perf_counter()

    def submit_more() -> None:
        while len(futures) < IN_FLIGHT_PER_THREAD * n_threads:
            job = next(parts, None)
            if job is None:
                return
            fut = client.submit(sweep_partition, job, pure=False, key=f"attnviz-sweep-{os.getpid()}-{t0}-{job.index}")
            futures.add(fut)
            pending.add(fut)

    try:
        submit_more()
        for fut in pending:
            futures.discard(fut)
            if fut.status == "cancelled":
                raise CorpusRunError("a partition of the sweep was cancelled by the cluster")
            if fut.status != "finished":
                exc = fut.exception()
                if isinstance(exc, ModelUnavailable):
                    raise CorpusRunError(f"a worker could not load the model: {exc}")
                raise CorpusRunError(f"a partition of the sweep failed on the cluster: {type(exc).__name__}: {exc}")
            r = fut.result()
            fut.release()
            waiting[r.index] = r
            done += len(r.failed) + (r.moments.n if r.moments is not None else 0)
            n_failed += len(r.failed)
            while next_fold in waiting:
                part = waiting.pop(next_fold)
                next_fold += 1
                if part.moments is not None:
                    moments = part.moments if moments is None else moments + part.moments
                    output_sum = part.output_sum if output_sum is None else output_sum + part.output_sum
                    positions += part.positions
                failed.extend(part.failed)
            if progress is not None:
                progress(Progress(done=done, total=max(total, done), failed=n_failed, elapsed=time.perf_counter() - t0))
            if cancelled is not None and cancelled():
                complete = False
                break
            submit_more()
    except CorpusError as exc:
        raise CorpusRunError(str(exc)) from None
    finally:
        if futures:
            client.cancel(list(futures))
    if moments is None:
        mean = std = np.full(shape, np.nan)
        n = 0
    else:
        mean, std, n = moments.mean, moments.std, moments.n
    head_means = None if output_sum is None else output_sum / positions
    return CorpusSweep(mean=mean, std=std, documents=n, total=total, metric=metric, mode=mode, complete=complete,
                       failed=failed, elapsed=time.perf_counter() - t0, workers=n_threads, head_means=head_means,
                       positions=positions)
