"""Whisper (``WhisperForConditionalGeneration``): audio -> log-mel features -> the encoder's frames, and text
written over them by the decoder, with every layer's and head's encoder self-attention, decoder
self-attention and cross-attention (each written token over the audio frames: the word-to-audio alignment).

As transformers 5.24 runs it in float32 (eager attention):

* encoder: the (n_mels, 2 P) features through two convolutions of width 3 (the second with stride 2), each
  followed by exact GELU, plus the P stored position rows, then pre-LN blocks (:mod:`.seq2seq`'s, keys
  without bias) and the final ``layer_norm``; encoder frame i covers the audio from i * 2 * hop / rate
  seconds (20 ms per frame at Whisper's 16 kHz and hop 160);
* decoder: token rows (unscaled) plus the learned position rows from 0, pre-LN blocks with causal
  self-attention and cross-attention over every frame, the final ``layer_norm``, and the output head tied to
  the token table (``proj_out`` when the config unties it);
* the decoder prompt as :class:`~.whisper_config.WhisperRules` reads it (a named language and task, without
  <|notimestamps|> when timestamps are asked), and the search (greedy or beams, timestamps, the windows) of
  :mod:`.whisper_search`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from attnviz.checkpoints import seq2seq
from attnviz.checkpoints.config import read_json
from attnviz.checkpoints.decoder import _W
from attnviz.checkpoints.errors import CheckpointError
from attnviz.checkpoints.layers import activation, linear
from attnviz.checkpoints.parts import Part, PartView, load_parts
from attnviz.checkpoints.whisper_config import (HEAD_PREFIXES, PREFIXES, WhisperRules, WhisperSpec,
                                                parse_whisper_config, read_whisper_rules, whisper_tensors)
from attnviz.checkpoints.whisper_features import WhisperFeatures, log_mel
from attnviz.sources.errors import SourceError
from attnviz.sources.text import BpeTokenizer

MAX_NEW_TOKENS = 448  # the longest transcript one call writes (Whisper's whole position table)
MEMORY_SHARE = 0.5  # share of the available memory the maps of one pass may take


@dataclass(frozen=True, eq=False)
class WhisperCheckpoint:
    """A loaded Whisper: its spec, mapped weights, tokenizer, feature settings and generation rules."""

    folder: Path
    name: str
    spec: WhisperSpec
    weights: object  # parts.load_parts store: "whisper/<name>", "head/proj_out.weight"
    text: BpeTokenizer  # the transcript's tokenizer (tokenizer.json)
    features: WhisperFeatures
    rules: WhisperRules

    kind = "whisper"
    tokenizer = None  # no text input of the panel's own: audio goes through the Audio tab
    special_tokens = None

    @property
    def family(self) -> str:
        return "whisper"

    @property
    def n_params(self) -> int:
        return int(self.weights.n_params)

    @property
    def stored_dtype(self) -> str:
        return "+".join(n.lower() for n in self.weights.dtypes())

    @property
    def frame_seconds(self) -> float:
        """Seconds of audio per encoder frame (0.02 for Whisper's 16 kHz, hop 160)."""
        return 2 * self.features.hop / self.features.rate

    def describe(self) -> str:
        s, n = self.spec, self.n_params
        size = f"{n / 1e6:.1f} M" if n >= 1e6 else f"{n:,}"
        lang = "multilingual" if self.rules.multilingual else "English-only"
        return (f"{self.name}: Whisper ({lang}), encoder {s.enc_layers} layers x {s.enc_heads} heads over "
                f"{s.max_source_positions} frames ({self.features.chunk_seconds} s), decoder {s.dec_layers} layers x "
                f"{s.dec_heads} heads, d_model {s.d_model}, {size} weights ({self.stored_dtype})")

    def piece(self, token_id: int) -> str:
        try:
            return self.text.id_to_piece(int(token_id))
        except SourceError:
            return f"<{int(token_id)}>"


def load_whisper(folder, cfg: dict, name: str | None = None) -> WhisperCheckpoint:
    """A Whisper folder (config.json already read as ``cfg``) -> a checked checkpoint."""
    folder = Path(folder)
    name = name or folder.name
    spec = parse_whisper_config(cfg)
    pre = folder / "preprocessor_config.json"
    if not pre.is_file():
        raise CheckpointError(f"the feature extractor's settings are missing: {pre} not found")
    feats = WhisperFeatures.from_config(read_json(pre, "the feature extractor config"))
    if feats.n_mels != spec.n_mels:
        raise CheckpointError(f"preprocessor_config.json gives {feats.n_mels} mel bands but the model takes "
                              f"{spec.n_mels} (num_mel_bins)")
    if feats.n_frames != spec.n_frames:
        raise CheckpointError(f"preprocessor_config.json makes {feats.n_frames} feature frames "
                              f"({feats.chunk_seconds} s), but the encoder takes {spec.n_frames} "
                              f"(2 x max_source_positions {spec.max_source_positions})")
    tok_path = folder / "tokenizer.json"
    if not tok_path.is_file():
        raise CheckpointError(f"the tokenizer is missing: {tok_path} not found (Whisper checkpoints ship tokenizer.json)")
    try:
        tok = BpeTokenizer.from_file(tok_path, name=name)
    except SourceError as exc:
        raise CheckpointError(str(exc)) from None
    if tok.vocab_size > spec.vocab_size:
        raise CheckpointError(f"tokenizer.json has {tok.vocab_size} tokens but the model's token table only "
                              f"{spec.vocab_size} rows: tokenizer and weights do not belong together")
    rules = read_whisper_rules(folder, spec, cfg)
    head = Part("head", {"proj_out.weight": (spec.vocab_size, spec.d_model)}, HEAD_PREFIXES,
                optional=frozenset({"proj_out.weight"}))
    store = load_parts(folder, [Part("whisper", whisper_tensors(spec), PREFIXES), head], "Whisper")
    if not spec.tied_head and "proj_out.weight" not in PartView(store, "head"):
        raise CheckpointError("config.json unties the output head (tie_word_embeddings false) but the weights "
                              "hold no proj_out.weight")
    return WhisperCheckpoint(folder=folder, name=name, spec=spec, weights=store, text=tok, features=feats,
                             rules=rules)


# ------------------------------------------------------------------------------------------------ audio


def read_clip(path, ckpt: WhisperCheckpoint | None = None):
    """An audio file at the model's rate (16 kHz) as a :class:`~attnviz.sources.audio.AudioClip`; every
    problem a CheckpointError."""
    from attnviz.sources.audio import load_audio_clip

    rate = ckpt.features.rate if ckpt is not None else 16_000
    try:
        return load_audio_clip(path, rate)
    except SourceError as exc:
        raise CheckpointError(str(exc)) from None


def read_audio(path, ckpt: WhisperCheckpoint | None = None) -> np.ndarray:
    """Mono float32 samples of an audio file at the model's rate (16 kHz); every problem a CheckpointError."""
    return read_clip(path, ckpt).samples


def input_features(ckpt: WhisperCheckpoint, samples) -> np.ndarray:
    """(n_mels, 2 P) log-mel features of mono samples at the model's rate (zero-padded or cut to its window)."""
    x = np.asarray(samples)
    if x.ndim != 1 or not np.issubdtype(x.dtype, np.number) or np.iscomplexobj(x):
        raise CheckpointError(f"audio samples must be one channel of real numbers (got {x.dtype} {x.shape})")
    return log_mel(x, ckpt.features)


def _conv(x: np.ndarray, w: np.ndarray, b: np.ndarray, stride: int) -> np.ndarray:
    """torch.nn.Conv1d(kernel 3, padding 1) on x (C_in, T) -> (C_out, T_out)."""
    c_in, T = x.shape
    xp = np.pad(x, ((0, 0), (1, 1)))  # (C_in, T + 2)
    n = (T + 2 - 3) // stride + 1
    cols = np.stack([xp[:, j:j + stride * (n - 1) + 1:stride] for j in range(3)], axis=-1)  # (C_in, n, 3)
    cols = cols.transpose(1, 0, 2).reshape(n, c_in * 3)  # (n, C_in * 3)
    return (cols @ w.reshape(w.shape[0], -1).T + b).T  # (C_out, n)


def encode_features(ckpt: WhisperCheckpoint, features: np.ndarray, *, dtype=np.float32, kernel: str = "auto",
                    edit=None):
    """(n_mels, 2 P) features -> (encoder attentions (L, nh, P, P), hidden (P, d_model)); ``edit``: an Edit of the
    self-attention (:mod:`attnviz.checkpoints.intervention_seq2seq`)."""
    s = ckpt.spec
    f = np.asarray(features)
    if f.shape != (s.n_mels, s.n_frames):
        raise CheckpointError(f"the encoder takes ({s.n_mels}, {s.n_frames}) features (got {f.shape})")
    if not np.isfinite(f).all():
        raise CheckpointError("the features hold NaN or infinite values")
    W = _W(PartView(ckpt.weights, "whisper"), dtype)
    x = activation("gelu", _conv(f.astype(dtype), W["encoder.conv1.weight"], W["encoder.conv1.bias"], 1))
    x = activation("gelu", _conv(x, W["encoder.conv2.weight"], W["encoder.conv2.bias"], 2))  # (C, P)
    x = x.T + W["encoder.embed_positions.weight"]  # (P, C)
    return seq2seq.encode(s, PartView(ckpt.weights, "whisper"), None, dtype=dtype, kernel=kernel, embedded=x,
                          edit=edit)


def _embed_decoder(ckpt: WhisperCheckpoint, ids: np.ndarray, dtype) -> np.ndarray:
    W = _W(PartView(ckpt.weights, "whisper"), dtype)
    T = ids.shape[0]
    return W.rows("decoder.embed_tokens.weight", ids) + W.rows("decoder.embed_positions.weight", np.arange(T))


def decode(ckpt: WhisperCheckpoint, ids: np.ndarray, memory: np.ndarray, *, dtype=np.float32, kernel: str = "auto",
           cross_cache: dict | None = None, edit=None, cross_edit=None):
    """The decoder on ids (T,) over the encoder's frames -> (self (L, nh, T, T), cross (L, nh, T, P), hidden);
    ``edit`` / ``cross_edit``: Edits of the self-attention / the cross-attention."""
    s = ckpt.spec
    ids = np.asarray(ids, dtype=np.int64)
    if ids.size == 0 or ids.size > s.max_target_positions:
        raise CheckpointError(f"the decoder takes 1 to {s.max_target_positions} tokens (got {ids.size})")
    if ids.min() < 0 or ids.max() >= s.vocab_size:
        raise CheckpointError(f"token id {int(ids.max())} is outside the {s.vocab_size}-row token table")
    return seq2seq.decode(s, PartView(ckpt.weights, "whisper"), ids, memory, dtype=dtype, kernel=kernel,
                          cross_cache=cross_cache, embedded=_embed_decoder(ckpt, ids, dtype), edit=edit,
                          cross_edit=cross_edit)


def logits(ckpt: WhisperCheckpoint, hidden: np.ndarray) -> np.ndarray:
    """(T, V) next-token logits of the decoder's last hidden states (T, d_model)."""
    x = np.asarray(hidden)
    dtype = x.dtype.type
    head = PartView(ckpt.weights, "head")
    if not ckpt.spec.tied_head and "proj_out.weight" in head:
        w = _W(head, dtype).matrix("proj_out.weight")
    else:
        w = _W(PartView(ckpt.weights, "whisper"), dtype).matrix("decoder.embed_tokens.weight")
    return linear(x, w, None)  # (T, V)


# ------------------------------------------------------------------------------------------------ results


@dataclass(eq=False)
class WhisperAttention:
    """One pass: the audio through the encoder, decoder ids (the prompt first) through the decoder."""

    model: str
    decoder_tokens: list[str]  # (T_dec,) pieces, the prompt's special tokens as written
    decoder_ids: np.ndarray  # (T_dec,) int64: the decoder prompt, then the text's tokens
    target_ids: np.ndarray  # (T_dec,) int64: what each decoder row predicts (the next id; end of text last)
    prompt_length: int  # how many of the decoder ids are the prompt
    encoder_attentions: np.ndarray  # (L_enc, nh_enc, P, P)
    decoder_attentions: np.ndarray  # (L_dec, nh_dec, T_dec, T_dec), causal
    cross_attentions: np.ndarray  # (L_dec, nh_dec, T_dec, P): each decoder row over the audio frames
    encoder_hidden: np.ndarray  # (P, d_model)
    decoder_hidden: np.ndarray  # (T_dec, d_model)
    features: np.ndarray  # (n_mels, 2 P) the log-mel spectrogram the encoder read
    frame_times: np.ndarray  # (P,) float64 seconds where each encoder frame starts
    duration: float  # seconds of audio given (the rest of the window is silence padding)
    frame_seconds: float  # seconds per encoder frame
    target: str = ""
    notes: tuple[str, ...] = field(default_factory=tuple)

    kind = "whisper"
    family = "whisper"

    @property
    def decoder_special(self) -> np.ndarray:
        """(T_dec,) bool: the prompt's tokens."""
        return np.arange(len(self.decoder_ids)) < self.prompt_length

    @property
    def written(self) -> np.ndarray:
        """(N,) int64 the text's tokens after the prompt, each predicted by decoder row prompt_length - 1 + k
        (its cross-attention row is that token's alignment over the audio, as Whisper's word timing reads it)."""
        return self.target_ids[self.prompt_length - 1:]

    @property
    def audio_frames(self) -> int:
        """Encoder frames that hold the given audio (the others hold the padding's silence)."""
        return int(min(len(self.frame_times), np.ceil(self.duration / self.frame_seconds - 1e-9)))


@dataclass(eq=False)
class WhisperTranscription:
    """A transcript: the tokens written and every map of the first window's final sequence."""

    generated: np.ndarray  # (N,) int64 the first window's new tokens (no prompt), end of text last when reached
    attention: WhisperAttention  # decoder ids: the prompt, then the generated tokens but the last
    finished: bool
    text: str  # the transcript decoded, special and timestamp tokens left out
    sequences: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))  # (M,) what transformers'
    # generate returns: every window's written tokens (timestamps kept, end of text taken off)
    segments: tuple = ()  # whisper_search.Segment: start, end (seconds), ids, text; one without timestamps
    windows: int = 1  # how many times the model wrote over the audio (more when timestamps moved it on)
    beams: int = 1
    timestamps: bool = False


