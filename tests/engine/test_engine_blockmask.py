"""BlockMask tile classification against a brute-force count, counts and sparsity for any T."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attnviz.engine.blockmask import EMPTY, FULL, PARTIAL, BlockMask


def _brute_states(dense, bm, bn):
    dense = dense if dense.ndim == 3 else dense[None]
    nh, Tq, Tk = dense.shape
    nQ, nK = -(-Tq // bm), -(-Tk // bn)
    out = np.zeros((nh, nQ, nK), np.int8)
    for h in range(nh):
        for a in range(nQ):
            for b in range(nK):
                tile = dense[h, a * bm:(a + 1) * bm, b * bn:(b + 1) * bn]
                out[h, a, b] = EMPTY if not tile.any() else FULL if tile.all() else PARTIAL
    return out


@settings(max_examples=60)
@given(st.integers(1, 3), st.integers(1, 70), st.integers(1, 70), st.integers(1, 33), st.integers(1, 33),
       st.floats(0, 1), st.integers(0, 2**31))
def test_classification_matches_brute_force(nh, Tq, Tk, bm, bn, density, seed):
    rng = np.random.default_rng(seed)
    dense = rng.random((nh, Tq, Tk)) < density
    dense[:, : Tq // 2] |= np.tri(Tq // 2, Tk, dtype=bool)  # also full and structured tiles
    bmask = BlockMask.from_dense(dense if nh > 1 else dense[0], bm, bn)
    expected = _brute_states(dense, bm, bn)
    np.testing.assert_array_equal(bmask.tile_state, expected)
    assert bmask.tile_state.dtype == np.int8
    counts = bmask.counts()
    assert counts == {"empty": int((expected == EMPTY).sum()), "partial": int((expected == PARTIAL).sum()),
                      "full": int((expected == FULL).sum())}
    assert 0.0 <= bmask.sparsity() <= 100.0
    assert bmask.sparsity() == pytest.approx(100.0 * counts["empty"] / expected.size)


def test_mask_smaller_than_one_tile_never_gives_negative_sparsity():
    causal = BlockMask.from_dense(np.tri(5, 5, dtype=bool), 128, 128)
    assert causal.counts() == {"empty": 0, "partial": 1, "full": 0}
    assert causal.sparsity() == 0.0
    ones = BlockMask.from_dense(np.ones((3, 4), bool), 128, 128)
    assert ones.counts()["full"] == 1  # full over the real extent, not the padded tile
    zeros = BlockMask.from_dense(np.zeros((3, 4), bool), 128, 128)
    assert zeros.sparsity() == 100.0


def test_causal_tile_counts_and_attributes():
    T, b = 256, 64
    bmask = BlockMask.from_dense(np.tri(T, dtype=bool), b, b)
    assert bmask.counts() == {"empty": 6, "partial": 4, "full": 6}
    assert bmask.sparsity() == pytest.approx(100 * 6 / 16)
    assert (bmask.block_m, bmask.block_n) == (b, b)
    assert bmask.dense.shape == (T, T) and bmask.dense.dtype == np.bool_
    assert bmask.tile_state.shape == (1, 4, 4)
    with pytest.raises(ValueError):
        bmask.dense[0, 0] = False  # read-only


@pytest.mark.parametrize("bad, match", [
    (np.ones((4, 4), np.int64), "bool"),
    (np.ones(4, bool), "shape"),
])
def test_from_dense_rejects_bad_masks(bad, match):
    with pytest.raises(ValueError, match=match):
        BlockMask.from_dense(bad, 16, 16)


@pytest.mark.parametrize("bm, bn", [(0, 16), (16, -1), (1.5, 16), (True, 16)])
def test_from_dense_rejects_bad_block_sizes(bm, bn):
    with pytest.raises(ValueError, match="block_"):
        BlockMask.from_dense(np.ones((4, 4), bool), bm, bn)


@pytest.mark.parametrize("serial", [True, False])
@pytest.mark.parametrize("shape, bm, bn", [((2, 300, 1000), 64, 128), ((1, 513, 1024), 32, 256),
                                           ((1, 70, 4096), 16, 2048), ((1, 65, 1003), 64, 128),
                                           ((3, 129, 2040), 64, 2040)])
def test_tile_counts_by_words_and_bytes_agree_with_numpy(shape, bm, bn, serial):
    """Masks with Tk and block_n multiples of 8 are counted 8 cells per word, the others byte by byte
    (and block_n = 2048 too, whose byte lanes could overflow): both equal numpy's padded sums."""
    from attnviz.engine.blockmask import _tile_counts_numpy, tile_counts

    m = np.random.default_rng(sum(shape)).random(shape) < 0.3
    m[0, :, : shape[2] // 2] = True  # a dense half: byte lanes at their largest
    got = tile_counts(m, bm, bn, serial=serial)
    want = np.zeros_like(got)
    _tile_counts_numpy(m, bm, bn, want)
    assert np.array_equal(got, want)
