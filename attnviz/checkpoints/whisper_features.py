"""Whisper's input features: 16 kHz samples -> an (n_mels, 3000) log-mel spectrogram, as transformers'
``WhisperFeatureExtractor`` computes it.

The samples are zero-padded (or cut) to ``chunk_length`` seconds, framed with a periodic Hann window
(n_fft 400, hop 160) around centres padded by reflection, and their power spectra are summed into
Slaney-style mel bands (``norm="slaney"``, Slaney's mel scale, 0-8 kHz); then log10 of at least 1e-10,
the last frame dropped, everything raised to at most 8 below the maximum, and ``(x + 4) / 4``.
Settings come from the checkpoint's ``preprocessor_config.json``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attnviz.checkpoints.errors import CheckpointError


@dataclass(frozen=True)
class WhisperFeatures:
    """The feature extractor's settings."""

    n_mels: int = 80  # feature_size
    rate: int = 16_000  # sampling_rate
    n_fft: int = 400
    hop: int = 160  # hop_length
    chunk_seconds: int = 30  # chunk_length

    @property
    def n_samples(self) -> int:
        return self.chunk_seconds * self.rate

    @property
    def n_frames(self) -> int:
        """Frames of features (3000 for 30 s): one per hop."""
        return self.n_samples // self.hop

    @classmethod
    def from_config(cls, cfg: dict) -> "WhisperFeatures":
        def whole(key, default, lo, hi):
            v = cfg.get(key, default)
            if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
                raise CheckpointError(f"preprocessor_config.json: {key!r} must be a whole number in [{lo}, {hi}] "
                                      f"(got {v!r})")
            return v

        return cls(n_mels=whole("feature_size", 80, 1, 512), rate=whole("sampling_rate", 16_000, 1000, 192_000),
                   n_fft=whole("n_fft", 400, 16, 8192), hop=whole("hop_length", 160, 1, 8192),
                   chunk_seconds=whole("chunk_length", 30, 1, 600))


def _hz_to_mel(f: np.ndarray) -> np.ndarray:
    """Slaney's mel scale: linear (3 mels per 200 Hz) below 1 kHz, logarithmic above."""
    f = np.asarray(f, dtype=np.float64)
    mel = 3.0 * f / 200.0
    log_step = np.log(6.4) / 27.0
    above = f >= 1000.0
    return np.where(above, 15.0 + np.log(np.maximum(f, 1e-12) / 1000.0) / log_step, mel)


def _mel_to_hz(m: np.ndarray) -> np.ndarray:
    m = np.asarray(m, dtype=np.float64)
    log_step = np.log(6.4) / 27.0
    return np.where(m >= 15.0, 1000.0 * np.exp(log_step * (m - 15.0)), 200.0 * m / 3.0)


def mel_filters(s: WhisperFeatures) -> np.ndarray:
    """(n_fft // 2 + 1, n_mels) triangular filters on the FFT bins, each scaled by 2 / its width in Hz."""
    bins = np.linspace(0.0, s.rate / 2, s.n_fft // 2 + 1)  # (F,) Hz of each FFT bin
    edges = _mel_to_hz(np.linspace(_hz_to_mel(0.0), _hz_to_mel(8000.0), s.n_mels + 2))  # (M + 2,) Hz
    lo, mid, hi = edges[:-2], edges[1:-1], edges[2:]  # (M,) each
    rise = (bins[:, None] - lo[None, :]) / (mid - lo)[None, :]  # (F, M)
    fall = (hi[None, :] - bins[:, None]) / (hi - mid)[None, :]
    tri = np.maximum(0.0, np.minimum(rise, fall))
    return tri * (2.0 / (hi - lo))[None, :]


def log_mel(samples: np.ndarray, s: WhisperFeatures = WhisperFeatures()) -> np.ndarray:
    """(n_mels, n_frames) float32 input features of mono ``samples`` at ``s.rate`` Hz."""
    x = np.asarray(samples, dtype=np.float64).reshape(-1)
    if x.size == 0:
        raise CheckpointError("no audio samples to compute features of")
    if not np.isfinite(x).all():
        raise CheckpointError("the audio holds NaN or infinite samples")
    x = np.pad(x[:s.n_samples], (0, max(0, s.n_samples - x.size)))  # (N,) the fixed window
    half = s.n_fft // 2
    padded = np.pad(x, half, mode="reflect")  # centred frames
    n = 1 + (padded.size - s.n_fft) // s.hop
    frames = np.lib.stride_tricks.as_strided(padded, shape=(n, s.n_fft),
                                             strides=(padded.strides[0] * s.hop, padded.strides[0]))  # (n, n_fft)
    window = 0.5 - 0.5 * np.cos(2.0 * np.pi * np.arange(s.n_fft) / s.n_fft)  # periodic Hann
    power = np.abs(np.fft.rfft(frames * window, axis=1)) ** 2  # (n, F)
    mel = power @ mel_filters(s)  # (n, M)
    spec = np.log10(np.maximum(mel, 1e-10)).T[:, :-1]  # (M, n - 1): the last frame dropped
    spec = np.maximum(spec, spec.max() - 8.0)
    return ((spec + 4.0) / 4.0).astype(np.float32)
