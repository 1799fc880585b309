"""Compile (or load from the cache) every engine kernel on tiny inputs, off the GUI thread at start-up.

The first call of a numba kernel compiles it (seconds for the flash kernel per dtype); with the cache
warm a new process loads it in about 0.1 s. Calling :func:`warmup` on a background thread at start-up
means the first real computation does not wait.
"""

from __future__ import annotations

import numpy as np

from attnviz.engine.activations import gelu_erf
from attnviz.engine.api import KERNELS, attention
from attnviz.engine.blockmask import tile_counts
from attnviz.engine.convert import bf16_matmul_t, bf16_to_f32
from attnviz.engine.display import display_matrices
from attnviz.engine.overview import attention_overview
from attnviz.engine.runtime import PARALLEL_LOCK
from attnviz.engine.scan import scan, scan_rows
from attnviz.engine.summaries import lse_summaries
from attnviz.engine.tiled_mask import TiledMask
from attnviz.engine.weights import recompute_weights


def warmup(dtypes=("float32", "float64"), kernels=("naive", "flash"), overview: bool = True) -> None:
    """Run every kernel once per dtype on tiny inputs, with and without a mask, with weights, display
    matrices and (``overview``) overviews; ``kernels``: the attention kernels to run ("naive", "flash")."""
    rng = np.random.default_rng(0)
    _bf16_weights(rng)
    gelu_erf(rng.standard_normal(8).astype(np.float32))  # a corpus pass's feed-forward activation
    for name in dtypes:
        dt = np.dtype(name)
        if dt not in (np.float32, np.float64):
            raise ValueError(f"dtypes must be float32 or float64, got {name!r}")
        q = rng.standard_normal((2, 9, 8)).astype(dt)  # (nh, Tq, hs)
        k = rng.standard_normal((2, 7, 8)).astype(dt)  # (nh, Tk, hs)
        v = rng.standard_normal((2, 7, 4)).astype(dt)  # (nh, Tk, hv)
        mask = np.tri(9, 7, dtype=bool)  # (Tq, Tk) partial and full tiles
        scan(q)  # mid-sized inputs are checked by it on one thread (smaller ones by numpy)
        with PARALLEL_LOCK:
            scan_rows(q.reshape(-1, q.shape[-1]))  # and large ones on every thread
        for serial in (True, False):
            tile_counts(mask[None], 4, 4, serial=serial)  # byte by byte (Tk = 7)
            tile_counts(np.tri(9, 16, dtype=bool)[None], 4, 8, serial=serial)  # 8 cells per word
        for kernel in KERNELS:
            if kernel == "reference" or kernel not in kernels:
                continue
            for m in (None, mask):
                res = attention(q, k, v, m, kernel=kernel, block_m=4, block_n=4, return_weights=True)
                for serial in (True, False):
                    recompute_weights(q, k, res.lse, m, rows=[0, 3], block_n=4, serial=serial)
                s32 = np.empty((2, 9, 7), dtype=np.float32)  # (nh, Tq, Tk)
                w32 = np.empty((2, 9, 7), dtype=np.float32)  # (nh, Tq, Tk)
                for serial in (True, False):
                    display_matrices(q, k, res.lse, m, weights=w32, scores=s32, block_m=4, block_n=4, serial=serial)
                    display_matrices(q, k, res.lse, m, weights=w32, given_scores=s32, block_m=4, block_n=4,
                                     serial=serial)
        if not overview:
            continue
        res = attention(q, k, v, mask, kernel="flash", block_m=4, block_n=4)
        for reduce in ("max", "mean"):
            attention_overview(q[0], k[0], res.lse[0], mask, out_shape=(3, 2), reduce=reduce)
        # a long decoder input's head summaries: full, partial and empty tiles, a thumbnail
        lse_summaries(q, k, res.lse, TiledMask.from_bands(lambda r0, r1: mask[r0:r1], 9, 7, 4, 4), side=2)


def warmup_first_view(dtype: str = "float64") -> None:
    """Compile (or load) only what a first start's first engine result needs: the naive kernel, which
    stands in for flash on small inputs while :func:`warmup` compiles the rest (about 3 s against 20 s
    for flash), with and without a mask, returning its weights."""
    rng = np.random.default_rng(0)
    dt = np.dtype(dtype)
    q = rng.standard_normal((2, 5, 4)).astype(dt)  # (nh, Tq, hs)
    v = rng.standard_normal((2, 5, 3)).astype(dt)  # (nh, Tk, hv)
    for m in (None, np.tri(5, dtype=bool)):
        attention(q, q, v, m, kernel="naive", return_weights=True)


def _bf16_weights(rng) -> None:
    """The bf16 widening kernels as a checkpoint pass calls them: on read-only bits (a mapped file), wide
    and deep matrices (row and column blocks), whole tensors above and below the parallel threshold."""
    for rows in (3, 12):  # a generation step's few rows (the dot kernel), a pass's many (blocks and BLAS)
        x = rng.standard_normal((rows, 8)).astype(np.float32)  # (T, k)
        for shape in ((16, 8), (4, 8)):  # out >= k: row blocks; out < k: column blocks (a strided view)
            bits = np.full(shape, 0x3F80, dtype=np.uint16)  # 1.0
            bits.flags.writeable = False
            bf16_matmul_t(x, bits, compiled=True)
    big = np.zeros(1 << 16, dtype=np.uint16)
    big.flags.writeable = False
    bf16_to_f32(big, compiled=True)
