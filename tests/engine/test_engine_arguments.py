"""Bad arguments raise ValueError naming the argument and the shape or value expected."""

from __future__ import annotations

import numpy as np
import pytest

from attnviz.engine import BlockMask, attention
from attnviz.engine.fastexp import MAX_ABS_SCORE
from attnviz.engine.validate import SCAN_PARALLEL_CELLS, row_scan

Q = np.zeros((2, 5, 4))
K = np.zeros((2, 6, 4))
V = np.zeros((2, 6, 3))


@pytest.mark.parametrize("args, kwargs, match", [
    ((np.zeros((2, 5, 3)), K, V), {}, r"k must have shape \(nh, Tk, hs\) = \(2, Tk, 3\)"),
    ((Q, np.zeros((3, 6, 4)), V), {}, r"k must have shape"),
    ((Q, K, np.zeros((2, 7, 3))), {}, r"v must have shape \(nh, Tk, hv\) = \(2, 6, hv\)"),
    ((Q[0], K, V), {}, r"all be 3-D"),
    ((np.zeros((2, 2, 5, 4)), K, V), {}, r"all be 3-D"),
    ((Q, K, V, np.ones((5, 7), bool)), {}, r"mask must have shape \(5, 6\) or \(2, 5, 6\)"),
    ((Q, K, V, np.ones((3, 5, 6), bool)), {}, r"mask must have shape"),
    ((Q, K, V, np.ones((5, 6), np.int8)), {}, r"mask must be a bool array of shape \(5, 6\)"),
    ((Q, K, V, BlockMask.from_dense(np.ones((5, 5), bool), 4, 4)), {}, r"mask must have shape"),
    ((Q, K, V), {"kernel": "fast"}, r"kernel must be one of"),
    ((Q, K, V), {"scale": float("nan")}, r"scale must be finite"),
    ((Q, K, V), {"scale": "big"}, r"scale must be a real number"),
    ((Q, K, V), {"block_m": 0}, r"block_m must be a positive integer"),
    ((Q, K, V), {"block_n": 2.5}, r"block_n must be a positive integer"),
    ((Q, K, V), {"scale": "1"}, r"scale must be a real number or None, got '1'"),
    ((Q, K, V), {"scale": b"1"}, r"scale must be a real number"),
    ((Q, K, V), {"scale": True}, r"scale must be a real number"),
    ((Q, K, V), {"scale": 1j}, r"scale must be a real number"),
    ((Q, K, V), {"scale": np.array([0.5])}, r"scale must be a real number"),
    ((np.zeros((2, 5, 0)), np.zeros((2, 6, 0)), V), {}, r"hs >= 1"),
    ((Q.astype(complex), K, V), {}, r"complex"),
])
def test_bad_arguments_raise_value_error(args, kwargs, match):
    with pytest.raises(ValueError, match=match):
        attention(*args, **kwargs)


@pytest.mark.parametrize("name", ["q", "k", "v"])
@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_inputs_are_refused(name, bad):
    arrays = {"q": Q.copy(), "k": K.copy(), "v": V.copy()}
    arrays[name][0, 1, 2] = bad
    with pytest.raises(ValueError, match=f"{name} contains non-finite values"):
        attention(arrays["q"], arrays["k"], arrays["v"])


@pytest.mark.parametrize("name", ["q", "k", "v"])
@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
@pytest.mark.parametrize("where", [0, 777, -1])
def test_non_finite_values_of_large_inputs_are_refused(name, bad, where):
    """Inputs above SCAN_PARALLEL_CELLS are checked by the parallel scan: anywhere in the array."""
    rng = np.random.default_rng(1)
    shapes = {"q": (2, 2100, 64), "k": (2, 2100, 64), "v": (2, 2100, 64)}
    arrays = {n: rng.standard_normal(sh).astype(np.float32) for n, sh in shapes.items()}
    assert arrays[name].size >= SCAN_PARALLEL_CELLS
    arrays[name].reshape(-1)[where] = bad
    with pytest.raises(ValueError, match=f"{name} contains non-finite values"):
        attention(arrays["q"], arrays["k"], arrays["v"])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(3, 50, 8), (2, 3000, 64), (1, 4097, 33)])
def test_row_scan_matches_numpy(dtype, shape):
    """Both paths of row_scan (numpy below SCAN_PARALLEL_CELLS, the parallel scan above) give numpy's
    largest squared row norm."""
    a = np.random.default_rng(2).standard_normal(shape).astype(dtype) * 3
    finite, top = row_scan(a)
    want = np.max(np.einsum("hqd,hqd->hq", a, a, dtype=np.float64))
    assert finite and top == pytest.approx(want, rel=1e-12)
    a[0, -1, -1] = np.nan
    assert row_scan(a)[0] is False


def test_large_finite_float64_inputs_are_too_large_not_non_finite():
    big = np.full((1, 4100, 64), 1e200)
    with pytest.raises(ValueError, match="too large"):
        attention(big, big, np.zeros((1, 4100, 1)))


def test_scores_that_could_overflow_are_refused():
    big = np.full((1, 2, 4), np.sqrt(MAX_ABS_SCORE))
    with pytest.raises(ValueError, match="too large"):
        attention(big, big, np.zeros((1, 2, 1)), scale=1.0)


@pytest.mark.parametrize("kernel", ["reference", "naive", "flash"])
def test_precision_follows_inputs(kernel):
    q32 = Q.astype(np.float32)
    assert attention(q32, K.astype(np.float32), V.astype(np.float32), kernel=kernel).out.dtype == np.float32
    assert attention(q32, K, V, kernel=kernel).out.dtype == np.float64  # mixed: the wider precision
    assert attention(Q.astype(np.int64), K, V, kernel=kernel).lse.dtype == np.float64


@pytest.mark.parametrize("kernel", ["reference", "naive", "flash"])
@pytest.mark.parametrize("kwargs, match", [
    ({"block_m": 10**9, "block_n": 10**9}, r"block_m must be at most 4096 \(a tile side\), got 1000000000"),
    ({"block_m": 64, "block_n": 4097}, r"block_n must be at most 4096"),
])
def test_tile_sizes_beyond_the_limit_are_refused_before_any_work(kernel, kwargs, match):
    q = np.ones((1, 8, 4), np.float32)
    with pytest.raises(ValueError, match=match):
        attention(q, q, q, kernel=kernel, **kwargs)
    with pytest.raises(ValueError, match=match):
        BlockMask.from_dense(np.ones((8, 8), bool), kwargs["block_m"], kwargs["block_n"])


def test_the_largest_tile_size_runs_on_a_small_problem():
    q = np.random.default_rng(0).standard_normal((2, 8, 4))
    res = attention(q, q, q, block_m=4096, block_n=4096)
    np.testing.assert_allclose(res.out, attention(q, q, q, kernel="reference").out, atol=1e-12)


@pytest.mark.parametrize("scale", [2, 0.5, np.float32(0.5), np.int64(2), np.array(0.5)])
def test_real_scales_of_any_numeric_type_are_taken(scale):
    q = np.random.default_rng(1).standard_normal((1, 5, 4))
    ref = attention(q, q, q, kernel="reference", scale=float(scale))
    np.testing.assert_allclose(attention(q, q, q, scale=scale).out, ref.out, atol=1e-12)
