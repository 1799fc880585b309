"""Loading broken and hostile files: every failure is one SessionError with a useful message."""

from __future__ import annotations

import hashlib
import json
import os
import re
import struct
import zipfile

import numpy as np
import pytest

from attnviz.persist import Limits, SessionError, load_payload
from persist_helpers import (
    PICKLE_RAN, Trap, npy_bytes, read_zip, set_array_member, write_sample, write_zip,
)


@pytest.fixture
def sample(tmp_path):
    return write_sample(tmp_path / "good.attnviz")


def _edited(tmp_path, sample, edit):
    """Write a copy of the sample with ``edit(manifest, members)`` applied."""
    manifest, members = read_zip(sample)
    edit(manifest, members)
    return write_zip(tmp_path / "edited.attnviz", manifest, members)


def _fails(path, match, **kw):
    with pytest.raises(SessionError, match=match) as info:
        load_payload(path, **kw)
    assert "\n" not in str(info.value)
    assert str(path) in str(info.value)  # names the file
    return str(info.value)


# --- paths and files that are not session files --------------------------------------------------

def test_empty_file(tmp_path):
    (tmp_path / "e.attnviz").write_bytes(b"")
    _fails(tmp_path / "e.attnviz", "empty")


def test_not_a_zip(tmp_path):
    (tmp_path / "t.attnviz").write_text("just some text, not a session\n" * 10)
    _fails(tmp_path / "t.attnviz", "not a zip")


def test_a_zip_without_manifest(tmp_path):
    _fails(write_zip(tmp_path / "z.attnviz", None, {"readme.txt": b"hi"}), "no manifest.json")


def test_missing_file(tmp_path):
    _fails(tmp_path / "nope.attnviz", "no such file")


def test_directory(tmp_path):
    (tmp_path / "d.attnviz").mkdir()
    _fails(tmp_path / "d.attnviz", "is a directory")


def test_path_below_a_file(tmp_path, sample):
    _fails(sample / "inner.attnviz", "cannot access")


def test_fifo_is_not_a_regular_file(tmp_path):
    os.mkfifo(tmp_path / "pipe.attnviz")
    _fails(tmp_path / "pipe.attnviz", "not a regular file")  # and does not block on open


def test_unreadable_file(tmp_path, sample, monkeypatch):
    """Permission denied when opening (simulated: these tests may run as root, who reads anything)."""
    import attnviz.persist.container as container

    def deny(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(container, "open", deny, raising=False)
    msg = _fails(sample, "cannot read the file")
    assert "Permission denied" in msg


@pytest.mark.skipif(os.geteuid() == 0, reason="root can read a file without read permission")
def test_unreadable_file_by_mode(tmp_path, sample):
    sample.chmod(0)
    try:
        _fails(sample, "Permission denied")
    finally:
        sample.chmod(0o644)


def test_too_large_file(tmp_path, sample):
    _fails(sample, "limit for a session file", limits=Limits(max_file_bytes=100))


# --- damaged bytes -------------------------------------------------------------------------------

@pytest.mark.parametrize("keep", [10, 22, 100, 0.5, -1, -22, -23, -100])
def test_truncated(tmp_path, sample, keep):
    data = sample.read_bytes()
    n = int(len(data) * keep) if isinstance(keep, float) else (keep if keep > 0 else len(data) + keep)
    (tmp_path / "cut.attnviz").write_bytes(data[:n])
    _fails(tmp_path / "cut.attnviz", "damaged|truncated|not a zip")


def test_flipped_byte_in_stored_member_fails_the_hash(tmp_path):
    from attnviz.persist import save_payload
    path = save_payload(tmp_path / "s.attnviz", {}, {"w": np.arange(300.0)}, limits=Limits(ratio_floor_bytes=64))
    data = bytearray(path.read_bytes())
    i = data.index(np.float64(150.0).tobytes())
    data[i] ^= 0x40
    (tmp_path / "flip.attnviz").write_bytes(bytes(data))
    _fails(tmp_path / "flip.attnviz", "damaged")  # zip CRC or the manifest's sha256


def test_flipped_bytes_never_load_silently_changed(tmp_path, sample):
    """Flip every 7th byte position in turn: a flip either fails to load, or it hit a field the
    reader never uses (local header copies, timestamps) and the content is exactly the original."""
    original = load_payload(sample)
    data = sample.read_bytes()
    failed = 0
    for i in range(0, len(data), 7):
        flipped = bytearray(data)
        flipped[i] ^= 0xFF
        (tmp_path / "flip.attnviz").write_bytes(bytes(flipped))
        try:
            got = load_payload(tmp_path / "flip.attnviz")
        except SessionError:
            failed += 1
            continue
        assert got.tree == original.tree and got.blobs == original.blobs, i
        for key, a in original.arrays.items():
            assert got.arrays[key].dtype == a.dtype and np.array_equal(got.arrays[key], a), (i, key)
    assert failed > len(data) // 7 * 0.8  # nearly every byte matters


def test_hash_mismatch(tmp_path, sample):
    def edit(m, members):
        m["arrays"]["heads.wq"]["sha256"] = "0" * 64
    _fails(_edited(tmp_path, sample, edit), "'arrays/0000_heads.wq.npy' is damaged: its sha256")


def test_blob_hash_mismatch(tmp_path, sample):
    def edit(m, members):
        members[m["blobs"]["tokenizer.json"]["member"]] = b'{"model": {"type": "XXX"}}'
    _fails(_edited(tmp_path, sample, edit), "sha256")


# --- member names --------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["../x", "/etc/x", "arrays/../../x", "arrays/..", "C:/x", "arrays\\x",
                                  "arrays/", "other/x", "arrays/.hidden", "manifest.json"])
