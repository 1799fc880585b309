"""Write the Whisper feature golden of tests/checkpoints/test_ckpt_whisper_features.py.

Run once, in an environment with transformers (CPU); attnviz itself never imports it:

    /path/to/venv/bin/python tools/make_whisper_goldens.py

It computes ``WhisperFeatureExtractor()`` (transformers' defaults: 80 mels, 16 kHz, n_fft 400, hop 160,
30 s) on the signal :func:`signal` makes (a 440 Hz tone, a chirp and seeded noise, 3 s), and one with 128
mels (``feature_size=128``, large-v3's), and keeps the first FRAMES frames of each (the rest is the zero
padding's, checked by the test on its own) in tests/data/audio/whisper_features.npz.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from transformers import WhisperFeatureExtractor

OUT = Path(__file__).resolve().parents[1] / "tests" / "data" / "audio" / "whisper_features.npz"
FRAMES = 320


def signal() -> np.ndarray:
    """3 s at 16 kHz: the same array in any numpy (PCG64's normal stream is fixed)."""
    t = np.arange(48_000) / 16_000
    tone = 0.3 * np.sin(2 * np.pi * 440 * t) + 0.2 * np.sin(2 * np.pi * (200 + 900 * t) * t)
    return (tone + 0.05 * np.random.default_rng(0).standard_normal(t.size)).astype(np.float32)


def main() -> None:
    x = signal()
    f80 = WhisperFeatureExtractor()(x, sampling_rate=16_000, return_tensors="np").input_features[0]
    f128 = WhisperFeatureExtractor(feature_size=128)(x, sampling_rate=16_000, return_tensors="np").input_features[0]
    np.savez_compressed(OUT, mel80=f80[:, :FRAMES], mel128=f128[:, :FRAMES], tail80=f80[:, -1], shape80=f80.shape)
    print(OUT, f80.shape, f128.shape)


if __name__ == "__main__":
    main()
