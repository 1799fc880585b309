"""STATS.parquet and the per-document file: written whole or not at all, and STATS read back.

STATS has one row per (layer, head) with the float64 means of every statistic, ``rows`` and
``documents``; its schema metadata names the model, the corpus and how many documents failed. The
per-document file has one row per (document, layer, head). Both are renamed into place only when
complete (:class:`AtomicParquet`), so an interrupted run leaves no half-written file; the temporary
of a run that was killed (``.NAME.PID.part``) is removed by the next run writing the same file.
"""

from __future__ import annotations

import os
import re
import stat
import time
from dataclasses import dataclass
from pathlib import Path

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None

import numpy as np

from attnviz.corpus.stats import STATISTICS, HeadSums

META_PREFIX = "attnviz."
SCHEMA_VERSION = "1"
STALE_AFTER_S = 60.0  # an unlocked temporary untouched this long is stale even if its PID runs again
_KINDS = ((stat.S_ISDIR, "a folder"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISFIFO, "a named pipe (FIFO)"), (stat.S_ISSOCK, "a socket"))


class StatsFileError(ValueError):
    """A STATS file that cannot be read or written; the message names it."""


def _pa():
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise StatsFileError("Parquet files need pyarrow: pip install 'attnviz[corpus]'") from None
    return pa, pq


def temporary_path(target: Path) -> Path:
    return target.with_name(f".{target.name}.{os.getpid()}.part")


def output_target(path) -> Path:
    """The real file an output ``path`` names (symlinks followed); StatsFileError when something other
    than a regular file is there (a folder, a device, a FIFO, a socket): it is never replaced."""
    given = os.fspath(path)
    target = Path(os.path.realpath(given))
    try:
        st = os.stat(target)
    except FileNotFoundError:
        return target
    except OSError as exc:
        raise StatsFileError(f"cannot write {given}: {exc.strerror or exc}") from None
    if not stat.S_ISREG(st.st_mode):
        kind = next((name for test, name in _KINDS if test(st.st_mode)), "not a regular file")
        hint = "; give a file name such as stats.parquet" if stat.S_ISDIR(st.st_mode) else ", so it is left as it is"
        raise StatsFileError(f"cannot write {given}: it is {kind}, not a regular file{hint}")
    return target


def _pid_running(pid: int) -> bool:
    if os.name == "nt":  # os.kill(pid, 0) would terminate a process on Windows: assume it runs
        return True
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, OverflowError):
        return False
    except OSError:  # PermissionError: it exists and belongs to someone else
        return True
    return True


def _lock_free(path: Path) -> bool:
    """True when nobody holds ``path``'s flock (taken and released here); False when held or unopenable."""
    if fcntl is None:
        return True
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return False
    finally:
        os.close(fd)
    return True


def remove_stale_parts(target: Path) -> list[Path]:
    """Remove ``.NAME.PID.part`` temporaries of killed runs writing ``target``; returns those removed.

    One is stale when its flock is free (a live writer holds it) and its PID does not run or it was
    untouched for :data:`STALE_AFTER_S`; only regular files are touched.
    """
    pattern = re.compile(rf"\.{re.escape(target.name)}\.(\d{{1,10}})\.part")
    removed = []
    try:
        entries = list(os.scandir(target.parent))
    except OSError:
        return removed
    now = time.time()
    for entry in entries:
        m = pattern.fullmatch(entry.name)
        if m is None:
            continue
        try:
            st = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        if not stat.S_ISREG(st.st_mode):
            continue
        path = Path(entry.path)
        if (now - st.st_mtime > STALE_AFTER_S or not _pid_running(int(m.group(1)))) and _lock_free(path):
            try:
                path.unlink()
            except OSError:
                continue
            removed.append(path)
    return removed


class AtomicParquet:
    """A Parquet file written in pieces to a temporary path and renamed into place by :meth:`commit`.

    The temporary is flock-ed while it is written, so another run never takes it for a killed one's."""

    def __init__(self, target, schema):
        pa, pq = _pa()
        self.given = Path(target)
        self.target = output_target(target)  # a link stays a link: its file is replaced
        self.tmp = temporary_path(self.target)
        self._fd = None
        try:
            self.target.parent.mkdir(parents=True, exist_ok=True)
            remove_stale_parts(self.target)
            self._fd = os.open(self.tmp, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o666)
            if fcntl is not None:
                fcntl.flock(self._fd, fcntl.LOCK_EX)
            self._writer = pq.ParquetWriter(self.tmp, schema)
        except OSError as exc:
            self._release()
            self.tmp.unlink(missing_ok=True)
            raise StatsFileError(f"cannot write {self.given}: {exc}") from None
        self._pa = pa

    def _release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # drops the lock
            self._fd = None

    def write(self, columns: dict) -> None:
        self._writer.write_table(self._pa.table(columns, schema=self._writer.schema))

    def commit(self) -> None:
        """Close and rename into place; StatsFileError (temporary removed) when that fails."""
        try:
            self._writer.close()
            output_target(self.given)  # nothing that is not a regular file appeared there meanwhile
            os.replace(self.tmp, self.target)
        except OSError as exc:
            self.discard()
            raise StatsFileError(f"cannot write {self.given}: {exc}") from None
        except StatsFileError:
            self.discard()
            raise
        finally:
            self._release()

    def discard(self) -> None:
        try:
            self._writer.close()
        finally:
            self._release()
            self.tmp.unlink(missing_ok=True)


