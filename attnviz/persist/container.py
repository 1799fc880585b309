"""The .attnviz container: a zip of ``manifest.json``, ``.npy`` array members and raw blob members.

It knows nothing about sessions (:mod:`attnviz.persist.session` puts the state on top): a JSON tree,
named arrays and byte blobs, with manifest, hashes, caps, migrations and atomic write around them.
Loading treats the file as hostile; see :func:`load_payload`.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import io
import os
import stat
import struct
import warnings
import zipfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

import numpy as np

import attnviz
from attnviz.persist.atomic import atomic_write, check_save_target
from attnviz.persist.errors import SessionError
from attnviz.persist.limits import DEFAULT_LIMITS, SAFE_DTYPES, Limits
from attnviz.persist.manifest import (
    FORMAT, MANIFEST_NAME, ArrayEntry, BlobEntry, check_envelope, check_tables, dump_manifest,
    member_name, parse_manifest,
)
from attnviz.persist.migrations import SCHEMA_VERSION, migrate
from attnviz.persist.session_maps import MAPS_KEY, MAPS_MEMBER, SessionMaps, check_maps, entry_json, parse_entry

_CHUNK = 1 << 20
_ALLOWED_METHODS = (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED)


@dataclass(frozen=True)
class Payload:
    """What a session file holds, after migration to the current schema."""

    tree: dict  # the model's JSON state tree
    arrays: dict[str, np.ndarray] = field(default_factory=dict)  # key -> array (a fresh, writable copy)
    blobs: dict[str, bytes] = field(default_factory=dict)  # key -> raw bytes (input files, tokenizer)
    schema_version: int = SCHEMA_VERSION  # the schema the file was written with (before migration)
    app_version: str = attnviz.__version__  # the attnviz version that wrote the file
    created: str = ""  # UTC ISO 8601 time the file was written
    maps: SessionMaps | None = None  # the read-only attention maps of a file the window showed (session_maps.py)


def utc_now_iso() -> str:
    """The current UTC time as ``YYYY-MM-DDTHH:MM:SSZ``."""
    return _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


# ---------------------------------------------------------------------------------------------
# saving


def _zip_time(created: str) -> tuple[int, int, int, int, int, int]:
    try:
        t = _dt.datetime.strptime(created, "%Y-%m-%dT%H:%M:%SZ")
    except ValueError:
        return (1980, 1, 1, 0, 0, 0)
    return (max(t.year, 1980), t.month, t.day, t.hour, t.minute, t.second)


def _encode_array(key: str, value, limits: Limits) -> tuple[bytes, np.dtype, tuple[int, ...]]:
    a = np.asarray(value)
    if a.dtype.byteorder == ">":
        a = a.astype(a.dtype.newbyteorder("<"))  # (same shape) stored little-endian everywhere
    if a.dtype.str not in SAFE_DTYPES:
        raise SessionError(f"cannot save array {key!r}: dtype {a.dtype} is not storable; allowed are "
                           f"bool, int8..int64, uint8..uint64, float32 and float64")
    if a.ndim > limits.max_ndim:
        raise SessionError(f"cannot save array {key!r}: {a.ndim} axes, at most {limits.max_ndim} allowed")
    if a.dtype.kind == "f" and not np.isfinite(a).all():
        raise SessionError(f"cannot save array {key!r}: it contains NaN or infinite values")
    a = np.ascontiguousarray(a)  # same shape, C order
    buf = io.BytesIO()
    np.save(buf, a, allow_pickle=False)
    return buf.getvalue(), a.dtype, a.shape


def _member_size(kind: str, key: str, data: bytes, limits: Limits) -> int:
    """len(data), after checking it against the per-member cap."""
    if len(data) > limits.max_member_bytes:
        raise SessionError(f"cannot save {kind} {key!r}: {len(data):,} bytes, the limit is "
                           f"{limits.max_member_bytes:,}")
    return len(data)


def _write_member(zf: zipfile.ZipFile, name: str, data: bytes, date_time, limits: Limits) -> None:
    """Write one member; small members are deflated, large ones stored (no ratio surprises, fast)."""
    info = zipfile.ZipInfo(name, date_time=date_time)
    info.external_attr = 0o644 << 16
    info.compress_type = zipfile.ZIP_DEFLATED if len(data) < limits.ratio_floor_bytes else zipfile.ZIP_STORED
    zf.writestr(info, data)


def save_payload(path: str | os.PathLike, tree: dict, arrays: Mapping[str, np.ndarray] | None = None,
                 blobs: Mapping[str, bytes] | None = None, *, limits: Limits = DEFAULT_LIMITS,
                 created: str | None = None, maps: SessionMaps | None = None) -> Path:
    """Write ``tree``, ``arrays`` and ``blobs`` (and ``maps``, the attention maps of a file, when given) as a
    session file at ``path``, atomically.

    The previous file at ``path`` (if any) stays byte-identical unless the new one is complete.
    Raises SessionError for content that cannot be stored (non-JSON tree, unsafe dtype, NaN,
    over the caps), for a target that is not a regular file (checked first) and for filesystem
    failures (disk full, permission). Returns the path written.
    """
    check_save_target(path)
    arrays = dict(arrays or {})
    blobs = dict(blobs or {})
    if not isinstance(tree, dict):
        raise SessionError(f"cannot save: the state tree must be a dict, got {type(tree).__name__}")
    for kind, table in (("array", arrays), ("blob", blobs)):
        for key in table:
            if not isinstance(key, str) or not key or len(key) > limits.max_name_length:
                raise SessionError(f"cannot save {kind} {key!r}: keys must be non-empty strings of at most "
                                   f"{limits.max_name_length} characters")
    if len(arrays) + len(blobs) + 1 > limits.max_members:
        raise SessionError(f"cannot save: {len(arrays) + len(blobs)} arrays and blobs, the limit is "
                           f"{limits.max_members - 1}")
    for key, value in blobs.items():
        if not isinstance(value, (bytes, bytearray, memoryview)):
            raise SessionError(f"cannot save blob {key!r}: expected bytes, got {type(value).__name__}")
    if maps is not None:
        check_maps(maps, limits, saving=True)  # before anything is written: a map too big is one line
    created = created or utc_now_iso()
    date_time = _zip_time(created)
    target = Path(path)

    def write(f) -> None:
        manifest_arrays: dict[str, dict] = {}
        manifest_blobs: dict[str, dict] = {}
        total = 0
        with zipfile.ZipFile(f, "w", allowZip64=True) as zf:
            for i, (key, value) in enumerate(arrays.items()):
                data, dtype, shape = _encode_array(key, value, limits)
                total += _member_size("array", key, data, limits)
                name = member_name("arrays", i, key, ".npy")
                _write_member(zf, name, data, date_time, limits)
                manifest_arrays[key] = ArrayEntry(key, name, dtype.str, tuple(shape), len(data),
                                                  hashlib.sha256(data).hexdigest()).to_json()
            for i, (key, value) in enumerate(blobs.items()):
                data = bytes(value)
                total += _member_size("blob", key, data, limits)
                name = member_name("blobs", i, key)
                _write_member(zf, name, data, date_time, limits)
                manifest_blobs[key] = BlobEntry(key, name, len(data), hashlib.sha256(data).hexdigest()).to_json()
            maps_entry = None
            if maps is not None:
                total += len(maps.data) + maps.nbytes  # what a load may allocate: the member and its maps
                _write_member(zf, MAPS_MEMBER, maps.data, date_time, limits)
                maps_entry = entry_json(maps, hashlib.sha256(maps.data).hexdigest())
            if total > limits.max_total_bytes:
                raise SessionError(f"cannot save: {total:,} bytes of arrays, blobs and maps, the limit is "
                                   f"{limits.max_total_bytes:,}")
            manifest = {
                "format": FORMAT,
                "schema_version": SCHEMA_VERSION,
                "app_version": attnviz.__version__,
                "created": created,
                "state": tree,
                "arrays": manifest_arrays,
                "blobs": manifest_blobs,
            }
            if maps_entry is not None:  # a session without maps is written exactly as before
                manifest[MAPS_KEY] = maps_entry
            raw = dump_manifest(manifest)
            if len(raw) > limits.max_manifest_bytes:
                raise SessionError(f"cannot save: the manifest is {len(raw):,} bytes, the limit is "
                                   f"{limits.max_manifest_bytes:,}")
            info = zipfile.ZipInfo(MANIFEST_NAME, date_time=date_time)
            info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, raw)

    existed = target.exists()
    kept = "; the previous file is unchanged" if existed else ""
    try:
        return atomic_write(target, write)
    except SessionError as exc:
        raise SessionError(f"{target}: {exc}{kept}") from exc
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise SessionError(f"could not save {target}: {reason}{kept}") from exc


# ---------------------------------------------------------------------------------------------
# loading


def _open_checked(path: Path, limits: Limits):
    """Open ``path`` for reading after checking it is a plausible, readable, regular file."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise SessionError(f"{path}: no such file") from None
    except OSError as exc:
        raise SessionError(f"{path}: cannot access the file ({exc.strerror or exc})") from None
    if stat.S_ISDIR(st.st_mode):
        raise SessionError(f"{path}: is a directory, not a session file")
    if not stat.S_ISREG(st.st_mode):
        raise SessionError(f"{path}: is not a regular file")
    if st.st_size == 0:
        raise SessionError(f"{path}: the file is empty (0 bytes), not a session file")
    if st.st_size > limits.max_file_bytes:
        raise SessionError(f"{path}: {st.st_size:,} bytes, more than the {limits.max_file_bytes:,}-byte "
                           f"limit for a session file")
    try:
        return open(path, "rb")
    except OSError as exc:
        raise SessionError(f"{path}: cannot read the file ({exc.strerror or exc})") from None


