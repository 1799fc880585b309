"""Mask commands: every inverse restores the design exactly; a merged stroke undoes in one step."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attnviz.model.command import Command, merge_key
from attnviz.model.mask.commands import (ApplyPreset, ClearPaint, CombinePreset, MergeBlocks, OnHead, PaintCells,
                                         PaintLines, PaintRect, RemovePresetTerm, RestoreCells, SetBlockRule,
                                         SetDefaultRule, SetPerHead, SplitBlock)
from attnviz.model.mask.design import BlockSplit, MaskDesign
from attnviz.model.mask.paint import CellOverrides
from attnviz.model.mask.presets import preset
from attnviz.model.mask.rules import Rule
from mask_oracles import segments_from_lengths

SEGS = segments_from_lengths([3, 2, 4, 3], ["image", "prompt", "fast", "expert"])


def start_design() -> MaskDesign:
    return MaskDesign(default_rule=Rule.causal(), rules=(("image", "image", Rule.allow()),),
                      splits=(BlockSplit("fast", (2,), ("fast.1", "fast.2")),),
                      overrides=CellOverrides.from_cells([0, 1], [5, 6], ["allow", "deny"]))


COMMANDS = [
    SetBlockRule("prompt", "image", Rule.deny()),
    SetBlockRule("image", "image", None),
    SetBlockRule("image", "image", Rule.sliding_window(2)),
    SetDefaultRule(Rule.allow()),
    PaintCells(((0, 5), (2, 2), (0, 5), (11, 11)), "deny"),
    PaintCells(((0, 5), (1, 6)), "erase"),
    PaintRect(1, 4, 2, 6, "allow"),
    PaintLines("row", (3, 0), 12, "deny"),
    PaintLines("column", (6,), 12, "erase"),
    ClearPaint(),
    ClearPaint(rows=(0,)),
    ApplyPreset.make("vla", SEGS),
    ApplyPreset.make("prefix_lm", SEGS, L=4),
    CombinePreset.make("sliding_window", "and", w=3),
    SplitBlock("image", 1),
    SplitBlock("fast", 1, new_name="fast.head"),
    SplitBlock("fast", 3),
    MergeBlocks("fast", 2),
    MergeBlocks("fast"),
    SetPerHead(1, MaskDesign(default_rule=Rule.deny())),
    OnHead(2, PaintCells(((1, 1),), "deny")),
    RestoreCells.make(((0, 5), (4, 4)), (0, -1)),
]


@pytest.mark.parametrize("cmd", COMMANDS, ids=lambda c: type(c).__name__)
def test_inverse_restores_exactly_and_redo_reapplies(cmd):
    d0 = start_design()
    assert isinstance(cmd, Command)
    assert isinstance(cmd.label, str) and cmd.label
    d1, inv = cmd.apply(d0)
    assert isinstance(inv, Command)
    back, redo = inv.apply(d1)
    assert back == d0
    again, _ = redo.apply(back)
    assert again == d1
    # the compiled masks agree too
    np.testing.assert_array_equal(back.compile(SEGS, nh=3), d0.compile(SEGS, nh=3))


def test_commands_change_what_they_say():
    d0 = start_design()
    d1, _ = SetBlockRule("prompt", "image", Rule.deny()).apply(d0)
    assert not d1.compile(SEGS)[3:5, 0:3].any() and d0.compile(SEGS)[3:5, 0:3].all()
    d2, _ = PaintRect(0, 2, 10, 12, "allow").apply(d0)
    assert d2.compile(SEGS)[0:2, 10:12].all()
    d3, _ = ApplyPreset.make("vla", SEGS).apply(d0)
    assert d3.overrides == d0.overrides and d3.splits == d0.splits  # paint and splits stay
    assert d3.rules == preset("vla", SEGS).rules
    d4, _ = SplitBlock("image", 1).apply(d0)
    assert [b.name for b in d4.blocks(SEGS)][:2] == ["image.1", "image.2"]
    np.testing.assert_array_equal(d4.compile(SEGS), d0.compile(SEGS))  # a split alone changes nothing
    d5, _ = OnHead(2, SetDefaultRule(Rule.deny())).apply(d0)
    m = d5.compile(SEGS, nh=3)
    assert m.shape == (3, 12, 12) and m[2].sum() < m[0].sum()


def test_merge_drops_rules_of_vanished_sub_blocks():
    d = MaskDesign(splits=(BlockSplit("a", (1, 2), ("a.1", "a.2", "a.3")),),
                   rules=(("a.3", "a.1", Rule.deny()), ("a.2", "a.2", Rule.deny()), ("a", "a", Rule.causal())))
    d1, inv = MergeBlocks("a", 2).apply(d)
    assert d1.split_of("a").names == ("a.1", "a.2")
    assert [(q, k) for q, k, _ in d1.rules] == [("a", "a"), ("a.2", "a.2")]
    d2, _ = MergeBlocks("a").apply(d)
    assert d2.split_of("a") is None and [(q, k) for q, k, _ in d2.rules] == [("a", "a")]
    assert inv.apply(d1)[0] == d


def test_bad_block_edits_raise():
    d = start_design()
    with pytest.raises(ValueError, match="already split"):
        SplitBlock("fast", 2).apply(d)
    with pytest.raises(ValueError, match="not split"):
        MergeBlocks("image").apply(d)
    with pytest.raises(ValueError, match="no cut"):
        MergeBlocks("fast", 3).apply(d)
    with pytest.raises(ValueError, match=">= 1"):
        SplitBlock("image", 0).apply(d)
    with pytest.raises(ValueError, match="no preset term"):
        RemovePresetTerm(0).apply(d)
    with pytest.raises(ValueError, match="paint value"):
        PaintCells(((0, 0),), "maybe")


def test_a_stroke_shares_one_merge_key_and_its_inverses_undo_it():
    """The commands of one stroke share a merge key (the undo stack makes them one step, keeping each command
    and its inverse); applying the inverses in reverse order restores the design."""
    d0 = start_design()
    parts = [PaintCells(((0, 3), (0, 4)), "deny", stroke=7), PaintCells(((0, 5), (1, 5)), "deny", stroke=7),
             PaintCells(((0, 3), (2, 8)), "deny", stroke=7)]
    d, invs = d0, []
    for p in parts:
        d, inv = p.apply(d)
        invs.append(inv)
    keys = {merge_key(p) for p in parts}
    assert len(keys) == 1 and None not in keys
    assert merge_key(PaintCells(((0, 0),), "allow", stroke=7)) not in keys  # another value: another step
    assert merge_key(PaintCells(((0, 0),), "allow")) is None
    for inv in reversed(invs):
        d = inv.apply(d)[0]
    assert d == d0


def test_row_column_and_on_head_strokes_share_their_keys():
    a, b = PaintLines("row", (1,), 12, "deny", stroke=3), PaintLines("row", (2,), 12, "deny", stroke=3)
    assert merge_key(a) == merge_key(b) is not None
    c1 = PaintLines("column", (0,), 12, "allow", stroke=4)
    assert merge_key(c1) != merge_key(a)
    h1, h2 = OnHead(1, PaintCells(((0, 0),), "deny", stroke=9)), OnHead(1, PaintCells(((0, 1),), "deny", stroke=9))
    assert merge_key(h1) == merge_key(h2) is not None
    assert merge_key(OnHead(2, PaintCells(((0, 0),), "deny", stroke=9))) != merge_key(h1)  # another head


def test_on_head_inverse_keeps_existing_head_design():
    d0 = start_design().with_head(0, MaskDesign(default_rule=Rule.deny()))
    cmd = OnHead(0, SetBlockRule("image", "image", Rule.allow()))
    d1, inv = cmd.apply(d0)
    assert dict(d1.heads)[0].rule_for("image", "image") == Rule.allow()
    assert inv.apply(d1)[0] == d0

_cell = st.tuples(st.integers(0, 13), st.integers(0, 13))
_value = st.sampled_from(["allow", "deny", "erase"])
_block = st.sampled_from(["image", "prompt", "fast", "expert", "fast.1", "fast.2", "image.1"])
_rule = st.sampled_from([Rule.allow(), Rule.deny(), Rule.causal(), Rule.sliding_window(2), Rule.ar_mask([1, 0, 1])])
_command = st.one_of(
    st.builds(SetBlockRule, _block, _block, st.one_of(st.none(), _rule)),
    st.builds(SetDefaultRule, _rule),
    st.builds(PaintCells, st.lists(_cell, max_size=5).map(tuple), _value),
    st.builds(lambda r, c, v: PaintRect(r, r + 2, c, c + 3, v), st.integers(0, 12), st.integers(0, 12), _value),
    st.builds(PaintLines, st.just("row"), st.lists(st.integers(0, 12), min_size=1, max_size=2).map(tuple),
              st.just(12), _value),
    st.builds(ClearPaint),
    st.builds(lambda n: ApplyPreset.make(n, SEGS), st.sampled_from(["vla", "causal", "block_diagonal"])),
    st.builds(lambda w: CombinePreset.make("sliding_window", "or", w=w), st.integers(1, 4)),
    st.builds(SplitBlock, st.sampled_from(["image", "expert"]), st.integers(1, 3)),
    st.builds(lambda h, r: SetPerHead(h, MaskDesign(default_rule=r)), st.integers(0, 2), _rule),
    st.builds(OnHead, st.integers(0, 2), st.builds(PaintCells, st.lists(_cell, max_size=3).map(tuple), _value)),
)


@settings(max_examples=60, deadline=None)
@given(st.lists(_command, max_size=8))
def test_random_edit_sequences_undo_to_the_start(cmds):
    d = start_design()
    history = [d]
    inverses = []
    for c in cmds:
        try:
            d, inv = c.apply(d)
        except ValueError:  # e.g. splitting where a cut exists: refused, nothing changes
            continue
        history.append(d)
        inverses.append(inv)
    for inv, before in zip(reversed(inverses), reversed(history[:-1])):
        d, _ = inv.apply(d)
        assert d == before
    assert d == start_design()