def test_listed_member_with_unsafe_name(tmp_path, sample, name):
    def edit(m, members):
        spec = m["arrays"]["heads.wq"]
        data = members.pop(spec["member"])
        if name != "manifest.json":  # that one is in the zip already
            members[name] = data
        spec["member"] = name
    _fails(_edited(tmp_path, sample, edit), "no '..', no absolute path")


@pytest.mark.parametrize("name", ["../x", "/etc/x", "../../tmp/evil.sh"])
def test_unlisted_members_are_never_read_or_extracted(tmp_path, sample, name):
    def edit(m, members):
        members[name] = b"#!/bin/sh\necho owned\n"
    path = _edited(tmp_path, sample, edit)
    before = sorted(p.name for p in tmp_path.parent.iterdir())
    got = load_payload(path)
    assert all("owned" not in v.decode("latin-1") for v in got.blobs.values())
    assert sorted(p.name for p in tmp_path.parent.iterdir()) == before
    assert not (tmp_path.parent / "x").exists() and not os.path.exists("/etc/x")


def test_member_listed_twice(tmp_path, sample):
    def edit(m, members):
        m["arrays"]["copy"] = dict(m["arrays"]["heads.wq"])
    _fails(_edited(tmp_path, sample, edit), "listed twice")


def test_duplicate_zip_entries(tmp_path, sample):
    manifest, members = read_zip(sample)
    path = write_zip(tmp_path / "dup.attnviz", manifest, members)
    spec = manifest["arrays"]["emb32"]
    with zipfile.ZipFile(path, "a") as zf, pytest.warns(UserWarning, match="Duplicate name"):
        zf.writestr(spec["member"], npy_bytes(np.zeros((4, 3), np.float32)))
    _fails(path, "appears twice")


def test_missing_member(tmp_path, sample):
    def edit(m, members):
        del members[m["arrays"]["mask.cells"]["member"]]
    _fails(_edited(tmp_path, sample, edit), "'arrays/0002_mask.cells.npy' listed in manifest.json is missing")


def test_missing_blob(tmp_path, sample):
    def edit(m, members):
        del members[m["blobs"]["image.png"]["member"]]
    _fails(_edited(tmp_path, sample, edit), "is missing from the zip")


# --- zip bombs and size caps ---------------------------------------------------------------------

def test_zip_bomb_listed_member(tmp_path, sample):
    bomb = np.zeros(2 * 1024 * 1024)  # 16 MiB of zeros, deflates ~1000-fold
    def edit(m, members):
        set_array_member(m, members, "heads.wq", npy_bytes(bomb), dtype="<f8", shape=[bomb.size])
    _fails(_edited(tmp_path, sample, edit), "zip bomb")


def test_zip_bomb_unlisted_member_is_ignored(tmp_path, sample):
    def edit(m, members):
        members["arrays/9999_bomb.npy"] = bytes(16 * 1024 * 1024)
    assert load_payload(_edited(tmp_path, sample, edit)).tree["title"] == "river bank"


