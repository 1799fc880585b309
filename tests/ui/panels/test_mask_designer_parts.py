"""The designer's pure parts: text parsing of ar_mask vectors and document lengths, block-grid hit
testing, and the flash-timing function's argument checks and result."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("PySide6")

from attnviz.model.display.mask_snapshot import Target, build_snapshot  # noqa: E402
from attnviz.model.mask.flash_timing import time_flash  # noqa: E402
from attnviz.model.mask.presets import preset  # noqa: E402
from attnviz.model.mask.rules import Rule  # noqa: E402
from attnviz.ui.mask_designer.block_grid import GridGeometry  # noqa: E402
from attnviz.ui.mask_designer.preset_bar import parse_lengths  # noqa: E402
from attnviz.ui.mask_designer.rule_chooser import parse_bits  # noqa: E402
from mask_oracles import snapshot_axes  # noqa: E402


def test_parse_bits_and_lengths():
    assert parse_bits("1 0 0 1", "ar") == [1, 0, 0, 1]
    assert parse_bits("[1, 0, true, False]", "ar") == [1, 0, 1, 0]
    assert parse_bits("  ", "ar") == []
    with pytest.raises(ValueError, match="ar: '2' is not 0/1"):
        parse_bits("1 2", "ar")
    assert parse_lengths("5, 7 3") == [5, 7, 3]
    assert parse_lengths("") is None
    with pytest.raises(ValueError, match="'-1' is not a whole number"):
        parse_lengths("4 -1")


def test_grid_geometry_hits():
    g = GridGeometry(left=100, top=80, cell=40, n_rows=3, n_cols=2)
    assert g.hit(100, 80) == ("cell", 0, 0)
    assert g.hit(179.9, 199.9) == ("cell", 2, 1)
    assert g.hit(180, 100) is None  # right of the last column
    assert g.hit(50, 130) == ("row", 1, -1)
    assert g.hit(150, 10) == ("col", -1, 1)
    assert g.hit(10, 10) is None  # the corner
    assert g.cell_rect(1, 1).topLeft().x() == 140 and g.cell_rect(1, 1).topLeft().y() == 120


def test_time_flash_checks_its_arguments_and_measures():
    rng = np.random.default_rng(0)
    q = rng.standard_normal((2, 24, 8))  # (nh, Tq, hs)
    k = rng.standard_normal((2, 24, 8))  # (nh, Tk, hs)
    v = rng.standard_normal((2, 24, 8))  # (nh, Tk, hv)
    causal = np.tri(24, dtype=bool)  # (Tq, Tk)
    with pytest.raises(ValueError, match="repeats"):
        time_flash(q, k, v, causal, 8, 8, repeats=0)
    with pytest.raises(ValueError, match="bool"):
        time_flash(q, k, v, causal.astype(int), 8, 8)
    with pytest.raises(ValueError, match="wait for the computation"):
        time_flash(q, k, v, np.tri(20, dtype=bool), 8, 8)
    res = time_flash(q, k, v, causal, 8, 8, repeats=2)
    assert res.repeats == 2 and res.masked_s > 0 and res.dense_s > 0
    assert res.skipped == pytest.approx(100 * 3 / 9)  # 3 of 9 tiles lie above the diagonal
    assert res.speedup == pytest.approx(res.dense_s / res.masked_s)
    assert "x" in res.text() and "median of 2" in res.text()


def test_block_grid_labels_say_what_a_prefix_lm_preset_allows(qtbot):
    from attnviz.ui.mask_designer.block_grid import BlockGrid, cell_label

    axes = snapshot_axes([4, 4, 4], ["prompt", "mid", "tail"])
    design = preset("prefix_lm", list(axes.q_segments), L=4)
    snap = build_snapshot(design, axes, Target(), 4, 4, nh=1)
    assert snap.cells[0][0].rule == Rule.deny()  # the rule layer under the OR-ed term
    labels = [[cell_label(snap, r, c) for c in range(3)] for r in range(3)]
    # every query sees the prefix block; the rest is causal
    assert labels == [["allow", "deny", "deny"], ["allow", "causal", "deny"], ["allow", "allow", "causal"]]
    plain = build_snapshot(preset("causal", list(axes.q_segments)), axes, Target(), 4, 4, nh=1)
    assert cell_label(plain, 0, 1) == plain.cells[0][1].rule.label()
    grid = BlockGrid()
    qtbot.addWidget(grid)
    grid.resize(400, 300)
    grid.set_snapshot(snap)
    grid.grab()  # paints every label without error
