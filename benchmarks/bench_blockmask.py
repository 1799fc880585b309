"""Block-sparse flash with the mask classified once (as the app's compute cache and FlexAttention's
create_block_mask do) versus classified inside every call, against dense, at one shape.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE .venv/bin/python benchmarks/bench_blockmask.py [--T 4096]

Prints best-of-N times and the dense/sparse time ratios; the mask is `attnviz-cli bench`'s
block-sparse mask (whole tiles at the flash tile size chosen for dense, about 40 % empty).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from attnviz.bench.anchors import sparse_tile_mask
from attnviz.engine import attention
from attnviz.engine.blockmask import BlockMask
from attnviz.engine.tiling import choose_blocks


def best_ms(fn, repeat: int) -> float:
    fn()  # warm: compile and tile-size measurement
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times) * 1e3


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--T", type=int, default=4096)
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--hs", type=int, default=64)
    ap.add_argument("--repeat", type=int, default=5)
    a = ap.parse_args()
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((a.heads, a.T, a.hs)).astype(np.float32) for _ in range(3))  # (nh, T, hs)
    bm, bn = choose_blocks(a.heads, a.T, a.T, a.hs, a.hs, np.float32)
    sparse = sparse_tile_mask(a.T, bm, bn, 0.4, 0)  # (T, T)
    prebuilt = BlockMask.from_dense(sparse, bm, bn)
    dense_ms = best_ms(lambda: attention(q, k, v, block_m=bm, block_n=bn), a.repeat)
    bool_ms = best_ms(lambda: attention(q, k, v, sparse), a.repeat)
    block_ms = best_ms(lambda: attention(q, k, v, prebuilt), a.repeat)
    print(f"T={a.T} nh={a.heads} hs={a.hs} tiles {bm}x{bn} {prebuilt.counts()} sparsity {prebuilt.sparsity():.1f} %")
    print(f"dense {dense_ms:.1f} ms | sparse, bool mask per call {bool_ms:.1f} ms ({dense_ms / bool_ms:.2f}x) | "
          f"sparse, BlockMask built once {block_ms:.1f} ms ({dense_ms / block_ms:.2f}x)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
