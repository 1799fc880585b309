"""Custom token blocks for other modalities: robot state, actions, noise, anything given as numbers.

A :class:`CustomBlock` makes ``count`` rows of zeros (placeholders), seeded Gaussian noise (e.g. the
noisy action tokens a flow-matching action expert starts from) or rows read from a .npy / .csv file
(e.g. a recorded joint state); labels are the name and the index ("state0", "state1", ...).
"""

from __future__ import annotations

import csv
import itertools
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from attnviz.sources.errors import (MAX_SOURCE_TOKENS, SourceError, finite_nonnegative, nonnegative_int, positive_int,
                                    read_npy)

GENERATORS = ("zeros", "noise", "file")
MAX_VALUES_FILE_BYTES = 256 * 2**20  # a values file larger than this is surely not a token block
MAX_BLOCK_TOKENS = MAX_SOURCE_TOKENS  # tokens one block may hold
MAX_BLOCK_COLUMNS = 4096  # numbers per token: the largest d_model a session has
MAX_BLOCK_CELLS = MAX_VALUES_FILE_BYTES // 8  # numbers in one block: as many as the largest .npy holds
MAX_CSV_LINE_CHARS = 64 * MAX_BLOCK_COLUMNS  # one CSV row of MAX_BLOCK_COLUMNS long numbers fits easily


@dataclass(frozen=True, eq=False)
class CustomBlock:
    """A named block of ``count`` tokens whose vectors come from ``generator``."""

    name: str  # label prefix and default segment name ("state" -> "state0", "state1", ...)
    count: int  # number of tokens in the block
    generator: str = "zeros"  # "zeros", "noise" (seeded Gaussian) or "file" (``values``)
    seed: int = 0  # seeds the "noise" generator
    scale: float = 1.0  # standard deviation of "noise"
    values: np.ndarray | None = None  # (count, d_model) rows for "file" (see load_block_values); ignored otherwise
    source: str = ""  # where ``values`` came from (a file name), shown to the person

    def __post_init__(self):
        put = object.__setattr__
        if not isinstance(self.name, str) or not self.name.strip():
            raise SourceError("a custom block needs a non-empty name")
        put(self, "count", positive_int(f"token count of block {self.name!r}", self.count))
        if self.count > MAX_BLOCK_TOKENS:
            raise SourceError(f"block {self.name!r} has {self.count:,} tokens; a block holds at most "
                              f"{MAX_BLOCK_TOKENS:,}")
        if self.generator not in GENERATORS:
            raise SourceError(
                f"block {self.name!r}: unknown generator {self.generator!r}; use one of: {', '.join(GENERATORS)}"
            )
        put(self, "seed", nonnegative_int("seed", self.seed))
        put(self, "scale", finite_nonnegative("scale", self.scale))
        if self.generator == "file":
            if self.values is None:
                raise SourceError(f"block {self.name!r}: generator 'file' needs values (load them with load_block_values)")
            v = _check_values(np.asarray(self.values), self.source or f"block {self.name!r}", None)
            if v.shape[0] != self.count:
                raise SourceError(
                    f"block {self.name!r} has count {self.count} but its values have {v.shape[0]} rows"
                )
            put(self, "values", v)
        elif self.values is not None:  # kept (e.g. while switching generators) but not used
            put(self, "values", _check_values(np.asarray(self.values), self.source or f"block {self.name!r}", None))

    @classmethod
    def from_file(cls, name: str, path, d_model: int | None = None) -> "CustomBlock":
        """A "file" block with one token per row of a .npy / .csv file."""
        values = load_block_values(path, d_model)
        return cls(name=name, count=values.shape[0], generator="file", values=values, source=Path(path).name)

    def embed(self, d_model: int) -> np.ndarray:
        """The block's token vectors -> (count, d_model) float64."""
        d_model = positive_int("d_model", d_model)
        if self.generator == "zeros":
            return np.zeros((self.count, d_model))  # (count, d_model)
        if self.generator == "noise":
            rng = np.random.default_rng(self.seed)
            return rng.standard_normal((self.count, d_model)) * self.scale  # (count, d_model)
        if self.values.shape[1] != d_model:
            raise SourceError(
                f"block {self.name!r}: its values have {self.values.shape[1]} columns but d_model is {d_model}"
            )
        return np.array(self.values)  # (count, d_model), a writable copy

    def labels(self) -> list[str]:
        """``name0 .. name{count-1}``."""
        return [f"{self.name}{i}" for i in range(self.count)]

    def __eq__(self, other) -> bool:
        if not isinstance(other, CustomBlock):
            return NotImplemented
        same = (self.name, self.count, self.generator, self.seed, self.scale, self.source) == (
            other.name, other.count, other.generator, other.seed, other.scale, other.source
        )
        if self.values is None or other.values is None:
            return same and self.values is other.values
        return same and np.array_equal(self.values, other.values)

    __hash__ = None  # holds an array