def _samples(ckpt: WhisperCheckpoint, audio) -> np.ndarray:
    if isinstance(audio, (str, Path)):
        return read_audio(audio, ckpt)
    return np.asarray(audio)


def _check(ckpt, dtype):
    if not isinstance(ckpt, WhisperCheckpoint):
        raise CheckpointError(f"{getattr(ckpt, 'name', ckpt)!r} is not a Whisper checkpoint")
    dtype = np.dtype(dtype).type
    if dtype not in (np.float32, np.float64):
        raise CheckpointError(f"dtype must be float32 or float64 (got {np.dtype(dtype).name})")
    return dtype


def _check_memory(ckpt: WhisperCheckpoint, T_dec: int, dtype) -> None:
    from attnviz.checkpoints.decoder_run import available_memory

    s, item = ckpt.spec, np.dtype(dtype).itemsize
    P = s.max_source_positions
    need = item * (s.enc_layers * s.enc_heads * P * P + s.dec_layers * s.dec_heads * T_dec * (T_dec + P))
    if need > available_memory() * MEMORY_SHARE:
        raise CheckpointError(f"every map of {ckpt.name} ({s.enc_layers} x {s.enc_heads} encoder maps of {P} x {P} "
                              f"frames) needs {need / 2**30:.1f} GiB, more than half the available memory")


