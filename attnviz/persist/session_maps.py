"""Attention maps a session carries: the read-only maps of a file (``attnviz FILE.npz``) that the window
showed when it was saved, kept in the session file so that reopening it shows them again.

They are stored as one zip member, ``maps/attentions.npz``: a compressed ``.npz`` as :func:`attnviz.save`
writes it (attentions in float16 or float32 as the file had them, the tokens, target tokens, image and title),
listed by an optional top-level manifest key beside ``state``::

    "maps": {"version": 1, "name": "run.npz", "member": "maps/attentions.npz", "size": 81234,
             "sha256": "...", "dtype": "<f2", "shape": [12, 12, 64, 64]}

``size`` and ``sha256`` are the member's (the compressed ``.npz`` bytes); ``dtype`` and ``shape`` those of the
``attentions`` array inside it, so the caps (limits.py) bound what decompressing it may allocate before a
byte of it is read. This layer checks the entry and the member's bytes; what the ``.npz`` holds is checked
by :mod:`attnviz.checkpoints.maps_file`, as for any maps file, by the window that shows them (persist knows
nothing of checkpoints). An attnviz from before this key ignores it (and the member it does not list): it
opens the session without the maps. A ``version`` above :data:`MAPS_VERSION` is refused as written by a
newer attnviz.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from attnviz.persist.errors import SessionError
from attnviz.persist.limits import Limits

MAPS_KEY = "maps"  # the manifest's top-level key
MAPS_MEMBER = "maps/attentions.npz"  # the zip member
MAPS_VERSION = 1  # the newest version of the entry
MAPS_DTYPES = {"<f2": 2, "<f4": 4}  # the attentions' dtype inside the .npz -> bytes per value
ENTRY_KEYS = ("version", "name", "member", "size", "sha256", "dtype", "shape")
MAX_NAME = 200  # characters of the maps file's name
_SHA_RE = re.compile(r"^[0-9a-f]{64}$")


@dataclass(frozen=True, eq=False)
class SessionMaps:
    """The maps member of a session: the ``.npz`` bytes and what the manifest says of them."""

    name: str  # the file the maps were read from (a name, no folder), e.g. "run.npz"
    data: bytes  # a compressed .npz: attentions, tokens, [target_tokens, image, title], computed
    dtype: str  # "<f2" or "<f4": the attentions' dtype inside data
    shape: tuple[int, int, int, int]  # (L, nh, Tq, Tk) of the attentions inside data

    @property
    def nbytes(self) -> int:
        """Bytes of the attentions once decompressed."""
        return math.prod(self.shape) * MAPS_DTYPES[self.dtype]


def check_maps(maps: SessionMaps, limits: Limits, *, saving: bool) -> None:
    """SessionError (one line) when ``maps`` do not fit the session file's caps or are malformed."""
    verb = "cannot save the attention maps" if saving else "the session's attention maps"
    if not isinstance(maps, SessionMaps):
        raise SessionError(f"{verb}: expected SessionMaps, got {type(maps).__name__}")
    if not isinstance(maps.name, str) or not maps.name or len(maps.name) > MAX_NAME or "/" in maps.name:
        raise SessionError(f"{verb}: the file name {str(maps.name)[:60]!r} must be 1 to {MAX_NAME} characters, "
                           f"no folder")
    if maps.dtype not in MAPS_DTYPES:
        raise SessionError(f"{verb}: dtype {maps.dtype!r}, expected float16 (<f2) or float32 (<f4)")
    if len(maps.shape) != 4 or any(isinstance(n, bool) or not isinstance(n, int) or n < 1 for n in maps.shape):
        raise SessionError(f"{verb}: shape {maps.shape!r}, expected (layers, heads, Tq, Tk) of positive sizes"[:200])
    if maps.nbytes > limits.max_member_bytes:
        raise SessionError(f"{verb}: {maps.shape[0]} x {maps.shape[1]} maps of {maps.shape[2]:,} x {maps.shape[3]:,} "
                           f"are {maps.nbytes:,} bytes, more than the session file's limit of "
                           f"{limits.max_member_bytes:,} bytes per member; keep them in their own file")
    if len(maps.data) > limits.max_member_bytes:
        raise SessionError(f"{verb}: {len(maps.data):,} compressed bytes, more than the limit of "
                           f"{limits.max_member_bytes:,} bytes per member")


def entry_json(maps: SessionMaps, sha256: str) -> dict:
    """The manifest entry of ``maps`` whose member hashes to ``sha256``."""
    return {"version": MAPS_VERSION, "name": maps.name, "member": MAPS_MEMBER, "size": len(maps.data),
            "sha256": sha256, "dtype": maps.dtype, "shape": list(maps.shape)}


def parse_entry(spec, limits: Limits) -> tuple[SessionMaps, str]:
    """(SessionMaps without data, the member's sha256) from the manifest's ``maps`` entry; SessionError
    (one line, saying which field) for anything else."""
    where = "manifest.json: maps"
    if not isinstance(spec, dict):
        raise SessionError(f"{where} must be an object, found {type(spec).__name__}")
    version = spec.get("version")
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise SessionError(f"{where}.version must be an integer from 1, found {str(version)[:40]!r}")
    if version > MAPS_VERSION:
        raise SessionError(f"{where}.version is {version}: written by a newer attnviz (this one reads up to "
                           f"{MAPS_VERSION}). Update attnviz to open it")
    unknown = sorted(set(spec) - set(ENTRY_KEYS))
    missing = [k for k in ENTRY_KEYS if k not in spec]
    if unknown or missing:
        raise SessionError(f"{where}: " + "; ".join(
            ([f"unknown key(s) {', '.join(map(repr, unknown))}"[:120]] if unknown else [])
            + ([f"missing key(s) {', '.join(map(repr, missing))}"] if missing else [])))
    if spec["member"] != MAPS_MEMBER:
        raise SessionError(f"{where}.member is {str(spec['member'])[:80]!r}, expected {MAPS_MEMBER!r}")
    sha = spec["sha256"]
    if not isinstance(sha, str) or not _SHA_RE.match(sha):
        raise SessionError(f"{where}.sha256 is not 64 lowercase hex digits")
    size = spec["size"]
    if isinstance(size, bool) or not isinstance(size, int) or not 0 < size <= limits.max_member_bytes:
        raise SessionError(f"{where}.size is {str(size)[:40]}, expected 1 .. {limits.max_member_bytes:,} bytes")
    shape = spec["shape"]
    if not isinstance(shape, list) or len(shape) != 4:
        raise SessionError(f"{where}.shape must be a list of four sizes (layers, heads, Tq, Tk), "
                           f"found {str(shape)[:80]}")
    if any(isinstance(n, bool) or not isinstance(n, int) or not 0 < n <= limits.max_member_bytes for n in shape):
        raise SessionError(f"{where}.shape {str(shape)[:80]} must hold positive integers")
    dtype = spec["dtype"]
    if dtype not in MAPS_DTYPES:
        raise SessionError(f"{where}.dtype is {str(dtype)[:40]!r}, expected '<f2' (float16) or '<f4' (float32)")
    name = spec["name"]
    if not isinstance(name, str):
        raise SessionError(f"{where}.name must be a string")
    maps = SessionMaps(name=name, data=b"", dtype=dtype, shape=tuple(shape))
    check_maps(maps, limits, saving=False)
    return maps, sha
