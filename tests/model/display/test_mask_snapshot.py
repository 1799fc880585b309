"""What the mask designer shows, without Qt: how edits are aimed at the shared mask or a head, the
snapshot's blocks and fully masked rows, its axes, and the sentences about rows and tiles."""

from __future__ import annotations

import numpy as np
import pytest

from attnviz.model.commands import EditMask
from attnviz.model.compute import ComputeRequest, run
from attnviz.model.demos import build_demo
from attnviz.model.display.mask_snapshot import (Target, axes_from_response, axes_from_state, build_snapshot,
                                                 describe_fully_masked, tile_text)
from attnviz.model.mask.analysis import tile_summary
from attnviz.model.mask.commands import OnHead, PaintCells
from attnviz.model.mask.design import MaskDesign
from attnviz.model.mask.presets import preset
from attnviz.model.mask.rules import Rule
from attnviz.model.state import SessionState
from mask_oracles import snapshot_axes


def test_target_lifts_edits_to_the_shared_mask_or_a_head():
    inner = PaintCells([(0, 1)], "deny", stroke=3)
    shared = Target().lift(inner)
    assert shared == EditMask(inner) and shared.merge_key is not None
    head = Target(2).lift(inner)
    assert head == EditMask(OnHead(2, inner))
    assert head.merge_key != shared.merge_key
    design = MaskDesign(default_rule=Rule.causal()).with_head(1, MaskDesign(default_rule=Rule.deny()))
    assert Target().design(design) == MaskDesign(default_rule=Rule.causal())
    assert Target(1).design(design) == MaskDesign(default_rule=Rule.deny())
    assert Target(0).design(design) == MaskDesign(default_rule=Rule.causal())
    assert Target(1).owns(design) and not Target(0).owns(design)


def test_snapshot_counts_fully_masked_rows_of_any_head():
    axes = snapshot_axes([3, 4], ["image", "fast"])
    design = preset("vla", list(axes.q_segments)).with_head(
        1, MaskDesign(default_rule=Rule.allow()).with_rule("fast", "image", Rule.deny())
        .with_rule("fast", "fast", Rule.deny()))
    snap = build_snapshot(design, axes, Target(), 4, 4, nh=2)
    assert not snap.fully_masked.any()
    assert np.flatnonzero(snap.all_heads_fully_masked).tolist() == [3, 4, 5, 6]
    assert snap.heads_differ
    assert [b.name for b in snap.q_blocks] == ["image", "fast"]
    assert snap.cells[1][1].rule == Rule.causal() and snap.cells[1][1].explicit
    head = build_snapshot(design, axes, Target(1), 4, 4, nh=2)
    assert np.flatnonzero(head.fully_masked).tolist() == [3, 4, 5, 6]
    assert not head.cells[0][0].explicit  # the default rule


def test_describe_fully_masked():
    rows = np.zeros(20, dtype=bool)
    assert describe_fully_masked(rows) == "no query row is fully masked"
    rows[[2]] = True
    assert describe_fully_masked(rows, ["a", "b", "c"]).startswith("1 query row is fully masked: 2 (c)")
    rows[3:15] = True
    text = describe_fully_masked(rows)
    assert text.startswith("13 query rows are fully masked") and "and 5 more" in text


def test_axes_from_the_state_are_those_of_its_response():
    for name in ("vla-mask", "translation"):
        state = build_demo(name)
        axes = axes_from_state(state)
        assert axes == axes_from_response(run(ComputeRequest(1, state)))
        assert axes.cross == (name == "translation")
        assert axes.k_segments_arg == (list(axes.k_segments) if axes.cross else None)
    assert axes_from_response(None) is None
    with pytest.raises(ValueError, match="the sequence has no tokens"):
        axes_from_state(SessionState(sources=()))


def test_tile_text_counts_the_tiles():
    mask = np.tril(np.ones((16, 16), dtype=bool))  # (Tq, Tk) causal: 8x8 tiles are empty, partial, full
    assert tile_text(tile_summary(mask, 8, 8)) == "8x8 tiles: 1 empty · 2 partial · 1 full — 25.0 % skipped"