def test_member_larger_than_cap(tmp_path, sample):
    _fails(sample, "limit", limits=Limits(max_member_bytes=200))


def test_total_larger_than_cap(tmp_path, sample):
    _fails(sample, "bytes of arrays and blobs, more than", limits=Limits(max_total_bytes=1000))


def test_too_many_entries(tmp_path, sample):
    _fails(sample, "entries, more than the limit", limits=Limits(max_members=5))


def test_manifest_too_large(tmp_path, sample):
    _fails(sample, "manifest.json.* more than the limit", limits=Limits(max_manifest_bytes=300))


def test_declared_size_disagrees_with_zip_entry(tmp_path, sample):
    def edit(m, members):
        m["arrays"]["heads.wq"]["size"] += 8
    _fails(_edited(tmp_path, sample, edit), "in the zip directory, the manifest says")


def _patch_sizes(path, name: str, new_size: int) -> None:
    """Rewrite the uncompressed size of member ``name`` in its local header and the central
    directory (a zip that lies about how much a member expands to)."""
    data = bytearray(path.read_bytes())
    enc = name.encode()
    with zipfile.ZipFile(path) as zf:
        info = zf.getinfo(name)
    local = info.header_offset
    assert data[local:local + 4] == b"PK\x03\x04"
    struct.pack_into("<I", data, local + 22, new_size)
    central = data.index(b"PK\x01\x02" + data[local + 4:local + 4], 0)  # first central record
    while True:
        n = struct.unpack_from("<H", data, central + 28)[0]
        if bytes(data[central + 46:central + 46 + n]) == enc:
            break
        central = data.index(b"PK\x01\x02", central + 4)
    struct.pack_into("<I", data, central + 24, new_size)
    path.write_bytes(bytes(data))


def test_member_expanding_beyond_its_declared_size(tmp_path, sample):
    manifest, members = read_zip(sample)
    spec = manifest["blobs"]["image.png"]
    spec["size"] = 100  # matches the lie below
    path = write_zip(tmp_path / "lie.attnviz", manifest, members)
    _patch_sizes(path, spec["member"], 100)
    _fails(path, "damaged")  # reading stops at the declared size: CRC or hash disagree


def test_encrypted_flag(tmp_path, sample):
    manifest, members = read_zip(sample)
    path = write_zip(tmp_path / "enc.attnviz", manifest, members)
    data = bytearray(path.read_bytes())
    name = manifest["arrays"]["emb32"]["member"].encode()
    with zipfile.ZipFile(path) as zf:
        off = zf.getinfo(name.decode()).header_offset
    struct.pack_into("<H", data, off + 6, 1)
    i = data.index(b"PK\x01\x02")
    while bytes(data[i + 46:i + 46 + len(name)]) != name:
        i = data.index(b"PK\x01\x02", i + 4)
    struct.pack_into("<H", data, i + 8, 1)
    path.write_bytes(bytes(data))
    _fails(path, "encrypted")


def test_unsupported_compression_method(tmp_path, sample):
    manifest, members = read_zip(sample)
    _fails(write_zip(tmp_path / "bz.attnviz", manifest, members, compress=zipfile.ZIP_BZIP2),
           "compression method 12")


# --- arrays that disagree with the manifest --------------------------------------------------------

def test_pickled_object_array_is_never_unpickled(tmp_path, sample):
    PICKLE_RAN.clear()
    obj = np.array([Trap(), Trap()], dtype=object)
    def edit(m, members):
        set_array_member(m, members, "token_ids", npy_bytes(obj, allow_pickle=True), dtype="<i8", shape=[2])
    _fails(_edited(tmp_path, sample, edit), "never pickled objects")
    assert PICKLE_RAN == []


def test_object_dtype_in_manifest(tmp_path, sample):
    def edit(m, members):
        m["arrays"]["token_ids"]["dtype"] = "|O"
    _fails(_edited(tmp_path, sample, edit), r"dtype '\|O'; allowed are")


@pytest.mark.parametrize("dtype", ["<c16", "|V8", "<U4", "<M8[s]", "<f2", ">f8", "float64", 8, None])
def test_unsafe_or_malformed_dtype_in_manifest(tmp_path, sample, dtype):
    def edit(m, members):
        m["arrays"]["heads.wq"]["dtype"] = dtype
    _fails(_edited(tmp_path, sample, edit), "allowed are")


