"""Attention maps from a file — ``.npz`` or ``.safetensors``, as :func:`attnviz.save` writes them or another
tool does — loaded like a checkpoint, so the Pretrained panel shows them read-only: the layers x heads grid,
the detail heatmap, the head summaries, the exports.

A file holds ``attentions`` (layers, heads, Tq, Tk) float16/32/64 and the ``tokens`` (Tk,) (a safetensors
file keeps them in its metadata header as a JSON list); optional: ``target_tokens`` (Tq,) for
cross-attention (the query rows), ``image`` (H, W, 3) uint8 and ``title``. :func:`load_maps` reads and checks
everything before it returns a :class:`MapsFile`, whose :meth:`MapsFile.run` gives a :class:`MapsAttention`
(the fields of a
:class:`~attnviz.checkpoints.run.ModelAttention`, kind "maps"). A hostile file — truncated, a
zip or header bomb, object arrays (pickles are never loaded), wrong dtype or shape, NaN, tokens that do not
match — is one :class:`~attnviz.checkpoints.errors.CheckpointError` line.
"""

from __future__ import annotations

import io
import json
import struct
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from attnviz import api
from attnviz.checkpoints.analysis import SPECIAL_TOKENS, HeadSummaries
from attnviz.checkpoints.errors import CheckpointError
from attnviz.checkpoints.safetensors_file import read_header
from attnviz.engine.softmax import row_entropy
from attnviz.jsontext import JsonRefused, loads_guarded

SUFFIXES = api.SUFFIXES
MAX_MEMBERS = 64  # zip entries of an npz (a maps file has at most six; attnviz-cli model inspect writes more)
MAX_NPY_HEADER = 64 * 1024  # bytes of one member's .npy header
MAX_META_BYTES = 32 * 2**20  # safetensors header (65,536 tokens of JSON fit many times over)
FIELDS = ("attnviz_maps", "attentions", "tokens", "target_tokens", "image", "title", "computed")
COMPUTED = ("bfloat16", "float16", "float32", "float64")
MAP_DTYPES = (np.float16, np.float32, np.float64)
_VISIBLE = str.maketrans({" ": "\u2423", "\n": "\u21b5", "\t": "\u21e5"})


def is_maps_file(path) -> bool:
    """True for a path whose suffix is a maps file's (``.npz``, ``.safetensors``)."""
    return Path(path).suffix.lower() in SUFFIXES


@dataclass(frozen=True)
class Maps:
    """The checked contents of a maps file."""

    attentions: np.ndarray  # (L, nh, Tq, Tk) float32
    tokens: list[str]  # (Tk,) key tokens (and the query tokens of self-attention)
    target_tokens: list[str] | None  # (Tq,) cross-attention's query tokens, None for self-attention
    image: np.ndarray | None  # (H, W, 3) uint8
    title: str | None
    stored: str  # how the maps were stored: "float16", "float32", "float64"
    computed: str  # the dtype the model computed them in, as the file says (else the stored one)

    @property
    def cross(self) -> bool:
        return self.target_tokens is not None


def _bad(path: Path, why: str) -> CheckpointError:
    return CheckpointError(f"{path.name} is not a readable attention-maps file ({why})")


# ------------------------------------------------------------------------------------------------ npz

