"""Overviews of a long sequence whose mask is kept per tile (a TiledMask, never dense) match the
ones drawn from the dense mask wherever cells are allowed. The dense-mask size is lowered so a few
hundred tokens take the long-sequence path."""

from __future__ import annotations

import numpy as np
import pytest

from attnviz.engine import TiledMask
from attnviz.model import compute_cache
from attnviz.model.commands import EditMask
from attnviz.model.compute import ComputeRequest, run
from attnviz.model.display.overview import overview_grid, overview_image
from attnviz.model.display.response_views import engine_scale
from attnviz.model.mask.commands import PaintLines
from attnviz.model.mask.presets import preset
from attnviz.model.state import CustomSource, ModelConfig, SessionState

T = 320


def long_state() -> SessionState:
    st = SessionState(sources=(CustomSource("a", count=T, generator="noise", seed=1),),
                      model=ModelConfig(d_model=32, nh=2, seed=3), mask=preset("sliding_window", (), w=40))
    return EditMask(PaintLines("row", 9, T, "deny")).apply(st)[0]


def pair():
    """(tiled response, dense response) of the same state; the dense one with full matrices off."""
    st = long_state()
    tiled = run(ComputeRequest(1, st, dense_mask_cells=100 * 100))
    compute_cache.clear()
    dense = run(ComputeRequest(2, st, dense_limit=100))
    compute_cache.clear()
    assert tiled.mask is None and isinstance(tiled.block_mask, TiledMask) and dense.mask is not None
    return st, tiled, dense


def test_overviews_with_a_tiled_mask_match_the_dense_ones_where_cells_are_allowed():
    st, tiled, dense = pair()
    scale = engine_scale(st)
    for head in (0, "mean"):
        for region in [((0, T), (0, T)), ((40, 200), (10, 180))]:
            a = overview_image(tiled, head, scale, "max", (64, 48), *region)
            b = overview_image(dense, head, scale, "max", (64, 48), *region)
            ok = ~np.isnan(b)
            assert np.all(~np.isnan(a)[ok])  # every pixel with an allowed cell is drawn
            np.testing.assert_allclose(a[ok], b[ok], rtol=1e-5)
    maps_t, ok_t = overview_grid(tiled, scale, "max", tile=32)
    maps_d, ok_d = overview_grid(dense, scale, "max", tile=32)
    assert np.all(ok_t[ok_d])
    np.testing.assert_allclose(maps_t[ok_d], maps_d[ok_d], rtol=1e-5)