def test_dtype_mismatch(tmp_path, sample):
    def edit(m, members):
        set_array_member(m, members, "heads.wq", npy_bytes(np.zeros((2, 4, 2), np.float32)))
    _fails(_edited(tmp_path, sample, edit), "holds dtype <f4, the manifest says <f8")


def test_shape_mismatch(tmp_path, sample):
    def edit(m, members):
        set_array_member(m, members, "heads.wq", npy_bytes(np.zeros((4, 2, 2))))
    _fails(_edited(tmp_path, sample, edit), r"holds shape \(4, 2, 2\), the manifest says \(2, 4, 2\)")


def test_npy_data_shorter_than_its_header_says(tmp_path, sample):
    def edit(m, members):
        full = npy_bytes(np.zeros((2, 4, 2)))
        set_array_member(m, members, "heads.wq", full[:-8])
    _fails(_edited(tmp_path, sample, edit), "data bytes")


def test_member_that_is_not_npy(tmp_path, sample):
    def edit(m, members):
        set_array_member(m, members, "heads.wq", b"not an npy file at all" + bytes(200))
    _fails(_edited(tmp_path, sample, edit), "not a valid .npy member")


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_weights(tmp_path, sample, bad):
    w = np.ones((2, 4, 2))
    w[1, 2, 0] = bad
    def edit(m, members):
        set_array_member(m, members, "heads.wq", npy_bytes(w))
    _fails(_edited(tmp_path, sample, edit), "1 of 16 values are NaN or infinite")


@pytest.mark.parametrize("shape, match", [
    ([10**9, 10**9], "declares shape"),
    ([2**62, 2**62, 2**62], "shape entry is"),
    ([-1, 4], "shape entry is -1"),
    ([1] * 20, "at most 8 sizes"),
    ("big", "shape must be a list"),
    ([2.5, 4], "shape entry must be an integer"),
    ([True, 4], "shape entry must be an integer"),
])
def test_absurd_declared_shape(tmp_path, sample, shape, match):
    def edit(m, members):
        m["arrays"]["heads.wq"]["shape"] = shape
    _fails(_edited(tmp_path, sample, edit), match)


# --- manifest contents and schema versions ---------------------------------------------------------

@pytest.mark.parametrize("raw, match", [
    (b"", "not valid JSON"),
    (b"\xff\xfe", "not valid UTF-8"),
    (b"[1, 2]", "must hold a JSON object"),
    (b'{"format": "attnviz-session", "schema_version": NaN}', "not allowed"),
    (b'{"format": "attnviz-session", "schema_version": 1, "state": {"x": 1e400}}', "too large for a float"),
    (b"[" * 100000 + b"]" * 100000, "nests deeper"),
    (b'{"format": "zip-of-cats", "schema_version": 1}', "format is 'zip-of-cats'"),
    (b'{"schema_version": 1}', "format is None"),
])
def test_bad_manifest_json(tmp_path, raw, match):
    _fails(write_zip(tmp_path / "m.attnviz", raw, {}), match)


@pytest.mark.parametrize("version, match", [
    (7, r"written by a newer attnviz \(schema 7\); this version reads up to 1"),
    (2, r"written by a newer attnviz \(schema 2\)"),
    (0, "unknown schema version 0"),
    (-3, "unknown schema version -3"),
    ("1", "schema_version must be an integer"),
    (1.0, "schema_version must be an integer"),
    (True, "schema_version must be an integer"),
    (None, "schema_version must be an integer"),
])
def test_unknown_and_newer_schema_versions(tmp_path, sample, version, match):
    def edit(m, members):
        m["schema_version"] = version
    _fails(_edited(tmp_path, sample, edit), match)


@pytest.mark.parametrize("field, value, match", [
    ("state", [1, 2], "'state' must be a JSON object"),
    ("state", None, "'state' must be a JSON object"),
    ("arrays", [1], "must be JSON objects"),
    ("blobs", "x", "must be JSON objects"),
])
def test_bad_manifest_fields(tmp_path, sample, field, value, match):
    def edit(m, members):
        m[field] = value
    _fails(_edited(tmp_path, sample, edit), match)


