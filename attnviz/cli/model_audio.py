"""``attnviz-cli model inspect|generate MODEL --audio A`` on Whisper: the audio through the encoder and a
text through the decoder, every map written.

* ``inspect --audio A --target TEXT``: teacher-forced, the decoder ids the model's decoder prompt (start of
  transcript, language, task, no timestamps, as its generation_config.json says) then the target's tokens;
* ``inspect --audio A`` (no ``--target``) and ``generate --audio A``: the model's own transcript.

``--language XX`` and ``--task transcribe|translate`` go into the decoder prompt as transformers' generate puts
them (an English-only model takes neither); ``--timestamps`` writes timestamp tokens (the prompt without
<|notimestamps|>) and prints the segments; ``--beams N`` searches with N beams instead of greedily.

The .npz holds ``decoder_ids``, ``decoder_tokens``, ``target_ids`` (what each decoder row predicts),
``encoder_attentions`` (layers, heads, P, P), ``decoder_attentions`` (layers, heads, T_dec, T_dec),
``cross_attentions`` (layers, heads, T_dec, P), ``frame_times`` (P,) the second each encoder frame starts,
``input_features`` (n_mels, 2 P) the log-mel spectrogram, ``duration`` (seconds of audio given) and
``prompt_length``; a transcript adds ``generated`` (the first window's new tokens, without the prompt),
``sequences`` (what transformers' generate returns: every window's written tokens, the end of text taken off)
and the segments: ``segment_start``, ``segment_end`` (seconds), ``segment_length`` (tokens of each, in
``sequences`` order) and ``segment_text``. No ``encoder_ids``: the encoder reads audio, not tokens.
"""

from __future__ import annotations

import numpy as np

from attnviz.cli import CliError


def add_audio_argument(parser) -> None:
    """``--audio A`` on a parser whose ``--text`` becomes optional (Whisper reads audio instead), and the
    options of a Whisper transcript."""
    for action in parser._actions:  # argparse keeps no public handle on an added argument
        if "--text" in action.option_strings:
            action.required = False
    parser.add_argument("--audio", type=str, metavar="A",
                        help="Whisper: an audio file (WAV, FLAC, OGG ...; any rate and channels: averaged to mono, "
                             "resampled to 16 kHz)")
    add_whisper_options(parser)


def add_whisper_options(parser) -> None:
    """``--language``, ``--task``, ``--timestamps`` and ``--beams`` (Whisper only)."""
    parser.add_argument("--language", metavar="XX",
                        help="Whisper (multilingual): the spoken language's code (en, fr, de ...) instead of "
                             "detecting it")
    parser.add_argument("--task", metavar="TASK",
                        help="Whisper (multilingual): transcribe (the default once a language is named) or translate "
                             "(into English)")
    parser.add_argument("--timestamps", action="store_true",
                        help="Whisper: write timestamp tokens and print the segments (start, end, text)")
    parser.add_argument("--beams", type=int, default=1, metavar="N",
                        help="Whisper: beam search over N beams (default 1: greedy)")


def refuse_whisper_options(ckpt, args) -> None:
    """One line for a Whisper option given to another model (they would be ignored)."""
    for flag in ("language", "task"):
        if getattr(args, flag, None) is not None:
            raise CliError(f"--{flag} is for Whisper speech models; {ckpt.name} is not one")
    if getattr(args, "timestamps", False) or getattr(args, "beams", 1) != 1:
        raise CliError(f"--timestamps and --beams are for Whisper speech models; {ckpt.name} is not one")


def _options(args) -> dict:
    beams = getattr(args, "beams", 1)
    if beams is None or beams < 1:
        raise CliError(f"--beams must be 1 or more (got {beams})")
    return {"language": getattr(args, "language", None), "task": getattr(args, "task", None),
            "timestamps": bool(getattr(args, "timestamps", False)), "beams": beams}


def _refuse_other_flags(ckpt, args) -> None:
    if getattr(args, "text", None) is not None or getattr(args, "image", None):
        raise CliError(f"{ckpt.name} is a Whisper speech model: it reads --audio, not --text or --image "
                       "(a text for its decoder goes in --target)")
    if getattr(args, "audio", None) is None:
        raise CliError(f"{ckpt.name} is a Whisper speech model: give the audio as --audio FILE")
    for flag in ("suffix", "state", "layer", "head", "lens"):
        if getattr(args, flag, None) is not None:
            raise CliError(f"--{flag} is not for Whisper; {ckpt.name} writes every map whole")
    for flag in ("chat", "sample"):
        if getattr(args, flag, False):
            raise CliError(f"--{flag} is not for Whisper; {ckpt.name} transcribes greedily or with --beams")


