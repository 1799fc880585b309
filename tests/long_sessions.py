"""A session long enough to keep its mask per tile once the dense-mask size is lowered, and its
tiled and dense responses side by side (shared by the model and the window tests)."""

from __future__ import annotations

from unittest import mock

from attnviz.engine import TiledMask
from attnviz.model import compute, compute_cache
from attnviz.model.commands import EditMask
from attnviz.model.compute import ComputeRequest, run
from attnviz.model.mask.commands import PaintLines
from attnviz.model.mask.presets import preset
from attnviz.model.state import CustomSource, ModelConfig, SessionState

T = 320
LOWERED = 100 * 100  # the dense-mask size that keeps this T's mask per tile


def lowered():
    """compute.DENSE_MASK_CELLS lowered to LOWERED while the context lasts."""
    return mock.patch.object(compute, "DENSE_MASK_CELLS", LOWERED)


def long_state() -> SessionState:
    st = SessionState(sources=(CustomSource("a", count=T, generator="noise", seed=1),),
                      model=ModelConfig(d_model=32, nh=2, seed=3), mask=preset("sliding_window", (), w=40))
    return EditMask(PaintLines("row", 9, T, "deny")).apply(st)[0]


def pair():
    """(state, tiled response, dense response) of the same state; the dense one with full matrices off."""
    st = long_state()
    with lowered():
        tiled = run(ComputeRequest(1, st))
    compute_cache.clear()
    dense = run(ComputeRequest(2, st, dense_limit=100))
    compute_cache.clear()
    assert tiled.mask is None and isinstance(tiled.block_mask, TiledMask) and dense.mask is not None
    return st, tiled, dense