@pytest.mark.parametrize("spec_edit, match", [
    (lambda s: s.pop("sha256"), "no valid sha256"),
    (lambda s: s.update(sha256="ABC"), "no valid sha256"),
    (lambda s: s.update(size=-1), "size is -1"),
    (lambda s: s.update(size="12"), "size must be an integer"),
    (lambda s: s.update(size=1), "does not fit its shape"),
    (lambda s: s.pop("member"), "names member None"),
])
def test_bad_array_entries(tmp_path, sample, spec_edit, match):
    def edit(m, members):
        spec_edit(m["arrays"]["heads.wq"])
    _fails(_edited(tmp_path, sample, edit), match)


def test_array_entry_not_an_object(tmp_path, sample):
    def edit(m, members):
        m["arrays"]["heads.wq"] = "arrays/0000_heads.wq.npy"
    _fails(_edited(tmp_path, sample, edit), "must be an object")


def test_overlong_key(tmp_path, sample):
    def edit(m, members):
        m["blobs"]["k" * 500] = m["blobs"].pop("image.png")
    _fails(_edited(tmp_path, sample, edit), "at most 200 characters")


def test_too_many_listed_members(tmp_path, sample):
    def edit(m, members):
        for i in range(50):
            m["blobs"][f"b{i}"] = {"member": f"blobs/x{i}", "size": 0, "sha256": hashlib.sha256(b"").hexdigest()}
    _fails(_edited(tmp_path, sample, edit), "lists 58 members, more than the limit of 20",
           limits=Limits(max_members=20))


def test_message_is_actionable_and_one_line(tmp_path, sample):
    def edit(m, members):
        m["schema_version"] = 7
    msg = _fails(_edited(tmp_path, sample, edit), "newer")
    assert msg.endswith("Update attnviz to open it")
    assert json.dumps(msg)  # plain text


# --- saving onto something that is not a regular file ---------------------------------------------

def _river():
    from attnviz.model.demos import build_demo

    return build_demo("river-bank")


def _special_targets(tmp_path):
    """name -> a path holding something that is not a regular file (a device node only where mknod
    is allowed, i.e. as root)."""
    import socket
    import stat as st

    os.mkfifo(tmp_path / "pipe.attnviz")
    (tmp_path / "folder.attnviz").mkdir()
    (tmp_path / "link-to-folder.attnviz").symlink_to(tmp_path / "folder.attnviz")
    targets = {"FIFO": tmp_path / "pipe.attnviz", "directory": tmp_path / "folder.attnviz",
               "link to a directory": tmp_path / "link-to-folder.attnviz"}
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(tmp_path / "sock.attnviz"))
    sock.close()
    targets["socket"] = tmp_path / "sock.attnviz"
    try:
        os.mknod(tmp_path / "null.attnviz", 0o644 | st.S_IFCHR, os.makedev(1, 3))
        targets["character device"] = tmp_path / "null.attnviz"
    except PermissionError:
        pass  # not root: the other kinds still cover the check
    return targets


def _kind(path):
    import stat as st

    return st.S_IFMT(os.lstat(path).st_mode)


def test_saving_onto_a_non_regular_file_is_refused_and_leaves_it(tmp_path):
    from attnviz.persist import save_payload, save_session

    state = _river()
    for what, path in _special_targets(tmp_path).items():
        before = _kind(path)
        for save in (lambda p: save_session(p, state), lambda p: save_payload(p, {"a": 1})):
            with pytest.raises(SessionError, match="not a regular file") as info:
                save(path)
            assert str(path) in str(info.value), what
            assert _kind(path) == before, what  # still a FIFO / folder / device, not a zip
    assert not [p for p in tmp_path.rglob("*.tmp")]  # refused before a temporary file was made


def test_symlinks_save_to_the_file_they_point_to(tmp_path):
    from attnviz.persist import load_session, save_session

    state = _river()
    real = save_session(tmp_path / "real.attnviz", state)
    link = tmp_path / "link.attnviz"
    link.symlink_to(real)
    assert save_session(link, state) == real
    assert link.is_symlink() and os.readlink(link) == str(real)
    assert load_session(link) == state
    dangling = tmp_path / "dangling.attnviz"
    dangling.symlink_to(tmp_path / "sub-new.attnviz")  # as editors do: the link's target is created
    save_session(dangling, state)
    assert dangling.is_symlink() and (tmp_path / "sub-new.attnviz").is_file()
    loop = tmp_path / "loop.attnviz"
    loop.symlink_to(loop)
    with pytest.raises(SessionError, match="loop.attnviz"):
        save_session(loop, state)


