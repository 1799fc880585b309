"""``attnviz-cli model generate``: a decoder LLM continues a text, greedy or sampled over a key/value
cache, and every step's attention rows are written with the ids.

The .npz holds ``ids`` (prompt and generated), ``generated`` (the new tokens only), ``attentions``
(layers, heads, T, T) of the whole final sequence as the cached steps computed them, ``tokens`` (the
pieces), ``top_ids`` / ``top_probs`` (new tokens, 10): the most probable next tokens at every step.
A vision-language model (PaliGemma, LLaVA, Idefics3, SmolVLM) reads ``--image`` (once per picture) with the
prompt: the image and prompt prefix is computed once, then each new token over the cache; ``ids`` and
``attentions`` then hold the image tokens as the processor expands them, and ``is_image`` marks them.
An encoder-decoder (MarianMT, BART, mBART, T5) translates greedily instead: ``generated``, ``encoder_ids``,
``decoder_ids`` (the decoder start token first), ``encoder_attentions``, ``decoder_attentions`` and
``cross_attentions`` (layers, heads, T_dec, T_enc) of the final sequence.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from attnviz.cli import CliError


def register(sub) -> None:
    """Add ``model generate`` to the ``model`` sub-commands."""
    gen = sub.add_parser("generate", help="continue a text with a decoder LLM and save every step's attention",
                         description="Generate with a decoder LLM, or a vision-language model reading --image "
                                     "(greedy, or seeded sampling) over a key/value cache; write ids, the new tokens "
                                     "and every attention row to a .npz file.")
    gen.add_argument("model_dir", metavar="MODEL", help="checkpoint folder, a ready model's name, or a cached repo id")
    gen.add_argument("--text", help="the prompt (every model but Whisper)")
    gen.add_argument("--audio", metavar="A",
                     help="Whisper: an audio file to transcribe greedily (WAV, FLAC, OGG ...; any rate and channels: "
                          "averaged to mono, resampled to 16 kHz)")
    gen.add_argument("--image", type=Path, action="append", metavar="IMAGE",
                     help="a picture for a vision-language model to read with the prompt (repeat for several)")
    gen.add_argument("--max-new-tokens", type=int, default=32, metavar="N", help="stop after N new tokens (default 32)")
    gen.add_argument("--sample", action="store_true", help="draw each token (default: the most probable one)")
    gen.add_argument("--seed", type=int, default=0, help="seed of the draws (with --sample; default 0)")
    gen.add_argument("--temperature", type=float, default=1.0, help="with --sample: logits divided by it (default 1)")
    gen.add_argument("--top-k", type=int, default=0, help="with --sample: keep the K most probable tokens (0: all)")
    gen.add_argument("--top-p", type=float, default=1.0,
                     help="with --sample: keep the most probable tokens whose probabilities sum to P (1: all)")
    gen.add_argument("--lens", type=int, metavar="POSITION",
                     help="also write the logit lens at this position of the final sequence (negative: from the "
                          "end): each layer's top 10 next tokens as lens_top_ids / lens_top_probs (layers + 1, 10)")
    gen.add_argument("--chat", action="store_true", help="read the text as one user message in the chat template")
    gen.add_argument("--npz", type=Path, required=True, metavar="OUT", help="output .npz file")
    from attnviz.cli.model_audio import add_whisper_options

    add_whisper_options(gen)
    gen.set_defaults(func=_cmd_generate)


def eos_ids(ckpt) -> list[int]:
    """End-of-sequence ids: generation_config.json's (a number or a list), else config.json's, else the
    tokenizer's EOS (:func:`attnviz.checkpoints.generation_study.eos_ids`, which the window uses too)."""
    from attnviz.checkpoints.generation_study import eos_ids as read

    return read(ckpt)


