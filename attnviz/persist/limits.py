"""Caps that keep a hostile or broken session file from exhausting memory or disk.

Every cap is checked twice: when saving (so attnviz never writes a file it would refuse to read) and
when loading (before anything is decompressed or allocated).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

KiB = 1024
MiB = 1024 * KiB
GiB = 1024 * MiB


@dataclass(frozen=True)
class Limits:
    """Upper bounds applied to every session file read or written."""

    max_file_bytes: int = 4 * GiB  # the whole .attnviz on disk; larger is not a session
    max_members: int = 10_000  # zip entries, listed or not; the central directory is parsed once
    max_manifest_bytes: int = 32 * MiB  # manifest.json uncompressed; holds texts of ~100k chars easily
    max_member_bytes: int = 1 * GiB  # one array or blob uncompressed (a GPT-2 sized embedding fits)
    max_total_bytes: int = 2 * GiB  # all members uncompressed together: what a load may allocate
    max_ratio: float = 200.0  # uncompressed / compressed per member; deflate bombs reach ~1000
    ratio_floor_bytes: int = 1 * MiB  # members smaller than this may compress freely (masks, zeros)
    max_ndim: int = 8  # no session array needs more axes; absurd shapes are refused early
    max_name_length: int = 200  # array / blob keys and member names
    max_npy_header_bytes: int = 64 * KiB  # the .npy header of one member (numpy's own cap is 10 kB)
    max_json_depth: int = 64  # nesting of the state tree; deeper is refused before recursion


DEFAULT_LIMITS = Limits()

# dtypes an array member may have (little-endian or byte-order free). No object, void, structured,
# string, datetime, complex or half types: nothing a session needs, and nothing numpy would unpickle.
SAFE_DTYPES: dict[str, np.dtype] = {
    d.str: d
    for d in (
        np.dtype("|b1"),
        np.dtype("|i1"), np.dtype("<i2"), np.dtype("<i4"), np.dtype("<i8"),
        np.dtype("|u1"), np.dtype("<u2"), np.dtype("<u4"), np.dtype("<u8"),
        np.dtype("<f4"), np.dtype("<f8"),
    )
}
