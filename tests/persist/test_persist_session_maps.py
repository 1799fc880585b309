"""A maps file's attention maps carried by a session file: written compressed beside the state (float16 or
float32 as the file had them), read back bit for bit, absent from sessions without them (written exactly as
before), bounded by the session file's caps, and every hostile entry or member refused in one line."""

from __future__ import annotations

import io
import json
import zipfile

import numpy as np
import pytest

import attnviz
from attnviz.checkpoints.errors import CheckpointError
from attnviz.checkpoints.maps_file import maps_from_bytes, maps_npz_bytes, read_maps
from attnviz.model.demos import build_demo
from attnviz.persist import Limits, SessionError, SessionMaps, load_session, read_session, save_session
from attnviz.persist.session_maps import MAPS_MEMBER
from persist_helpers import read_zip, write_zip

TOKENS = ["[CLS]", "the", "river", " bank", "[SEP]"]


def softmax(shape, seed=0):
    x = np.random.default_rng(seed).normal(size=shape) * 2
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def session_maps(tmp_path, dtype="float16", shape=(2, 3, 5, 5), name="run.npz", **kw) -> tuple[SessionMaps, object]:
    """(the SessionMaps of a maps file written by attnviz.save, the file's checked Maps)."""
    tokens = TOKENS if shape[3] == len(TOKENS) else [f"t{i}" for i in range(shape[3])]
    path = attnviz.save(tmp_path / name, softmax(shape), tokens, dtype=dtype, **kw)
    maps = read_maps(path)
    stored = SessionMaps(name=name, data=maps_npz_bytes(maps), dtype="<f2" if dtype == "float16" else "<f4",
                         shape=shape)
    return stored, maps


@pytest.mark.parametrize("dtype", ["float16", "float32"])
def test_maps_round_trip_bit_for_bit(tmp_path, dtype):
    stored, maps = session_maps(tmp_path, dtype, title="river maps", image=np.zeros((4, 6, 3), np.uint8))
    state = build_demo("river-bank")
    path = save_session(tmp_path / "s.attnviz", state, maps=stored)
    back_state, payload = read_session(path)
    assert back_state == state
    assert payload.maps.name == "run.npz" and payload.maps.dtype == stored.dtype and payload.maps.shape == (2, 3, 5, 5)
    assert payload.maps.data == stored.data
    back = maps_from_bytes(payload.maps.data, payload.maps.name, payload.maps.shape, payload.maps.dtype)
    assert back.stored == dtype and back.attentions.dtype == np.float32
    assert np.array_equal(back.attentions, maps.attentions)  # bit for bit
    assert back.tokens == TOKENS and back.title == "river maps" and back.image.shape == (4, 6, 3)
    with zipfile.ZipFile(path) as zf:  # the member is the compressed .npz, its attentions in the file's dtype
        inner = np.load(io.BytesIO(zf.read(MAPS_MEMBER)))
        assert inner["attentions"].dtype == np.dtype(dtype)
        manifest = json.loads(zf.read("manifest.json"))
    assert manifest["maps"]["version"] == 1 and manifest["maps"]["shape"] == [2, 3, 5, 5]
    assert load_session(path) == state  # load_session: the state alone, as before


def test_float16_maps_are_stored_smaller_than_raw(tmp_path):
    stored, _ = session_maps(tmp_path, "float16", shape=(4, 4, 64, 64))
    path = save_session(tmp_path / "s.attnviz", build_demo("river-bank"), maps=stored)
    with zipfile.ZipFile(path) as zf:
        size = zf.getinfo(MAPS_MEMBER).file_size
    assert size < 4 * 4 * 64 * 64 * 2  # compressed: below the float16 maps' raw bytes


def test_a_session_without_maps_is_written_as_before(tmp_path):
    state = build_demo("river-bank")
    path = save_session(tmp_path / "plain.attnviz", state)
    manifest, members = read_zip(path)
    assert "maps" not in manifest and MAPS_MEMBER not in members
    assert read_session(path)[1].maps is None


def test_an_older_reader_ignores_the_maps(tmp_path):
    """What an attnviz from before the maps key sees: the state (the member is not listed among arrays or
    blobs, so the tree's references still match); simulated by the same file without the key."""
    stored, _ = session_maps(tmp_path)
    path = save_session(tmp_path / "s.attnviz", build_demo("river-bank"), maps=stored)
    manifest, members = read_zip(path)
    assert MAPS_MEMBER not in manifest["arrays"] and MAPS_MEMBER not in manifest["blobs"]
    del manifest["maps"]
    old = write_zip(tmp_path / "old.attnviz", manifest, members)
    state, payload = read_session(old)
    assert state == build_demo("river-bank") and payload.maps is None


