"""``attnviz-cli corpus MODEL TEXTS --out STATS.parquet``: per-head attention statistics over a corpus, on Dask.

A progress bar runs on stderr; Ctrl+C stops and leaves no file behind; documents that fail are
named in the summary and give exit status 1, the statistics of the others still written. Outputs
that are not regular files (a folder, a device, a FIFO), a corpus that is not a file or a folder,
and arguments out of bounds are refused in one line before anything is read or computed.
"""

from __future__ import annotations

import signal
import sys
from contextlib import contextmanager
from pathlib import Path

from attnviz.cli import CliError

MAX_NAMED_FAILURES = 10


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "corpus", help="per-head attention statistics of a checkpoint over a corpus (Dask)",
        description="Run a text checkpoint over every document of a corpus on a Dask cluster and write "
                    "per-(layer, head) statistics (entropy, to_first, to_self, to_prev, distance) to Parquet.")
    p.add_argument("model", metavar="MODEL", help="checkpoint folder, or a ready model's name (see 'model list')")
    p.add_argument("texts", metavar="TEXTS", type=Path,
                   help="a text file (one document per line), a folder of .txt files, or a .parquet/.jsonl file with a "
                        "'text' column; a document over 1 MiB, or a line that is not UTF-8, fails unread")
    p.add_argument("--out", type=Path, required=True, metavar="STATS.parquet", help="output: one row per (layer, head)")
    p.add_argument("--scheduler", default="processes", metavar="SCHED",
                   help="threads, processes (a local cluster on this machine; default) or tcp://HOST:PORT of a running dask scheduler")
    p.add_argument("--workers", type=int, default=None, metavar="N",
                   help="local cluster size: worker processes (processes) or threads (threads); default: the usable "
                        "cores, at most 4 per usable core")
    p.add_argument("--batch", type=int, default=None, metavar="N",
                   help="documents per partition, at most 10,000 (default: 16 to 128, at least 4 partitions per worker)")
    p.add_argument("--max-tokens", type=int, default=None, metavar="T",
                   help="documents with more tokens fail instead of running (default: the model's limit); a long one "
                        "is found from its first kilobytes and its text is not sent to a worker")
    p.add_argument("--per-document", type=Path, default=None, metavar="FILE",
                   help="also write each document's statistics, one row per (document, layer, head)")
    p.set_defaults(func=_cmd_corpus)


def _clock(seconds: float) -> str:
    s = int(round(seconds))
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}" if s >= 3600 else f"{s // 60}:{s % 60:02d}"


@contextmanager
def _terminate_as_interrupt():
    """SIGTERM (a job system stopping the run) stops it as cleanly as Ctrl+C: workers shut, no file left."""
    def stop(_signum, _frame):
        raise KeyboardInterrupt

    try:
        old = signal.signal(signal.SIGTERM, stop)
    except ValueError:  # not the main thread
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)


def _cmd_corpus(args) -> int:
    from attnviz.cli.model_cmd import _resolve
    from attnviz.corpus.run import CorpusRunError, run_corpus
    from attnviz.persist import SessionError, check_save_target

    try:  # as a session save does: a folder, a device or a FIFO named as output is refused, not replaced
        for path in (args.out, args.per_document):
            if path is not None:
                check_save_target(path)  # (the files are then written where a symlink points, the link kept)
    except SessionError as exc:
        raise CliError(str(exc)) from None
    folder, name = _resolve(args.model)
    from attnviz.cli.progress import DocumentBar

    bar = DocumentBar()
    try:
        with _terminate_as_interrupt():
            result = run_corpus(folder, name, args.texts, args.out, scheduler=args.scheduler, workers=args.workers,
                                batch=args.batch, max_tokens=args.max_tokens, per_document=args.per_document,
                                progress=bar)
    except KeyboardInterrupt:
        bar.end()
        print(f"interrupted: nothing written to {args.out}", file=sys.stderr)
        return 130
    except CorpusRunError as exc:
        bar.end()
        raise CliError(str(exc)) from None
    bar.end()
    s = result.sums
    rate = (s.documents + len(result.failed)) / result.elapsed if result.elapsed > 0 else 0.0
    print(f"{s.documents:,} of {result.total:,} documents ran ({s.rows:,} query rows) in {_clock(result.elapsed)} "
          f"on {result.workers} worker thread(s), {rate:.1f} documents/s")
    if result.worker_cpu == result.worker_cpu and s.documents:
        print(f"CPU time: workers {result.worker_cpu:.1f} s ({1000 * result.worker_cpu / s.documents:.1f} ms "
              f"per document), this process {result.driver_cpu:.1f} s")
    print(f"statistics of {s.shape[0]} layers x {s.shape[1]} heads -> {args.out}")
    if args.per_document is not None:
        print(f"per-document statistics -> {args.per_document}")
    if result.changed:  # the statistics of what was read are written; the run is still not the corpus counted
        print(f"error: {args.texts} changed during the run: it held {result.counted:,} documents when counted "
              f"and {result.total:,} when read", file=sys.stderr)
        if not result.failed:
            return 1
    if result.failed:
        print(f"{len(result.failed):,} document(s) failed:", file=sys.stderr)
        for _index, doc, message in result.failed[:MAX_NAMED_FAILURES]:
            print(f"  {doc}: {message}", file=sys.stderr)
        if len(result.failed) > MAX_NAMED_FAILURES:
            print(f"  ... and {len(result.failed) - MAX_NAMED_FAILURES:,} more", file=sys.stderr)
        return 1
    return 0