def test_cli_demo_save_onto_a_fifo_or_device(tmp_path, capsys):
    from attnviz.cli import main

    for what, path in _special_targets(tmp_path).items():
        before = _kind(path)
        assert main(["demo", "river-bank", "--save", str(path)]) == 1, what
        out, err = capsys.readouterr()
        assert out == "" and err.startswith(f"error: {path}: it is ") and "not a regular file" in err, what
        assert err.count("\n") == 1 and _kind(path) == before


def test_autosave_onto_a_folder_is_refused(tmp_path):
    from attnviz.persist import AutosaveStore

    store = AutosaveStore(tmp_path / "store")
    (tmp_path / "store" / "autosave.attnviz").mkdir(parents=True)
    with pytest.raises(SessionError, match="is a directory, not a regular file"):
        store.write(_river())
    assert (tmp_path / "store" / "autosave.attnviz").is_dir()


# --- strings that could never be saved again -------------------------------------------------------

def _session_with(tmp_path, edit, name="edited.attnviz"):
    from attnviz.persist import save_session

    src = save_session(tmp_path / "src.attnviz", _river())
    manifest, members = read_zip(src)
    edit(manifest["state"])
    return write_zip(tmp_path / name, manifest, members)  # json.dumps writes \udXXX escapes


@pytest.mark.parametrize("edit, where", [
    (lambda s: s["sources"][0].update(name="river\udc80"), r"state\.sources\[0\]\.name"),
    (lambda s: s["sources"][0].update(text="by the \ud800 bank"), r"state\.sources\[0\]\.text"),
    (lambda s: s["view"].update(colormap="\udfff"), r"state\.view\.colormap"),
    (lambda s: s["tokenizer"].update({"x\ud83d": 1}), r"a key of state\.tokenizer"),
])
def test_lone_surrogate_in_the_manifest_is_refused_with_its_path(tmp_path, edit, where):
    from attnviz.persist import load_session

    path = _session_with(tmp_path, edit)
    with pytest.raises(SessionError, match=f"{where} holds a lone UTF-16 surrogate") as info:
        load_session(path)
    assert str(path) in str(info.value)


def test_paired_surrogates_are_ordinary_text(tmp_path):
    from attnviz.persist import load_session

    path = _session_with(tmp_path, lambda s: s["sources"][0].update(name="river \U0001f30a"))
    assert load_session(path).sources[0].name == "river \U0001f30a"


def test_cli_check_refuses_a_lone_surrogate(tmp_path, capsys):
    from attnviz.cli import main

    path = _session_with(tmp_path, lambda s: s["sources"][0].update(name="\udc80"))
    assert main(["check", str(path)]) == 1
    err = capsys.readouterr().err
    assert "state.sources[0].name holds a lone UTF-16 surrogate" in err and err.count("\n") == 1


# --- impossible indices ----------------------------------------------------------------------------

def _with_override(token=0, head=0, dim=0):
    return lambda s: s["model"].update(qk_overrides=[["q", head, token, dim, 1.5]])


def _with_head_design(head):
    return lambda s: s["mask"]["payload"].update(heads=[{"head": head, "design": {}}])


@pytest.mark.parametrize("edit, match", [
    (_with_override(token=10**12), r"model\.qk_overrides\[0\]\.token is 1,000,000,000,000; the token positions "
                                   r"a sequence can have are 0 \.\. 65,535"),
    (_with_override(token=-1), r"model\.qk_overrides\[0\]\.token is -1"),
    (_with_override(head=10**9), r"model\.qk_overrides\[0\]\.head is 1,000,000,000; the heads of this model "
                                 r"\(nh = 1\) are 0 \.\. 0"),
    (_with_override(dim=4096), r"model\.qk_overrides\[0\]\.dim is 4,096; the components of a head"),
    (_with_override(token=1.5), r"model\.qk_overrides\[0\]\.token must be an integer"),
    (_with_head_design(10**9), r"mask\.payload\.heads\[0\]\.head is 1,000,000,000; the heads a session can have "
                               r"\(at most 256\) are 0 \.\. 255"),
    (_with_head_design(-2), r"mask\.payload\.heads\[0\]\.head is -2"),
    (lambda s: s["view"].update(query=10**12), r"view\.query is 1,000,000,000,000"),
    (lambda s: s["view"].update(head=10**9), r"view\.head is 1,000,000,000"),
])
def test_impossible_indices_are_refused_at_load_with_the_field(tmp_path, edit, match):
    from attnviz.persist import load_session

    path = _session_with(tmp_path, edit)
    with pytest.raises(SessionError, match=match):
        load_session(path)


