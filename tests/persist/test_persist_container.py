"""The .attnviz container on synthetic payloads: round trip, manifest layout, what saving refuses."""

from __future__ import annotations

import hashlib
import json
import re
import zipfile

import numpy as np
import pytest

import attnviz
from attnviz.persist import SCHEMA_VERSION, Limits, SessionError, load_payload, save_payload
from persist_helpers import npy_bytes, read_zip, sample_payload, write_sample


def test_round_trip_restores_tree_arrays_and_blobs(tmp_path):
    tree, arrays, blobs = sample_payload()
    path = save_payload(tmp_path / "s.attnviz", tree, arrays, blobs)
    got = load_payload(path)
    assert got.tree == tree
    assert got.blobs == blobs
    assert set(got.arrays) == set(arrays)
    for key, a in arrays.items():
        b = got.arrays[key]
        assert b.dtype == a.dtype and b.shape == a.shape, key
        np.testing.assert_array_equal(b, a)
        assert b.flags.writeable and b.flags.c_contiguous and b.flags.owndata, key
    assert got.schema_version == SCHEMA_VERSION
    assert got.app_version == attnviz.__version__


def test_manifest_describes_every_member(tmp_path):
    path = write_sample(tmp_path / "s.attnviz")
    manifest, members = read_zip(path)
    assert manifest["format"] == "attnviz-session"
    assert manifest["schema_version"] == 1 == SCHEMA_VERSION
    assert manifest["app_version"] == attnviz.__version__
    assert manifest["created"] == "2025-01-02T03:04:05Z"
    tree, arrays, blobs = sample_payload()
    assert manifest["state"] == tree
    listed = {s["member"] for s in manifest["arrays"].values()} | {s["member"] for s in manifest["blobs"].values()}
    assert listed == set(members)
    for key, spec in manifest["arrays"].items():
        data = members[spec["member"]]
        assert spec["member"].startswith("arrays/") and spec["member"].endswith(".npy")
        assert spec["dtype"] == arrays[key].dtype.str
        assert spec["shape"] == list(arrays[key].shape)
        assert spec["size"] == len(data)
        assert spec["sha256"] == hashlib.sha256(data).hexdigest()
        assert data == npy_bytes(arrays[key])  # a plain .npy any numpy reads
    for key, spec in manifest["blobs"].items():
        assert members[spec["member"]] == blobs[key]
        assert spec["size"] == len(blobs[key])
        assert spec["sha256"] == hashlib.sha256(blobs[key]).hexdigest()


def test_created_defaults_to_utc_now(tmp_path):
    got = load_payload(save_payload(tmp_path / "s.attnviz", {}))
    assert len(got.created) == 20 and got.created.endswith("Z") and got.created[10] == "T"


def test_keys_with_odd_characters_get_safe_unique_member_names(tmp_path):
    arrays = {"../../etc/passwd": np.ones(2), "a/b": np.zeros(3), "a_b": np.arange(4), "": None}
    del arrays[""]
    path = save_payload(tmp_path / "s.attnviz", {}, arrays)
    manifest, members = read_zip(path)
    names = [s["member"] for s in manifest["arrays"].values()]
    assert len(set(names)) == 3
    assert all(re.fullmatch(r"arrays/\d{4}_[A-Za-z0-9_][A-Za-z0-9_.\-]*\.npy", n) for n in names), names
    got = load_payload(path)
    np.testing.assert_array_equal(got.arrays["../../etc/passwd"], np.ones(2))
    np.testing.assert_array_equal(got.arrays["a_b"], np.arange(4))


def test_big_endian_and_fortran_arrays_are_stored_portably(tmp_path):
    a = np.arange(6, dtype=">f8").reshape(2, 3)
    f = np.asfortranarray(np.arange(6, dtype=np.float32).reshape(2, 3))
    got = load_payload(save_payload(tmp_path / "s.attnviz", {}, {"be": a, "f": f})).arrays
    assert got["be"].dtype == np.dtype("<f8")
    np.testing.assert_array_equal(got["be"], a)
    np.testing.assert_array_equal(got["f"], f)


