"""Small, deterministic sample data for the widget tests: a multimodal sequence with a block mask,
large matrices with isolated peaks, and a picture for the patch view."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attnviz.model import score_rules
from attnviz.model.segments import Segment


@dataclass(frozen=True)
class SampleAttention:
    """One head's attention over a labelled, segmented sequence."""

    tokens: list  # token text per position
    ids: list  # token id per position
    segments: tuple  # Segment per modality
    mask: np.ndarray  # (T, T) bool, True = query may attend to key
    scores: np.ndarray  # (T, T) float32 scaled scores, -inf where masked
    weights: np.ndarray  # (T, T) float32 softmax over allowed keys, 0 in fully masked rows


def vla_mask(segments, T: int) -> np.ndarray:
    """Block mask of a vision-language-action sequence: image and prompt attend bidirectionally to
    image+prompt, actions attend to everything before them and causally among themselves, and the
    padding row attends to nothing."""
    mask = np.zeros((T, T), dtype=bool)  # (T, T)
    by = {s.name: s for s in segments}
    img, txt, act = by["image"], by["prompt"], by["actions"]
    mask[img.start:txt.stop, img.start:txt.stop] = True
    mask[act.start:act.stop, : act.start] = True
    mask[act.start:act.stop, act.start:act.stop] = np.tri(len(act), dtype=bool)
    return mask


def river_bank(seed: int = 0) -> SampleAttention:
    tokens = ["<img0>", "<img1>", "<img2>", "<img3>", "by", " the", " river", " bank",
              "<act0>", "<act1>", "<act2>", "<pad>"]
    ids = [50000, 50001, 50002, 50003, 1525, 262, 7850, 3331, 50100, 50101, 50102, 0]
    segments = (Segment("image", 0, 4, "#4c78a8"), Segment("prompt", 4, 8, "#f58518"),
                Segment("actions", 8, 11, "#54a24b"), Segment("pad", 11, 12, "#9d9d9d"))
    T = len(tokens)
    mask = vla_mask(segments, T)
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((T, 8))  # (T, hs)
    k = rng.standard_normal((T, 8))  # (T, hs)
    scores = q @ k.T / np.sqrt(8.0)  # (T, T)
    scores[7, 6] += 2.5  # "bank" looks at "river"
    weights = score_rules.masked_softmax(scores, mask)[0].astype(np.float32)
    return SampleAttention(tokens, ids, segments, mask, np.where(mask, scores, -np.inf).astype(np.float32), weights)


def peaked_matrix(T: int, seed: int = 0, causal: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """(weights (T, T) float32, mask (T, T) bool): causal, locally banded attention with a few
    isolated sharp peaks far from the diagonal (what mean pooling would wash out)."""
    rng = np.random.default_rng(seed)
    i = np.arange(T)[:, None]
    j = np.arange(T)[None, :]
    scores = -np.abs(i - j) / max(T / 64, 1.0) + 0.3 * rng.standard_normal((T, T))  # (T, T)
    for _ in range(8):
        r = int(rng.integers(T // 2, T))
        scores[r, int(rng.integers(0, max(r // 2, 1)))] = scores[r].max() + 6.0  # one key takes most of the row
    mask = (j <= i) if causal else np.ones((T, T), dtype=bool)
    return score_rules.masked_softmax(scores, mask)[0].astype(np.float32), mask


def sample_image(h: int = 224, w: int = 224) -> np.ndarray:
    """An RGB uint8 (h, w, 3) picture: a sky gradient, a sun, a river band and a bank."""
    y = np.linspace(0, 1, h)[:, None]
    x = np.linspace(0, 1, w)[None, :]
    img = np.zeros((h, w, 3), dtype=np.float64)  # (h, w, 3)
    img[..., 0] = 120 + 100 * y
    img[..., 1] = 170 + 50 * y
    img[..., 2] = 235 - 30 * y
    sun = (x - 0.75) ** 2 + (y - 0.25) ** 2 < 0.01
    img[sun] = (255, 210, 80)
    river = (y > 0.6) & (y < 0.8 + 0.05 * np.sin(12 * x))
    img[river] = (40, 90, 170)
    bank = y >= 0.8 + 0.05 * np.sin(12 * x)
    img[bank] = (90, 140, 60)
    return np.clip(img, 0, 255).astype(np.uint8)