def test_possible_indices_still_load(tmp_path):
    from attnviz.persist import load_session

    state = load_session(_session_with(tmp_path, _with_override(token=65_535), "a.attnviz"))
    assert state.model.qk_overrides[0].token == 65_535  # beyond this sequence, within any sequence
    state = load_session(_session_with(tmp_path, _with_head_design(255), "b.attnviz"))
    assert dict(state.mask.heads).keys() == {255}  # a design kept from when the model had more heads


def test_cli_check_refuses_impossible_indices(tmp_path, capsys):
    from attnviz.cli import main

    for i, edit in enumerate((_with_override(token=10**12), _with_head_design(10**9))):
        assert main(["check", str(_session_with(tmp_path, edit, f"{i}.attnviz"))]) == 1
        err = capsys.readouterr().err
        assert err.startswith("error: ") and ("token is 1,000,000,000,000" in err or "head is 1,000,000,000" in err)


# --- temporary files of killed saves ---------------------------------------------------------------

_SLOW_SAVE = """
import sys, time
from attnviz.persist.atomic import atomic_write

def write(f):
    f.write(b"x" * 100_000)
    f.flush()
    print("writing", flush=True)
    time.sleep(120)

atomic_write(sys.argv[1], write)
"""


def _start_slow_save(target):
    import subprocess
    import sys

    from pathlib import Path

    import attnviz

    root = str(Path(attnviz.__file__).resolve().parents[1])  # this attnviz, wherever the tests run from
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH", "")) if p))
    proc = subprocess.Popen([sys.executable, "-c", _SLOW_SAVE, str(target)], stdout=subprocess.PIPE, env=env)
    assert proc.stdout.readline() == b"writing\n"  # the temporary file exists and is locked
    return proc


def _temporaries(folder, name):
    return sorted(p.name for p in folder.iterdir() if p.name.startswith(f".{name}.") and p.name.endswith(".tmp"))


def test_temporaries_of_killed_saves_are_removed_by_the_next_save(tmp_path):
    import signal

    from attnviz.persist import save_session

    target = tmp_path / "work.attnviz"
    save_session(target, _river())
    original = target.read_bytes()
    killed = None
    for _ in range(3):  # each save, killed or not, starts by removing what the previous kill left
        proc = _start_slow_save(target)
        assert _temporaries(tmp_path, "work.attnviz") == [n for n in _temporaries(tmp_path, "work.attnviz")
                                                        if n.startswith(f".work.attnviz.{proc.pid}-")]
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        killed = proc.pid
    left = _temporaries(tmp_path, "work.attnviz")
    assert len(left) == 1 and left[0].startswith(f".work.attnviz.{killed}-")
    assert target.read_bytes() == original  # the kills never touched the file itself

    live = _start_slow_save(target)  # a save in progress in another process is left alone
    try:
        (tmp_path / "other.attnviz").write_bytes(b"")  # another file's temporaries are not ours
        (tmp_path / ".other.attnviz.1-abcdefgh.tmp").write_bytes(b"x")
        save_session(target, _river())
        remaining = _temporaries(tmp_path, "work.attnviz")
        assert len(remaining) == 1 and remaining[0].startswith(f".work.attnviz.{live.pid}-")
        assert (tmp_path / ".other.attnviz.1-abcdefgh.tmp").exists()
    finally:
        live.kill()
        live.wait()
    save_session(target, _river())
    assert _temporaries(tmp_path, "work.attnviz") == []


