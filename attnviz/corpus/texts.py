"""Documents of a corpus, streamed: never more than one partition of text in memory.

A corpus is a text file (a document per line, named ``notes.txt:12``), a folder of .txt files, a
.parquet file with a ``text`` column (``data.parquet:row 7``) or a .jsonl file of ``{"text": ...}``.
Every line / row / file is a document, blank or malformed ones too: they fail on the worker and are
named there, so the summary accounts for every document of the input. A line ends at ``\\n``, ``\\r\\n``
or a lone ``\\r``, the same for counting and for reading.

Text is read in pieces of at most :data:`MAX_DOCUMENT_BYTES` per document: a longer document, or a
line that is not UTF-8, becomes a failing document with its reason (its text is never held whole
nor sent to a worker). A corpus must be a regular file or a folder: it is read twice (counted, then
run), so a pipe, a device or a socket is refused before anything is read.
"""

from __future__ import annotations

import json
import os
import stat
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import Iterator

from attnviz.jsontext import JsonRefused, loads_guarded

TEXT_COLUMN = "text"
_CHUNK = 1 << 20
MAX_DOCUMENT_BYTES = 1 << 20  # a longer document fails unread (tokenising 1 MiB takes about a second)
_KINDS = ((stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISFIFO, "a named pipe (FIFO)"), (stat.S_ISSOCK, "a socket"))


class CorpusError(ValueError):
    """A corpus that cannot be read at all (missing, wrong format, no documents); the message names it."""


@dataclass(frozen=True)
class Document:
    index: int  # position in the corpus, from 0
    name: str  # where it comes from, for messages: "file.txt:3", "sub/a.txt", "data.parquet:row 7"
    text: object  # normally a str; anything else fails as a document, not as the run


def corpus_kind(path) -> str:
    """"folder" | "parquet" | "jsonl" | "lines", or CorpusError when ``path`` does not exist or is
    neither a regular file nor a folder."""
    p = Path(path)
    try:
        st = os.stat(p)
    except FileNotFoundError:
        raise CorpusError(f"corpus not found: {p}") from None
    except OSError as exc:
        raise CorpusError(f"cannot read {p}: {exc.strerror or exc}") from None
    if stat.S_ISDIR(st.st_mode):
        return "folder"
    if not stat.S_ISREG(st.st_mode):
        kind = next((name for test, name in _KINDS if test(st.st_mode)), "not a regular file")
        raise CorpusError(f"the corpus {p} is {kind}, not a file or a folder; a corpus is read twice "
                          "(counted, then run): save it to a file first")
    suffix = p.suffix.lower()
    if suffix == ".parquet":
        return "parquet"
    if suffix == ".jsonl":
        return "jsonl"
    return "lines"


