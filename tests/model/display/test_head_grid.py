"""The all-heads grid's layout: a full rectangle of maps, rows titled by their heads."""

from __future__ import annotations

import numpy as np

from attnviz.model.display.head_grid import grid_columns, grid_layout


def test_grid_layout_is_a_full_rectangle():
    assert [grid_columns(n) for n in (1, 2, 3, 4, 6, 8, 12)] == [1, 1, 1, 2, 2, 2, 3]
    maps = np.arange(8 * 3 * 3, dtype=float).reshape(8, 3, 3)
    g, m, titles = grid_layout(maps, np.ones((8, 3, 3), bool))
    assert g.shape == (4, 2, 3, 3) and m.shape == (4, 2, 3, 3)
    np.testing.assert_array_equal(g[2, 1], maps[5])
    assert titles[0] == "h0–1"