def stats_schema(metadata: dict[str, str]):
    pa, _ = _pa()
    fields = [pa.field("layer", pa.int32()), pa.field("head", pa.int32())]
    fields += [pa.field(name, pa.float64()) for name in STATISTICS]
    fields += [pa.field("rows", pa.int64()), pa.field("documents", pa.int64())]
    meta = {f"{META_PREFIX}{k}": str(v) for k, v in metadata.items()}
    meta[f"{META_PREFIX}schema"] = SCHEMA_VERSION
    return pa.schema(fields, metadata=meta)


def stats_columns(sums: HeadSums) -> dict:
    """Columns of STATS.parquet, one row per (layer, head), layer-major."""
    L, nh = sums.shape
    layer, head = np.meshgrid(np.arange(L), np.arange(nh), indexing="ij")  # (L, nh) each
    cols = {"layer": layer.ravel().astype(np.int32), "head": head.ravel().astype(np.int32)}
    cols.update({name: m.ravel() for name, m in sums.means().items()})
    cols["rows"] = np.full(L * nh, sums.rows, dtype=np.int64)
    cols["documents"] = np.full(L * nh, sums.documents, dtype=np.int64)
    return cols


def per_document_schema(metadata: dict[str, str]):
    pa, _ = _pa()
    fields = [pa.field("document", pa.string()), pa.field("index", pa.int64()), pa.field("tokens", pa.int64()),
              pa.field("layer", pa.int32()), pa.field("head", pa.int32())]
    fields += [pa.field(name, pa.float64()) for name in STATISTICS]
    return pa.schema(fields, metadata={f"{META_PREFIX}{k}": str(v) for k, v in metadata.items()})


def per_document_columns(rows: list[tuple[int, str, int, np.ndarray]]) -> dict:
    """Columns for documents [(index, name, tokens, (L, nh, 5) means)], one row per (document, layer, head)."""
    L, nh, _ = rows[0][3].shape
    n = L * nh
    layer, head = np.meshgrid(np.arange(L), np.arange(nh), indexing="ij")  # (L, nh) each
    means = np.concatenate([m.reshape(n, -1) for *_rest, m in rows])  # (docs * n, 5)
    cols = {"document": [name for _i, name, _t, _m in rows for _ in range(n)],
            "index": np.repeat([i for i, *_ in rows], n).astype(np.int64),
            "tokens": np.repeat([t for _i, _n, t, _m in rows], n).astype(np.int64),
            "layer": np.tile(layer.ravel(), len(rows)).astype(np.int32),
            "head": np.tile(head.ravel(), len(rows)).astype(np.int32)}
    cols.update({name: means[:, k] for k, name in enumerate(STATISTICS)})
    return cols


@dataclass(frozen=True, eq=False)
class CorpusStats:
    """A STATS.parquet read back: each statistic as a (layers, heads) grid."""

    path: Path
    values: dict[str, np.ndarray]  # statistic -> (L, nh) float64
    rows: int  # query rows summed
    documents: int  # documents that ran
    metadata: dict[str, str]  # model, layers, heads, corpus, failed, ... (without the "attnviz." prefix)

    @property
    def shape(self) -> tuple[int, int]:
        return next(iter(self.values.values())).shape

    @property
    def model(self) -> str:
        return self.metadata.get("model", "")


def head_rows(p: Path, table, need: tuple[str, ...], what: str):
    """(layer, head, L, nh) of a per-(layer, head) table that holds the columns ``need`` and each of the
    L x nh pairs exactly once; StatsFileError names ``p`` and what it is not (``what``) otherwise."""
    missing = [c for c in need if c not in table.column_names]
    if missing:
        raise StatsFileError(f"{p} is not {what}: no column {', '.join(missing)}")
    if table.num_rows == 0:
        raise StatsFileError(f"{p} holds no (layer, head) rows")
    layer = np.asarray(table.column("layer").to_numpy(), dtype=np.int64)
    head = np.asarray(table.column("head").to_numpy(), dtype=np.int64)
    if layer.min() < 0 or head.min() < 0:
        raise StatsFileError(f"{p}: negative layer or head index")
    L, nh = int(layer.max()) + 1, int(head.max()) + 1
    if table.num_rows != L * nh or len(set(zip(layer.tolist(), head.tolist()))) != L * nh:
        raise StatsFileError(f"{p}: expected each of the {L} x {nh} (layer, head) pairs once, found {table.num_rows} rows")
    return layer, head, L, nh


def read_stats(path) -> CorpusStats:
    """Read a STATS.parquet written by ``attnviz-cli corpus``; StatsFileError says what is wrong."""
    _pa_mod, pq = _pa()
    p = Path(path)
    if not p.is_file():
        raise StatsFileError(f"statistics file not found: {p}")
    try:
        table = pq.read_table(p)
    except Exception as exc:  # ArrowInvalid / OSError: not Parquet
        raise StatsFileError(f"{p} is not a readable Parquet file: {exc}") from None
    layer, head, L, nh = head_rows(p, table, ("layer", "head", *STATISTICS, "rows", "documents"),
                                   "a corpus statistics file")
    values = {}
    for name in STATISTICS:
        grid = np.full((L, nh), np.nan)
        grid[layer, head] = table.column(name).to_numpy(zero_copy_only=False).astype(np.float64)
        values[name] = grid  # (L, nh)
    raw = table.schema.metadata or {}
    meta = {k.decode()[len(META_PREFIX):]: v.decode() for k, v in raw.items() if k.decode().startswith(META_PREFIX)}
    rows = int(table.column("rows")[0].as_py())
    documents = int(table.column("documents")[0].as_py())
    return CorpusStats(path=p, values=values, rows=rows, documents=documents, metadata=meta)