def _npy_header(fh, path: Path, name: str):
    """(shape, dtype) of a member's .npy header, read without reading its data."""
    try:
        version = np.lib.format.read_magic(fh)
        if version == (1, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_1_0(fh, max_header_size=MAX_NPY_HEADER)
        elif version in ((2, 0), (3, 0)):
            shape, fortran, dtype = np.lib.format.read_array_header_2_0(fh, max_header_size=MAX_NPY_HEADER)
        else:
            raise _bad(path, f"{name} has .npy version {version}")
    except CheckpointError:
        raise
    except (ValueError, OSError, EOFError, zlib.error, zipfile.BadZipFile) as exc:
        raise _bad(path, f"{name} has no readable .npy header: {str(exc).splitlines()[0][:120]}") from None
    if dtype.hasobject or dtype.fields is not None or dtype.subdtype is not None:
        raise _bad(path, f"{name} holds Python objects, which attnviz never unpickles")
    return shape, dtype


def _npz_member(zf: zipfile.ZipFile, path: Path, name: str, check) -> np.ndarray:
    """Member ``name`` after ``check(shape, dtype)`` approved its header."""
    member = f"{name}.npy"
    try:
        with zf.open(member) as fh:
            shape, dtype = _npy_header(fh, path, name)
            check(shape, dtype)
        with zf.open(member) as fh:
            return np.lib.format.read_array(fh, allow_pickle=False, max_header_size=MAX_NPY_HEADER)
    except CheckpointError:
        raise
    except (ValueError, OSError, EOFError, zlib.error, zipfile.BadZipFile, NotImplementedError) as exc:
        raise _bad(path, f"{name} cannot be read: {str(exc).splitlines()[0][:120] or type(exc).__name__}") from None


def _check_maps_header(path: Path, expect=None):
    """The attentions' header check; ``expect`` (shape, dtype): what a session's manifest declares, which the
    member must hold exactly (so the caps that bound it hold before its data is read)."""
    def check(shape, dtype):
        if len(shape) != 4:
            raise _bad(path, f"attentions must be (layers, heads, Tq, Tk), got shape {tuple(shape)}")
        if dtype.type not in MAP_DTYPES:
            raise _bad(path, f"attentions must be float16, float32 or float64, got {dtype}")
        if expect is not None and (tuple(shape) != tuple(expect[0]) or dtype != np.dtype(expect[1])):
            raise _bad(path, f"attentions are {dtype.str} {tuple(shape)}, the session's manifest says "
                             f"{expect[1]} {tuple(expect[0])}")
        n = int(np.prod(shape, dtype=object))
        if n > api.MAX_VALUES or max(shape[2:]) > api.MAX_TOKENS:
            raise _bad(path, f"attentions of shape {tuple(shape)} are larger than attnviz reads "
                             f"({api.MAX_TOKENS:,} tokens, {api.MAX_VALUES:,} values)")
    return check


def _check_strings(path: Path, name: str, ndim: int):
    def check(shape, dtype):
        if dtype.kind not in "US":
            raise _bad(path, f"{name} must be strings, got {dtype}")
        if len(shape) != ndim or (ndim and shape[0] > api.MAX_TOKENS) or dtype.itemsize > 4 * api.MAX_TOKEN_CHARS:
            raise _bad(path, f"{name} has shape {tuple(shape)} and dtype {dtype}")
    return check


def _check_image_header(path: Path):
    def check(shape, dtype):
        if (len(shape) != 3 or shape[2] not in (3, 4) or dtype != np.uint8
                or not all(0 < s <= api.MAX_IMAGE_SIDE for s in shape[:2])):
            raise _bad(path, f"image must be (H, W, 3) uint8 of at most {api.MAX_IMAGE_SIDE:,} pixels a side, got "
                             f"{dtype} {tuple(shape)}")
    return check


def _strings(a: np.ndarray) -> list[str]:
    if a.dtype.kind == "S":
        try:
            return [x.decode("utf-8") for x in a.tolist()]
        except UnicodeDecodeError:
            raise ValueError("tokens are bytes that are not UTF-8") from None
    return [str(x) for x in a.tolist()]


def _read_npz(path: Path, source=None, expect=None) -> tuple:
    """The fields of the .npz at ``path`` (or in ``source``, a file object, named ``path``); ``expect``: see
    :func:`_check_maps_header`."""
    try:
        zf = zipfile.ZipFile(path if source is None else source)
    except (zipfile.BadZipFile, OSError, EOFError, ValueError) as exc:
        raise _bad(path, f"not a zip archive as .npz files are: {str(exc)[:120]}") from None
    with zf:
        infos = zf.infolist()
        if len(infos) > MAX_MEMBERS:
            raise _bad(path, f"{len(infos)} members (at most {MAX_MEMBERS} are read)")
        names = {i.filename[:-4] for i in infos if i.filename.endswith(".npy")}
        for need in ("attentions", "tokens"):
            if need not in names:
                raise _bad(path, f"no {need!r} array (it has {', '.join(sorted(names)) or 'none'})")
        a = _npz_member(zf, path, "attentions", _check_maps_header(path, expect))
        tokens = _strings(_npz_member(zf, path, "tokens", _check_strings(path, "tokens", 1)))
        target = None
        if "target_tokens" in names:
            target = _strings(_npz_member(zf, path, "target_tokens", _check_strings(path, "target_tokens", 1)))
        image = _npz_member(zf, path, "image", _check_image_header(path)) if "image" in names else None
        title = computed = None
        if "title" in names:
            t = _npz_member(zf, path, "title", _check_strings(path, "title", 0))
            title = _strings(t.reshape(1))[0]
        if "computed" in names:
            computed = _strings(_npz_member(zf, path, "computed", _check_strings(path, "computed", 0)).reshape(1))[0]
        if "attnviz_maps" in names:
            def version_check(shape, dtype):
                if shape != () or dtype.kind not in "iu":
                    raise _bad(path, f"attnviz_maps must be one integer, got {dtype} {tuple(shape)}")
            v = int(_npz_member(zf, path, "attnviz_maps", version_check))
            if v > api.FORMAT_VERSION:
                raise _bad(path, f"format version {v} is newer than this attnviz reads ({api.FORMAT_VERSION})")
    return a, tokens, target, image, title, computed


# ------------------------------------------------------------------------------------------------ safetensors

def _read_safetensors(path: Path) -> tuple:
    entries, _base = read_header(path)  # checked against the file's size (CheckpointError otherwise)
    with open(path, "rb") as fh:
        (n,) = struct.unpack("<Q", fh.read(8))
        if n > MAX_META_BYTES:
            raise _bad(path, f"header of {n:,} bytes (at most {MAX_META_BYTES:,})")
        meta = json.loads(fh.read(n).decode("utf-8")).get("__metadata__") or {}
        if "attentions" not in entries:
            raise _bad(path, "no 'attentions' tensor; the weights of a model? open the folder that holds them "
                             "and config.json as a checkpoint")
        e = entries["attentions"]
        kinds = {"F16": np.dtype("<f2"), "F32": np.dtype("<f4"), "F64": np.dtype("<f8")}
        if e.dtype not in kinds:
            raise _bad(path, f"attentions must be F16, F32 or F64, got {e.dtype}")
        _check_maps_header(path)(e.shape, kinds[e.dtype])

        def read(entry, dtype):
            fh.seek(entry.start)
            raw = fh.read(entry.stop - entry.start)
            if len(raw) != entry.stop - entry.start:
                raise _bad(path, "the file ends inside a tensor")
            return np.frombuffer(raw, dtype=dtype).reshape(entry.shape)

        a = read(e, kinds[e.dtype])
        image = None
        if "image" in entries:
            ie = entries["image"]
            if ie.dtype != "U8":
                raise _bad(path, f"image must be U8, got {ie.dtype}")
            _check_image_header(path)(ie.shape, np.dtype(np.uint8))
            image = read(ie, np.uint8)
    if meta.get("format", api.FORMAT_NAME) != api.FORMAT_NAME:
        raise _bad(path, f"metadata format {meta.get('format')!r} is not {api.FORMAT_NAME!r}")
    version = meta.get("version", str(api.FORMAT_VERSION))
    if not version.isdigit() or int(version) > api.FORMAT_VERSION:
        raise _bad(path, f"format version {version!r} is not one this attnviz reads ({api.FORMAT_VERSION})")

    def tokens_of(key):
        if key not in meta:
            return None
        try:
            val = loads_guarded(meta[key])
        except (JsonRefused, json.JSONDecodeError, RecursionError):
            raise _bad(path, f"metadata {key!r} is not a JSON list of strings") from None
        if not isinstance(val, list):
            raise _bad(path, f"metadata {key!r} is not a JSON list of strings")
        return val

    tokens = tokens_of("tokens")
    if tokens is None:
        raise _bad(path, "no 'tokens' in its metadata (a JSON list of strings)")
    return a, tokens, tokens_of("target_tokens"), image, meta.get("title"), meta.get("computed")


def read_maps(path) -> Maps:
    """Read and check a maps file; CheckpointError (one line, naming the file) for any problem."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"{path}: no such file" if not path.exists() else f"{path} is not a regular file")
    suffix = path.suffix.lower()
    if suffix not in SUFFIXES:
        raise CheckpointError(f"{path.name}: attention maps are read from .npz or .safetensors files")
    fields = _read_npz(path) if suffix == ".npz" else _read_safetensors(path)
    return _checked(path, *fields)


def maps_from_bytes(data: bytes, name: str, shape, dtype: str) -> Maps:
    """The maps of an ``.npz`` held in memory (a session's maps member, see
    :mod:`attnviz.persist.session_maps`), named ``name`` in messages: checked as a maps file is, and its
    attentions must be exactly ``dtype`` ("<f2" or "<f4") of ``shape`` (L, nh, Tq, Tk) as the session's
    manifest declares (so what they may allocate is bounded before they are decompressed).
    CheckpointError (one line) for any problem."""
    path = Path(name or "maps.npz")
    if np.dtype(dtype) not in (np.dtype("<f2"), np.dtype("<f4")):
        raise _bad(path, f"the session stores maps as float16 or float32, not {dtype}")
    fields = _read_npz(path, io.BytesIO(data), expect=(tuple(shape), dtype))
    return _checked(path, *fields)


def maps_npz_bytes(maps: Maps) -> bytes:
    """``maps`` as the compressed ``.npz`` :func:`attnviz.save` writes: attentions in float16 when the file
    stored them so (exact: float16 -> float32 -> float16 loses nothing), else float32 (as shown)."""
    stored = np.float16 if maps.stored == "float16" else np.float32
    fields = {"attentions": np.ascontiguousarray(maps.attentions, dtype=stored), "tokens": list(maps.tokens),
              "target_tokens": None if maps.target_tokens is None else list(maps.target_tokens),
              "image": maps.image, "title": maps.title, "computed": maps.computed}
    buf = io.BytesIO()
    api.write_npz(buf, fields)
    return buf.getvalue()


def _checked(path: Path, a, tokens, target, image, title, computed) -> Maps:
    """The fields read from a maps file, checked (values, tokens, image, title) into a :class:`Maps`."""
    if computed is not None and computed not in COMPUTED:
        raise _bad(path, f"'computed' is {computed[:40]!r}, not one of {', '.join(COMPUTED)}")
    computed = computed or str(a.dtype)
    try:
        tokens, target = api.check_maps(a, tokens, target, low_precision=computed in api.LOW_PRECISION)
        image = api.check_image(image)
        title = api.check_title(title)
    except ValueError as exc:
        raise CheckpointError(f"{path.name}: {exc}") from None
    stored = str(a.dtype)
    return Maps(attentions=np.ascontiguousarray(a, dtype=np.float32), tokens=tokens, target_tokens=target,
                image=image, title=title, stored=stored, computed=computed)


# ------------------------------------------------------------------------------------------------ as a checkpoint

@dataclass(frozen=True, eq=False)
class MapsAttention:
    """The maps of a file as a run result, kind "maps": every field of
    :class:`~attnviz.checkpoints.run.ModelAttention` (so each view of a run takes it; not a subclass, since
    the loader, which run.py imports, hands these out) and the query tokens of cross-attention.
    Self-attention: rows and columns are ``tokens``. Cross-attention: rows are ``query_tokens`` (the
    target), columns ``tokens`` (the source)."""

    model: str  # the display name (the title, else the file's name)
    kind: str  # "maps"
    tokens: list[str]  # (Tk,) key tokens
    labels: list[str]  # (Tk,) with whitespace made visible, for plot axes
    special: np.ndarray  # (Tk,) bool: [CLS], [SEP], <s> ... among the keys
    attentions: np.ndarray  # (L, nh, Tq, Tk) float32 weights, rows = queries, columns = keys
    hidden: np.ndarray  # (Tk, 0): a file holds no hidden states
    ids: np.ndarray | None = None
    spans: list[tuple[int, int]] | None = None
    grid: tuple[int, int] | None = None
    n_extra_tokens: int = 0
    pixels: np.ndarray | None = None
    decoder: object = None
    score_terms: dict | None = None
    query_tokens: list[str] | None = None  # (Tq,) cross-attention's query tokens, None for self-attention
    query_labels: list[str] | None = None  # (Tq,) the same with whitespace made visible
    source: str = ""  # the file the maps came from

    @property
    def shape(self) -> tuple[int, int, int, int]:
        """(L, nh, Tq, Tk)."""
        return tuple(self.attentions.shape)

    @property
    def row_labels(self) -> list[str]:
        """(Tq,) labels of the query rows."""
        return self.query_labels if self.query_labels is not None else self.labels


def map_summaries(attentions: np.ndarray, special: np.ndarray, cross: bool = False) -> HeadSummaries:
    """Per-head summaries of maps (L, nh, Tq, Tk), averaged over the rows that attend to anything: entropy,
    attention to special tokens and to the first key; for self-attention also to self, to the previous token
    and the mean distance |i - j| (they mean nothing between two sequences, so cross-attention leaves them None)."""
    a = np.asarray(attentions)
    L, nh, Tq, Tk = a.shape
    keys = ("entropy", "to_special", "to_first", "to_self", "to_previous", "distance")
    sums = {k: np.zeros((L, nh)) for k in keys}  # sums over live rows, divided at the end
    n_live, n_prev = np.zeros((L, nh)), np.zeros((L, nh))
    special = np.asarray(special, dtype=bool)  # (Tk,)
    cols = np.arange(Tk, dtype=np.float64)
    for layer in range(L):
        for head in range(nh):
            for r0, r1 in api.row_blocks(Tq, Tk):
                w = np.asarray(a[layer, head, r0:r1], dtype=np.float64)  # (rows, Tk)
                live = w.sum(axis=-1) > 0  # (rows,) rows that see anything
                at = (layer, head)
                n_live[at] += live.sum()
                sums["entropy"][at] += row_entropy(w)[live].sum()
                sums["to_special"][at] += w[live][:, special].sum()
                sums["to_first"][at] += w[live, 0].sum()
                if cross:
                    continue
                rows = np.arange(r0, r1)
                sums["to_self"][at] += w[np.flatnonzero(live), rows[live]].sum()
                sums["distance"][at] += (w[live] * np.abs(rows[live, None] - cols[None, :])).sum()
                prev = live & (rows >= 1)
                n_prev[at] += prev.sum()
                sums["to_previous"][at] += w[np.flatnonzero(prev), rows[prev] - 1].sum()
    out = {k: v / np.maximum(n_live, 1) for k, v in sums.items()}
    out["to_previous"] = sums["to_previous"] / np.maximum(n_prev, 1)
    if cross:
        out["to_self"] = out["to_previous"] = out["distance"] = None
    return HeadSummaries(entropy=out["entropy"], to_special=out["to_special"], to_self=out["to_self"],
                         to_previous=out["to_previous"], to_first=out["to_first"], distance=out["distance"])


class MapsFile:
    """A maps file loaded as a checkpoint (kind "maps"): nothing to run, its :meth:`run` gives the maps."""

    kind = "maps"
    tokenizer = None
    special_tokens = None
    image = None  # no image preprocessing (the file's picture, if any, is ``rgb``)
    config = None
    weights: dict = {}
    n_params = 0
    stored_dtype = "f32"

    def __init__(self, path: Path, maps: Maps, name: str | None = None):
        self.folder = Path(path)
        self.maps = maps
        self.name = name or maps.title or self.folder.name
        self.rgb = maps.image
        self._result: MapsAttention | None = None

    @property
    def shape(self) -> tuple[int, int, int, int]:
        return tuple(self.maps.attentions.shape)

    def describe(self) -> str:
        L, nh, Tq, Tk = self.shape
        size = f"{Tq:,} target x {Tk:,} source tokens (cross-attention)" if self.maps.cross else f"{Tk:,} tokens"
        title = f" “{self.maps.title}”" if self.maps.title and self.maps.title != self.name else ""
        dt = self.maps.stored if self.maps.computed == self.maps.stored else \
            f"computed in {self.maps.computed}, stored {self.maps.stored}"
        return (f"{self.name}{title}: attention maps from {self.folder.name}, {L} layers x {nh} heads, {size}, "
                f"{dt}; read-only (nothing runs)")

    def special(self) -> np.ndarray:
        """(Tk,) bool: the key tokens that are special ([CLS], [SEP], <s>, ...)."""
        return np.array([t in SPECIAL_TOKENS for t in self.maps.tokens], dtype=bool)

    def run(self) -> MapsAttention:
        """The maps as a run result (the same object each time: a file is read once, nothing runs)."""
        if self._result is None:
            self._result = self._make_result()
        return self._result

    def _make_result(self) -> MapsAttention:
        m = self.maps
        Tk = len(m.tokens)
        return MapsAttention(
            model=self.name, kind="maps", tokens=list(m.tokens), labels=[t.translate(_VISIBLE) for t in m.tokens],
            special=self.special(), attentions=m.attentions, hidden=np.zeros((Tk, 0), dtype=np.float32),
            query_tokens=None if m.target_tokens is None else list(m.target_tokens),
            query_labels=None if m.target_tokens is None else [t.translate(_VISIBLE) for t in m.target_tokens],
            source=str(self.folder))

    def summaries(self) -> HeadSummaries:
        return map_summaries(self.maps.attentions, self.special(), cross=self.maps.cross)


def load_maps(path, name: str | None = None) -> MapsFile:
    """Read a maps file as a :class:`MapsFile` checkpoint; CheckpointError for any problem."""
    return MapsFile(Path(path), read_maps(path), name)