def _read_member(zf: zipfile.ZipFile, info: zipfile.ZipInfo, declared: int | None, cap: int,
                 limits: Limits) -> bytes:
    """Read one member into memory after checking method, encryption, sizes and ratio."""
    name = info.filename
    if info.flag_bits & 0x1:
        raise SessionError(f"member {name!r} is encrypted; session files never are")
    if info.compress_type not in _ALLOWED_METHODS:
        raise SessionError(f"member {name!r} uses compression method {info.compress_type}; "
                           f"expected stored (0) or deflate (8)")
    if declared is not None and info.file_size != declared:
        raise SessionError(f"member {name!r} is {info.file_size:,} bytes in the zip directory, the manifest "
                           f"says {declared:,}")
    if info.file_size > cap:
        raise SessionError(f"member {name!r} declares {info.file_size:,} bytes, more than the limit of {cap:,}")
    if (info.file_size > limits.ratio_floor_bytes
            and info.file_size > limits.max_ratio * max(info.compress_size, 1)):
        raise SessionError(f"member {name!r} expands {info.file_size / max(info.compress_size, 1):,.0f}-fold "
                           f"(limit {limits.max_ratio:.0f}); refusing a possible zip bomb")
    parts = []
    got = 0
    with zf.open(info) as m:
        while True:
            chunk = m.read(min(_CHUNK, cap + 1 - got))
            if not chunk:
                break
            got += len(chunk)
            parts.append(chunk)
            if got > cap:
                raise SessionError(f"member {name!r} holds more than the limit of {cap:,} bytes")
    if got != info.file_size:
        raise SessionError(f"member {name!r} holds {got:,} bytes, its zip entry says {info.file_size:,}")
    return b"".join(parts)


