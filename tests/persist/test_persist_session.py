"""Sessions on top of the container: every demo and generated sessions reopen equal and compute
identical attention; content the model rejects is a SessionError."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings

from attnviz.model.demos import build_demo, list_demos
from attnviz.model.serialize import dump_state
from attnviz.persist import SessionError, load_payload, load_session, read_session, save_payload, save_session
from persist_helpers import read_zip, write_zip
from session_strategies import assert_same_attention, compute, sessions

DEMOS = [name for name, _ in list_demos()]


@pytest.mark.parametrize("name", DEMOS)
def test_demo_round_trip(tmp_path, name):
    state = build_demo(name)
    path = save_session(tmp_path / f"{name}.attnviz", state)
    back = load_session(path)
    assert back == state
    assert_same_attention(compute(state), compute(back))


def test_river_bank_reopens_with_the_seed_numbers(tmp_path):
    back = load_session(save_session(tmp_path / "rb.attnviz", build_demo("river-bank")))
    r = compute(back)
    bank = r.query_labels.index("bank")
    np.testing.assert_allclose(r.scores[0, bank], [0.46, 0, 2.3, 0.69], atol=1e-12)
    np.testing.assert_allclose(r.weights[0, bank], [0.11, 0.07, 0.69, 0.14], atol=0.005)
    np.testing.assert_allclose(r.output[0, bank], [1.43, 0.06, 0.14, 0], atol=0.005)


def test_file_holds_the_inputs(tmp_path):
    """Image bytes, hand-set weights and the text travel inside the file."""
    state = build_demo("vla-mask")
    manifest, members = read_zip(save_session(tmp_path / "v.attnviz", state))
    image = state.sources[0].data
    assert any(members[s["member"]] == image for s in manifest["blobs"].values())
    assert "pick up the red cup" in str(manifest["state"])
    rb_manifest, _ = read_zip(save_session(tmp_path / "r.attnviz", build_demo("river-bank")))
    assert any(s["shape"] == [1, 4, 4] for s in rb_manifest["arrays"].values())  # a hand-set W (nh, d, hs)


@settings(max_examples=50)
@given(state=sessions())
def test_generated_sessions_round_trip(tmp_path_factory, state):
    path = save_session(tmp_path_factory.mktemp("rt") / "s.attnviz", state)
    back = load_session(path)
    assert back == state
    assert_same_attention(compute(state), compute(back))


def test_read_session_reports_the_file(tmp_path):
    state = build_demo("translation")
    path = save_session(tmp_path / "t.attnviz", state, created="2024-05-06T07:08:09Z")
    back, payload = read_session(path)
    assert back == state
    assert payload.schema_version == 1 and payload.created == "2024-05-06T07:08:09Z"
    tree, arrays, blobs = dump_state(state)
    assert set(payload.arrays) == set(arrays) and payload.tree == tree


def _with_tree(tmp_path, edit):
    tree, arrays, blobs = dump_state(build_demo("river-bank"))
    edit(tree, arrays, blobs)
    return save_payload(tmp_path / "edited.attnviz", tree, arrays, blobs)


@pytest.mark.parametrize("edit, match", [
    (lambda t, a, b: t["model"].update(nh=3), "not divisible by nh=3"),
    (lambda t, a, b: t["model"].update(d_model="four"), "d_model must be an integer"),
    (lambda t, a, b: t.pop("view"), "missing key"),
    (lambda t, a, b: t.update(extra=1), "unknown key"),
    (lambda t, a, b: t["sources"][0].update(kind="smell"), "unknown source kind"),
    (lambda t, a, b: a.update(stray=np.zeros(2)), "not referred to"),
    (lambda t, a, b: a.pop(sorted(a)[0]), "missing"),
    (lambda t, a, b: t["view"].update(overlay_opacity=7), "opacity"),
])
def test_content_the_model_rejects(tmp_path, edit, match):
    path = _with_tree(tmp_path, edit)
    load_payload(path)  # the container itself is fine
    with pytest.raises(SessionError, match=f"the session content is invalid: .*{match}") as info:
        load_session(path)
    assert str(path) in str(info.value) and "\n" not in str(info.value)


def test_wrong_shape_for_a_hand_set_weight(tmp_path):
    def edit(t, a, b):
        key = t["model"]["weights"]["W_q"]
        a[key] = np.zeros((1, 4, 3))
    with pytest.raises(SessionError, match="W_q"):
        load_session(_with_tree(tmp_path, edit))


def test_saving_something_that_is_not_a_session(tmp_path):
    with pytest.raises(SessionError, match="cannot save"):
        save_session(tmp_path / "x.attnviz", object())
    assert not (tmp_path / "x.attnviz").exists()


def test_session_from_a_newer_attnviz(tmp_path):
    path = save_session(tmp_path / "s.attnviz", build_demo("river-bank"))
    manifest, members = read_zip(path)
    manifest["schema_version"] = 7
    out = write_zip(tmp_path / "new.attnviz", manifest, members)
    with pytest.raises(SessionError, match=r"written by a newer attnviz \(schema 7\); this version reads up to 1"):
        load_session(out)
