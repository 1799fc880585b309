"""Memory-mapped safetensors files, one or sharded, read without copying the weights.

A file is an 8-byte little-endian header length, a JSON header (name -> dtype, shape, byte offsets)
and the raw data, mapped read-only so a tensor costs nothing until used; F32 is used in place.
A BF16 or F16 tensor is widened to float32 when read and, while the copies leave at least half of the
memory the system had available at the first one, kept: a model run again (every edit of a prompt in
the window) then reads its float32 weights instead of widening billions of values again, and the mapped
16-bit pages of a kept tensor are handed back to the system.
Shards are listed in ``model.safetensors.index.json`` (``weight_map``). Every problem is a
CheckpointError ("not a readable safetensors file" and what is wrong).
"""

from __future__ import annotations

import json
import math
import mmap
import struct
import threading
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from attnviz.checkpoints.errors import CheckpointError
from attnviz.checkpoints.json_file import read_json
from attnviz.engine.convert import bf16_matmul_t, bf16_to_f32
from attnviz.engine.runtime import available_memory
from attnviz.jsontext import JsonRefused, loads_guarded

# safetensors dtype -> (numpy dtype of the stored bits, bytes per element)
STORED = {"F16": np.dtype("<f2"), "BF16": np.dtype("<u2"), "F32": np.dtype("<f4"), "F64": np.dtype("<f8")}
NON_FLOAT = {"BOOL": 1, "U8": 1, "I8": 1, "I16": 2, "U16": 2, "I32": 4, "U32": 4, "I64": 8, "U64": 8,
             "F8_E4M3": 1, "F8_E5M2": 1}
MAX_HEADER = 100 * 2**20  # bytes of JSON header accepted (the real ones are a few MB at most)
INDEX = "model.safetensors.index.json"
BF16_EXP = 0x7F80  # exponent bits of a bfloat16: all ones = inf or NaN
KEEP_FRACTION = 0.5  # of the available memory, for float32 copies of 16-bit tensors (see StoredTensors.keep)


class Bf16Matrix:
    """A stored bfloat16 matrix (out, in) read as float32 without widening it whole: :func:`linear
    <attnviz.checkpoints.layers.linear>` multiplies by it block by block (:func:`bf16_matmul_t`); any
    other use (``np.asarray``) widens it."""

    __slots__ = ("bits",)
    dtype = np.dtype(np.float32)
    ndim = 2

    def __init__(self, bits: np.ndarray):
        self.bits = bits  # (out, in) uint16, a view of the mapped file

    @property
    def shape(self) -> tuple[int, int]:
        return self.bits.shape

    def __array__(self, dtype=None, copy=None):
        a = bf16_to_f32(self.bits)
        return a if dtype is None else a.astype(dtype, copy=False)

    def matmul_t(self, x: np.ndarray) -> np.ndarray:
        """``x @ W.T`` (T, out) for float32 x (T, in)."""
        return bf16_matmul_t(x, self.bits)


class _Entry:
    __slots__ = ("dtype", "shape", "file", "start", "stop")

    def __init__(self, dtype, shape, file, start, stop):
        self.dtype, self.shape, self.file, self.start, self.stop = dtype, shape, file, start, stop


def _bad(path: Path, why: str) -> CheckpointError:
    return CheckpointError(f"{path} is not a readable safetensors file ({why})")


