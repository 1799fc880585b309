"""The session's interventions (the Pretrained workspace's Intervene tab) in session files: saved and reopened
equal, written only when set (so a session without them is the file older versions wrote), older files
loading with none, and a bad "interventions" tree refused with its path."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from attnviz.model.demos import build_demo
from attnviz.model.serialize import INTERVENTIONS_VERSION, dump_state, load_state
from attnviz.model.state import Interventions, MeansFile
from attnviz.persist import SessionError, load_session, save_session
from persist_helpers import read_zip, write_zip

FIXTURES = Path(__file__).resolve().parents[1] / "data" / "sessions"
FULL = Interventions(heads=((1, 2), (0, 3)), mode="scale", factor=-0.5, knockout_layers=(1, 0),
                     knockout_heads=(2,), patch="residual", patch_layer=1, patch_positions=(4, 2),
                     clean="the river bank flooded")


def test_interventions_round_trip_through_a_file(tmp_path):
    state = replace(build_demo("river-bank"), interventions=FULL)
    back = load_session(save_session(tmp_path / "iv.attnviz", state))
    assert back == state and back.interventions == FULL
    assert back.interventions.heads == ((0, 3), (1, 2)) and back.interventions.patch_positions == (2, 4)
    manifest, _members = read_zip(tmp_path / "iv.attnviz")
    tree = manifest["state"]["interventions"]
    assert tree["version"] == 1 and tree["clean"] == "the river bank flooded"  # nothing version 2 adds: 1
    assert "means_file" not in tree and "stack" not in tree


def test_a_session_without_interventions_is_written_as_before(tmp_path):
    state = build_demo("river-bank")
    tree, arrays, blobs = dump_state(state)
    assert "interventions" not in tree
    assert load_state(tree, arrays, blobs).interventions == Interventions()


@pytest.mark.parametrize("path", sorted(FIXTURES.glob("v*/*.attnviz")), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_older_files_load_unchanged_with_no_interventions(path):
    state = load_session(path)
    assert state.interventions == Interventions() and not state.interventions.active


@pytest.mark.parametrize("change, message", [
    ({"version": INTERVENTIONS_VERSION + 1}, "newer attnviz"),
    ({"version": 0}, "versions start at 1"),
    ({"stack": "cross"}, "unknown key"),  # a version 1 tree has no stack
    ({"version": 2, "stack": "middle"}, "intervention stack must be one of"),
    ({"version": 2, "means_file": {"path": "m.parquet", "size": 5}}, "missing key"),
    ({"version": 2, "means_file": {"path": "", "size": 5, "digest": "0" * 64}}, "non-empty path"),
    ({"version": 2, "means_file": {"path": "m.parquet", "size": -1, "digest": "0" * 64}}, "size must be"),
    ({"version": 2, "means_file": {"path": "m.parquet", "size": 5, "digest": "XYZ"}}, "64 lowercase hex"),
    ({"version": 2, "means_file": {"path": "m\x00", "size": 5, "digest": "0" * 64}}, "non-empty path"),
    ({"version": 2, "means_file": {"path": "m" * 5000, "size": 5, "digest": "0" * 64}}, "at most 4,096"),
    ({"version": 2, "means_file": ["m.parquet", 5]}, "must be a mapping"),
    ({"heads": [[0, 300]]}, r"interventions.heads\[0\].head is 300"),
    ({"mode": "half"}, "intervention mode"),
    ({"factor": "big"}, "interventions.factor must be a finite number"),
    ({"patch": "everything"}, "patch must be one of"),
    ({"patch_positions": [70000]}, r"interventions.patch_positions\[0\] is 70,000"),
    ({"extra": 1}, "unknown key"),
])
def test_a_bad_interventions_tree_is_refused_with_its_path(tmp_path, change, message):
    path = save_session(tmp_path / "iv.attnviz", replace(build_demo("river-bank"), interventions=FULL))
    manifest, members = read_zip(path)
    manifest["state"]["interventions"].update(change)
    bad = tmp_path / "bad.attnviz"
    write_zip(bad, manifest, members)
    with pytest.raises(SessionError, match=message):
        load_session(bad)


def test_interventions_validate_what_they_hold():
    with pytest.raises(ValueError, match="finite"):
        Interventions(factor=float("nan"))
    with pytest.raises(ValueError, match=r"\(layer, head\)"):
        Interventions(heads=((1, 2, 3),))
    assert Interventions(heads=((1, 2), (1, 2))).heads == ((1, 2),)
    assert json.dumps(dump_state(replace(build_demo("river-bank"), interventions=FULL))[0])  # JSON types only


MEANS = MeansFile(path="/data/sweeps/heads.parquet", size=12_345, digest="ab" * 32)


@pytest.mark.parametrize("iv", [
    Interventions(heads=((0, 1),), mode="mean", means_file=MEANS),
    Interventions(heads=((1, 0),), stack="cross", patch="head", clean="hello there"),
    replace(FULL, means_file=MEANS, stack="encoder"),
    Interventions(heads=((2, 1),), stack="expert", knockout_layers=(0, 1)),  # a SmolVLA policy's action expert
], ids=["means-file", "stack", "both", "policy-stack"])
def test_a_means_file_and_a_stack_round_trip_as_version_2(tmp_path, iv):
    state = replace(build_demo("river-bank"), interventions=iv)
    back = load_session(save_session(tmp_path / "iv.attnviz", state))
    assert back == state and back.interventions.means_file == iv.means_file and back.interventions.stack == iv.stack
    tree = read_zip(tmp_path / "iv.attnviz")[0]["state"]["interventions"]
    assert tree["version"] == 2 == INTERVENTIONS_VERSION
    assert ("means_file" in tree) == (iv.means_file is not None) and ("stack" in tree) == (iv.stack != "decoder")


def test_a_version_1_tree_loads_with_no_means_file_and_the_decoder_stack(tmp_path):
    path = save_session(tmp_path / "iv.attnviz", replace(build_demo("river-bank"), interventions=FULL))
    manifest, members = read_zip(path)
    assert manifest["state"]["interventions"]["version"] == 1
    back = load_session(path).interventions
    assert back == FULL and back.means_file is None and back.stack == "decoder"


def test_a_version_2_tree_may_leave_out_what_it_adds(tmp_path):
    path = save_session(tmp_path / "iv.attnviz", replace(build_demo("river-bank"), interventions=FULL))
    manifest, members = read_zip(path)
    manifest["state"]["interventions"]["version"] = 2
    manifest["state"]["interventions"]["means_file"] = None
    out = tmp_path / "v2.attnviz"
    write_zip(out, manifest, members)
    assert load_session(out).interventions == FULL


def test_a_means_file_validates_what_it_holds():
    with pytest.raises(ValueError, match="MeansFile"):
        Interventions(means_file="heads.parquet")
    with pytest.raises(ValueError, match="stack"):
        Interventions(stack="self")
    with pytest.raises(ValueError, match="size"):
        MeansFile(path="a", size=True, digest="0" * 64)