def _check_hash(name: str, data: bytes, sha: str) -> None:
    actual = hashlib.sha256(data).hexdigest()
    if actual != sha:
        raise SessionError(f"member {name!r} is damaged: its sha256 is {actual[:12]}..., the manifest "
                           f"says {sha[:12]}...")


def _decode_array(entry: ArrayEntry, data: bytes, limits: Limits) -> np.ndarray:
    """Build the array of one verified .npy member without numpy's loader (no pickle path exists)."""
    where = f"array {entry.key!r} ({entry.member})"
    buf = io.BytesIO(data)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # a hostile header's odd escapes are not the user's concern
            version = np.lib.format.read_magic(buf)
            if version == (1, 0):
                shape, fortran, dtype = np.lib.format.read_array_header_1_0(
                    buf, max_header_size=limits.max_npy_header_bytes)
            elif version == (2, 0):
                shape, fortran, dtype = np.lib.format.read_array_header_2_0(
                    buf, max_header_size=limits.max_npy_header_bytes)
            else:
                raise SessionError(f"{where}: .npy format version {version} is not supported (1.0 or 2.0)")
    except SessionError:
        raise
    except Exception as exc:  # numpy's header parser raises several types on malformed headers
        raise SessionError(f"{where}: not a valid .npy member ({exc})") from exc
    if dtype.hasobject or dtype.str not in SAFE_DTYPES:
        raise SessionError(f"{where}: holds dtype {dtype} ({dtype.str}); only plain numeric dtypes are loaded, "
                           f"never pickled objects")
    if dtype.str != entry.dtype:
        raise SessionError(f"{where}: holds dtype {dtype.str}, the manifest says {entry.dtype}")
    if tuple(shape) != entry.shape:
        raise SessionError(f"{where}: holds shape {tuple(shape)}, the manifest says {entry.shape}")
    offset = buf.tell()
    if len(data) - offset != entry.data_bytes:
        raise SessionError(f"{where}: {len(data) - offset:,} data bytes, shape {entry.shape} of "
                           f"{entry.dtype} needs {entry.data_bytes:,}")
    order = "F" if fortran else "C"
    count = entry.data_bytes // dtype.itemsize
    if dtype.kind == "b":  # normalise any nonzero byte to True
        flat = np.frombuffer(data, dtype=np.uint8, count=count, offset=offset) != 0  # (count,)
    else:
        flat = np.frombuffer(data, dtype=dtype, count=count, offset=offset)  # (count,)
    arr = np.array(flat.reshape(entry.shape, order=order), order="C", copy=True)  # (*shape)
    if arr.dtype.kind == "f" and not np.isfinite(arr).all():
        bad = int(arr.size - np.count_nonzero(np.isfinite(arr)))
        raise SessionError(f"{where}: {bad} of {arr.size} values are NaN or infinite; "
                           f"session arrays must be finite")
    return arr