def read_header(path: Path) -> tuple[dict[str, _Entry], int]:
    """Tensor name -> entry of one file, checked against the file's size; and the data's start offset."""
    try:
        size = path.stat().st_size
        with open(path, "rb") as fh:
            head = fh.read(8)
            if len(head) < 8:
                raise _bad(path, f"{size} bytes, shorter than the 8-byte header length")
            (n,) = struct.unpack("<Q", head)
            if n > MAX_HEADER or 8 + n > size:
                raise _bad(path, f"header length {n:,} bytes does not fit the file of {size:,} bytes")
            raw = fh.read(n)
    except OSError as exc:
        raise CheckpointError(f"cannot read {path}: {exc}") from None
    try:
        header = loads_guarded(raw.decode("utf-8"), object_pairs_hook=_no_duplicates)  # n <= MAX_HEADER
    except JsonRefused as exc:
        raise _bad(path, f"header is not JSON: it {exc}") from None
    except _Duplicate as exc:
        raise _bad(path, f"header names {exc.args[0]!r} twice") from None
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise _bad(path, f"header is not JSON: {type(exc).__name__}") from None
    if not isinstance(header, dict):
        raise _bad(path, "header is not a JSON object")
    meta = header.get("__metadata__")
    if meta is not None and (not isinstance(meta, dict) or
                             not all(isinstance(k, str) and isinstance(v, str) for k, v in meta.items())):
        raise _bad(path, "__metadata__ is not an object of strings")
    base, data_len = 8 + n, size - 8 - n
    entries = {}
    for name, spec in header.items():
        if name == "__metadata__":
            continue
        if not isinstance(spec, dict):
            raise _bad(path, f"entry {name!r} is not an object")
        dtype, shape, offs = spec.get("dtype"), spec.get("shape"), spec.get("data_offsets")
        if not isinstance(dtype, str) or (dtype not in STORED and dtype not in NON_FLOAT):
            raise _bad(path, f"tensor {name!r} has unknown dtype {dtype!r}")
        if (not isinstance(shape, list) or len(shape) > 8
                or not all(isinstance(s, int) and not isinstance(s, bool) and 0 <= s < 2**40 for s in shape)):
            raise _bad(path, f"tensor {name!r} has a malformed shape {shape!r}")
        if (not isinstance(offs, list) or len(offs) != 2
                or not all(isinstance(o, int) and not isinstance(o, bool) for o in offs)):
            raise _bad(path, f"tensor {name!r} has malformed data_offsets {offs!r}")
        a, b = offs
        itemsize = STORED[dtype].itemsize if dtype in STORED else NON_FLOAT[dtype]
        if not 0 <= a <= b <= data_len or b - a != math.prod(shape) * itemsize:
            raise _bad(path, f"tensor {name!r} at bytes {a}..{b} does not fit its shape {shape} or the "
                             f"file's {data_len:,} data bytes")
        entries[name] = _Entry(dtype, tuple(shape), path, base + a, base + b)
    _check_layout(path, entries, base, data_len)
    return entries, base


def _stamp(path: Path) -> tuple | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_size, st.st_mtime_ns, st.st_ino


class _Duplicate(Exception):
    pass


def _no_duplicates(pairs):
    seen = {}
    for k, v in pairs:
        if k in seen:
            raise _Duplicate(k)
        seen[k] = v
    return seen


def _check_layout(path: Path, entries: dict[str, _Entry], base: int, data_len: int) -> None:
    """The tensors tile the data exactly, as the format's specification and the safetensors library
    require: in offset order each starts where the one before ends, from byte 0 to the file's end (no
    two on the same bytes, no bytes no tensor covers)."""
    at = 0
    for name, e in sorted(entries.items(), key=lambda kv: (kv[1].start, kv[1].stop)):
        a, b = e.start - base, e.stop - base
        if a < at:
            raise _bad(path, f"tensor {name!r} at bytes {a}..{b} overlaps the tensor before it (which ends at {at})")
        if a > at:
            raise _bad(path, f"bytes {at}..{a} before tensor {name!r} belong to no tensor")
        at = b
    if at != data_len:
        raise _bad(path, f"the last {data_len - at:,} data bytes belong to no tensor")


def weight_files(folder: Path) -> list[Path]:
    """The safetensors file(s) of a checkpoint folder: model.safetensors, or the shards its index names."""
    single = folder / "model.safetensors"
    if single.is_file():
        return [single]
    index = folder / INDEX
    if not index.is_file():
        hint = "a checkpoint folder needs model.safetensors (or model.safetensors.index.json and its shards)"
        if (folder / "pytorch_model.bin").is_file() or (folder / "pytorch_model.bin.index.json").is_file():
            hint = "pytorch_model.bin is not read (pickle files can run code); convert it to model.safetensors"
        raise CheckpointError(f"the weights file is missing: {single} not found ({hint})")
    spec = read_json(index, "the weight index")
    wmap = spec.get("weight_map")
    if not isinstance(wmap, dict) or not wmap or not all(isinstance(v, str) for v in wmap.values()):
        raise CheckpointError(f"{index} has no 'weight_map' of tensor name -> shard file")
    files = []
    for shard in dict.fromkeys(wmap.values()):
        p = folder / shard
        if Path(shard).name != shard or not p.is_file():
            raise CheckpointError(f"{index} names the shard {shard!r}, which is not a file in {folder}")
        files.append(p)
    return files


