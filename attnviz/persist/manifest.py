"""The manifest of a session file: building it when saving, and checking it when loading.

``manifest.json`` is the only member read without being listed anywhere: ``format``
("attnviz-session"), ``schema_version``, ``app_version``, ``created`` (UTC ISO 8601), ``state`` (the
model's JSON tree), and the ``arrays`` / ``blobs`` tables (key -> member, size, sha256; arrays also
dtype and shape), which :func:`check_tables` validates before any member is decompressed.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass

from attnviz.jsontext import JsonRefused, loads_guarded
from attnviz.persist.errors import SessionError
from attnviz.persist.limits import SAFE_DTYPES, Limits

FORMAT = "attnviz-session"
MANIFEST_NAME = "manifest.json"

# Member names attnviz writes and accepts: one folder, one plain file name. No "..", no absolute
# paths, no backslashes, no drive letters: even though nothing is ever extracted to disk.
_MEMBER_RE = re.compile(r"^(arrays|blobs)/[A-Za-z0-9_][A-Za-z0-9_.\-]*$")
_SHA_RE = re.compile(r"^[0-9a-f]{64}$")


@dataclass(frozen=True)
class ArrayEntry:
    """One array member as the manifest describes it."""

    key: str
    member: str
    dtype: str
    shape: tuple[int, ...]
    size: int  # uncompressed member size in bytes
    sha256: str  # of the member's bytes as stored (the whole .npy member)

    @property
    def data_bytes(self) -> int:
        """Bytes of the array's data (without the .npy header)."""
        return math.prod(self.shape) * SAFE_DTYPES[self.dtype].itemsize

    def to_json(self) -> dict:
        return {"member": self.member, "dtype": self.dtype, "shape": list(self.shape),
                "size": self.size, "sha256": self.sha256}


@dataclass(frozen=True)
class BlobEntry:
    """One raw member (an input file's bytes, an embedded tokenizer) as the manifest describes it."""

    key: str
    member: str
    size: int  # uncompressed member size in bytes
    sha256: str  # of the member's bytes as stored

    def to_json(self) -> dict:
        return {"member": self.member, "size": self.size, "sha256": self.sha256}


def member_name(folder: str, index: int, key: str, suffix: str = "") -> str:
    """A safe, unique, readable member name for ``key`` (e.g. ``arrays/003_heads.wq.npy``)."""
    stem = re.sub(r"[^A-Za-z0-9_.\-]+", "_", key).strip("._-")[:80] or "item"
    return f"{folder}/{index:04d}_{stem}{suffix}"


def dump_manifest(manifest: dict) -> bytes:
    """The manifest as UTF-8 JSON; NaN or infinity anywhere in it is refused."""
    try:
        return json.dumps(manifest, ensure_ascii=False, allow_nan=False, indent=1).encode("utf-8")
    except (TypeError, ValueError) as exc:
        raise SessionError(f"the session state cannot be written as JSON: {exc}") from exc


def _refuse_constant(name: str):
    raise ValueError(f"{name} is not allowed in a session manifest")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"the number {text[:40]} is too large for a float")
    return value


# A lone surrogate can only enter through a \\uD800..\\uDFFF escape: the text itself is strict UTF-8.
_SURROGATE_ESCAPE_RE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


def _field_path(path: str, key) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    if isinstance(key, str) and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key):
        return f"{path}.{key}" if path else key
    return f"{path}[{key!r}]"


def _lone_surrogate(value, path: str) -> tuple[str, int] | None:
    """(path of the first string holding a lone UTF-16 surrogate, character index), or None.
    Keys are checked as well as values; the depth is already capped, so the recursion is bounded."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            return path, exc.start
        return None
    if isinstance(value, dict):
        for key, item in value.items():
            found = _lone_surrogate(key, f"a key of {path}" if path else "a top-level key")
            if found is None:
                found = _lone_surrogate(item, _field_path(path, key))
            if found is not None:
                return found
    elif isinstance(value, list):
        for i, item in enumerate(value):
            found = _lone_surrogate(item, _field_path(path, i))
            if found is not None:
                return found
    return None


def parse_manifest(raw: bytes, limits: Limits) -> dict:
    """Decode ``manifest.json`` into a dict; any problem is a SessionError."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SessionError(f"manifest.json is not valid UTF-8 (byte {exc.start})") from exc
    try:
        manifest = loads_guarded(text, max_depth=limits.max_json_depth,
                                 parse_constant=_refuse_constant, parse_float=_finite_float)
    except JsonRefused as exc:
        raise SessionError(f"manifest.json {exc}") from None
    except (ValueError, RecursionError) as exc:
        raise SessionError(f"manifest.json is not valid JSON: {exc}") from exc
    if not isinstance(manifest, dict):
        raise SessionError(f"manifest.json must hold a JSON object, found {type(manifest).__name__}")
    if _SURROGATE_ESCAPE_RE.search(text):  # paired surrogates (emoji) are fine; a lone one never saves again
        found = _lone_surrogate(manifest, "")
        if found is not None:
            where, index = found
            raise SessionError(f"manifest.json: {where} holds a lone UTF-16 surrogate at character {index}; "
                               f"strings must be valid Unicode (the session could never be saved again)")
    return manifest


