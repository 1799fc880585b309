"""What the window's Audio tab asks of a Whisper run, without Qt: a run on a clip (teacher-forced on a target,
or the model's own transcript, stoppable), then the written tokens, one token's cross-attention over the
audio frames (a layer's head, or the mean over its heads) and the tokens x frames alignment matrix.

Token k of the written text is predicted by decoder row ``prompt_length - 1 + k``: the row whose
cross-attention says where in the audio the model listened when it wrote that token (as Whisper's own word
timing reads it). Only the frames that hold the clip are shown; the rest of the window is silence padding.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attnviz.checkpoints.errors import CheckpointError
from attnviz.checkpoints.whisper import (WhisperAttention, WhisperCheckpoint, generate_whisper, read_clip,
                                         run_whisper)

MEAN = -1  # the head index that means "mean over the layer's heads"


@dataclass(eq=False)
class AudioOutcome:
    """One run of the Audio tab."""

    result: WhisperAttention
    clip_name: str
    clip_line: str  # "1.50 s at 16,000 Hz (2 channels averaged to mono)"
    transcribed: bool  # the model's own text (True) or a target forced (False)
    finished: bool  # end of text reached (teacher-forced: True)
    text: str  # the transcript, or the target
    pieces: list[str]  # (N,) the written tokens' pieces (result.written), end of text last when reached
    stopped: bool = False  # the transcript was stopped (cancel) before the end of text or its length limit

    @property
    def frames(self) -> int:
        """Encoder frames shown: those that hold the clip (at least one)."""
        return max(1, self.result.audio_frames)


def run_outcome(ckpt: WhisperCheckpoint, path, target: str, *, name: str | None = None, cancel=None,
                on_token=None) -> AudioOutcome:
    """The clip at ``path`` through ``ckpt``: teacher-forced on ``target``, or (empty target) transcribed."""
    if not isinstance(ckpt, WhisperCheckpoint):
        raise CheckpointError("the Audio tab runs Whisper checkpoints; load one first")
    clip = read_clip(path, ckpt)
    if target.strip():
        res = run_whisper(ckpt, clip.samples, target)
        out = AudioOutcome(result=res, clip_name=name or str(path), clip_line=clip.describe(), transcribed=False,
                           finished=True, text=target, pieces=[ckpt.piece(i) for i in res.written])
    else:
        gen = generate_whisper(ckpt, clip.samples, cancel=cancel, on_token=on_token)
        res = gen.attention
        out = AudioOutcome(result=res, clip_name=name or str(path), clip_line=clip.describe(), transcribed=True,
                           finished=gen.finished, text=gen.text, pieces=[ckpt.piece(i) for i in gen.generated],
                           stopped=not gen.finished and cancel is not None and bool(cancel()))
    return out


def _check(out: AudioOutcome, layer: int, head: int) -> None:
    L, nh = out.result.cross_attentions.shape[:2]
    if not (0 <= layer < L and (head == MEAN or 0 <= head < nh)):
        raise ValueError(f"no head ({layer}, {head}) in a {L} layers x {nh} heads decoder")


def alignment(out: AudioOutcome, layer: int, head: int = MEAN) -> np.ndarray:
    """(written tokens, frames) float32: each written token's cross-attention over the clip's frames."""
    _check(out, layer, head)
    r = out.result
    first = r.prompt_length - 1
    rows = r.cross_attentions[layer, :, first:first + len(out.pieces), :out.frames]  # (nh, N, F)
    m = rows.mean(axis=0) if head == MEAN else rows[head]
    return np.ascontiguousarray(m, dtype=np.float32)  # (N, F)


def token_row(out: AudioOutcome, token: int, layer: int, head: int = MEAN) -> np.ndarray:
    """(frames,) the cross-attention of written token ``token`` over the clip's frames."""
    m = alignment(out, layer, head)
    if not 0 <= token < m.shape[0]:
        raise ValueError(f"no written token {token} (the text has {m.shape[0]})")
    return m[token]


def peak_seconds(out: AudioOutcome, token: int, layer: int, head: int = MEAN) -> float:
    """Where in the clip (seconds) written token ``token`` attends most."""
    row = token_row(out, token, layer, head)
    return float(out.result.frame_times[int(np.argmax(row))])