def detect_language(ckpt: WhisperCheckpoint, memory: np.ndarray, dtype, kernel, cross: dict) -> int:
    """The language token the decoder finds most likely after the start token."""
    _, _, hidden = decode(ckpt, np.array([ckpt.rules.start]), memory, dtype=dtype, kernel=kernel, cross_cache=cross)
    lg = logits(ckpt, hidden[-1:])[0]  # (V,)
    ids = np.array(sorted(set(ckpt.rules.lang_to_id.values())), dtype=np.int64)
    return int(ids[np.argmax(lg[ids])])  # ties: the lowest id, as torch's argmax over the masked row


def decoder_prompt(rules: WhisperRules, detect) -> list[int]:
    """The ids transformers' ``_retrieve_init_tokens`` starts from; ``detect`` () -> the detected language id."""
    init: list = [rules.start]
    if rules.task is None and rules.language is None:
        init += list(rules.forced)
    undefined = len(init) <= 1 or init[1] is None
    lang = rules.language_id(rules.language)
    if lang is None and rules.multilingual and undefined:
        lang = detect()
    if lang is not None:
        if len(init) > 1:
            init[1] = lang
        else:
            init.append(lang)
    tasks = rules.task_to_id or {}
    if rules.task is not None:
        tid = tasks[rules.task]
        init.append(tid)
        init = [tid if i in tasks.values() else i for i in init]
    elif rules.language is not None and tasks and not any(t in init for t in tasks.values()):
        init.append(tasks["transcribe"])
    if not rules.timestamps:
        if rules.no_timestamps is not None and init[-1] != rules.no_timestamps:
            init.append(rules.no_timestamps)
    elif init[-1] == rules.no_timestamps:
        init = init[:-1]  # timestamps asked: the prompt ends before <|notimestamps|>
    return [int(i) for i in init if i is not None]