def _open_regular(p: Path):
    """``p`` opened for reading in binary, without blocking on a FIFO put there since it was checked;
    OSError when it is not a regular file any more."""
    fd = os.open(p, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            kind = next((name for test, name in _KINDS if test(mode)), "not a regular file")
            raise OSError(f"it is now {kind}, not a file")
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def _folder_files(p: Path) -> list[Path]:
    return sorted(f for f in p.rglob("*") if f.is_file() and f.suffix.lower() == ".txt")


def _parquet(p: Path):
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise CorpusError("reading Parquet needs pyarrow: pip install 'attnviz[corpus]'") from None
    try:
        pf = pq.ParquetFile(p)
    except Exception as exc:  # pyarrow raises ArrowInvalid / OSError for a file that is not Parquet
        raise CorpusError(f"{p} is not a readable Parquet file: {exc}") from None
    names = pf.schema_arrow.names
    if TEXT_COLUMN not in names:
        raise CorpusError(f"{p} has no '{TEXT_COLUMN}' column (columns: {', '.join(names) or 'none'})")
    return pf


def _count_lines(p: Path) -> int:
    """Lines as :func:`_raw_lines` splits them, counted without splitting."""
    n, last, prev_cr = 0, b"\n", False
    with _open_regular(p) as fh:
        while chunk := fh.read(_CHUNK):
            n += chunk.count(b"\n") + chunk.count(b"\r") - chunk.count(b"\r\n")
            if prev_cr and chunk[:1] == b"\n":
                n -= 1  # a "\r\n" across two chunks ends one line, not two
            prev_cr = chunk[-1:] == b"\r"
            last = chunk[-1:]
    return n + (last not in (b"\n", b"\r"))  # a last line without an end still counts


def count_documents(path) -> int:
    """Number of documents in the corpus at ``path`` (a streaming pass; CorpusError if unreadable)."""
    p = Path(path)
    kind = corpus_kind(p)
    try:
        if kind == "folder":
            return len(_folder_files(p))
        if kind == "parquet":
            return _parquet(p).metadata.num_rows
        return _count_lines(p)
    except OSError as exc:
        raise CorpusError(f"cannot read {p}: {exc}") from None


def _too_long(size: int, limit: int) -> ValueError:
    return ValueError(f"{size:,} bytes, over the limit of {limit:,} bytes for one document; it was not read "
                      "(split it into shorter documents)")


def _raw_lines(p: Path, limit: int) -> Iterator[tuple[bytes | None, int]]:
    """(the line's bytes without its end, or None when it is longer than ``limit``; its size in bytes),
    reading ``_CHUNK`` bytes at a time and keeping at most ``limit`` bytes of a line."""
    carry: bytearray | None = bytearray()  # the line under way; None once it is over the limit
    size = 0  # its bytes so far
    skip_lf = False  # the previous chunk ended in "\r": a "\n" starting this one belongs to it
    with _open_regular(p) as fh:
        while chunk := fh.read(_CHUNK):
            if skip_lf and chunk[:1] == b"\n":
                chunk = chunk[1:]
            skip_lf = False
            cut = max(chunk.rfind(b"\n"), chunk.rfind(b"\r"))  # the last line end in this chunk
            head, tail = (chunk[:cut + 1], chunk[cut + 1:]) if cut >= 0 else (b"", chunk)
            if head:
                skip_lf = not tail and head[-1:] == b"\r"  # the chunk ends in "\r"
                lines = head.splitlines()  # bytes split at \n, \r\n and \r only: one per line end
                first = lines[0]
                size += len(first)
                if carry is not None and size <= limit:
                    carry += first
                    yield bytes(carry), size
                else:
                    yield None, size
                for line in islice(lines, 1, None):
                    yield (line if len(line) <= limit else None), len(line)
                carry, size = bytearray(), 0
            size += len(tail)
            if carry is not None and size <= limit:
                carry += tail
            else:
                carry = None
    if size or carry is None:
        yield (bytes(carry) if carry is not None else None), size


def _lines(p: Path) -> Iterator[tuple[str, object]]:
    limit = MAX_DOCUMENT_BYTES
    for i, (raw, size) in enumerate(_raw_lines(p, limit), start=1):
        name = f"{p.name}:{i}"
        if raw is None:
            yield name, _too_long(size, limit)
            continue
        try:
            yield name, raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            yield name, ValueError(f"line {i} is not UTF-8 text ({exc.reason} at byte {exc.start} of the line)")


def _jsonl(p: Path) -> Iterator[tuple[str, object]]:
    for name, line in _lines(p):
        if isinstance(line, Exception):
            yield name, line
            continue
        try:
            obj = loads_guarded(line)  # the line's length is capped by _lines
        except JsonRefused:
            yield name, ValueError("not a JSON object (nested too deeply)")
            continue
        except json.JSONDecodeError as exc:
            yield name, ValueError(f"not a JSON object ({exc.msg})")
            continue
        except RecursionError:
            yield name, ValueError("not a JSON object (nested too deeply)")
            continue
        if not isinstance(obj, dict) or TEXT_COLUMN not in obj:
            yield name, ValueError(f"no '{TEXT_COLUMN}' field")
            continue
        yield name, obj[TEXT_COLUMN]


def _parquet_rows(p: Path, batch: int) -> Iterator[tuple[str, object]]:
    import pyarrow.compute as pc

    limit = MAX_DOCUMENT_BYTES
    i = 0
    for rb in _parquet(p).iter_batches(batch_size=max(batch, 64), columns=[TEXT_COLUMN]):
        col = rb.column(0)
        try:
            sizes = pc.binary_length(col).to_pylist()  # bytes of each text, None for null
        except Exception:  # not a string column: every row fails on the worker as "not text"
            sizes = [None] * len(col)
        for k, size in enumerate(sizes):
            text = _too_long(size, limit) if size is not None and size > limit else col[k].as_py()
            yield f"{p.name}:row {i}", text
            i += 1


def _read_file(f: Path, limit: int) -> object:
    try:
        with _open_regular(f) as fh:
            size = os.fstat(fh.fileno()).st_size
            if size > limit:
                return _too_long(size, limit)
            raw = fh.read(limit + 1)
    except OSError as exc:
        return ValueError(f"cannot read it ({exc})")
    if len(raw) > limit:  # grew since it was measured
        return _too_long(len(raw), limit)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return ValueError(f"not UTF-8 text ({exc.reason} at byte {exc.start})")


def _folder(p: Path) -> Iterator[tuple[str, object]]:
    limit = MAX_DOCUMENT_BYTES
    for f in _folder_files(p):
        yield f.relative_to(p).as_posix(), _read_file(f, limit)


def iter_documents(path, batch: int = 64) -> Iterator[Document]:
    """The corpus's documents in order; CorpusError for a corpus that cannot be read at all."""
    p = Path(path)
    kind = corpus_kind(p)
    rows = {"folder": lambda: _folder(p), "parquet": lambda: _parquet_rows(p, batch),
            "jsonl": lambda: _jsonl(p), "lines": lambda: _lines(p)}[kind]()
    try:
        for index, (name, text) in enumerate(rows):
            yield Document(index, name, text)
    except OSError as exc:
        raise CorpusError(f"cannot read {p}: {exc}") from None


def partitions(path, batch: int) -> Iterator[list[Document]]:
    """Lists of ``batch`` consecutive documents (the last one shorter)."""
    if batch < 1:
        raise CorpusError(f"a partition holds at least 1 document (got --batch {batch})")
    docs = iter_documents(path, batch)
    while part := list(islice(docs, batch)):
        yield part
