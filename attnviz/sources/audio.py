"""Audio files -> mono float32 samples at the rate a speech model wants.

:func:`load_audio` reads WAV, FLAC, OGG/Vorbis and the other formats libsndfile knows (through
``soundfile``), averages the channels to mono as ``librosa.load(mono=True)`` does, and resamples with
libsoxr (through ``soxr``, its "HQ" quality: librosa's default resampler). A file that is not audio, is
truncated, holds no samples, too many channels or samples, or non-finite values is a SourceError.
"""

from __future__ import annotations

import math
import stat
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from attnviz.sources.errors import SourceError

MAX_BYTES = 1 << 30  # an audio file larger than 1 GiB is not read
MAX_SECONDS = 20 * 60  # 20 minutes: far more than a speech model's 30-second window
MAX_CHANNELS = 64
BLOCK_FRAMES = 1 << 18  # frames read at once (a huge file never becomes one array before it is checked)


@dataclass(frozen=True)
class AudioClip:
    """An audio file read for a speech model."""

    samples: np.ndarray  # (n,) float32 mono at ``rate`` Hz
    rate: int
    native_rate: int  # the file's own sample rate
    channels: int  # the file's channels (averaged into the samples)

    @property
    def seconds(self) -> float:
        return self.samples.size / self.rate

    def describe(self) -> str:
        """One line: length, the file's rate and channels, and what was done to them."""
        how = [] if self.channels == 1 else [f"{self.channels} channels averaged to mono"]
        if self.native_rate != self.rate:
            how.append(f"resampled from {self.native_rate:,} Hz")
        return f"{self.seconds:.2f} s at {self.rate:,} Hz" + (f" ({', '.join(how)})" if how else "")


def load_audio(path, rate: int = 16_000) -> tuple[np.ndarray, int]:
    """(samples (n,) float32 mono at ``rate`` Hz, the file's own rate)."""
    clip = load_audio_clip(path, rate)
    return clip.samples, clip.native_rate


def load_audio_clip(path, rate: int = 16_000) -> AudioClip:
    """The file ``path`` as an :class:`AudioClip` at ``rate`` Hz (every problem a SourceError)."""
    import soundfile as sf

    path = Path(path)
    try:
        st = path.stat()
    except OSError as exc:
        raise SourceError(f"cannot read {path}: {exc.strerror or exc}") from None
    if not stat.S_ISREG(st.st_mode):
        raise SourceError(f"{path} is not a regular file")
    if st.st_size > MAX_BYTES:
        raise SourceError(f"{path} is {st.st_size:,} bytes; audio files of at most {MAX_BYTES:,} are read")
    if st.st_size == 0:
        raise SourceError(f"{path} is empty")
    try:
        with sf.SoundFile(path) as f:
            native, channels, frames = int(f.samplerate), int(f.channels), int(f.frames)
            if not 1 <= channels <= MAX_CHANNELS:
                raise SourceError(f"{path} has {channels} channels; 1 to {MAX_CHANNELS} are read")
            if native < 1:
                raise SourceError(f"{path} has a sample rate of {native} Hz")
            if frames > MAX_SECONDS * native:
                raise SourceError(f"{path} lasts {frames / native / 60:.1f} minutes; at most "
                                  f"{MAX_SECONDS / 60:g} are read")
            parts = []
            while True:
                block = f.read(BLOCK_FRAMES, dtype="float32", always_2d=True)  # (m, channels)
                if block.shape[0] == 0:
                    break
                parts.append(block.mean(axis=1, dtype=np.float32))  # mono as the mean of the channels
                if sum(p.size for p in parts) > MAX_SECONDS * native:
                    raise SourceError(f"{path} holds more than {MAX_SECONDS / 60:g} minutes of samples")
    except SourceError:
        raise
    except (RuntimeError, sf.LibsndfileError, OSError, ValueError, TypeError) as exc:
        raise SourceError(f"{path} is not readable audio ({_reason(exc)})") from None
    samples = np.concatenate(parts) if parts else np.zeros(0, np.float32)
    if samples.size == 0:
        raise SourceError(f"{path} holds no samples")
    if not np.isfinite(samples).all():
        raise SourceError(f"{path} holds NaN or infinite samples")
    return AudioClip(samples=resample(samples, native, rate), rate=rate, native_rate=native, channels=channels)


def resample(samples: np.ndarray, native: int, rate: int) -> np.ndarray:
    """``samples`` at ``native`` Hz -> float32 at ``rate`` Hz (libsoxr, HQ; unchanged when equal)."""
    if isinstance(rate, bool) or not isinstance(rate, int) or rate < 1:
        raise SourceError(f"sample rate must be a positive whole number of Hz (got {rate!r})")
    x = np.ascontiguousarray(samples, dtype=np.float32)
    if native == rate:
        return x
    import soxr

    out = soxr.resample(x, native, rate, quality="HQ")
    return np.ascontiguousarray(out, dtype=np.float32)


def _reason(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[-1][:200] if text else type(exc).__name__


def duration(samples: np.ndarray, rate: int) -> float:
    """Seconds of ``samples`` at ``rate`` Hz."""
    return samples.size / rate if rate else math.nan
