"""``attnviz-cli model inspect|generate MODEL --audio A`` on Whisper: the audio through the encoder and a
text through the decoder, every map written.

* ``inspect --audio A --target TEXT``: teacher-forced, the decoder ids the model's decoder prompt (start of
  transcript, language, task, no timestamps, as its generation_config.json says) then the target's tokens;
* ``inspect --audio A`` (no ``--target``) and ``generate --audio A``: the model's own greedy transcript.

The .npz holds ``decoder_ids``, ``decoder_tokens``, ``target_ids`` (what each decoder row predicts),
``encoder_attentions`` (layers, heads, P, P), ``decoder_attentions`` (layers, heads, T_dec, T_dec),
``cross_attentions`` (layers, heads, T_dec, P), ``frame_times`` (P,) the second each encoder frame starts,
``input_features`` (n_mels, 2 P) the log-mel spectrogram, ``duration`` (seconds of audio given) and
``prompt_length``; a transcript adds ``generated`` (the new tokens, without the prompt). No ``encoder_ids``:
the encoder reads audio, not tokens.
"""

from __future__ import annotations

import numpy as np

from attnviz.cli import CliError


def add_audio_argument(parser) -> None:
    """``--audio A`` on a parser whose ``--text`` becomes optional (Whisper reads audio instead)."""
    for action in parser._actions:  # argparse keeps no public handle on an added argument
        if "--text" in action.option_strings:
            action.required = False
    parser.add_argument("--audio", type=str, metavar="A",
                        help="Whisper: an audio file (WAV, FLAC, OGG ...; any rate and channels: averaged to mono, "
                             "resampled to 16 kHz)")


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
            raise CliError(f"--{flag} is not for Whisper; {ckpt.name} transcribes greedily")


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
        if args.target is not None:
            a = run_whisper(ckpt, clip.samples, args.target, dtype=args.dtype, kernel=args.kernel)
            out, line = _arrays(a), f"decoder {len(a.decoder_ids)} tokens: {' '.join(map(repr, a.decoder_tokens[:40]))}"
        else:
            res = generate_whisper(ckpt, clip.samples, dtype=args.dtype, kernel=args.kernel)
            a = res.attention
            out = _arrays(a) | {"generated": res.generated}
            line = _transcript_line(res)
    except CheckpointError as exc:
        raise CliError(str(exc)) from None
    write_npz(args.npz, out)
    _report(ckpt, clip, a, args.npz)
    print(line)
    return 0


def _transcript_line(res) -> str:
    how = "end of text" if res.finished else "length"
    return f"{len(res.generated)} new tokens ({how}; greedy): {res.text!r}"


def generate_audio(ckpt, args) -> int:
    """``model generate --audio A`` on a Whisper checkpoint: its greedy transcript (``--max-new-tokens``)."""
    from attnviz.checkpoints import CheckpointError
    from attnviz.checkpoints.whisper import generate_whisper
    from attnviz.cli.npz_out import write_npz

    if ckpt.kind != "whisper":
        raise CliError(f"--audio is for Whisper speech models; {ckpt.name} reads text")
    _refuse_other_flags(ckpt, args)
    clip = _clip(ckpt, args.audio)
    try:
        res = generate_whisper(ckpt, clip.samples, max_new_tokens=args.max_new_tokens)
    except CheckpointError as exc:
        raise CliError(str(exc)) from None
    a = res.attention
    write_npz(args.npz, _arrays(a) | {"generated": res.generated, "ids": np.concatenate(
        [a.decoder_ids, res.generated[-1:]]).astype(np.int64)})
    _report(ckpt, clip, a, args.npz)
    print(_transcript_line(res))
    return 0
