"""The flash kernel's work order: every work item appears once, and the contiguous share each thread
receives from numba's parallel loop carries about the same number of non-empty tiles."""

from __future__ import annotations

import numpy as np
import pytest

from attnviz.engine.blockmask import BlockMask
from attnviz.engine.flash import work_order


def _share_costs(order, tile_state, nh, n):
    nQ = tile_state.shape[1]
    cost = np.broadcast_to(np.count_nonzero(tile_state != 0, axis=2), (nh, nQ)).reshape(-1)  # (nh * nQ,)
    shares = np.array_split(order, n)  # what prange gives each of n threads
    return [int(cost[s].sum()) for s in shares]


@pytest.mark.parametrize("n_threads", [1, 2, 3, 4])
@pytest.mark.parametrize("T", [64, 1000, 4096])
def test_causal_work_is_shared_evenly(T, n_threads):
    bm = BlockMask.from_dense(np.tril(np.ones((T, T), dtype=bool)), 128, 128)
    nh = 8
    order = work_order(bm.tile_state, nh, n_threads)
    assert sorted(order.tolist()) == list(range(nh * bm.tile_state.shape[1]))
    costs = _share_costs(order, bm.tile_state, nh, n_threads)
    per_item = bm.tile_state.shape[2]  # the heaviest item's cost bounds the imbalance
    assert max(costs) - min(costs) <= per_item


def _costs(tile_state, nh):
    nQ = tile_state.shape[1]
    return np.broadcast_to(np.count_nonzero(tile_state != 0, axis=2), (nh, nQ)).reshape(-1)  # (nh * nQ,)


@pytest.mark.parametrize("n_threads", [1, 2, 3])
def test_each_share_takes_one_head_after_the_other(n_threads):
    """Within a thread's share the items of a head are adjacent, heaviest first: the thread works on one
    head's keys and values at a time."""
    T, nh = 2048, 8
    bm = BlockMask.from_dense(np.tril(np.ones((T, T), dtype=bool)), 128, 128)
    nQ = bm.tile_state.shape[1]
    cost = _costs(bm.tile_state, nh)
    order = work_order(bm.tile_state, nh, n_threads)
    for share in np.array_split(order, n_threads):
        heads = share // nQ
        assert (np.diff(heads) >= 0).all()  # heads in blocks, never revisited
        for h in np.unique(heads):
            c = cost[share[heads == h]]
            assert (np.diff(c) <= 0).all()  # heaviest first within the head