def _clip(ckpt, path: str):
    from attnviz.checkpoints import CheckpointError
    from attnviz.checkpoints.whisper import read_clip

    try:
        return read_clip(path, ckpt)
    except CheckpointError as exc:
        raise CliError(f"cannot read audio {path}: {exc}") from None


def _arrays(a) -> dict:
    return {"decoder_ids": a.decoder_ids, "decoder_tokens": np.array(a.decoder_tokens, dtype=str),
            "target_ids": a.target_ids, "encoder_attentions": a.encoder_attentions,
            "decoder_attentions": a.decoder_attentions, "cross_attentions": a.cross_attentions,
            "frame_times": a.frame_times, "input_features": a.features, "duration": np.float64(a.duration),
            "prompt_length": np.int64(a.prompt_length)}


def _transcript_arrays(res) -> dict:
    segs = res.segments
    return {"generated": res.generated, "sequences": res.sequences,
            "segment_start": np.array([g.start for g in segs], dtype=np.float64),
            "segment_end": np.array([g.end for g in segs], dtype=np.float64),
            "segment_length": np.array([len(g.ids) for g in segs], dtype=np.int64),
            "segment_text": np.array([g.text for g in segs], dtype=str)}


def _print_transcript(res) -> None:
    print(_transcript_line(res))
    print("ids:", " ".join(map(str, res.sequences.tolist())))
    if res.timestamps:
        for g in res.segments:
            print(f"[{g.start:7.2f} -> {g.end:7.2f}] {g.text!r}")


def _report(ckpt, clip, a, npz) -> None:
    print(ckpt.describe())
    print(f"audio: {clip.describe()}; {a.audio_frames} of {len(a.frame_times)} encoder frames "
          f"({a.frame_seconds * 1000:g} ms each) hold it, the rest the window's silence")
    for note in a.notes:
        print(note)
    L, nh, Td, P = a.cross_attentions.shape
    print(f"cross_attentions ({L}, {nh}, {Td}, {P}), encoder ({a.encoder_attentions.shape[0]} layers, {P} frames), "
          f"decoder ({a.decoder_attentions.shape[0]} layers) -> {npz}")


def inspect_audio(ckpt, args) -> int:
    """``model inspect`` on a Whisper checkpoint (teacher-forced with --target, else its own transcript)."""
    from attnviz.checkpoints import CheckpointError
    from attnviz.checkpoints.whisper import generate_whisper, run_whisper
    from attnviz.cli.npz_out import write_npz

    _refuse_other_flags(ckpt, args)
    clip = _clip(ckpt, args.audio)
    try:
        opts = _options(args)
        res = None
        if args.target is not None:
            if opts["beams"] != 1:
                raise CliError("--beams is for a transcript; with --target the decoder reads the target's tokens")
            opts.pop("beams")
            a = run_whisper(ckpt, clip.samples, args.target, dtype=args.dtype, kernel=args.kernel, **opts)
            out = _arrays(a)
        else:
            res = generate_whisper(ckpt, clip.samples, dtype=args.dtype, kernel=args.kernel, **opts)
            a = res.attention
            out = _arrays(a) | _transcript_arrays(res)
    except CheckpointError as exc:
        raise CliError(str(exc)) from None
    write_npz(args.npz, out)
    _report(ckpt, clip, a, args.npz)
    if res is None:
        print(f"decoder {len(a.decoder_ids)} tokens: {' '.join(map(repr, a.decoder_tokens[:40]))}")
    else:
        _print_transcript(res)
    return 0


def _transcript_line(res) -> str:
    how = "end of text" if res.finished else "length"
    search = "greedy" if res.beams == 1 else f"{res.beams} beams"
    windows = "" if res.windows == 1 else f", {res.windows} windows"
    return f"{len(res.generated)} new tokens ({how}; {search}{windows}): {res.text!r}"


def generate_audio(ckpt, args) -> int:
    """``model generate --audio A`` on a Whisper checkpoint: its transcript (``--max-new-tokens`` a window)."""
    from attnviz.checkpoints import CheckpointError
    from attnviz.checkpoints.whisper import generate_whisper
    from attnviz.cli.npz_out import write_npz

    if ckpt.kind != "whisper":
        raise CliError(f"--audio is for Whisper speech models; {ckpt.name} reads text")
    _refuse_other_flags(ckpt, args)
    clip = _clip(ckpt, args.audio)
    try:
        res = generate_whisper(ckpt, clip.samples, max_new_tokens=args.max_new_tokens, **_options(args))
    except CheckpointError as exc:
        raise CliError(str(exc)) from None
    a = res.attention
    write_npz(args.npz, _arrays(a) | _transcript_arrays(res) | {"ids": np.concatenate(
        [a.decoder_ids, res.generated[-1:]]).astype(np.int64)})
    _report(ckpt, clip, a, args.npz)
    _print_transcript(res)
    return 0
