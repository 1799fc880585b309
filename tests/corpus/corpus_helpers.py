"""Helpers of the corpus tests: sentences, the tiny checkpoint, and the single-process reference.

The reference computes the statistics the slow, obvious way — one forward pass per document, one
query row at a time — independently of :mod:`attnviz.corpus.stats`."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_limits

from attnviz.checkpoints import load_checkpoint, run_text

DATA = Path(__file__).resolve().parents[1] / "data" / "checkpoints"
TINY_GPT2 = DATA / "tiny_gpt2"
STATS = ("entropy", "to_first", "to_self", "to_prev", "distance")
WORDS = ("the a river bank was steep after rain model reads every token and attends to its neighbours while "
         "some heads look far back at the first word of each sentence").split()


def sentences(n: int, seed: int = 0, longest: int = 20) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(1, longest))).capitalize() + "."
            for _ in range(n)]


def reference_stats(folder, texts, name=None):
    """statistic -> (L, nh) row-weighted means, plus (rows, documents), in one process, row by row."""
    ckpt = load_checkpoint(folder, name=name)
    L, nh = ckpt.config.n_layer, ckpt.config.n_head
    total = {k: np.zeros((L, nh)) for k in STATS}
    rows = prev_rows = 0
    with threadpool_limits(limits=1, user_api="blas"):  # as on the workers
        for text in texts:
            a = run_text(ckpt, text).attentions.astype(np.float64)  # (L, nh, T, T)
            T = a.shape[-1]
            for i in range(T):
                w = a[:, :, i, :]  # (L, nh, T) row i of every head
                total["entropy"] += -np.where(w > 0, w * np.log(np.where(w > 0, w, 1.0)), 0.0).sum(axis=-1)
                total["to_first"] += w[..., 0]
                total["to_self"] += w[..., i]
                if i >= 1:
                    total["to_prev"] += w[..., i - 1]
                total["distance"] += (w * np.abs(i - np.arange(T))).sum(axis=-1)
            rows += T
            prev_rows += T - 1
    means = {k: v / (prev_rows if k == "to_prev" else rows) for k, v in total.items()}
    return means, rows, len(texts)


def write_lines(path: Path, texts) -> Path:
    path.write_text("".join(t + "\n" for t in texts), encoding="utf-8")
    return path