def _cmd_generate(args) -> int:
    from attnviz.checkpoints import CheckpointError, load_checkpoint
    from attnviz.checkpoints.decoder_text import encode
    from attnviz.checkpoints.generate import Sampling, generate, logit_lens
    from attnviz.checkpoints.hub_cache import resolve
    from attnviz.cli.npz_out import write_npz
    from attnviz.sources.errors import SourceError

    try:
        folder, name = resolve(args.model_dir)
    except CheckpointError as exc:
        raise CliError(str(exc)) from None
    if not args.sample and (args.temperature != 1.0 or args.top_k or args.top_p != 1.0 or args.seed):
        raise CliError("--temperature, --top-k, --top-p and --seed shape sampling: add --sample")
    try:
        ckpt = load_checkpoint(folder, name=name)
        if ckpt.kind == "whisper" or args.audio is not None:
            from attnviz.cli.model_audio import generate_audio

            if args.sample:
                raise CliError("--sample is for text models: a Whisper transcript is written greedily")
            return generate_audio(ckpt, args)
        from attnviz.cli.model_audio import refuse_whisper_options

        refuse_whisper_options(ckpt, args)
        if args.text is None:
            raise CliError(f"give the prompt of {ckpt.name} as --text")
        if ckpt.kind == "seq2seq":
            if args.image:
                raise CliError(f"{ckpt.name} is an encoder-decoder of text; --image needs a vision-language model")
            return _generate_seq2seq(ckpt, args)
        if ckpt.kind == "vlm":
            return _generate_vlm(ckpt, args)
        if args.image:
            raise CliError(f"{ckpt.name} is a {ckpt.config.model_type} model of text only; --image needs a "
                           "vision-language model (PaliGemma, LLaVA, Idefics3, SmolVLM)")
        if ckpt.kind != "decoder":
            raise CliError(f"{ckpt.name} is a {ckpt.config.model_type} model; generate runs decoder LLMs "
                           "(Llama, Mistral, Qwen2, Qwen3, Gemma, Gemma 2, Gemma 3)")
        how = Sampling(sample=args.sample, temperature=args.temperature, top_k=args.top_k, top_p=args.top_p,
                       seed=args.seed)
        c = ckpt.config
        try:  # the prompt within the context; generate() says when the new tokens do not fit after it
            toks = encode(ckpt.tokenizer, ckpt.special_tokens, args.text, c.max_positions or 1 << 20, chat=args.chat,
                          model=ckpt.name)
        except SourceError as exc:
            raise CliError(f"{ckpt.name}: {exc}") from None
        if len(toks) == 0:
            raise CliError("the prompt gives no tokens; give some text")
        res = generate(c, ckpt.weights, toks.ids, max_new_tokens=args.max_new_tokens, how=how, eos_ids=eos_ids(ckpt))
        lens = None if args.lens is None else logit_lens(c, ckpt.weights, res.ids, args.lens)
    except CheckpointError as exc:
        raise CliError(str(exc)) from None
    tok = ckpt.tokenizer
    pieces = list(toks.pieces) + [tok.id_to_piece(int(t)) for t in res.generated]
    out = {"ids": res.ids, "generated": res.generated, "attentions": res.attentions,
           "tokens": np.array(pieces, dtype=str), "top_ids": res.top_ids, "top_probs": res.top_probs}
    if lens is not None:
        out.update(lens_top_ids=lens.top_ids, lens_top_probs=lens.top_probs, lens_position=np.int64(lens.position))
    write_npz(args.npz, out)
    text = tok.tokenizer.decode([int(t) for t in res.generated], skip_special_tokens=True)
    L, nh, T, _ = res.attentions.shape
    print(ckpt.describe())
    print(f"{res.n_prompt} prompt tokens + {len(res.generated)} new ({res.stopped}; "
          f"{'sampled, seed ' + str(args.seed) if args.sample else 'greedy'}): {text!r}")
    print(f"attentions ({L}, {nh}, {T}, {T}) -> {args.npz}")
    if lens is not None:
        words = [repr(tok.id_to_piece(int(t))) for t in lens.top_ids[:, 0]]
        print(f"logit lens at token {lens.position} (embedding, then each layer): {' '.join(words)}")
    return 0


