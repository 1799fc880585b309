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
from attnviz.checkpoints.seq2seq_run import Seq2SeqAttention
from attnviz.checkpoints.seq2seq_study import Seq2SeqOutcome, summaries_of
from attnviz.checkpoints.whisper import (WhisperAttention, WhisperCheckpoint, generate_whisper, read_clip,
                                         run_whisper)

MEAN = -1  # the head index that means "mean over the layer's heads"


@dataclass(frozen=True)
class AudioOptions:
    """What the Audio tab asks of a run (each only where the model allows it)."""

    language: str | None = None  # None: the generation config's, or detected
    task: str | None = None  # None: the generation config's (transcribe once a language is named)
    timestamps: bool = False
    beams: int = 1

    def describe(self) -> str:
        parts = [p for p in (self.language and f"language {self.language}", self.task,
                             self.timestamps and "timestamps", self.beams > 1 and f"{self.beams} beams") if p]
        return ", ".join(parts)


@dataclass(eq=False)
class WhisperMapsOutcome(Seq2SeqOutcome):
    """A Whisper run as the panel's layers x heads grid and detail map show an encoder-decoder's: the audio
    frames as the source tokens ("f12 0.24s"; the frames of the window's silence marked special)."""

    clip_name: str = ""

    def describe(self) -> str:
        r = self.result
        how = "the model's own transcript" if self.generated else "teacher-forced on the target"
        return (f"{how} {self.text[:80]!r} over {self.clip_name} · {len(r.encoder_ids)} audio frames, "
                f"decoder {len(r.decoder_ids)} tokens")


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
    segments: tuple = ()  # whisper_search.Segment of a transcript with timestamps
    options: AudioOptions = AudioOptions()
    maps: WhisperMapsOutcome | None = None  # the three stacks for the panel's grid and detail map

    @property
    def frames(self) -> int:
        """Encoder frames shown: those that hold the clip (at least one)."""
        return max(1, self.result.audio_frames)


def run_outcome(ckpt: WhisperCheckpoint, path, target: str, *, name: str | None = None, cancel=None,
                on_token=None, options: AudioOptions = AudioOptions()) -> AudioOutcome:
    """The clip at ``path`` through ``ckpt``: teacher-forced on ``target``, or (empty target) transcribed, with
    ``options``' language, task, timestamps and beams (beams: transcripts only)."""
    if not isinstance(ckpt, WhisperCheckpoint):
        raise CheckpointError("the Audio tab runs Whisper checkpoints; load one first")
    clip = read_clip(path, ckpt)
    prompt = {"language": options.language, "task": options.task, "timestamps": options.timestamps}
    name = name or str(path)
    if target.strip():
        res = run_whisper(ckpt, clip.samples, target, **prompt)
        out = AudioOutcome(result=res, clip_name=name, clip_line=clip.describe(), transcribed=False,
                           finished=True, text=target, pieces=[ckpt.piece(i) for i in res.written], options=options)
    else:
        gen = generate_whisper(ckpt, clip.samples, cancel=cancel, on_token=on_token, beams=options.beams, **prompt)
        res = gen.attention
        out = AudioOutcome(result=res, clip_name=name, clip_line=clip.describe(), transcribed=True,
                           finished=gen.finished, text=gen.text, pieces=[ckpt.piece(i) for i in gen.generated],
                           stopped=not gen.finished and cancel is not None and bool(cancel()),
                           segments=gen.segments if gen.timestamps else (), options=options)
    out.maps = maps_outcome(ckpt, out)
    return out


def frame_labels(result: WhisperAttention) -> list[str]:
    """(P,) a label per encoder frame: its number and the second it starts."""
    return [f"f{i} {t:.2f}s" for i, t in enumerate(result.frame_times)]


def maps_outcome(ckpt: WhisperCheckpoint, out: AudioOutcome) -> WhisperMapsOutcome:
    """The run's encoder self-attention, decoder self-attention and cross-attention (over every frame) as an
    encoder-decoder outcome: rows of the decoder labelled with the tokens read, the alignment's with the tokens
    each row writes."""
    r = out.result
    P = len(r.frame_times)
    silence = np.arange(P) >= max(1, r.audio_frames)  # (P,) frames of the window's padding
    s2s = Seq2SeqAttention(
        model=r.model, family="whisper", encoder_tokens=frame_labels(r), encoder_ids=np.arange(P, dtype=np.int64),
        decoder_tokens=list(r.decoder_tokens), decoder_ids=r.decoder_ids, target_ids=r.target_ids,
        encoder_attentions=r.encoder_attentions, decoder_attentions=r.decoder_attentions,
        cross_attentions=r.cross_attentions, encoder_hidden=r.encoder_hidden, decoder_hidden=r.decoder_hidden,
        source=out.clip_name, target=out.text, encoder_special=silence, decoder_special=r.decoder_special,
        notes=r.notes)
    return WhisperMapsOutcome(result=s2s, generated=out.transcribed, text=out.text, finished=out.finished,
                              written=[ckpt.piece(i) for i in r.target_ids], summaries=summaries_of(s2s),
                              clip_name=out.clip_name)


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
