"""Building, taking apart and re-assembling session files for the persistence tests."""

from __future__ import annotations

import hashlib
import io
import json
import zipfile
from pathlib import Path

import numpy as np

from attnviz.persist import save_payload


def sample_payload() -> tuple[dict, dict, dict]:
    """A small payload with every storable kind: float64/float32 weights, a bool mask, ints, blobs."""
    rng = np.random.default_rng(7)
    tree = {
        "title": "river bank",
        "tokens": ["by", "the", "river", "bank"],
        "settings": {"d_model": 4, "nh": 2, "scale": 0.5, "flags": [True, False, None]},
        "text": "emoji \U0001f600 and \u05e9\u05dc\u05d5\u05dd",
    }
    arrays = {
        "heads.wq": rng.standard_normal((2, 4, 2)),  # (nh, d_model, hs)
        "emb32": rng.standard_normal((4, 3)).astype(np.float32),  # (T, C)
        "mask.cells": rng.random((4, 4)) < 0.5,  # (T, T)
        "token_ids": np.array([5, 9, 1, 300], dtype=np.int64),  # (T,)
        "pixels": rng.integers(0, 256, (2, 3, 3), dtype=np.uint8),  # (H, W, C)
        "empty": np.zeros((0, 4)),  # (0, C)
    }
    blobs = {"image.png": bytes(range(256)) * 3, "tokenizer.json": b'{"model": {"type": "BPE"}}'}
    return tree, arrays, blobs


def write_sample(path: Path) -> Path:
    tree, arrays, blobs = sample_payload()
    return save_payload(path, tree, arrays, blobs, created="2025-01-02T03:04:05Z")


def read_zip(path: Path) -> tuple[dict, dict[str, bytes]]:
    """The manifest (parsed) and every member's bytes."""
    with zipfile.ZipFile(path) as zf:
        members = {i.filename: zf.read(i) for i in zf.infolist()}
    return json.loads(members.pop("manifest.json")), members


def write_zip(path: Path, manifest: dict | bytes | None, members: dict[str, bytes],
              compress=zipfile.ZIP_DEFLATED) -> Path:
    """Assemble a zip from a manifest (dict, raw bytes or None to leave it out) and members."""
    with zipfile.ZipFile(path, "w", compression=compress) as zf:
        if manifest is not None:
            raw = manifest if isinstance(manifest, bytes) else json.dumps(manifest).encode()
            zf.writestr("manifest.json", raw)
        for name, data in members.items():
            zf.writestr(name, data)
    return path


def npy_bytes(a: np.ndarray, allow_pickle: bool = False) -> bytes:
    buf = io.BytesIO()
    np.save(buf, a, allow_pickle=allow_pickle)
    return buf.getvalue()


def set_array_member(manifest: dict, members: dict, key: str, data: bytes, **fields) -> None:
    """Replace array ``key``'s member bytes, keeping size and sha256 consistent (so only the
    field under test disagrees); ``fields`` override manifest entries."""
    spec = manifest["arrays"][key]
    members[spec["member"]] = data
    spec["size"] = len(data)
    spec["sha256"] = hashlib.sha256(data).hexdigest()
    spec.update(fields)


PICKLE_RAN: list[str] = []


def _mark_pickle_ran(tag: str) -> str:
    PICKLE_RAN.append(tag)
    return tag


class Trap:
    """Unpickling this object records that a pickle was executed."""

    def __reduce__(self):
        return (_mark_pickle_ran, ("trap",))
