"""``attnviz-cli model ablate`` and ``model patch``: interventions on a decoder LLM, their logits written.

``ablate MODEL --text T --heads L.H[,L.H...] [--mode zero|mean] --npz OUT`` writes ``logits_before`` and
``logits_after`` (the last position, vocabulary-sized), ``attentions_before``, ``attentions_after`` and
``kl`` (nats). ``patch MODEL --clean T1 --corrupted T2 --layer L --head H --npz OUT`` writes
``logits_clean``, ``logits_corrupted`` and ``logits_patched`` (head L.H's output on the corrupted text
taken from the clean one; both texts must give the same number of tokens).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from attnviz.cli import CliError


def register(sub) -> None:
    """Add ``model ablate`` and ``model patch`` to the ``model`` sub-commands."""
    ab = sub.add_parser("ablate", help="ablate attention heads of a decoder LLM and save the logits before and after",
                        description="Zero- or mean-ablate heads (their output before the output projection) and "
                                    "write the last position's logits before and after, and every map.")
    ab.add_argument("model_dir", metavar="MODEL", help="checkpoint folder, a ready model's name, or a cached repo id")
    ab.add_argument("--text", required=True, help="the input text")
    ab.add_argument("--heads", required=True, metavar="L.H[,L.H...]", help="heads to ablate, e.g. 0.3,2.1")
    ab.add_argument("--mode", choices=("zero", "mean"), default="zero",
                    help="zero: the head's output set to 0; mean: to its mean over the positions (default zero)")
    ab.add_argument("--npz", type=Path, required=True, metavar="OUT", help="output .npz file")
    ab.set_defaults(func=_cmd_ablate)

    pa = sub.add_parser("patch", help="patch one head's output from a clean text into a corrupted one",
                        description="Run the corrupted text with head L.H's output taken from the clean text's "
                                    "pass; write the three passes' last-position logits.")
    pa.add_argument("model_dir", metavar="MODEL", help="checkpoint folder, a ready model's name, or a cached repo id")
    pa.add_argument("--clean", required=True, help="the clean text")
    pa.add_argument("--corrupted", required=True, help="the corrupted text (the same number of tokens)")
    pa.add_argument("--layer", type=int, required=True)
    pa.add_argument("--head", type=int, required=True)
    pa.add_argument("--npz", type=Path, required=True, metavar="OUT", help="output .npz file")
    pa.set_defaults(func=_cmd_patch)


def _load(model_dir: str, *texts: str):
    from attnviz.checkpoints import CheckpointError, load_checkpoint
    from attnviz.checkpoints.decoder_text import encode
    from attnviz.checkpoints.hub_cache import resolve
    from attnviz.sources.errors import SourceError

    try:
        folder, name = resolve(model_dir)
        ckpt = load_checkpoint(folder, name=name)
    except CheckpointError as exc:
        raise CliError(str(exc)) from None
    if ckpt.kind != "decoder":
        raise CliError(f"{ckpt.name} is a {ckpt.config.model_type} model; interventions run on decoder LLMs "
                       "(Llama, Mistral, Qwen2, Qwen3, Gemma, Gemma 2, Gemma 3)")
    ids = []
    for text in texts:
        try:
            ids.append(encode(ckpt.tokenizer, ckpt.special_tokens, text, ckpt.config.max_positions or 1 << 20).ids)
        except SourceError as exc:
            raise CliError(f"{ckpt.name}: {exc}") from None
    return ckpt, ids


def _top(tok, logits: np.ndarray, k: int = 5) -> str:
    p = np.exp(logits - logits.max())
    p /= p.sum()
    top = np.argsort(-p, kind="stable")[:k]
    return ", ".join(f"{tok.id_to_piece(int(t))!r} {p[t]:.3f}" for t in top)


def _cmd_ablate(args) -> int:
    from attnviz.checkpoints import CheckpointError
    from attnviz.checkpoints.interventions import ablate, kl_divergence, parse_heads
    from attnviz.cli.npz_out import write_npz

    ckpt, (ids,) = _load(args.model_dir, args.text)
    try:
        heads = parse_heads(ckpt.config, args.heads)
        before, after = ablate(ckpt.config, ckpt.weights, ids, heads, args.mode)
    except CheckpointError as exc:
        raise CliError(str(exc)) from None
    kl = kl_divergence(before.logits, after.logits)
    write_npz(args.npz, {"ids": ids, "heads": np.array(heads, dtype=np.int64), "logits_before": before.logits,
                         "logits_after": after.logits, "attentions_before": before.attentions,
                         "attentions_after": after.attentions, "kl": np.float64(kl)})
    print(ckpt.describe())
    print(f"{args.mode}-ablated {', '.join(f'{a}.{b}' for a, b in heads)} over {len(ids)} tokens; KL(before || after) "
          f"{kl:.4g} nats -> {args.npz}")
    print(f"before: {_top(ckpt.tokenizer, before.logits)}")
    print(f"after:  {_top(ckpt.tokenizer, after.logits)}")
    return 0


def _cmd_patch(args) -> int:
    from attnviz.checkpoints import CheckpointError
    from attnviz.checkpoints.interventions import patch_head
    from attnviz.cli.npz_out import write_npz

    ckpt, (clean_ids, corrupted_ids) = _load(args.model_dir, args.clean, args.corrupted)
    try:
        clean, corrupted, patched = patch_head(ckpt.config, ckpt.weights, clean_ids, corrupted_ids, args.layer,
                                               args.head)
    except CheckpointError as exc:
        raise CliError(str(exc)) from None
    write_npz(args.npz, {"clean_ids": clean_ids, "corrupted_ids": corrupted_ids, "logits_clean": clean.logits,
                         "logits_corrupted": corrupted.logits, "logits_patched": patched.logits})
    print(ckpt.describe())
    print(f"head {args.layer}.{args.head} patched from the clean text into the corrupted one -> {args.npz}")
    for what, p in (("clean", clean), ("corrupted", corrupted), ("patched", patched)):
        print(f"{what + ':':11} {_top(ckpt.tokenizer, p.logits)}")
    return 0
