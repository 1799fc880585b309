"""The all-heads panel in a tall narrow column (the Attention workspace at 1280 x 800): the small maps
sit at the top of the panel, not small in the middle of a large empty frame, and no axis line runs on
past them like a frame cut off at the right edge."""

from __future__ import annotations

import numpy as np
from PySide6.QtCore import Qt

from attnviz.ui.widgets.small_multiples import HeadGrid


def test_small_maps_sit_at_the_top_with_no_frame(qtbot):
    grid = HeadGrid()
    qtbot.addWidget(grid)
    grid.resize(220, 660)
    grid.show()
    qtbot.waitExposed(grid)
    rng = np.random.default_rng(0)
    grid.set_matrices(rng.random((2, 2, 44, 44)), row_titles=["h0–1", "h2–3"], col_titles=["", ""])
    qtbot.wait(100)
    for name in ("left", "top"):
        assert grid.plot.getPlotItem().getAxis(name).pen().style() == Qt.PenStyle.NoPen
    # where the mosaic is drawn, in the grid's own pixels
    rect = grid.image.mapRectToScene(grid.image.boundingRect())
    top_left = grid.plot.mapTo(grid, grid.plot.mapFromScene(rect.topLeft()))
    bottom = grid.plot.mapTo(grid, grid.plot.mapFromScene(rect.bottomLeft())).y()
    assert top_left.y() < 60, top_left.y()  # at the top, not centred in 660 px
    assert bottom < grid.height() / 2, (bottom, grid.height())
    assert rect.width() > 0.7 * (grid.width() - 60)  # as wide as the column allows
