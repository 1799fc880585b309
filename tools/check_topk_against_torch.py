"""Compare attnviz.checkpoints.topk with torch.topk on CPU over rows full of ties (and NaN), the orders the
constants of tests/checkpoints/test_ckpt_moe.py were taken from. Run in an environment with torch:

    /path/to/venv/bin/python tools/check_topk_against_torch.py

It loads topk.py by path (numpy only) and prints the number of rows compared and how many differ.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import torch

SRC = Path(__file__).resolve().parents[1] / "attnviz" / "checkpoints" / "topk.py"


def main() -> int:
    spec = importlib.util.spec_from_file_location("topk", SRC)
    topk = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(topk)
    rng = np.random.default_rng(0)
    compared = differ = 0
    for n in (2, 3, 4, 5, 8, 16, 17, 20, 33, 60, 64, 65, 128, 129, 200, 256):
        for k in sorted({1, 2, 3, 4, 8, min(n, 20), n}):
            if k > n:
                continue
            for trial in range(40):
                row = rng.integers(0, rng.integers(1, 5), n).astype(np.float32) / 7  # few distinct values
                if trial % 7 == 0:
                    row[rng.integers(0, n)] = np.nan
                want = torch.topk(torch.from_numpy(row), k).indices.numpy()
                compared += 1
                if not np.array_equal(want, topk.topk_indices(row, k)):
                    differ += 1
                    print("differs:", n, k, row.tolist(), want.tolist())
    print(f"{compared} rows compared, {differ} differ")
    return 1 if differ else 0


if __name__ == "__main__":
    raise SystemExit(main())