class StoredTensors(Mapping):
    """Tensor name -> float32/float64 array of memory-mapped safetensors file(s), converted on access."""

    def __init__(self, files: list[Path]):
        self.files = list(files)
        self._entries: dict[str, _Entry] = {}
        self._stamps: dict[Path, tuple] = {}  # file -> (size, mtime, inode) when its header was read
        for f in self.files:
            entries, _ = read_header(f)
            self._stamps[f] = _stamp(f)
            for name, e in entries.items():
                self._entries.setdefault(name, e)
        self._maps: dict[Path, np.memmap] = {}
        self._keep: set[str] | None = None  # names visible through the Mapping (None: all)
        self._alias: dict[str, str] = {}  # canonical name -> stored name
        self._kept: dict[str, np.ndarray] = {}  # stored name -> read-only float32 copy of a 16-bit tensor
        self._kept_bytes = 0
        self._budget: int | None = None  # bytes of float32 copies to keep (None: by the available memory)
        self._floor: int | None = None  # available bytes the copies leave (None: set at the first copy)
        self._refused = False  # a copy did not fit: stop asking
        self._lock = threading.Lock()

    # ---- float32 copies of 16-bit tensors ---------------------------------------------------------
    def keep(self, budget: int | None) -> None:
        """Keep float32 copies of widened 16-bit tensors up to ``budget`` bytes (0: keep none, every read
        widens again). None (the default): keep copies while the memory still available stays above
        1 - KEEP_FRACTION of what was available at the first widening, so the copies never take the half
        a pass plans with (decoder_run.MEMORY_SHARE). Copies beyond a smaller budget are dropped."""
        if budget is not None and (isinstance(budget, bool) or not isinstance(budget, int) or budget < 0):
            raise ValueError(f"budget must be a number of bytes >= 0 or None, got {budget!r}")
        with self._lock:
            self._budget, self._floor, self._refused = budget, None, False
            if budget is not None and self._kept_bytes > budget:
                self._kept.clear()
                self._kept_bytes = 0

    @property
    def kept_bytes(self) -> int:
        """Bytes of float32 copies held now."""
        return self._kept_bytes

    def _fits(self, nbytes: int) -> bool:
        if self._budget is not None:
            return self._kept_bytes + nbytes <= self._budget
        avail = available_memory()
        if avail is None:
            return False
        if self._floor is None:
            self._floor = int(avail * (1 - KEEP_FRACTION))
        return avail - nbytes >= self._floor

    def _remember(self, stored: str, arr: np.ndarray) -> None:
        with self._lock:
            if self._refused or stored in self._kept:
                return
            if not self._fits(arr.nbytes):
                self._refused = True  # full: later reads widen without asking again (keep() resets)
                return
            arr.flags.writeable = False  # shared by every later read
            self._kept[stored] = arr
            self._kept_bytes += arr.nbytes
        self._release_pages(stored)

    def _release_pages(self, stored: str) -> None:
        """Hand the mapped pages of a kept tensor back (they are read again from the file if ever needed)."""
        e = self._entries[stored]
        mm = self._maps.get(e.file)
        raw = getattr(mm, "_mmap", None)
        if raw is None or not hasattr(raw, "madvise") or not hasattr(mmap, "MADV_DONTNEED"):
            return
        page = mmap.PAGESIZE
        a = -(-e.start // page) * page  # whole pages inside the tensor only: neighbours stay mapped
        b = e.stop // page * page
        if b > a:
            try:
                raw.madvise(mmap.MADV_DONTNEED, a, b - a)
            except (OSError, ValueError):
                pass

    # ---- the file's view ------------------------------------------------------------------------
    def stored_names(self) -> set[str]:
        return set(self._entries)

    def stored_dtype(self, stored: str) -> str:
        return self._entries[stored].dtype

    def stored_shape(self, stored: str) -> tuple[int, ...]:
        return self._entries[stored].shape

    def n_stored_elements(self) -> int:
        return sum(math.prod(e.shape) for e in self._entries.values())

    def _raw(self, stored: str) -> np.ndarray:
        e = self._entries[stored]
        if _stamp(e.file) != self._stamps.get(e.file):
            # reading a mapped file that shrank kills the process (SIGBUS): never touch a changed one
            raise CheckpointError(f"{e.file} changed on disk since the model was opened (it was replaced, "
                                  "truncated or rewritten); open the model again")
        mm = self._maps.get(e.file)
        if mm is None:
            try:
                mm = self._maps[e.file] = np.memmap(e.file, dtype=np.uint8, mode="r")
            except (OSError, ValueError) as exc:
                raise CheckpointError(f"cannot map {e.file}: {exc}") from None
        dt = STORED[e.dtype]
        n = math.prod(e.shape)
        if n == 0:
            return np.zeros(e.shape, dtype=dt)
        return mm[e.start:e.stop].view(dt).reshape(e.shape)

    def check_finite(self, stored: str, chunk: int = 1 << 22) -> bool:
        """True if every value of the tensor is finite; reads it in chunks, never converting it whole."""
        raw = self._raw(stored).reshape(-1)
        for a in range(0, raw.size, chunk):
            part = raw[a:a + chunk]
            if self._entries[stored].dtype == "BF16":
                if ((part & BF16_EXP) == BF16_EXP).any():
                    return False
            elif not np.isfinite(part).all():
                return False
        return True

    # ---- canonical names, after load_weights chose them --------------------------------------------
    def select(self, alias: dict[str, str]) -> None:
        """Expose only ``alias`` (canonical name -> stored name) through the Mapping."""
        self._alias = dict(alias)
        self._keep = set(alias)

    def _name(self, name: str) -> str:
        if self._keep is not None:
            if name not in self._keep:
                raise KeyError(name)
            return self._alias[name]
        if name not in self._entries:
            raise KeyError(name)
        return name

    @staticmethod
    def _convert(raw: np.ndarray, dtype: str) -> np.ndarray:
        if dtype == "BF16":  # exact: BF16 bits are the top half of a float32
            return bf16_to_f32(raw)
        if dtype == "F64":
            return np.asarray(raw, dtype=np.float64)
        return np.asarray(raw, dtype=np.float32)  # F32: the mapped bytes themselves; F16: converted

    def __getitem__(self, name: str) -> np.ndarray:
        stored = self._name(name)
        kept = self._kept.get(stored)
        if kept is not None:
            return kept
        dtype = self._entries[stored].dtype
        arr = self._convert(self._raw(stored), dtype)
        if dtype in ("BF16", "F16") and arr.size:
            self._remember(stored, arr)
        return arr

    def matrix(self, name: str):
        """A weight matrix for :func:`linear <attnviz.checkpoints.layers.linear>` in float32: the kept
        float32 copy, else a stored BF16 matrix as a :class:`Bf16Matrix` (multiplied block by block, never
        widened whole), else ``self[name]``."""
        stored = self._name(name)
        kept = self._kept.get(stored)
        if kept is not None:
            return kept
        e = self._entries[stored]
        if e.dtype == "BF16" and len(e.shape) == 2 and math.prod(e.shape):
            return Bf16Matrix(self._raw(stored))
        return self[name]

    def rows(self, name: str, index) -> np.ndarray:
        """``self[name][index]`` converting only the rows indexed (a 150k-row embedding table never whole)."""
        stored = self._name(name)
        return self._convert(np.asarray(self._raw(stored)[index]), self._entries[stored].dtype)

    def shape(self, name: str) -> tuple[int, ...]:
        return self._entries[self._name(name)].shape

    def dtype_of(self, name: str) -> str:
        """The stored dtype ("BF16", "F16", "F32", "F64") of a canonical tensor."""
        return self._entries[self._name(name)].dtype

    def __contains__(self, name) -> bool:
        """Whether a canonical name is exposed, without reading (Mapping's default would convert the tensor)."""
        return name in (self._keep if self._keep is not None else self._entries)

    def __iter__(self):
        return iter(self._keep if self._keep is not None else self._entries)

    def __len__(self) -> int:
        return len(self._keep if self._keep is not None else self._entries)

    @property
    def n_params(self) -> int:
        """Elements of the exposed tensors, without reading them."""
        return int(sum(math.prod(self.shape(n)) for n in self))

    def dtypes(self) -> list[str]:
        """Stored dtypes of the exposed tensors, most common first."""
        count: dict[str, int] = {}
        for n in self:
            d = self.dtype_of(n)
            count[d] = count.get(d, 0) + math.prod(self.shape(n))
        return sorted(count, key=lambda d: -count[d])