def test_maps_too_big_for_the_session_are_one_line(tmp_path):
    stored, _ = session_maps(tmp_path, "float32", shape=(2, 3, 5, 5))  # 600 bytes of maps
    limits = Limits(max_member_bytes=599)
    with pytest.raises(SessionError) as info:
        save_session(tmp_path / "s.attnviz", build_demo("river-bank"), maps=stored, limits=limits)
    msg = str(info.value)
    assert "\n" not in msg and "600 bytes, more than the session file's limit of 599" in msg
    assert not (tmp_path / "s.attnviz").exists()
    with pytest.raises(SessionError, match="arrays, blobs and maps"):
        save_session(tmp_path / "s.attnviz", build_demo("river-bank"), maps=stored,
                     limits=Limits(max_total_bytes=600))


def _edited(tmp_path, edit_manifest=None, member=None):
    stored, _ = session_maps(tmp_path)
    path = save_session(tmp_path / "good.attnviz", build_demo("river-bank"), maps=stored)
    manifest, members = read_zip(path)
    if edit_manifest:
        edit_manifest(manifest["maps"])
    if member is not None:
        import hashlib

        members[MAPS_MEMBER] = member
        manifest["maps"]["size"] = len(member)
        manifest["maps"]["sha256"] = hashlib.sha256(member).hexdigest()
    return write_zip(tmp_path / "edited.attnviz", manifest, members), manifest["maps"]


@pytest.mark.parametrize("edit, match", [
    (lambda m: m.update(version=2), "maps.version is 2: written by a newer attnviz"),
    (lambda m: m.update(version="1"), "maps.version must be an integer"),
    (lambda m: m.update(dtype="<f8"), "maps.dtype is '<f8'"),
    (lambda m: m.update(dtype="|O"), "maps.dtype is '|O'"),
    (lambda m: m.update(shape=[2, 3, 5]), "maps.shape must be a list of four sizes"),
    (lambda m: m.update(shape=[2, 3, -5, 5]), "must hold positive integers"),
    (lambda m: m.update(shape=[64, 64, 65536, 65536]), "more than the session file's limit"),  # a bomb's declaration
    (lambda m: m.update(member="../../etc/passwd"), "maps.member is"),
    (lambda m: m.update(sha256="0" * 64), "is damaged: its sha256"),
    (lambda m: m.update(size=10**12), "maps.size is"),
    (lambda m: m.update(extra=1), "unknown key"),
    (lambda m: m.pop("name"), "missing key"),
    (lambda m: m.update(name="a/b.npz"), "no folder"),
])
def test_a_hostile_maps_entry_is_one_line(tmp_path, edit, match):
    path, _ = _edited(tmp_path, edit)
    with pytest.raises(SessionError, match=match) as info:
        read_session(path)
    assert "\n" not in str(info.value) and str(path) in str(info.value)


def test_a_missing_maps_member_is_one_line(tmp_path):
    stored, _ = session_maps(tmp_path)
    path = save_session(tmp_path / "good.attnviz", build_demo("river-bank"), maps=stored)
    manifest, members = read_zip(path)
    del members[MAPS_MEMBER]
    bad = write_zip(tmp_path / "cut.attnviz", manifest, members)
    with pytest.raises(SessionError, match="missing from the zip"):
        read_session(bad)


def _npz(**arrays) -> bytes:
    buf = io.BytesIO()
    np.savez_compressed(buf, **arrays)
    return buf.getvalue()


@pytest.mark.parametrize("member, match", [
    (lambda a: _npz(attentions=np.where(a > 0.3, np.nan, a).astype(np.float16), tokens=np.array(TOKENS)), "NaN"),
    (lambda a: _npz(attentions=a.astype(np.float32), tokens=np.array(TOKENS)),
     "attentions are <f4 .* the session's manifest says <f2"),  # not the dtype declared
    (lambda a: _npz(attentions=np.ones((2, 3, 50, 50), np.float16), tokens=np.array(TOKENS)),
     r"the session's manifest says <f2 \(2, 3, 5, 5\)"),  # larger than declared: refused before its data is read
    (lambda a: _npz(attentions=a.astype(np.float16), tokens=np.array(TOKENS[:4])), "tokens"),
    (lambda a: _npz(attentions=a.astype(np.float16), tokens=np.array([{"x": 1}] * 5, dtype=object)),
     "Python objects"),
    (lambda a: b"PK\x03\x04 not a zip at all", "not a zip archive"),
])
def test_a_hostile_maps_member_is_refused_like_a_maps_file(tmp_path, member, match):
    a = softmax((2, 3, 5, 5))
    path, entry = _edited(tmp_path, member=member(a))
    _state, payload = read_session(path)  # the container's checks pass: the bytes are what the manifest lists
    with pytest.raises(CheckpointError, match=match) as info:
        maps_from_bytes(payload.maps.data, payload.maps.name, payload.maps.shape, payload.maps.dtype)
    assert "\n" not in str(info.value) and "run.npz" in str(info.value)


def test_a_deflate_bomb_member_is_refused_before_it_inflates(tmp_path):
    """A maps member of 4 MiB of zeros deflated a thousandfold: the container's ratio cap refuses it."""
    path, _ = _edited(tmp_path, member=b"\0" * (4 * 2**20))  # write_zip deflates every member
    with pytest.raises(SessionError, match="possible zip bomb") as info:
        read_session(path)
    assert "\n" not in str(info.value)
