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