def test_stale_temporaries_by_age_and_of_earlier_versions(tmp_path):
    from attnviz.persist.atomic import LEGACY_STALE_AFTER_S, STALE_AFTER_S, atomic_write

    target = tmp_path / "w.attnviz"
    old = os.getpid()  # a running process (this one), but nobody holds the file: stale once old enough
    fresh_live = tmp_path / f".w.attnviz.{old}-aaaaaaaa.tmp"
    aged_live = tmp_path / f".w.attnviz.{old}-bbbbbbbb.tmp"
    legacy_new = tmp_path / ".w.attnviz.cccccccc.tmp"
    legacy_old = tmp_path / ".w.attnviz.dddddddd.tmp"
    for p in (fresh_live, aged_live, legacy_new, legacy_old):
        p.write_bytes(b"partial")
    now = os.path.getmtime(fresh_live)
    os.utime(aged_live, (now - STALE_AFTER_S - 5, now - STALE_AFTER_S - 5))
    os.utime(legacy_old, (now - LEGACY_STALE_AFTER_S - 5, now - LEGACY_STALE_AFTER_S - 5))
    atomic_write(target, lambda f: f.write(b"data"))
    assert _temporaries(tmp_path, "w.attnviz") == sorted([fresh_live.name, legacy_new.name])
    assert target.read_bytes() == b"data"


# --- a values file far over the row limit ----------------------------------------------------------

def test_huge_csv_values_file_stops_reading_at_the_row_limit(tmp_path, monkeypatch):
    import attnviz.sources.custom as custom
    from attnviz.sources.errors import SourceError

    path = tmp_path / "huge.csv"
    path.write_bytes(b"0.5\n" * 5_000_000)  # 20 MB, 5 million one-number rows
    lines_read = []
    real = custom._data_lines

    def counting(f, name):
        for line in real(f, name):
            lines_read.append(1)
            yield line

    monkeypatch.setattr(custom, "_data_lines", counting)
    with pytest.raises(SourceError, match=r"huge\.csv has more than 65,536 rows of 1 number; a block holds at most "
                                          r"65,536 tokens .* \(reading stopped at data row 65537\)"):
        custom.load_block_values(path)
    assert len(lines_read) == custom.MAX_BLOCK_TOKENS + 1


@pytest.mark.parametrize("content, match", [
    (b"1," * 5000 + b"1\n", r"rows have 5,001 values; a token holds at most 4,096"),
    (b"1" * 300_000 + b"\n", r"line 1 is longer than 262,144 characters"),
    (b"a,b\n" + b"1,2\n" * 600, r"has more than 500 rows of 2 numbers; a block holds at most 65,536 tokens and "
                                  r"1,000 numbers \(reading stopped at data row 501\)"),
])
def test_csv_values_file_over_the_column_line_and_cell_limits(tmp_path, monkeypatch, content, match):
    import attnviz.sources.custom as custom
    from attnviz.sources.errors import SourceError

    monkeypatch.setattr(custom, "MAX_BLOCK_CELLS", 1000)  # the real cap (2**25 numbers) needs a 64 MB file
    (tmp_path / "v.csv").write_bytes(content)
    with pytest.raises(SourceError, match=match):
        custom.load_block_values(tmp_path / "v.csv")


@pytest.mark.parametrize("cell, shown", [((10**12, 1), "(1,000,000,000,000, 1)"), ((2, 65_536), "(2, 65,536)"),
                                         ((-1, 0), "(-1, 0)")])
def test_painted_cells_outside_any_sequence_are_refused_at_load(tmp_path, cell, shown):
    from dataclasses import replace

    from attnviz.model.mask.paint import CellOverrides
    from attnviz.model.serialize import dump_state
    from attnviz.persist import load_session, save_payload

    state = _river()
    painted = replace(state.mask, overrides=CellOverrides().set(np.array([0, 3]), np.array([1, 2]), np.array([-1, 1])))
    tree, arrays, blobs = dump_state(replace(state, mask=painted))
    (key,) = tree["mask"]["arrays"].values()
    ok = save_payload(tmp_path / "ok.attnviz", tree, arrays, blobs)
    assert len(load_session(ok).mask.overrides) == 2
    arrays[key] = np.array(arrays[key], dtype=np.int64)
    arrays[key][1, :2] = cell
    path = save_payload(tmp_path / "far.attnviz", tree, arrays, blobs)
    with pytest.raises(SessionError, match=rf"mask\.arrays\['mask\.overrides'\] row 1: painted cell {re.escape(shown)} "
                                           r"is outside the token positions a sequence can have \(0 \.\. 65,535\)"):
        load_session(path)