def _result(ckpt, features, samples_n, enc_atts, memory, dec_ids, prompt_len, dtype, kernel, target="",
            cross=None, notes=(), last: int | None = None) -> WhisperAttention:
    """The decoder over ``dec_ids``; ``last``: what the last row predicts (default: end of text)."""
    dec_atts, cross_atts, hidden = decode(ckpt, dec_ids, memory, dtype=dtype, kernel=kernel, cross_cache=cross)
    eos = ckpt.rules.eos_ids[0] if ckpt.rules.eos_ids else ckpt.spec.eos_token_id
    eos = eos if last is None else last
    P = memory.shape[0]
    return WhisperAttention(
        model=ckpt.name, decoder_tokens=[ckpt.piece(i) for i in dec_ids], decoder_ids=dec_ids,
        target_ids=np.concatenate([dec_ids[1:], [eos]]).astype(np.int64), prompt_length=prompt_len,
        encoder_attentions=enc_atts, decoder_attentions=dec_atts, cross_attentions=cross_atts, encoder_hidden=memory,
        decoder_hidden=hidden, features=features, frame_times=np.arange(P) * ckpt.frame_seconds,
        duration=samples_n / ckpt.features.rate, frame_seconds=ckpt.frame_seconds, target=target, notes=tuple(notes))