def load_block_values(path, d_model: int | None = None) -> np.ndarray:
    """Rows of a ``.npy`` (no pickles) or ``.csv`` file -> float64 (rows, columns), all finite.

    A 1-D array is one token.  ``d_model`` (if given) must equal the number of columns.  CSV:
    comma-, semicolon- or tab-separated numbers; one header line of names is skipped.
    """
    path = Path(path)
    if d_model is not None:
        d_model = positive_int("d_model", d_model)
    if not path.is_file():
        raise SourceError(f"values file not found: {path}")
    size = path.stat().st_size
    if size == 0:
        raise SourceError(f"values file {path.name} is empty")
    if size > MAX_VALUES_FILE_BYTES:
        raise SourceError(f"values file {path.name} is {size / 2**20:.0f} MiB; a token block file is at most 256 MiB")
    suffix = path.suffix.lower()
    if suffix == ".npy":
        values = read_npy(path)
    elif suffix in (".csv", ".tsv", ".txt"):
        values = _read_csv(path)
    else:
        raise SourceError(f"values file {path.name}: use a .npy or .csv file (got {suffix or 'no extension'})")
    return _check_values(values, path.name, d_model)


def _data_lines(f, name: str):
    """The file's lines that hold data (not blank, not ``#`` comments), each read with a length cap so
    one endless line cannot fill memory."""
    for number in itertools.count(1):
        line = f.readline(MAX_CSV_LINE_CHARS + 1)
        if not line:
            return
        if len(line) > MAX_CSV_LINE_CHARS:
            raise SourceError(f"{name}: line {number} is longer than {MAX_CSV_LINE_CHARS:,} characters; a row holds "
                              f"at most {MAX_BLOCK_COLUMNS:,} numbers")
        if line.strip() and not line.lstrip().startswith("#"):
            yield line.rstrip("\r\n")


def _read_csv(path: Path) -> np.ndarray:
    """Read row by row, stopping as soon as the file has more rows or columns than a block may hold."""
    name = path.name
    try:
        with open(path, encoding="utf-8-sig", newline=None) as f:
            lines = _data_lines(f, name)
            first = next(lines, None)
            if first is None:
                raise SourceError(f"{name} has no rows of numbers")
            delimiter = next((d for d in (",", ";", "\t") if d in first), None)
            lines = itertools.chain([first], lines)
            cells = csv.reader(lines, delimiter=delimiter) if delimiter else (ln.split() for ln in lines)
            rows: list[np.ndarray] = []
            width = None
            header_checked = False
            for row in cells:
                row = [cell.strip() for cell in row]
                if not header_checked:
                    header_checked = True
                    if not _numeric_row(row):
                        continue  # a header of column names
                if width is None:
                    width = len(row)
                    if width > MAX_BLOCK_COLUMNS:
                        raise SourceError(f"{name}: rows have {width:,} values; a token holds at most "
                                          f"{MAX_BLOCK_COLUMNS:,} (the largest d_model)")
                r = len(rows) + 1
                if len(row) != width:
                    raise SourceError(f"{name}: line {r} of the data has {len(row)} values, the first has {width}")
                if r > MAX_BLOCK_TOKENS or r * width > MAX_BLOCK_CELLS:
                    numbers = "number" if width == 1 else "numbers"
                    raise SourceError(f"{name} has more than {r - 1:,} rows of {width} {numbers}; a block holds at most "
                                      f"{MAX_BLOCK_TOKENS:,} tokens and {MAX_BLOCK_CELLS:,} numbers (reading stopped "
                                      f"at data row {r})")
                out = np.empty(width)  # (width,)
                for c, cell in enumerate(row):
                    try:
                        out[c] = float(cell)
                    except ValueError:
                        raise SourceError(f"{name}: {cell!r} (data row {r}, column {c + 1}) is not a number") from None
                rows.append(out)
    except UnicodeDecodeError:
        raise SourceError(f"{name} is not a UTF-8 text file") from None
    except csv.Error as exc:
        raise SourceError(f"{name} is not a readable CSV file ({exc})") from None
    except OSError as exc:
        raise SourceError(f"cannot read values file {name}: {exc.strerror or exc}") from None
    if not rows:
        raise SourceError(f"{name} has a header but no rows of numbers")
    return np.stack(rows)  # (rows, width)


def _numeric_row(row: list[str]) -> bool:
    try:
        for cell in row:
            float(cell)
    except ValueError:
        return False
    return True


def _check_values(a: np.ndarray, what: str, d_model: int | None) -> np.ndarray:
    if a.dtype == object or not (np.issubdtype(a.dtype, np.number) or a.dtype == bool) or np.iscomplexobj(a):
        raise SourceError(f"{what}: values must be real numbers (got dtype {a.dtype})")
    if a.ndim == 1:
        a = a[None, :]  # (1, d): a single token
    if a.ndim != 2:
        raise SourceError(f"{what}: values must be a (tokens, d_model) table (got shape {a.shape})")
    if a.shape[0] == 0 or a.shape[1] == 0:
        raise SourceError(f"{what}: values are empty (shape {a.shape})")
    a = np.array(a, dtype=np.float64)  # (tokens, d_model), our own copy
    bad = ~np.isfinite(a)
    if bad.any():
        r, c = np.argwhere(bad)[0]
        raise SourceError(f"{what}: value at row {r + 1}, column {c + 1} is {a[r, c]} (NaN or infinite)")
    if d_model is not None and a.shape[1] != d_model:
        raise SourceError(f"{what}: values have {a.shape[1]} columns but d_model is {d_model}")
    a.flags.writeable = False
    return a