def test_large_members_are_stored_small_ones_deflated(tmp_path):
    limits = Limits(ratio_floor_bytes=1000)
    path = save_payload(tmp_path / "s.attnviz", {}, {"big": np.zeros(1000), "small": np.zeros(3)}, limits=limits)
    with zipfile.ZipFile(path) as zf:
        kinds = {i.filename: i.compress_type for i in zf.infolist()}
    assert kinds["arrays/0000_big.npy"] == zipfile.ZIP_STORED
    assert kinds["arrays/0001_small.npy"] == zipfile.ZIP_DEFLATED
    # a file full of zeros that we wrote is never mistaken for a zip bomb by our own reader
    np.testing.assert_array_equal(load_payload(path, limits=limits).arrays["big"], np.zeros(1000))


@pytest.mark.parametrize("arrays, blobs, tree, match", [
    ({"w": np.array([1.0, np.nan])}, {}, {}, "NaN or infinite"),
    ({"w": np.array([np.inf], dtype=np.float32)}, {}, {}, "NaN or infinite"),
    ({"w": np.array([object()], dtype=object)}, {}, {}, "dtype object is not storable"),
    ({"w": np.array([1 + 2j])}, {}, {}, "not storable"),
    ({"w": np.array(["text"])}, {}, {}, "not storable"),
    ({"w": np.zeros((1,) * 9)}, {}, {}, "9 axes"),
    ({1: np.zeros(2)}, {}, {}, "keys must be non-empty strings"),
    ({}, {"b": "not bytes"}, {}, "expected bytes"),
    ({}, {}, {"x": float("nan")}, "cannot be written as JSON"),
    ({}, {}, {"x": object()}, "cannot be written as JSON"),
    ({}, {}, ["not", "a", "dict"], "must be a dict"),
])
def test_saving_refuses_what_loading_would_refuse(tmp_path, arrays, blobs, tree, match):
    with pytest.raises(SessionError, match=match):
        save_payload(tmp_path / "s.attnviz", tree, arrays, blobs)
    assert not (tmp_path / "s.attnviz").exists()
    assert list(tmp_path.iterdir()) == []  # no temporary file left behind


def test_saving_respects_the_caps(tmp_path):
    with pytest.raises(SessionError, match="limit"):
        save_payload(tmp_path / "a.attnviz", {}, {"w": np.zeros(1000)}, limits=Limits(max_member_bytes=1000))
    with pytest.raises(SessionError, match="limit"):
        save_payload(tmp_path / "b.attnviz", {}, {"w": np.zeros(100), "v": np.zeros(100)},
                     limits=Limits(max_total_bytes=1500))
    with pytest.raises(SessionError, match="limit"):
        save_payload(tmp_path / "c.attnviz", {"t": "x" * 5000}, limits=Limits(max_manifest_bytes=4000))
    with pytest.raises(SessionError, match="limit"):
        save_payload(tmp_path / "d.attnviz", {}, {str(i): np.zeros(1) for i in range(5)}, limits=Limits(max_members=5))
    assert list(tmp_path.iterdir()) == []


def test_bool_members_are_normalised(tmp_path):
    path = save_payload(tmp_path / "s.attnviz", {}, {"m": np.array([True, False, True])})
    manifest, members = read_zip(path)
    name = manifest["arrays"]["m"]["member"]
    data = bytearray(members[name])
    data[-3] = 2  # a nonzero byte that is not 1
    members[name] = bytes(data)
    manifest["arrays"]["m"]["sha256"] = hashlib.sha256(data).hexdigest()
    from persist_helpers import write_zip
    got = load_payload(write_zip(tmp_path / "t.attnviz", manifest, members)).arrays["m"]
    assert got.tolist() == [True, False, True]
    assert got.view(np.uint8).tolist() == [1, 0, 1]


def test_manifest_is_readable_json_with_unicode(tmp_path):
    path = write_sample(tmp_path / "s.attnviz")
    with zipfile.ZipFile(path) as zf:
        text = zf.read("manifest.json").decode("utf-8")
    assert "\U0001f600" in text  # stored as UTF-8, not escaped
    assert json.loads(text)["state"]["text"].startswith("emoji")
