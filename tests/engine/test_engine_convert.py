"""bf16 -> float32: the whole-tensor widening and the block-by-block matrix product, exact against numpy,
both compiled and on numpy's stand-in (a cold kernel cache)."""

from __future__ import annotations

import numpy as np
import pytest

import attnviz.engine.convert as convert
from attnviz.engine.convert import bf16_matmul_t, bf16_to_f32


def _bits(rng, shape) -> np.ndarray:
    x = rng.standard_normal(shape).astype(np.float32)
    return (x.view(np.uint32) >> 16).astype(np.uint16)


def _widened(bits: np.ndarray) -> np.ndarray:
    return (bits.astype(np.uint32) << 16).view(np.float32)


@pytest.mark.parametrize("compiled", [True, False])
@pytest.mark.parametrize("shape", [(3, 5), (300, 257), (1 << 17,)])
def test_bf16_to_f32_is_exact(shape, compiled):
    bits = _bits(np.random.default_rng(1), shape)
    out = bf16_to_f32(bits, compiled=compiled)
    assert out.dtype == np.float32 and out.shape == bits.shape
    np.testing.assert_array_equal(out, _widened(bits))


@pytest.mark.parametrize("out_n,k", [(40, 24), (24, 40), (1, 7), (7, 1), (33, 33)])
@pytest.mark.parametrize("block", [16, 100, 1 << 22])  # blocks that split rows or columns unevenly, and one
@pytest.mark.parametrize("compiled", [True, False])
def test_block_by_block_product_matches_the_widened_matrix(monkeypatch, out_n, k, block, compiled):
    """Wide matrices go by row blocks, deep ones by column blocks; every block size gives x @ W.T."""
    monkeypatch.setattr(convert, "BLOCK", block)
    rng = np.random.default_rng(out_n * 100 + k)
    bits = _bits(rng, (out_n, k))
    bits.flags.writeable = False  # as a mapped file gives them
    for rows in (1, 5, 9):  # one generated token and a few (the dot kernel), more (blocks and BLAS)
        x = rng.standard_normal((rows, k)).astype(np.float32)
        y = bf16_matmul_t(x, bits, compiled=compiled)
        ref = x.astype(np.float64) @ _widened(bits).astype(np.float64).T
        assert y.shape == (rows, out_n) and y.dtype == np.float32
        np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-5 * np.abs(ref).max())


def test_block_product_takes_any_layout_of_x(monkeypatch):
    monkeypatch.setattr(convert, "BLOCK", 64)
    rng = np.random.default_rng(3)
    bits = _bits(rng, (20, 30))
    x = np.asfortranarray(rng.standard_normal((12, 30)).astype(np.float32))
    np.testing.assert_allclose(bf16_matmul_t(x, bits), np.ascontiguousarray(x) @ _widened(bits).T, rtol=1e-5,
                               atol=1e-5)
    with pytest.raises(ValueError, match="columns"):
        bf16_matmul_t(x[:, :29], bits)


def test_a_strided_matrix_view_is_read_right():
    rng = np.random.default_rng(5)
    bits = _bits(rng, (20, 40))[:, ::2]  # (20, 20) with a column stride of 2 elements
    x = rng.standard_normal((2, 20)).astype(np.float32)
    np.testing.assert_allclose(bf16_matmul_t(x, bits), x @ _widened(bits).T, rtol=1e-5, atol=1e-5)


def test_a_cold_kernel_cache_widens_with_numpy(monkeypatch):
    """Without a warm-up neither compiled kernel runs (they would compile for 10-30 s first)."""
    from attnviz.engine import jitcache

    def refuse(*a):
        raise AssertionError("a compiled kernel ran on a cold cache")

    monkeypatch.setattr(jitcache, "is_warm", lambda: False)
    for name in ("_widen", "_widen_block", "_rows_dot"):
        monkeypatch.setattr(convert, name, refuse)
    rng = np.random.default_rng(7)
    big = _bits(rng, (1 << 17,))
    np.testing.assert_array_equal(bf16_to_f32(big), _widened(big))
    for out_n, k in ((40, 24), (24, 40)):
        bits = _bits(rng, (out_n, k))
        for rows in (1, 12):
            x = rng.standard_normal((rows, k)).astype(np.float32)
            np.testing.assert_allclose(bf16_matmul_t(x, bits), x @ _widened(bits).T, rtol=1e-5, atol=1e-5)