def _read_payload(f, limits: Limits) -> Payload:
    try:
        zf = zipfile.ZipFile(f)
    except zipfile.BadZipFile as exc:
        raise SessionError(f"not an attnviz session: not a zip archive, or a damaged or truncated one ({exc})") from None
    with zf:
        infos = zf.infolist()
        if len(infos) > limits.max_members:
            raise SessionError(f"the zip holds {len(infos)} entries, more than the limit of {limits.max_members}")
        by_name: dict[str, zipfile.ZipInfo] = {}
        duplicates: set[str] = set()
        for info in infos:
            if info.filename in by_name:
                duplicates.add(info.filename)
            by_name[info.filename] = info
        minfo = by_name.get(MANIFEST_NAME)
        if minfo is None:
            raise SessionError("not an attnviz session: the zip has no manifest.json")
        if MANIFEST_NAME in duplicates:
            raise SessionError("manifest.json appears twice in the zip")
        manifest = parse_manifest(_read_member(zf, minfo, None, limits.max_manifest_bytes, limits), limits)
        written_version = check_envelope(manifest)
        manifest = migrate(manifest)
        tree = manifest.get("state")
        if not isinstance(tree, dict):
            raise SessionError(f"manifest.json: 'state' must be a JSON object, found {type(tree).__name__}")
        app_version = manifest.get("app_version")
        created = manifest.get("created")
        array_entries, blob_entries = check_tables(manifest, limits)
        maps_spec = None
        if MAPS_KEY in manifest:
            maps_spec, maps_sha = parse_entry(manifest[MAPS_KEY], limits)
            total = (sum(e.size for e in array_entries) + sum(e.size for e in blob_entries)
                     + _maps_size(manifest) + maps_spec.nbytes)
            if total > limits.max_total_bytes:
                raise SessionError(f"manifest.json declares {total:,} bytes of arrays, blobs and maps, more than "
                                   f"the {limits.max_total_bytes:,}-byte limit")

        def info_for(member: str) -> zipfile.ZipInfo:
            info = by_name.get(member)
            if info is None:
                raise SessionError(f"member {member!r} listed in manifest.json is missing from the zip; "
                                   f"the file is incomplete")
            if member in duplicates:
                raise SessionError(f"member {member!r} appears twice in the zip")
            return info

        arrays: dict[str, np.ndarray] = {}
        for entry in array_entries:
            data = _read_member(zf, info_for(entry.member), entry.size, limits.max_member_bytes, limits)
            _check_hash(entry.member, data, entry.sha256)
            arrays[entry.key] = _decode_array(entry, data, limits)
        blobs: dict[str, bytes] = {}
        for entry in blob_entries:
            data = _read_member(zf, info_for(entry.member), entry.size, limits.max_member_bytes, limits)
            _check_hash(entry.member, data, entry.sha256)
            blobs[entry.key] = data
        maps = None
        if maps_spec is not None:
            data = _read_member(zf, info_for(MAPS_MEMBER), _maps_size(manifest), limits.max_member_bytes, limits)
            _check_hash(MAPS_MEMBER, data, maps_sha)
            maps = SessionMaps(maps_spec.name, data, maps_spec.dtype, maps_spec.shape)
    return Payload(tree, arrays, blobs, written_version,
                   app_version if isinstance(app_version, str) else "unknown",
                   created if isinstance(created, str) else "", maps)


def _maps_size(manifest: dict) -> int:
    """The maps member's declared size (checked by parse_entry)."""
    return manifest[MAPS_KEY]["size"]


def load_payload(path: str | os.PathLike, *, limits: Limits = DEFAULT_LIMITS) -> Payload:
    """Read a session file written by :func:`save_payload` (any released schema), migrated to the current one.

    Only the members the manifest lists are read, into memory; each one's sizes, compression ratio and
    method, sha256 and (arrays) .npy dtype and shape must agree with it before ``np.frombuffer`` builds a
    whitelisted dtype (no pickle), and floats must be finite. Every failure is a SessionError naming ``path``.
    """
    path = Path(path)
    f = _open_checked(path, limits)
    try:
        with f:
            return _read_payload(f, limits)
    except SessionError as exc:
        raise SessionError(f"{path}: {exc}") from exc.__cause__
    # A hostile zip can make the zip reader or the decompressor fail in many ways; each of them
    # means the same thing to a person: the file is damaged.
    except (zipfile.BadZipFile, zlib.error, EOFError, OSError, ValueError, struct.error,
            NotImplementedError, RuntimeError, OverflowError, KeyError, IndexError) as exc:
        raise SessionError(f"{path}: the file is damaged or truncated ({type(exc).__name__}: {exc})") from exc
