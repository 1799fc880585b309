"""Session: per-field psygnal events, dirty flag, replace_state, failing commands."""

import pytest

from attnviz.model import commands as C
from attnviz.model.demos import build_demo
from attnviz.model.mask.presets import preset
from attnviz.model.session import Session
from attnviz.model.state import FIELDS, SessionState, TextSource


def recorder(session):
    seen = []
    for name in FIELDS + ("state", "dirty"):
        getattr(session.events, name).connect(lambda v, n=name: seen.append((n, v)))
    return seen


def test_execute_emits_only_changed_fields_then_state():
    s = Session(SessionState(sources=(TextSource("p", text="hi"),)))
    seen = recorder(s)
    inv = s.execute(C.SetMask(preset("causal", [])))
    assert [n for n, _ in seen] == ["mask", "state", "dirty"]
    assert seen[0][1] == s.state.mask and seen[2][1] is True and s.dirty
    seen.clear()
    s.execute(inv)
    assert [n for n, _ in seen] == ["mask", "state"]  # already dirty: no second dirty event
    assert s.state.mask == SessionState().mask


def test_a_command_that_changes_nothing_emits_nothing():
    s = Session(SessionState(sources=(TextSource("p", text="hi"),)))
    seen = recorder(s)
    s.execute(C.SetText("p", "hi"))
    assert seen == [] and not s.dirty


def test_a_failing_command_leaves_session_untouched():
    s = Session(SessionState(sources=(TextSource("p", text="hi"),)))
    before = s.state
    seen = recorder(s)
    with pytest.raises(ValueError):
        s.execute(C.set_model(d_model=10, nh=3))
    assert s.state is before and seen == [] and not s.dirty


def test_source_edit_emits_sources_only():
    s = Session(SessionState(sources=(TextSource("p", text="hi"),)))
    got = []
    s.events.sources.connect(got.append)
    s.events.view.connect(lambda v: got.append("view!"))
    s.execute(C.SetText("p", "bank"))
    assert got == [s.state.sources]


def test_replace_state_emits_everything_and_is_clean():
    s = Session(SessionState(sources=(TextSource("p", text="hi"),)))
    s.execute(C.SetText("p", "bank"))
    assert s.dirty
    seen = recorder(s)
    st = build_demo("river-bank")
    s.replace_state(st)
    names = [n for n, _ in seen]
    assert names[: len(FIELDS)] == list(FIELDS) and names[len(FIELDS)] == "state"
    assert ("dirty", False) in seen and not s.dirty and s.state is st


def test_mark_clean():
    s = Session(SessionState(sources=(TextSource("p", text="a"),)))
    inv1 = s.execute(C.SetText("p", "ab"))
    s.execute(C.SetText("p", "abc"))
    s.mark_clean()
    assert not s.dirty
    assert C.SetText("p", "ab").merge_key == C.SetText("p", "abc").merge_key == ("text", "p")
    s.execute(inv1)
    assert s.state.source("p").text == "a" and s.dirty


def test_view_only_changes_are_kept_but_are_not_unsaved_work():
    s = Session(build_demo("vla-mask"))
    seen = recorder(s)
    s.execute(C.set_view(matrix="mask", colormap="magma", head=2))
    assert s.state.view.matrix == "mask" and s.state.view.colormap == "magma"
    assert [n for n, _ in seen] == ["view", "state"] and not s.dirty
    s.execute(C.SetText("prompt", "pick up the cup"))  # a real edit
    assert s.dirty
    s.mark_clean()
    s.execute(C.set_view(matrix="weights"))
    assert not s.dirty
