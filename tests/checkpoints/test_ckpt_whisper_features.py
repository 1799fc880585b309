"""Whisper's log-mel input features against transformers' WhisperFeatureExtractor (within 1e-4):
80 and 128 mels, the zero-padded tail, the settings read from preprocessor_config.json.
Golden: tools/make_whisper_goldens.py."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from attnviz.checkpoints import CheckpointError
from attnviz.checkpoints.whisper_features import WhisperFeatures, log_mel, mel_filters

GOLDEN = Path(__file__).resolve().parents[1] / "data" / "audio" / "whisper_features.npz"


def _signal() -> np.ndarray:
    t = np.arange(48_000) / 16_000
    tone = 0.3 * np.sin(2 * np.pi * 440 * t) + 0.2 * np.sin(2 * np.pi * (200 + 900 * t) * t)
    return (tone + 0.05 * np.random.default_rng(0).standard_normal(t.size)).astype(np.float32)


@pytest.fixture(scope="module")
def golden():
    with np.load(GOLDEN) as z:
        return {k: z[k] for k in z.files}


def test_80_mel_features_match_transformers(golden):
    f = log_mel(_signal())
    assert f.shape == tuple(golden["shape80"]) == (80, 3000) and f.dtype == np.float32
    frames = golden["mel80"].shape[1]
    np.testing.assert_allclose(f[:, :frames], golden["mel80"], atol=1e-4, rtol=0)
    np.testing.assert_allclose(f[:, -1], golden["tail80"], atol=1e-4, rtol=0)  # the padding's frames


def test_128_mel_features_match_transformers(golden):
    f = log_mel(_signal(), WhisperFeatures.from_config({"feature_size": 128}))
    np.testing.assert_allclose(f[:, :golden["mel128"].shape[1]], golden["mel128"], atol=1e-4, rtol=0)


def test_longer_audio_is_cut_to_the_window_and_filters_are_slaney_normalised():
    s = WhisperFeatures()
    long = np.tile(_signal(), 12)  # 36 s
    assert log_mel(long).shape == (80, 3000)
    np.testing.assert_array_equal(log_mel(long), log_mel(long[:s.n_samples]))
    fb = mel_filters(s)
    assert fb.shape == (201, 80) and (fb >= 0).all() and (fb.max(axis=0) > 0).all()  # every band sees a bin


@pytest.mark.parametrize("bad, message", [(np.zeros(0), "no audio"), (np.array([0.0, np.nan]), "NaN")])
def test_bad_samples_are_refused(bad, message):
    with pytest.raises(CheckpointError, match=message):
        log_mel(bad)


@pytest.mark.parametrize("cfg", [{"feature_size": 0}, {"hop_length": "160"}, {"sampling_rate": True},
                                 {"chunk_length": 10**9}])
def test_bad_settings_name_the_field(cfg):
    with pytest.raises(CheckpointError, match=list(cfg)[0]):
        WhisperFeatures.from_config(cfg)