def check_envelope(manifest: dict) -> int:
    """Check the format name and return the schema version (before any migration)."""
    fmt = manifest.get("format")
    if fmt != FORMAT:
        raise SessionError(f"manifest.json: format is {fmt!r}, expected {FORMAT!r}; "
                           f"this is not an attnviz session")
    version = manifest.get("schema_version")
    if isinstance(version, bool) or not isinstance(version, int):
        raise SessionError(f"manifest.json: schema_version must be an integer, found {version!r}")
    return version


def _int(value, what: str, lo: int, hi: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise SessionError(f"{what} must be an integer, found {value!r}")
    if not lo <= value <= hi:
        raise SessionError(f"{what} is {value}, expected {lo} .. {hi}")
    return value


def _size(value, what: str, limits: Limits) -> int:
    size = _int(value, f"{what} size", 0, 2**63)
    if size > limits.max_member_bytes:
        raise SessionError(f"{what} is {size:,} bytes, more than the limit of {limits.max_member_bytes:,} "
                           f"bytes per member")
    return size


def _check_common(key, spec, what: str, limits: Limits, seen: set[str]) -> tuple[str, str]:
    if not isinstance(key, str) or not key or len(key) > limits.max_name_length:
        raise SessionError(f"manifest.json: {what} key {key!r} must be a non-empty string of at most "
                           f"{limits.max_name_length} characters")
    if not isinstance(spec, dict):
        raise SessionError(f"manifest.json: {what} {key!r} must be an object, found {type(spec).__name__}")
    member = spec.get("member")
    if not isinstance(member, str) or len(member) > limits.max_name_length or not _MEMBER_RE.match(member):
        raise SessionError(f"manifest.json: {what} {key!r} names member {member!r}; expected a plain name "
                           f"under arrays/ or blobs/ (no '..', no absolute path)")
    if member in seen:
        raise SessionError(f"manifest.json: member {member!r} is listed twice")
    seen.add(member)
    sha = spec.get("sha256")
    if not isinstance(sha, str) or not _SHA_RE.match(sha):
        raise SessionError(f"manifest.json: {what} {key!r} has no valid sha256 (64 lowercase hex digits)")
    return member, sha


def check_tables(manifest: dict, limits: Limits) -> tuple[list[ArrayEntry], list[BlobEntry]]:
    """Validate the array and blob tables of a (migrated) manifest against the caps."""
    arrays_spec = manifest.get("arrays", {})
    blobs_spec = manifest.get("blobs", {})
    if not isinstance(arrays_spec, dict) or not isinstance(blobs_spec, dict):
        raise SessionError("manifest.json: 'arrays' and 'blobs' must be JSON objects")
    if len(arrays_spec) + len(blobs_spec) > limits.max_members:
        raise SessionError(f"manifest.json lists {len(arrays_spec) + len(blobs_spec)} members, "
                           f"more than the limit of {limits.max_members}")
    seen: set[str] = set()
    total = 0
    arrays: list[ArrayEntry] = []
    for key, spec in arrays_spec.items():
        member, sha = _check_common(key, spec, "array", limits, seen)
        dtype = spec.get("dtype")
        if not isinstance(dtype, str) or dtype not in SAFE_DTYPES:
            raise SessionError(f"manifest.json: array {key!r} has dtype {dtype!r}; allowed are "
                               f"{', '.join(sorted(SAFE_DTYPES))}")
        shape = spec.get("shape")
        if not isinstance(shape, list) or len(shape) > limits.max_ndim:
            raise SessionError(f"manifest.json: array {key!r} shape must be a list of at most "
                               f"{limits.max_ndim} sizes, found {shape!r}"[:300])
        dims = tuple(_int(n, f"manifest.json: array {key!r} shape entry", 0, limits.max_member_bytes)
                     for n in shape)
        nbytes = math.prod(dims) * SAFE_DTYPES[dtype].itemsize
        if nbytes > limits.max_member_bytes:
            raise SessionError(f"manifest.json: array {key!r} declares shape {dims} ({nbytes:,} bytes), "
                               f"more than the {limits.max_member_bytes:,}-byte limit per array")
        size = _size(spec.get("size"), f"manifest.json: array {key!r}", limits)
        if not nbytes < size <= nbytes + limits.max_npy_header_bytes:
            raise SessionError(f"manifest.json: array {key!r} member size {size} does not fit its shape "
                               f"{dims} and dtype {dtype} ({nbytes} data bytes plus a .npy header)")
        total += size
        arrays.append(ArrayEntry(key, member, dtype, dims, size, sha))
    blobs: list[BlobEntry] = []
    for key, spec in blobs_spec.items():
        member, sha = _check_common(key, spec, "blob", limits, seen)
        size = _size(spec.get("size"), f"manifest.json: blob {key!r}", limits)
        total += size
        blobs.append(BlobEntry(key, member, size, sha))
    if total > limits.max_total_bytes:
        raise SessionError(f"manifest.json declares {total:,} bytes of arrays and blobs, more than the "
                           f"{limits.max_total_bytes:,}-byte limit")
    return arrays, blobs