def read_picture(path: Path) -> np.ndarray:
    """(H, W, 3) uint8 of an image file through the sources layer's hardened reader, transparency over white
    as ``model inspect`` reads a vision-language model's picture."""
    from attnviz.sources.errors import SourceError
    from attnviz.sources.image import load_image

    if not path.is_file():
        raise CliError(f"image not found: {path}")
    try:
        return load_image(path, alpha="white")
    except SourceError as exc:
        raise CliError(f"cannot read image {path}: {exc}") from None


def _generate_vlm(ckpt, args) -> int:
    from attnviz.checkpoints import CheckpointError
    from attnviz.checkpoints.generate import Sampling, generate_vlm, vlm_prefix
    from attnviz.cli.npz_out import write_npz

    if args.lens is not None or args.chat:
        raise CliError(f"{ckpt.name} is a vision-language model: its prompt is written as the family says "
                       "(no --chat), and --lens runs on text decoders")
    images = [read_picture(p) for p in args.image or ()]
    how = Sampling(sample=args.sample, temperature=args.temperature, top_k=args.top_k, top_p=args.top_p,
                   seed=args.seed)
    try:
        prefix = vlm_prefix(ckpt, images, args.text)
        res = generate_vlm(ckpt, images, args.text, max_new_tokens=args.max_new_tokens, how=how,
                           eos_ids=eos_ids(ckpt), prefix=prefix)
    except CheckpointError as exc:
        raise CliError(str(exc)) from None
    tok = ckpt.tokenizer
    pieces = list(prefix.pieces) + [tok.id_to_piece(int(t)) for t in res.generated]
    is_image = np.concatenate([prefix.is_image, np.zeros(len(res.generated), dtype=bool)])
    write_npz(args.npz, {"ids": res.ids, "generated": res.generated, "attentions": res.attentions,
                         "tokens": np.array(pieces, dtype=str), "is_image": is_image, "top_ids": res.top_ids,
                         "top_probs": res.top_probs})
    text = tok.tokenizer.decode([int(t) for t in res.generated], skip_special_tokens=True)
    L, nh, T, _ = res.attentions.shape
    print(ckpt.describe())
    print(f"{res.n_prompt} prompt tokens ({int(prefix.is_image.sum())} of them image tokens) + "
          f"{len(res.generated)} new ({res.stopped}; {'sampled, seed ' + str(args.seed) if args.sample else 'greedy'}): "
          f"{text!r}")
    print(f"attentions ({L}, {nh}, {T}, {T}) -> {args.npz}")
    return 0


def _generate_seq2seq(ckpt, args) -> int:
    from attnviz.checkpoints.seq2seq_generate import generate_seq2seq
    from attnviz.cli.npz_out import write_npz

    if args.sample or args.lens is not None or args.chat:
        raise CliError(f"{ckpt.name} is an encoder-decoder: it translates greedily (no --sample, --lens or --chat)")
    res = generate_seq2seq(ckpt, args.text, max_new_tokens=args.max_new_tokens)
    a = res.attention
    write_npz(args.npz, {"generated": res.generated, "encoder_ids": a.encoder_ids, "decoder_ids": a.decoder_ids,
                         "encoder_attentions": a.encoder_attentions, "decoder_attentions": a.decoder_attentions,
                         "cross_attentions": a.cross_attentions,
                         "encoder_tokens": np.array(a.encoder_tokens, dtype=str),
                         "decoder_tokens": np.array(a.decoder_tokens, dtype=str)})
    print(ckpt.describe() if hasattr(ckpt, "describe") else ckpt.name)
    print(f"{len(a.encoder_ids)} source tokens -> {len(res.generated)} new ({'end of sequence' if res.finished else 'length'}; "
          f"greedy): {res.text!r}")
    L, nh, Td, Te = a.cross_attentions.shape
    print(f"cross_attentions ({L}, {nh}, {Td}, {Te}) -> {args.npz}")
    return 0