def _prepare(ckpt, audio, dtype, kernel, rules: WhisperRules | None = None):
    dtype = _check(ckpt, dtype)
    rules = ckpt.rules if rules is None else rules
    x = _samples(ckpt, audio)
    feats = input_features(ckpt, x)
    if x.size > ckpt.features.n_samples:
        note = (f"the audio lasts {x.size / ckpt.features.rate:.1f} s; the model hears its first "
                f"{ckpt.features.chunk_seconds} s")
    else:
        note = None
    enc_atts, memory = encode_features(ckpt, feats, dtype=dtype, kernel=kernel)
    cross: dict = {}
    prompt = decoder_prompt(rules, lambda: detect_language(ckpt, memory, dtype, kernel, cross))
    return dtype, x, feats, enc_atts, memory, cross, prompt, [note] if note else []


def _prompt_note(ckpt, prompt) -> str:
    return "decoder prompt: " + " ".join(ckpt.piece(i) for i in prompt)


def run_whisper(ckpt: WhisperCheckpoint, audio, target: str = "", *, language: str | None = None,
                task: str | None = None, timestamps: bool = False, dtype=np.float32,
                kernel: str = "auto") -> WhisperAttention:
    """Teacher-forced: the audio (a file, or mono samples at the model's rate) through the encoder, the decoder
    prompt (with ``language``, ``task``, and without <|notimestamps|> when ``timestamps``) then ``target``'s
    tokens through the decoder -> every map."""
    if not isinstance(target, str):
        raise CheckpointError(f"the target text must be a string (got {type(target).__name__})")
    _check(ckpt, dtype)
    rules = ckpt.rules.with_options(language=language, task=task, timestamps=timestamps)
    if target:
        try:
            ids = ckpt.text.encode(target, add_special_tokens=False).ids
        except SourceError as exc:
            raise CheckpointError(f"the target text: {exc}") from None
    else:
        ids = np.zeros(0, dtype=np.int64)
    if len(ids) + 4 > ckpt.spec.max_target_positions:
        raise CheckpointError(f"the target gives {len(ids):,} tokens; with the prompt the decoder takes at most "
                              f"{ckpt.spec.max_target_positions}: shorten it")
    _check_memory(ckpt, len(ids) + 4, dtype)
    dtype, x, feats, enc_atts, memory, cross, prompt, notes = _prepare(ckpt, audio, dtype, kernel, rules)
    dec_ids = np.concatenate([prompt, ids]).astype(np.int64)
    if dec_ids.size > ckpt.spec.max_target_positions:
        raise CheckpointError(f"the prompt and the target give {dec_ids.size} tokens, more than the decoder's "
                              f"{ckpt.spec.max_target_positions}: shorten the target")
    return _result(ckpt, feats, x.size, enc_atts, memory, dec_ids, len(prompt), dtype, kernel, target=target,
                   cross=cross, notes=[_prompt_note(ckpt, prompt), *notes])


