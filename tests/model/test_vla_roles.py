"""VLA roles of a session's segments: inferred from what their sources are, remembered in the mask
design by the preset, saved with the session (older files, without roles, still load)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from attnviz.model.commands import EditMask, RenameSource
from attnviz.model.demos import build_demo
from attnviz.model.mask.commands import ApplyPreset
from attnviz.model.mask.design import MaskDesign
from attnviz.model.mask.presets import infer_vla_roles, preset
from attnviz.model.serialize import dump_state, load_state
from attnviz.model.session import Session
from attnviz.model.state import CustomSource, ImageSource, TextSource
from attnviz.model.segments import Segment


def _segs(names):
    return [Segment(n, i, i + 1) for i, n in enumerate(names)]


def test_roles_come_from_source_kinds_before_names():
    sources = (ImageSource("china"), TextSource("what to do"), CustomSource("state"), CustomSource("fast actions"),
               CustomSource("noise block"), CustomSource("block 7"))
    names = [s.name for s in sources]
    roles, unsure = infer_vla_roles(_segs(names), sources)
    assert roles == {"china": "I", "what to do": "P", "state": "P", "fast actions": "A", "noise block": "E"}
    assert unsure == ["block 7"]
    # a choice made before wins over everything
    roles, unsure = infer_vla_roles(_segs(names), sources, {"block 7": "A", "china": "P"})
    assert roles["block 7"] == "A" and roles["china"] == "P" and unsure == []


def test_the_vla_preset_remembers_its_roles_and_undo_forgets_them():
    s = Session(build_demo("vla-mask"))
    s.execute(RenameSource("image", "china"))
    segs = _segs([src.name for src in s.state.sources])
    with pytest.raises(ValueError, match="no VLA role"):
        preset("vla", segs)  # the name alone does not say it is the image
    roles, unsure = infer_vla_roles(segs, s.state.sources)
    assert unsure == [] and roles["china"] == "I"
    inverse = s.execute(EditMask(ApplyPreset.make("vla", segs, roles=roles)))
    assert s.state.mask.role_map() == roles
    assert s.state.mask.rule_for("china", "fast actions").label() == "deny"
    s.execute(inverse)
    assert s.state.mask.roles == ()


def test_roles_are_saved_with_the_session_and_old_files_still_load():
    state = build_demo("vla-mask")
    tree, arrays, blobs = dump_state(state)
    assert tree["mask"]["payload"]["version"] == 1 and "roles" not in tree["mask"]["payload"]  # as before
    old = json.loads(json.dumps(tree))
    assert load_state(old, arrays, blobs) == state  # a file written before roles existed
    from dataclasses import replace

    remembering = replace(state, mask=state.mask.with_roles({"image": "I", "block": "E"}))
    tree, arrays, blobs = dump_state(remembering)
    payload = tree["mask"]["payload"]
    assert payload["version"] == 2
    assert payload["roles"] == [{"segment": "block", "role": "E"}, {"segment": "image", "role": "I"}]
    back = load_state(json.loads(json.dumps(tree)), arrays, blobs)
    assert back == remembering and back.mask.role_map() == {"image": "I", "block": "E"}
    bad = json.loads(json.dumps(tree))
    bad["mask"]["payload"]["roles"][0]["role"] = "X"
    with pytest.raises(ValueError, match="one of I, P, A, E"):
        load_state(bad, arrays, blobs)


def test_a_design_checks_its_roles():
    with pytest.raises(ValueError, match="one of I, P, A, E"):
        MaskDesign(roles=(("image", "Z"),))
    d = MaskDesign(roles=(("b", "P"), ("a", "I")))
    assert d.roles == (("a", "I"), ("b", "P"))
    assert np.array_equal(d.compile(_segs(["a", "b"])), MaskDesign().compile(_segs(["a", "b"])))
