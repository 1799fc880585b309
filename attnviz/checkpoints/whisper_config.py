"""Whisper's ``config.json`` -> a checked :class:`WhisperSpec`, the tensors its forward pass reads, and the
rules of greedy transcription its ``generation_config.json`` sets (:class:`WhisperRules`).

Tensor names are ``WhisperForConditionalGeneration``'s: the base model under ``model.`` (``encoder.conv1``,
``encoder.layers.0.self_attn.q_proj``, ``decoder.embed_positions`` ...; the keys have no bias) and the
output head ``proj_out.weight`` beside it, absent when tied to the decoder's token table.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from attnviz.checkpoints.config import read_json
from attnviz.checkpoints.errors import CheckpointError
from attnviz.checkpoints.model_config import ACTIVATIONS, bool_field, int_field

PREFIXES = ("model.", "")
HEAD_PREFIXES = ("",)
NO_LENGTH_DEFAULT = 20  # transformers' GenerationConfig.max_length when the file names none
TASKS = ("transcribe", "translate")  # the tasks transformers' Whisper generate knows
MAX_BEAMS = 16  # more beams than this would multiply every step's work past what a desktop run waits for


@dataclass(frozen=True)
class WhisperSpec:
    """The numbers of Whisper's two stacks; the field names seq2seq's blocks read (pre-LN, LayerNorm 1e-5)."""

    d_model: int
    n_mels: int  # num_mel_bins: input channels of the first convolution
    enc_layers: int
    dec_layers: int
    enc_heads: int
    dec_heads: int
    enc_ff: int
    dec_ff: int
    act: str
    vocab_size: int
    max_source_positions: int  # encoder frames (1,500 for 30 s): the feature frames / 2
    max_target_positions: int  # the decoder's position table (448)
    decoder_start_token_id: int
    eos_token_id: int
    tied_head: bool = True
    pre_norm: bool = True  # every block x + f(LN(x)), a final layer_norm per stack
    ln_eps: float = 1e-5
    family: str = "whisper"

    name = "Whisper"

    @property
    def n_frames(self) -> int:
        """Feature frames the encoder takes (twice its positions: the second convolution has stride 2)."""
        return 2 * self.max_source_positions


def parse_whisper_config(cfg: dict) -> WhisperSpec:
    if cfg.get("model_type") != "whisper":
        raise CheckpointError(f"config.json: model_type {cfg.get('model_type')!r} is not whisper")
    d = int_field(cfg, "d_model", 384)
    eh, dh = int_field(cfg, "encoder_attention_heads", 6), int_field(cfg, "decoder_attention_heads", 6)
    for key, nh in (("encoder_attention_heads", eh), ("decoder_attention_heads", dh)):
        if d % nh:
            raise CheckpointError(f"config.json: d_model {d} is not divisible by {key} {nh}")
    act = cfg.get("activation_function", "gelu")
    if act not in ACTIVATIONS:
        raise CheckpointError(f"config.json: activation_function {act!r} is not supported ({', '.join(ACTIVATIONS)})")
    vocab = int_field(cfg, "vocab_size", 51865)

    def token(key, default):
        v = int_field(cfg, key, default, minimum=0)
        if v >= vocab:
            raise CheckpointError(f"config.json: {key} {v} is outside the {vocab}-row token table")
        return v

    return WhisperSpec(
        d_model=d, n_mels=int_field(cfg, "num_mel_bins", 80), enc_layers=int_field(cfg, "encoder_layers", 4),
        dec_layers=int_field(cfg, "decoder_layers", 4), enc_heads=eh, dec_heads=dh,
        enc_ff=int_field(cfg, "encoder_ffn_dim", 1536), dec_ff=int_field(cfg, "decoder_ffn_dim", 1536), act=act,
        vocab_size=vocab, max_source_positions=int_field(cfg, "max_source_positions", 1500),
        max_target_positions=int_field(cfg, "max_target_positions", 448),
        decoder_start_token_id=token("decoder_start_token_id", 50257), eos_token_id=token("eos_token_id", 50256),
        tied_head=bool_field(cfg, "tie_word_embeddings", True))


def whisper_tensors(s: WhisperSpec) -> dict[str, tuple[int, ...]]:
    """Canonical name -> shape of every tensor the forward pass reads."""
    d, shapes = s.d_model, {}

    def lin(name, n_out, n_in, bias=True):
        shapes[name + ".weight"] = (n_out, n_in)
        if bias:
            shapes[name + ".bias"] = (n_out,)

    def ln(name):
        shapes[name + ".weight"] = (d,)
        shapes[name + ".bias"] = (d,)

    shapes["encoder.conv1.weight"], shapes["encoder.conv1.bias"] = (d, s.n_mels, 3), (d,)
    shapes["encoder.conv2.weight"], shapes["encoder.conv2.bias"] = (d, d, 3), (d,)
    shapes["encoder.embed_positions.weight"] = (s.max_source_positions, d)
    shapes["decoder.embed_tokens.weight"] = (s.vocab_size, d)
    shapes["decoder.embed_positions.weight"] = (s.max_target_positions, d)
    for stack, n, ff in (("encoder", s.enc_layers, s.enc_ff), ("decoder", s.dec_layers, s.dec_ff)):
        for i in range(n):
            p = f"{stack}.layers.{i}."
            for a in ("self_attn", "encoder_attn") if stack == "decoder" else ("self_attn",):
                for m in ("q_proj", "v_proj", "out_proj"):
                    lin(p + f"{a}.{m}", d, d)
                lin(p + f"{a}.k_proj", d, d, bias=False)
                ln(p + f"{a}_layer_norm")
            lin(p + "fc1", ff, d)
            lin(p + "fc2", d, ff)
            ln(p + "final_layer_norm")
        ln(f"{stack}.layer_norm")
    return shapes


@dataclass(frozen=True)
class WhisperRules:
    """What ``generation_config.json`` asks of the decoder prompt and of greedy search (transformers 5.24's
    ``WhisperGenerationMixin``): the prompt is the start token, then ``forced_decoder_ids`` when neither
    ``language`` nor ``task`` is set, the language (named, or detected: the most likely language token after
    the start token, for a model with ``lang_to_id``), the task (named; ``transcribe`` when only a language is
    named) and ``<|notimestamps|>`` (left out when timestamps are asked); ``suppress_tokens`` never come,
    ``begin_suppress_tokens`` not as the first written token; the sequence stops at ``eos_token_id`` or at
    ``max_length`` new tokens past the prompt. :meth:`with_options` adds what a run asks (language, task,
    timestamps, beams); :mod:`.whisper_search` applies the rest (timestamp rules, beam search)."""

    start: int
    forced: tuple[int, ...] = ()  # forced_decoder_ids at positions 1, 2, ... (old checkpoints)
    lang_to_id: dict | None = None
    task_to_id: dict | None = None
    language: str | None = None
    task: str | None = None
    no_timestamps: int | None = None
    suppress: tuple[int, ...] = ()
    begin_suppress: tuple[int, ...] = ()
    eos_ids: tuple[int, ...] = ()
    max_length: int = NO_LENGTH_DEFAULT
    is_multilingual: bool | None = None  # generation_config's flag: False refuses a language or a task
    vocab_size: int = 0  # rows of the output head (timestamps are the ids past <|notimestamps|>)
    max_initial_timestamp_index: int | None = None  # the latest timestamp the transcript may open with
    early_stopping: bool | str = False  # beam search: stop once num_beams are done (True), never early, or heuristic
    length_penalty: float = 1.0  # beam search: a finished beam's score is its log-probability / length ** this
    timestamps: bool = False  # write timestamp tokens (segments) instead of starting with <|notimestamps|>
    num_beams: int = 1  # 1: greedy
    pad: int | None = None  # pad_token_id: what a finished beam is filled with, taken off the written tokens

    @property
    def multilingual(self) -> bool:
        return bool(self.lang_to_id)

    @property
    def timestamp_begin(self) -> int | None:
        """The id of <|0.00|>: the one after <|notimestamps|> (None: the model has no timestamp tokens)."""
        if self.no_timestamps is None or self.no_timestamps + 1 >= self.vocab_size:
            return None
        return self.no_timestamps + 1

    @property
    def eos(self) -> int:
        return self.eos_ids[0] if self.eos_ids else -1

    def choices(self) -> dict:
        """What a run may ask of this model: languages, tasks, whether it writes timestamps."""
        english_only = self.is_multilingual is False or not self.lang_to_id
        return {"languages": () if english_only else tuple(sorted(t.strip("<|>") for t in self.lang_to_id)),
                "tasks": () if self.is_multilingual is False else tuple(sorted(self.task_to_id or ())),
                "timestamps": self.timestamp_begin is not None}

    def with_options(self, *, language: str | None = None, task: str | None = None, timestamps: bool = False,
                     num_beams: int = 1) -> "WhisperRules":
        """These rules with a named language and task, timestamps and beams, checked as transformers' generate
        checks them (a CheckpointError in one line otherwise)."""
        if self.is_multilingual is False and (language is not None or task is not None):
            raise CheckpointError("this model is English-only (generation_config.json: is_multilingual false); "
                                  "it takes no language or task")
        if language is not None:
            if not isinstance(language, str) or not language.strip():
                raise CheckpointError(f"a language is a code such as 'fr' (got {language!r})")
            self.language_id(language)
        if task is not None:
            if task not in TASKS:
                raise CheckpointError(f"task {task!r} is not one of {', '.join(TASKS)}")
            if task not in (self.task_to_id or {}):
                raise CheckpointError(f"this model has no {task} token (generation_config.json: task_to_id "
                                      f"{sorted(self.task_to_id or {})}); it takes no task {task!r}")
        if timestamps and self.timestamp_begin is None:
            raise CheckpointError("this model writes no timestamps (no timestamp tokens after <|notimestamps|> "
                                  "in its vocabulary)")
        if isinstance(num_beams, bool) or not isinstance(num_beams, int) or not 1 <= num_beams <= MAX_BEAMS:
            raise CheckpointError(f"beams must be a whole number from 1 to {MAX_BEAMS} (got {num_beams!r})")
        return replace(self, language=self.language if language is None else language.strip(),
                       task=self.task if task is None else task, timestamps=bool(timestamps), num_beams=num_beams)

    def language_id(self, language: str | None) -> int | None:
        """The id of ``language`` ("fr" or "<|fr|>"), None for None; a CheckpointError when the model lacks it."""
        if language is None:
            return None
        if not self.lang_to_id:
            raise CheckpointError(f"this model is English-only (no lang_to_id in generation_config.json); "
                                  f"it takes no language {language!r}")
        code = language.strip().lower()
        tok = code if code.startswith("<|") else f"<|{code}|>"
        if tok not in self.lang_to_id:
            known = ", ".join(t.strip("<|>") for t in sorted(self.lang_to_id)[:12])
            raise CheckpointError(f"language {language!r} is not one this model knows ({known}"
                                  f"{' ...' if len(self.lang_to_id) > 12 else ''})")
        return int(self.lang_to_id[tok])


def _id_list(value, what: str, vocab: int) -> tuple[int, ...]:
    vals = value if isinstance(value, list) else [value]
    if not all(isinstance(v, int) and not isinstance(v, bool) and 0 <= v < vocab for v in vals):
        raise CheckpointError(f"generation_config.json: {what} must be token ids below {vocab} (got {value!r})")
    return tuple(vals)


def _id_map(value, what: str, vocab: int) -> dict | None:
    if value is None:
        return None
    if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
        raise CheckpointError(f"generation_config.json: {what} must map names to token ids")
    _id_list(list(value.values()), what, vocab)
    return dict(value)


def read_whisper_rules(folder: Path, spec: WhisperSpec, raw_config: dict) -> WhisperRules:
    """The rules of ``generation_config.json`` (absent: the same fields of config.json, as transformers
    builds a generation config from the model's)."""
    path = Path(folder) / "generation_config.json"
    cfg = read_json(path, "generation_config.json") if path.is_file() else dict(raw_config)
    V = spec.vocab_size
    start = cfg.get("decoder_start_token_id", spec.decoder_start_token_id)
    start = _id_list(start, "decoder_start_token_id", V)[0]
    forced = []
    fdi = cfg.get("forced_decoder_ids")
    if fdi is not None:
        if not isinstance(fdi, list) or not all(isinstance(p, list) and len(p) == 2 for p in fdi):
            raise CheckpointError("generation_config.json: forced_decoder_ids must be [position, id] pairs")
        for i, (pos, tok) in enumerate(fdi, start=1):
            if pos != i:
                raise CheckpointError(f"generation_config.json: forced_decoder_ids {fdi} do not follow Whisper's "
                                      "prompt (positions 1, 2, ... in order)")
            forced.append(None if tok is None else _id_list(tok, "forced_decoder_ids", V)[0])
    eos = cfg.get("eos_token_id", spec.eos_token_id)
    lang, task = cfg.get("language"), cfg.get("task")
    for key, v in (("language", lang), ("task", task)):
        if v is not None and not isinstance(v, str):
            raise CheckpointError(f"generation_config.json: {key} must be a name (got {v!r})")
    tasks = _id_map(cfg.get("task_to_id"), "task_to_id", V)
    if task is not None and task not in (tasks or {}):
        raise CheckpointError(f"generation_config.json: task {task!r} is not in task_to_id")
    nts = cfg.get("no_timestamps_token_id")
    length = cfg.get("max_length", NO_LENGTH_DEFAULT)
    if isinstance(length, bool) or not isinstance(length, int) or length < 1:
        raise CheckpointError(f"generation_config.json: max_length must be a whole number >= 1 (got {length!r})")
    multi = cfg.get("is_multilingual")
    if multi is not None and not isinstance(multi, bool):
        raise CheckpointError(f"generation_config.json: is_multilingual must be true or false (got {multi!r})")
    mit = cfg.get("max_initial_timestamp_index")
    if mit is not None and (isinstance(mit, bool) or not isinstance(mit, int) or mit < 0):
        raise CheckpointError(f"generation_config.json: max_initial_timestamp_index must be a whole number >= 0 "
                              f"(got {mit!r})")
    early = cfg.get("early_stopping", False)
    if early not in (True, False, "never"):
        raise CheckpointError(f"generation_config.json: early_stopping must be true, false or \"never\" "
                              f"(got {early!r})")
    lp = cfg.get("length_penalty", 1.0)
    if isinstance(lp, bool) or not isinstance(lp, (int, float)):
        raise CheckpointError(f"generation_config.json: length_penalty must be a number (got {lp!r})")
    return WhisperRules(
        is_multilingual=multi, vocab_size=V, max_initial_timestamp_index=mit, early_stopping=early,
        length_penalty=float(lp), pad=None if cfg.get("pad_token_id") is None else _id_list(
            cfg["pad_token_id"], "pad_token_id", V)[0],
        start=start, forced=tuple(forced), lang_to_id=_id_map(cfg.get("lang_to_id"), "lang_to_id", V),
        task_to_id=tasks, language=lang, task=task,
        no_timestamps=None if nts is None else _id_list(nts, "no_timestamps_token_id", V)[0],
        suppress=_id_list(cfg.get("suppress_tokens") or [], "suppress_tokens", V),
        begin_suppress=_id_list(cfg.get("begin_suppress_tokens") or [], "begin_suppress_tokens", V),
        eos_ids=() if eos is None else _id_list(eos, "eos_token_id", V), max_length=length)
