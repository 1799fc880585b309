"""Documents of a corpus, streamed: never more than one partition of text in memory.

A corpus is a text file (a document per line, named ``notes.txt:12``), a folder of .txt files, a
.parquet file with a ``text`` column (``data.parquet:row 7``) or a .jsonl file of ``{"text": ...}``.
Every line / row / file is a document, blank or malformed ones too: they fail on the worker and are
named there, so the summary accounts for every document of the input.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import Iterator

TEXT_COLUMN = "text"
_CHUNK = 1 << 20


class CorpusError(ValueError):
    """A corpus that cannot be read at all (missing, wrong format, no documents); the message names it."""


@dataclass(frozen=True)
class Document:
    index: int  # position in the corpus, from 0
    name: str  # where it comes from, for messages: "file.txt:3", "sub/a.txt", "data.parquet:row 7"
    text: object  # normally a str; anything else fails as a document, not as the run


def corpus_kind(path) -> str:
    """"folder" | "parquet" | "jsonl" | "lines", or CorpusError when ``path`` does not exist."""
    p = Path(path)
    if not p.exists():
        raise CorpusError(f"corpus not found: {p}")
    if p.is_dir():
        return "folder"
    suffix = p.suffix.lower()
    if suffix == ".parquet":
        return "parquet"
    if suffix == ".jsonl":
        return "jsonl"
    return "lines"


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
    n, last = 0, b"\n"
    with open(p, "rb") as fh:
        while chunk := fh.read(_CHUNK):
            n += chunk.count(b"\n")
            last = chunk[-1:]
    return n + (last != b"\n")  # a last line without a newline still counts


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


def _lines(p: Path) -> Iterator[tuple[str, object]]:
    with open(p, "r", encoding="utf-8", newline="") as fh:
        for i, line in enumerate(fh, start=1):
            yield f"{p.name}:{i}", line.rstrip("\r\n")


def _jsonl(p: Path) -> Iterator[tuple[str, object]]:
    for name, line in _lines(p):
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            yield name, ValueError(f"not a JSON object ({exc.msg})")
            continue
        if not isinstance(obj, dict) or TEXT_COLUMN not in obj:
            yield name, ValueError(f"no '{TEXT_COLUMN}' field")
            continue
        yield name, obj[TEXT_COLUMN]


def _parquet_rows(p: Path, batch: int) -> Iterator[tuple[str, object]]:
    i = 0
    for rb in _parquet(p).iter_batches(batch_size=max(batch, 64), columns=[TEXT_COLUMN]):
        for text in rb.column(0).to_pylist():
            yield f"{p.name}:row {i}", text
            i += 1


def _folder(p: Path) -> Iterator[tuple[str, object]]:
    for f in _folder_files(p):
        name = f.relative_to(p).as_posix()
        try:
            yield name, f.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            yield name, ValueError(f"cannot read it ({exc})")


def iter_documents(path, batch: int = 64) -> Iterator[Document]:
    """The corpus's documents in order; CorpusError for a corpus that cannot be read at all."""
    p = Path(path)
    kind = corpus_kind(p)
    rows = {"folder": lambda: _folder(p), "parquet": lambda: _parquet_rows(p, batch),
            "jsonl": lambda: _jsonl(p), "lines": lambda: _lines(p)}[kind]()
    try:
        for index, (name, text) in enumerate(rows):
            yield Document(index, name, text)
    except UnicodeDecodeError as exc:
        raise CorpusError(f"{p} is not UTF-8 text ({exc.reason} at byte {exc.start} of a line)") from None
    except OSError as exc:
        raise CorpusError(f"cannot read {p}: {exc}") from None


def partitions(path, batch: int) -> Iterator[list[Document]]:
    """Lists of ``batch`` consecutive documents (the last one shorter)."""
    if batch < 1:
        raise CorpusError(f"a partition holds at least 1 document (got --batch {batch})")
    docs = iter_documents(path, batch)
    while part := list(islice(docs, batch)):
        yield part