def _decode_text(ckpt: WhisperCheckpoint, ids) -> str:
    """Token ids -> text, the special, timestamp and end-of-text tokens left out."""
    r = ckpt.rules
    tb = r.timestamp_begin
    body = [int(i) for i in ids if i not in r.eos_ids and (tb is None or i < tb)]
    return ckpt.text.tokenizer.decode(body, skip_special_tokens=True)


def generate_whisper(ckpt: WhisperCheckpoint, audio, *, max_new_tokens: int | None = None, language: str | None = None,
                     task: str | None = None, timestamps: bool = False, beams: int = 1, dtype=np.float32,
                     kernel: str = "auto", cancel=None, on_token=None) -> WhisperTranscription:
    """Transcribe as ``generate(input_features, do_sample=False, language=..., task=..., return_timestamps=...,
    num_beams=...)``: up to ``max_new_tokens`` per window (default: generation_config's max_length past the
    prompt, within the position table) or the end of text. ``cancel`` () -> bool is asked before each step;
    ``on_token`` (id, piece) is told each new token of the first window (a beam search's once it is chosen)."""
    from attnviz.checkpoints.whisper_search import Segment, transcribe

    if max_new_tokens is not None and (isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int)
                                       or not 1 <= max_new_tokens <= MAX_NEW_TOKENS):
        raise CheckpointError(f"max_new_tokens must be a whole number from 1 to {MAX_NEW_TOKENS} "
                              f"(got {max_new_tokens!r})")
    _check(ckpt, dtype)
    rules = ckpt.rules.with_options(language=language, task=task, timestamps=timestamps, num_beams=beams)
    _check_memory(ckpt, ckpt.spec.max_target_positions if max_new_tokens is None else max_new_tokens + 4, dtype)
    dtype, x, feats, enc_atts, memory, cross, prompt, notes = _prepare(ckpt, audio, dtype, kernel, rules)
    s = ckpt.spec
    if max_new_tokens is not None and len(prompt) + max_new_tokens > s.max_target_positions:
        raise CheckpointError(f"{len(prompt)} prompt tokens and {max_new_tokens} new ones exceed the decoder's "
                              f"{s.max_target_positions} positions; ask for at most "
                              f"{s.max_target_positions - len(prompt)}")

    def window_step(part, seek):
        mem, cc = (memory, cross) if seek == 0 else (encode_features(ckpt, part, dtype=dtype, kernel=kernel)[1], {})

        def step(seqs):
            rows = []
            for q in seqs:
                _, _, hidden = decode(ckpt, np.asarray(q, dtype=np.int64), mem, dtype=dtype, kernel=kernel,
                                      cross_cache=cc)
                rows.append(logits(ckpt, hidden[-1:])[0])
            return np.stack(rows)  # (n, V)
        return step

    tell = None if on_token is None else (lambda t: on_token(t, ckpt.piece(t)))
    windows = transcribe(rules, prompt, feats, window_step, max_new_tokens=max_new_tokens,
                         max_target_positions=s.max_target_positions, cancel=cancel, on_token=tell)
    first = windows[0]
    seq = list(first.sequence)
    gen = np.asarray(seq[len(prompt):], dtype=np.int64)
    dec_ids = np.asarray(seq[:-1] if gen.size else seq, dtype=np.int64)
    if beams > 1:
        notes.append(f"beam search over {beams} beams (length penalty {rules.length_penalty:g}, early stopping "
                     f"{rules.early_stopping}); the maps are the chosen beam's")
    if len(windows) > 1:
        notes.append(f"the model wrote over {len(windows)} windows (the later from "
                     f"{', '.join(f'{w.seek * ckpt.features.hop / ckpt.features.rate:.2f} s' for w in windows[1:])}): "
                     "their tokens are in sequences, the maps are of the first window")
    res = _result(ckpt, feats, x.size, enc_atts, memory, dec_ids, len(prompt), dtype, kernel, cross=cross,
                  notes=[_prompt_note(ckpt, prompt), *notes], last=int(gen[-1]) if gen.size else None)
    segs = tuple(Segment(g.start, g.end, g.ids, _decode_text(ckpt, g.ids)) for w in windows for g in w.segments)
    sequences = np.asarray([i for g in segs for i in g.ids], dtype=np.int64)
    return WhisperTranscription(generated=gen, attention=res, finished=first.finished,
                                text=_decode_text(ckpt, sequences), sequences=sequences, segments=segs,
                                windows=len(windows), beams=beams, timestamps=bool(timestamps))
