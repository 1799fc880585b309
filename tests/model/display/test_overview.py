"""Overviews of a long sequence whose mask is kept per tile (a TiledMask, never dense) match the
ones drawn from the dense mask wherever cells are allowed. The dense-mask size is lowered so a few
hundred tokens take the long-sequence path."""

from __future__ import annotations

import numpy as np

from attnviz.model.display.overview import overview_grid, overview_image
from attnviz.model.display.response_views import engine_scale
from long_sessions import T, pair


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
