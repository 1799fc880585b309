"""Paths and readers shared by the checkpoint tests (the committed tiny checkpoints and golden outputs)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

DATA = Path(__file__).resolve().parents[1] / "data" / "checkpoints"
TINY = {"gpt2": DATA / "tiny_gpt2", "vit": DATA / "tiny_vit", "deit": DATA / "tiny_deit"}


def golden(path: Path) -> dict[str, np.ndarray]:
    """All arrays of a golden .npz file."""
    with np.load(path) as z:
        return {k: z[k] for k in z.files}


# float32 maps of a tiny checkpoint may differ from transformers' float32 ones by more than 1e-5 where the
# random model magnifies rounding: tiny_gemma2's third layer does so about tenfold (transformers' own
# float32 maps are 7.4e-6 from a float64 pass there, ours 1.1-1.5e-5 from theirs with an AVX2 CPU's BLAS)
F32_MAP_ATOL = {"tiny_gemma2": 2.5e-5}


def f32_map_atol(name: str) -> float:
    """The tolerance of checkpoint ``name``'s float32 attention maps against transformers' float32 ones."""
    return F32_MAP_ATOL.get(name, 1e-5)
