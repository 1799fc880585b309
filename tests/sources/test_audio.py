"""Audio files through soundfile and soxr: formats, channels averaged to mono, resampling that keeps a
tone's pitch, and hostile files (truncated, random bytes, no samples, too many channels, NaN floats,
too long, not a regular file) refused with one clear message."""

from __future__ import annotations

import os

import numpy as np
import pytest
import soundfile as sf

import attnviz.sources.audio as audio
from attnviz.sources.audio import load_audio, resample
from attnviz.sources.errors import SourceError


def _tone(rate: int, seconds: float = 1.0, hz: float = 440.0) -> np.ndarray:
    t = np.arange(int(rate * seconds)) / rate
    return (0.5 * np.sin(2 * np.pi * hz * t)).astype(np.float32)


def _peak_hz(x: np.ndarray, rate: int) -> float:
    spec = np.abs(np.fft.rfft(x * np.hanning(x.size)))
    return float(np.argmax(spec) * rate / x.size)


@pytest.mark.parametrize("fmt, subtype", [("WAV", "PCM_16"), ("FLAC", "PCM_16"), ("OGG", "VORBIS"), ("WAV", "FLOAT")])
def test_formats_read_and_resampled_to_16k(tmp_path, fmt, subtype):
    path = tmp_path / f"a.{fmt.lower()}"
    sf.write(path, _tone(44_100), 44_100, format=fmt, subtype=subtype)
    x, native = load_audio(path)
    assert native == 44_100 and x.dtype == np.float32
    assert abs(x.size - 16_000) <= 2  # one second at 16 kHz
    assert abs(_peak_hz(x, 16_000) - 440.0) < 2.0  # the pitch survives resampling


def test_channels_are_averaged_to_mono(tmp_path):
    path = tmp_path / "eight.wav"
    chans = np.stack([_tone(16_000) * (i % 2) for i in range(8)], axis=1)  # odd channels carry the tone
    sf.write(path, chans, 16_000, subtype="FLOAT")
    x, _ = load_audio(path)
    np.testing.assert_allclose(x, chans.mean(axis=1), atol=1e-7)


def test_same_rate_is_not_resampled():
    x = _tone(16_000)
    assert resample(x, 16_000, 16_000) is not None
    np.testing.assert_array_equal(resample(x, 16_000, 16_000), x)


def _wav(tmp_path, data, rate=16_000, subtype="FLOAT"):
    path = tmp_path / "x.wav"
    sf.write(path, data, rate, subtype=subtype)
    return path


def test_hostile_files(tmp_path, monkeypatch):
    good = _wav(tmp_path, _tone(16_000))
    raw = good.read_bytes()
    cases = {}
    (tmp_path / "trunc.wav").write_bytes(raw[:30])
    cases["trunc.wav"] = "not readable audio"
    (tmp_path / "noise.wav").write_bytes(os.urandom(4096))
    cases["noise.wav"] = "not readable audio"
    (tmp_path / "empty.wav").write_bytes(b"")
    cases["empty.wav"] = "is empty"
    sf.write(tmp_path / "nosamples.wav", np.zeros((0, 1), np.float32), 16_000)
    cases["nosamples.wav"] = "no samples"
    bad = _tone(16_000)
    bad[100] = np.nan
    sf.write(tmp_path / "nan.wav", bad, 16_000, subtype="FLOAT")
    cases["nan.wav"] = "NaN"
    (tmp_path / "folder.wav").mkdir()
    cases["folder.wav"] = "not a regular file"
    os.mkfifo(tmp_path / "fifo.wav")
    cases["fifo.wav"] = "not a regular file"
    cases["missing.wav"] = "cannot read"
    for name, message in cases.items():
        with pytest.raises(SourceError, match=message):
            load_audio(tmp_path / name)
    monkeypatch.setattr(audio, "MAX_SECONDS", 0.5)
    with pytest.raises(SourceError, match="minutes"):
        load_audio(good)
    monkeypatch.setattr(audio, "MAX_CHANNELS", 4)
    with pytest.raises(SourceError, match="channels"):
        load_audio(_wav(tmp_path, np.zeros((100, 8), np.float32)))
    with pytest.raises(SourceError, match="sample rate"):
        resample(_tone(100), 100, 0)
