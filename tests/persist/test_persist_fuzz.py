"""Fuzzing the loader: mutated session files (bytes flipped, cut, inserted, deleted; manifest JSON
values replaced or removed; .npy members rewritten with consistent hashes) either load or raise
SessionError, never anything else."""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attnviz.persist import Payload, SessionError, load_payload
from persist_helpers import read_zip, write_sample, write_zip


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    d = tmp_path_factory.mktemp("fuzz")
    path = write_sample(d / "base.attnviz")
    manifest, members = read_zip(path)
    return d, path.read_bytes(), manifest, members


def _load_or_session_error(path) -> Payload | None:
    try:
        got = load_payload(path)
    except SessionError as exc:
        assert str(exc) and "\n" not in str(exc)
        return None
    assert isinstance(got, Payload)
    for a in got.arrays.values():  # whatever loads is sane
        assert isinstance(a, np.ndarray) and not a.dtype.hasobject
        if a.dtype.kind == "f":
            assert np.isfinite(a).all()
    return got


_byte_ops = st.one_of(
    st.tuples(st.just("flip"), st.floats(0, 1, exclude_max=True), st.integers(1, 255)),
    st.tuples(st.just("cut"), st.floats(0, 1, exclude_max=True), st.just(0)),
    st.tuples(st.just("insert"), st.floats(0, 1), st.binary(min_size=1, max_size=16)),
    st.tuples(st.just("delete"), st.floats(0, 1, exclude_max=True), st.integers(1, 64)),
)


def _apply(data: bytearray, op) -> bytearray:
    kind, where, arg = op
    i = int(where * len(data)) if data else 0
    if kind == "flip" and data:
        data[min(i, len(data) - 1)] ^= arg
    elif kind == "cut":
        del data[i:]
    elif kind == "insert":
        data[i:i] = arg
    elif kind == "delete":
        del data[i:i + arg]
    return data


@settings(max_examples=150)
@given(ops=st.lists(_byte_ops, min_size=1, max_size=4))
def test_mutated_bytes(base, ops):
    d, raw, _, _ = base
    data = bytearray(raw)
    for op in ops:
        data = _apply(data, op)
    path = d / "bytes.attnviz"
    path.write_bytes(bytes(data))
    _load_or_session_error(path)


_json = st.recursive(
    st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=30) | st.sampled_from(["|O", "<f8", "|b1", "arrays/../x", "/etc/x", "0" * 64]),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)


def _paths(obj, prefix=()):
    yield prefix
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from _paths(v, prefix + (k,))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from _paths(v, prefix + (i,))


@settings(max_examples=150)
@given(data=st.data())
def test_mutated_manifest(base, data):
    d, _, manifest, members = base
    m = json.loads(json.dumps(manifest))
    for _ in range(data.draw(st.integers(1, 3))):
        paths = [p for p in _paths(m) if p]
        if not paths:
            break
        path = data.draw(st.sampled_from(paths))
        parent = m
        for key in path[:-1]:
            parent = parent[key]
        action = data.draw(st.sampled_from(["replace", "delete"]))
        if action == "delete":
            del parent[path[-1]]
        else:
            parent[path[-1]] = data.draw(_json)
    out = write_zip(d / "manifest.attnviz", m, members)
    _load_or_session_error(out)


@settings(max_examples=100)
@given(data=st.data())
def test_mutated_npy_member_with_consistent_hash(base, data):
    """The hash is no defence when the attacker writes the manifest: the .npy parser must hold."""
    d, _, manifest, members = base
    m = json.loads(json.dumps(manifest))
    members = dict(members)
    key = data.draw(st.sampled_from(sorted(m["arrays"])))
    spec = m["arrays"][key]
    blob = bytearray(members[spec["member"]])
    for op in data.draw(st.lists(_byte_ops, min_size=1, max_size=3)):
        # bias towards the .npy header, where the parser lives
        kind, where, arg = op
        blob = _apply(blob, (kind, where * min(1.0, 140 / max(len(blob), 1)), arg))
    blob = bytes(blob)
    members[spec["member"]] = blob
    spec["size"] = len(blob)
    spec["sha256"] = hashlib.sha256(blob).hexdigest()
    out = write_zip(d / "npy.attnviz", m, members)
    got = _load_or_session_error(out)
    if got is not None:  # only a header edit that changes nothing (spacing) may load
        assert got.arrays[key].dtype.str == spec["dtype"] and list(got.arrays[key].shape) == spec["shape"]


@pytest.fixture(scope="module")
def session_trees():
    from attnviz.model.demos import build_demo
    from attnviz.model.serialize import dump_state

    return [dump_state(build_demo(name)) for name in ("river-bank", "translation", "vla-mask")]


@settings(max_examples=150)
@given(data=st.data())
def test_mutated_session_tree(base, session_trees, data):
    """A valid container around a state tree the model must judge: only SessionError escapes."""
    from attnviz.model.state import SessionState
    from attnviz.persist import load_session, save_payload

    d = base[0]
    tree, arrays, blobs = data.draw(st.sampled_from(session_trees))
    t = json.loads(json.dumps(tree))
    for _ in range(data.draw(st.integers(1, 3))):
        paths = [p for p in _paths(t) if p]
        path = data.draw(st.sampled_from(paths))
        parent = t
        for key in path[:-1]:
            parent = parent[key]
        if data.draw(st.booleans()):
            del parent[path[-1]]
        else:
            parent[path[-1]] = data.draw(_json | st.integers(-5, 300) | st.sampled_from(["mean", "causal", "file"]))
    out = save_payload(d / "tree.attnviz", t, arrays, blobs)
    try:
        state = load_session(out)
    except SessionError as exc:
        assert str(exc) and "\n" not in str(exc)
        return
    assert isinstance(state, SessionState)
