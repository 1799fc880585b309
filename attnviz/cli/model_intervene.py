"""``attnviz-cli model ablate`` and ``model patch``: interventions on a decoder LLM (GPT-2 among them), their logits
written; on a vision-language model (PaliGemma, LLaVA, Idefics3, SmolVLM: ``--image PIC --text PROMPT``, or
``--image PIC --clean T1 --corrupted T2``) the language model's over the picture and prompt.

``ablate MODEL --text T --heads L.H[,L.H...] [--mode zero|mean] --npz OUT`` writes ``logits_before`` and
``logits_after`` (the last position, vocabulary-sized), ``attentions_before``, ``attentions_after`` and
``kl`` (nats); on an encoder (``--text``) or a vision model (``--image``) it writes ``hidden_before`` and
``hidden_after`` (the last hidden state), the attentions and ``cosine`` (of the pooled / class-token output
before and after) instead of logits; on an encoder-decoder (MarianMT, BART, mBART, T5; ``--target``, ``--stack
encoder|decoder|cross``) the logits of every decoder row, and on Whisper the same with ``--audio`` for the source
(:mod:`attnviz.cli.model_intervene_whisper`); Swin and SmolVLA policies have their own read-outs
(:mod:`~attnviz.cli.model_intervene_swin`, :mod:`~attnviz.cli.model_intervene_vla`). ``patch MODEL --clean T1 --corrupted T2 --layer L --head H --npz OUT`` writes
``logits_clean``, ``logits_corrupted`` and ``logits_patched`` (head L.H's output on the corrupted text
taken from the clean one; both texts must give the same number of tokens).
``sweep MODEL CORPUS... --out OUT.parquet`` ablates every head in turn over each document of the corpora on
Dask (:mod:`attnviz.corpus.sweep`) and writes one row per (layer, head): ``mean``, ``std``, ``documents``,
``rank``; a progress bar on stderr, Ctrl+C stops it in one line and writes nothing.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from attnviz.cli import CliError
from attnviz.cli.model_intervene_vla import add_vla_arguments

STACKS = ("encoder", "decoder", "cross")  # an encoder-decoder's attentions (intervention_seq2seq.STACKS)
VLA_STACKS = ("vlm", "expert")  # a SmolVLA policy's: the VLM's prefix layers, the action expert's


def register(sub) -> None:
    """Add ``model ablate`` and ``model patch`` to the ``model`` sub-commands."""
    ab = sub.add_parser("ablate", help="ablate attention heads and save the logits (or outputs) before and after",
                        description="Zero- or mean-ablate heads (their output before the output projection) and "
                                    "write the last position's logits before and after, and every map; on an "
                                    "encoder or a vision model, the last hidden state and the pooled output's "
                                    "cosine instead of logits.")
    ab.add_argument("model_dir", metavar="MODEL", help="checkpoint folder, a ready model's name, or a cached repo id")
    ab.add_argument("--text", help="the input text (decoder LLMs, text encoders)")
    ab.add_argument("--image", type=Path, action="append", metavar="IMAGE",
                    help="the input image (vision models: ViT, DeiT, DINOv2, CLIP, SigLIP); vision-language models "
                         "(PaliGemma, LLaVA, Idefics3, SmolVLM) read it with --text, repeated for several pictures")
    ab.add_argument("--heads", required=True, metavar="L.H[,L.H...]", help="heads to ablate, e.g. 0.3,2.1")
    ab.add_argument("--mode", choices=("zero", "mean"), default="zero",
                    help="zero: the head's output set to 0; mean: to its mean over the positions (default zero)")
    ab.add_argument("--means", type=Path, default=None, metavar="SWEEP.parquet",
                    help="with --mode mean: set each head to its mean output over a corpus, as 'model sweep' wrote "
                         "it (its output_mean column), instead of its mean over this text's positions")
    ab.add_argument("--target", default=None, metavar="T",
                    help="encoder-decoders (MarianMT, BART, mBART): the target text teacher-forced through the decoder "
                         "(default: none, the start token only); the logits of every decoder row are written")
    ab.add_argument("--stack", choices=STACKS + VLA_STACKS, default=None,
                    help="encoder-decoders (and Whisper): the attention whose heads are edited: the encoder's "
                         "self-attention, the decoder's self-attention or the cross-attention (default encoder); "
                         "SmolVLA policies: vlm (the VLM's prefix layers, the default) or expert (the action expert)")
    ab.add_argument("--audio", metavar="A", help="Whisper: the audio file (its --target text is teacher-forced)")
    add_vla_arguments(ab)
    ab.add_argument("--npz", type=Path, required=True, metavar="OUT", help="output .npz file")
    ab.set_defaults(func=_cmd_ablate)

    pa = sub.add_parser("patch", help="patch one head's output from a clean text into a corrupted one",
                        description="Run the corrupted text with head L.H's output taken from the clean text's "
                                    "pass; write the three passes' last-position logits.")
    pa.add_argument("model_dir", metavar="MODEL", help="checkpoint folder, a ready model's name, or a cached repo id")
    pa.add_argument("--image", type=Path, action="append", metavar="IMAGE",
                    help="vision-language models: the picture both prompts are about (repeat for several)")
    pa.add_argument("--clean", required=True, help="the clean text (Whisper: the clean audio file)")
    pa.add_argument("--corrupted", required=True,
                    help="the corrupted text, the same number of tokens (Whisper: the corrupted audio file)")
    pa.add_argument("--layer", type=int, required=True)
    pa.add_argument("--head", type=int, required=True)
    pa.add_argument("--target", default=None, metavar="T", help="encoder-decoders: the target text (as for ablate)")
    pa.add_argument("--stack", choices=STACKS + VLA_STACKS, default=None,
                    help="encoder-decoders: the attention of head L.H (default encoder); the clean and corrupted "
                         "texts are sources; SmolVLA policies: vlm or expert")
    add_vla_arguments(pa, patching=True)
    pa.add_argument("--npz", type=Path, required=True, metavar="OUT", help="output .npz file")
    pa.set_defaults(func=_cmd_patch)

    sw = sub.add_parser("sweep", help="rank every head by its effect when ablated, over a corpus (Dask)",
                        description="Ablate every head in turn over each document of the corpora, on a Dask "
                                    "cluster as the corpus command schedules it, and write the effect's mean and "
                                    "standard deviation over the documents per (layer, head) to Parquet, ranked.")
    sw.add_argument("model_dir", metavar="MODEL", help="checkpoint folder, a ready model's name, or a cached repo id")
    sw.add_argument("corpora", nargs="+", type=Path, metavar="CORPUS",
                    help="text files (a document per line), folders of .txt files, .parquet or .jsonl files with "
                         "a 'text' column")
    sw.add_argument("--mode", choices=("zero", "mean"), default="zero",
                    help="zero: the head's output set to 0; mean: to its mean over the document's positions")
    sw.add_argument("--metric", choices=("kl", "logit_diff", "cosine"), default=None,
                    help="decoder LLMs: kl (KL divergence of the last position's next-token distribution, the "
                         "default) or logit_diff (the drop of logit(A) - logit(B), with --tokens); text encoders: "
                         "cosine (1 - cosine of the class token's output; their default)")
    sw.add_argument("--tokens", nargs=2, metavar=("A", "B"), help="the two tokens of logit_diff (a piece of the "
                                                                   "vocabulary, a one-token word, or #ID)")
    sw.add_argument("--scheduler", default="processes", metavar="SCHED",
                    help="threads, processes (a local cluster; default) or tcp://HOST:PORT of a running scheduler")
    sw.add_argument("--workers", type=int, default=None, metavar="N", help="local cluster size (default: the usable cores)")
    sw.add_argument("--batch", type=int, default=4, metavar="N", help="documents per partition (default 4)")
    sw.add_argument("--max-tokens", type=int, default=None, metavar="T",
                    help="documents with more tokens fail instead of running (default: the model's limit)")
    sw.add_argument("--means", type=Path, default=None, metavar="SWEEP.parquet",
                    help="with --mode mean: set each head to its mean output over another sweep's corpus (its "
                         "output_mean column) instead of its mean over each document")
    sw.add_argument("--out", type=Path, required=True, metavar="OUT.parquet",
                    help="output: one row per (layer, head): mean, std, documents, rank, output_mean")
    sw.set_defaults(func=_cmd_sweep)


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
    if ckpt.kind not in ("decoder", "gpt2"):
        family = getattr(getattr(ckpt, "config", None), "model_type", None) or getattr(ckpt, "kind", "other")
        raise CliError(f"{ckpt.name} is a {family} model; these interventions "
                       "run on decoder LLMs (GPT-2, Llama, Mistral, Qwen2, Qwen3, Gemma, Gemma 2, Gemma 3)"
                       + ("" if len(texts) != 1 else " and, for model ablate, on encoders and vision models"))
    ids = []
    for text in texts:
        try:
            if ckpt.kind == "gpt2":
                ids.append(ckpt.tokenizer.encode(text, add_special_tokens=True, max_tokens=ckpt.config.max_tokens).ids)
            else:
                ids.append(encode(ckpt.tokenizer, ckpt.special_tokens, text, ckpt.config.max_positions or 1 << 20).ids)
        except SourceError as exc:
            raise CliError(f"{ckpt.name}: {exc}") from None
    return ckpt, ids


def _top(tok, logits: np.ndarray, k: int = 5) -> str:
    p = np.exp(logits - logits.max())
    p /= p.sum()
    top = np.argsort(-p, kind="stable")[:k]
    return ", ".join(f"{tok.id_to_piece(int(t))!r} {p[t]:.3f}" for t in top)


def _cmd_encoder_ablate(args, means) -> int | None:
    """``model ablate`` on an encoder or a vision model; None when the model is neither."""
    from attnviz.checkpoints import CheckpointError, load_checkpoint
    from attnviz.checkpoints.hub_cache import resolve
    from attnviz.checkpoints.intervention_study import check_means
    from attnviz.checkpoints.interventions import ENCODER_KINDS, Edit, cosine, encoder_run, parse_heads
    from attnviz.cli.npz_out import write_npz
    from attnviz.sources.errors import SourceError

    try:
        folder, name = resolve(args.model_dir)
        ckpt = load_checkpoint(folder, name=name)
    except CheckpointError as exc:
        raise CliError(str(exc)) from None
    if getattr(ckpt, "kind", None) not in ENCODER_KINDS or getattr(ckpt, "config", None) is None:
        return None
    c = ckpt.config
    if c.model_type == "swin":
        from attnviz.cli.model_intervene_swin import cmd_swin

        return cmd_swin(args, ckpt)
    try:
        if ckpt.kind == "vit":
            if args.image is None or args.text is not None:
                raise CliError(f"{ckpt.name} is a {c.model_type} image model: give --image, not --text")
            if len(args.image) != 1:
                raise CliError(f"{ckpt.name} reads one image; {len(args.image)} were given")
            from attnviz.checkpoints.preprocess import preprocess_image
            from attnviz.sources.image import load_image

            if not args.image[0].is_file():
                raise CliError(f"image not found: {args.image[0]}")
            x = preprocess_image(load_image(args.image[0], alpha="drop"), ckpt.image)  # (3, H, W)
        else:
            if args.text is None or args.image is not None:
                raise CliError(f"{ckpt.name} is a {c.model_type} text model: give --text, not --image")
            x = ckpt.tokenizer.encode(args.text, add_special_tokens=True, max_tokens=c.max_tokens).ids
        heads = parse_heads(c, args.heads)
        how = {h: args.mode for h in heads} if means is None else {h: check_means(c, means)[h] for h in heads}
        before = encoder_run(c, ckpt.weights, x)
        after = encoder_run(c, ckpt.weights, x, Edit(ablate=how))
    except SourceError as exc:
        raise CliError(f"{ckpt.name}: {exc}") from None
    except CheckpointError as exc:
        raise CliError(str(exc)) from None
    cos = cosine(before.pooled, after.pooled)
    write_npz(args.npz, {"heads": np.array(heads, dtype=np.int64), "hidden_before": before.hidden,
                         "hidden_after": after.hidden, "attentions_before": before.attentions,
                         "attentions_after": after.attentions, "cosine": np.float64(cos)})
    print(ckpt.describe())
    what = f"{args.mode}-ablated" if means is None else f"set to their means over {args.means}"
    pooled = "class token" if before.n_extra else "mean over the tokens"
    print(f"{what} {', '.join(f'{a}.{b}' for a, b in heads)} over {before.hidden.shape[0]} tokens; cosine of the "
          f"pooled output ({pooled}) before and after {cos:.6f} -> {args.npz}")
    return 0


def _cmd_ablate(args) -> int:
    from attnviz.checkpoints import CheckpointError
    from attnviz.checkpoints.interventions import ablate, kl_divergence, parse_heads
    from attnviz.cli.npz_out import write_npz

    means = _means(args)
    special = _special(args)
    if special is not None:
        return special
    if getattr(args, "audio", None) is not None:
        raise CliError("--audio is for Whisper speech models; "
                       f"{Path(args.model_dir).name} is not one")
    if _vlm(args):
        return _cmd_vlm(args, means)
    if _seq2seq(args):
        return _cmd_seq2seq(args, means)
    done = _cmd_encoder_ablate(args, means)
    if done is not None:
        return done
    if args.text is None or args.image is not None:
        raise CliError("a decoder LLM reads --text (the input text), not --image")
    ckpt, (ids,) = _load(args.model_dir, args.text)
    try:
        heads = parse_heads(ckpt.config, args.heads)
        if means is None:
            before, after = ablate(ckpt.config, ckpt.weights, ids, heads, args.mode)
        else:
            from attnviz.checkpoints.intervention_study import check_means
            from attnviz.checkpoints.interventions import Edit, run

            m = check_means(ckpt.config, means)
            before = run(ckpt.config, ckpt.weights, ids)
            after = run(ckpt.config, ckpt.weights, ids, Edit(ablate={h: m[h] for h in heads}))
    except CheckpointError as exc:
        raise CliError(str(exc)) from None
    kl = kl_divergence(before.logits, after.logits)
    write_npz(args.npz, {"ids": ids, "heads": np.array(heads, dtype=np.int64), "logits_before": before.logits,
                         "logits_after": after.logits, "attentions_before": before.attentions,
                         "attentions_after": after.attentions, "kl": np.float64(kl)})
    print(ckpt.describe())
    how = f"{args.mode}-ablated" if means is None else f"set to their means over {args.means}"
    print(f"{how} {', '.join(f'{a}.{b}' for a, b in heads)} over {len(ids)} tokens; KL(before || after) "
          f"{kl:.4g} nats -> {args.npz}")
    print(f"before: {_top(ckpt.tokenizer, before.logits)}")
    print(f"after:  {_top(ckpt.tokenizer, after.logits)}")
    return 0


def _family(args) -> tuple[Path, str | None, str | None]:
    """(folder, name, model_type) of ``args.model_dir``; model_type None when config.json cannot say (the loader
    then says what is wrong with the folder). The config is read through the guarded JSON reader."""
    from attnviz.checkpoints import CheckpointError
    from attnviz.checkpoints.config import read_json
    from attnviz.checkpoints.hub_cache import resolve

    try:
        folder, name = resolve(args.model_dir)
    except CheckpointError as exc:
        raise CliError(str(exc)) from None
    try:
        family = read_json(Path(folder) / "config.json", "config.json").get("model_type")
    except CheckpointError:
        family = None
    return Path(folder), name, family if isinstance(family, str) else None


def _special(args) -> int | None:
    """A SmolVLA policy or a Whisper checkpoint: its own command's exit code; None for any other model. A robot
    policy's --stack or flags on another model are one line."""
    from attnviz.checkpoints import CheckpointError, load_checkpoint
    from attnviz.checkpoints.config import read_json

    folder, name, family = _family(args)
    try:
        policy = read_json(Path(folder) / "config.json", "config.json").get("type") == "smolvla"
    except CheckpointError:
        policy = False
    if not policy:
        vla_flags = [f"--{f.replace('_', '-')}" for f in ("state", "clean_state") if getattr(args, f, None) is not None]
        if args.stack in VLA_STACKS or vla_flags:
            what = f"--stack {args.stack}" if args.stack in VLA_STACKS else vla_flags[0]
            raise CliError(f"{what} is for SmolVLA robot policies; {name or Path(folder).name} is not one")
    if not policy and family != "whisper":
        return None
    try:
        ckpt = load_checkpoint(folder, name=name)
    except CheckpointError as exc:
        raise CliError(str(exc)) from None
    if policy:
        from attnviz.cli.model_intervene_vla import cmd_vla

        return cmd_vla(args, ckpt)
    if args.stack in VLA_STACKS:
        raise CliError(f"--stack {args.stack} is for SmolVLA robot policies; {ckpt.name} is Whisper: choose "
                       f"{', '.join(STACKS)}")
    from attnviz.cli.model_intervene_whisper import cmd_whisper

    return cmd_whisper(args, ckpt)


def _seq2seq(args) -> bool:
    """The model is an encoder-decoder (MarianMT, BART, mBART, T5, mT5); --target and --stack are refused on the
    others."""
    from attnviz.checkpoints import CheckpointError, load_checkpoint
    from attnviz.checkpoints.seq2seq_config import SEQ2SEQ_TYPES

    folder, name, family = _family(args)
    if family in SEQ2SEQ_TYPES:
        try:
            args.ckpt = load_checkpoint(folder, name=name)
        except CheckpointError as exc:
            raise CliError(str(exc)) from None
        return True
    if args.target is not None or args.stack is not None:
        raise CliError(f"--target and --stack are for encoder-decoders (MarianMT, BART, mBART, T5, Whisper); "
                       f"{name or Path(folder).name} is not one")
    return False


def _cmd_seq2seq(args, means) -> int:
    """``model ablate`` / ``model patch`` on an encoder-decoder: the logits of every decoder row before and after."""
    from attnviz.checkpoints import CheckpointError
    from attnviz.checkpoints.intervention_seq2seq import patch_seq2seq_head, seq2seq_run, stack_shape
    from attnviz.checkpoints.interventions import Edit, check_head, kl_divergence, parse_heads
    from attnviz.checkpoints.seq2seq_run import run_seq2seq
    from attnviz.cli.npz_out import write_npz

    ckpt, stack = args.ckpt, args.stack or "encoder"
    if means is not None:
        raise CliError("--means holds a decoder LLM's or an encoder's head means; an encoder-decoder's are not swept yet")
    patching = hasattr(args, "clean")
    try:
        if getattr(args, "image", None) is not None:
            raise CliError(f"{ckpt.name} translates text: give --text, not --image")
        texts = (args.clean, args.corrupted) if patching else (args.text,)
        if any(t is None for t in texts):
            raise CliError(f"{ckpt.name} is an encoder-decoder: give the source text with --text")
        runs = [run_seq2seq(ckpt, t, args.target or "") for t in texts]
        dec = runs[0].decoder_ids
        shape = stack_shape(ckpt, stack)
        if patching:
            layer, head = check_head(shape, args.layer, args.head)
            clean, corrupted, patched = patch_seq2seq_head(ckpt, runs[0].encoder_ids, runs[1].encoder_ids, dec, stack,
                                                           layer, head)
        else:
            heads = parse_heads(shape, args.heads)
            before = seq2seq_run(ckpt, runs[0].encoder_ids, dec)
            after = seq2seq_run(ckpt, runs[0].encoder_ids, dec, {stack: Edit(ablate={h: args.mode for h in heads})})
    except CheckpointError as exc:
        raise CliError(str(exc)) from None
    print(f"{ckpt.name}: {ckpt.spec.family} encoder-decoder, the {stack} attention; {dec.size} decoder rows")
    if patching:
        write_npz(args.npz, {"clean_ids": runs[0].encoder_ids, "corrupted_ids": runs[1].encoder_ids,
                             "decoder_ids": dec, "logits_clean": clean.logits, "logits_corrupted": corrupted.logits,
                             "logits_patched": patched.logits})
        print(f"{stack} head {layer}.{head} patched from the clean source into the corrupted one -> {args.npz}")
        return 0
    kl = kl_divergence(before.logits[-1], after.logits[-1])
    write_npz(args.npz, {"ids": runs[0].encoder_ids, "decoder_ids": dec, "heads": np.array(heads, dtype=np.int64),
                         "logits_before": before.logits, "logits_after": after.logits,
                         "attentions_after": getattr(after, stack), "kl": np.float64(kl)})
    print(f"{args.mode}-ablated {stack} heads {', '.join(f'{a}.{b}' for a, b in heads)}; KL(before || after) at the "
          f"last decoder row {kl:.4g} nats -> {args.npz}")
    return 0


def _vlm(args) -> bool:
    """The model is a vision-language model (its checkpoint is loaded into ``args.ckpt``)."""
    from attnviz.checkpoints import CheckpointError, load_checkpoint
    from attnviz.checkpoints.vlm_registry import is_multimodal

    folder, name, family = _family(args)
    if not is_multimodal(family):
        return False
    try:
        args.ckpt = load_checkpoint(folder, name=name)
    except CheckpointError as exc:
        raise CliError(str(exc)) from None
    return True


def _cmd_vlm(args, means) -> int:
    """``model ablate`` / ``model patch`` on a vision-language model: its language model over the pictures and the
    prompt, the last position's logits before and after."""
    from attnviz.checkpoints import CheckpointError
    from attnviz.checkpoints.intervention_study import check_means
    from attnviz.checkpoints.intervention_vlm import check_vlm, vlm_input, vlm_run
    from attnviz.checkpoints.interventions import Edit, check_head, kl_divergence, parse_heads
    from attnviz.cli.model_generate import read_picture
    from attnviz.cli.npz_out import write_npz

    ckpt = args.ckpt
    patching = hasattr(args, "clean")
    if getattr(args, "target", None) is not None or getattr(args, "stack", None) is not None:
        raise CliError(f"--target and --stack are for encoder-decoders; {ckpt.name} is a vision-language model")
    if not patching and args.text is None:
        raise CliError(f"{ckpt.name} is a vision-language model: give the prompt with --text (and the picture with "
                       "--image)")
    pictures = [read_picture(p) for p in (args.image or [])]
    c = ckpt.spec.text
    try:
        check_vlm(ckpt)
        if patching:
            layer, head = check_head(c, args.layer, args.head)
            clean_in = vlm_input(ckpt, pictures, args.clean)
            corrupted_in = vlm_input(ckpt, pictures, args.corrupted, clean_in.weights)
            if clean_in.T != corrupted_in.T:
                raise CheckpointError(f"the clean prompt has {clean_in.T} tokens and the corrupted one "
                                      f"{corrupted_in.T} (with the picture's): patching needs the same length")
            rec: dict = {}
            clean = vlm_run(ckpt, clean_in, Edit(record=rec))
            corrupted = vlm_run(ckpt, corrupted_in)
            patched = vlm_run(ckpt, corrupted_in, Edit(patch_heads={(layer, head): rec[layer][head]}))
        else:
            heads = parse_heads(c, args.heads)
            how = {h: args.mode for h in heads} if means is None else {h: check_means(c, means)[h] for h in heads}
            inp = vlm_input(ckpt, pictures, args.text)
            before = vlm_run(ckpt, inp)
            after = vlm_run(ckpt, inp, Edit(ablate=how))
    except CheckpointError as exc:
        raise CliError(str(exc)) from None
    print(ckpt.describe())
    if patching:
        write_npz(args.npz, {"clean_ids": clean_in.prefix.ids, "corrupted_ids": corrupted_in.prefix.ids,
                             "is_image": clean_in.prefix.is_image, "logits_clean": clean.logits,
                             "logits_corrupted": corrupted.logits, "logits_patched": patched.logits})
        print(f"head {layer}.{head} patched from the clean prompt into the corrupted one over {clean_in.T} tokens "
              f"({int(clean_in.prefix.is_image.sum())} image) -> {args.npz}")
        for what, p in (("clean", clean), ("corrupted", corrupted), ("patched", patched)):
            print(f"{what + ':':11} {_top(ckpt.tokenizer, p.logits)}")
        return 0
    kl = kl_divergence(before.logits, after.logits)
    write_npz(args.npz, {"ids": inp.prefix.ids, "is_image": inp.prefix.is_image,
                         "heads": np.array(heads, dtype=np.int64), "logits_before": before.logits,
                         "logits_after": after.logits, "attentions_before": before.attentions,
                         "attentions_after": after.attentions, "kl": np.float64(kl)})
    what = f"{args.mode}-ablated" if means is None else f"set to their means over {args.means}"
    print(f"{what} {', '.join(f'{a}.{b}' for a, b in heads)} over {inp.T} tokens ({int(inp.prefix.is_image.sum())} "
          f"image); KL(before || after) {kl:.4g} nats -> {args.npz}")
    print(f"before: {_top(ckpt.tokenizer, before.logits)}")
    print(f"after:  {_top(ckpt.tokenizer, after.logits)}")
    return 0


def _means(args):
    """The (L, nh, hd) head means of ``--means`` (None without it); one line for a file that cannot be used."""
    if args.means is None:
        return None
    if args.mode != "mean":
        raise CliError("--means sets each head to a corpus's means: use it with --mode mean")
    from attnviz.corpus.files import StatsFileError
    from attnviz.corpus.sweep import read_sweep

    try:
        return read_sweep(args.means).head_means
    except StatsFileError as exc:
        raise CliError(str(exc)) from None


def _cmd_patch(args) -> int:
    from attnviz.checkpoints import CheckpointError
    from attnviz.checkpoints.interventions import patch_head
    from attnviz.cli.npz_out import write_npz

    special = _special(args)
    if special is not None:
        return special
    if _vlm(args):
        return _cmd_vlm(args, None)
    if getattr(args, "image", None):
        raise CliError("--image is for vision-language models (PaliGemma, LLaVA, Idefics3, SmolVLM); patching a "
                       "text model reads --clean and --corrupted only")
    if _seq2seq(args):
        return _cmd_seq2seq(args, None)
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


def _cmd_sweep(args) -> int:
    import signal
    import sys

    from attnviz.checkpoints import CheckpointError
    from attnviz.checkpoints.hub_cache import resolve
    from attnviz.corpus.run import CorpusRunError
    from attnviz.corpus.sweep import run_sweep
    from attnviz.persist import SessionError, check_save_target

    try:  # a folder, a device or a FIFO named as output is refused, not replaced
        check_save_target(args.out)
    except SessionError as exc:
        raise CliError(str(exc)) from None
    try:
        folder, name = resolve(args.model_dir)
    except CheckpointError as exc:
        raise CliError(str(exc)) from None
    means = _means(args)
    from attnviz.cli.progress import DocumentBar

    bar = DocumentBar(sys.stderr, desc="sweep: ")
    seen = []

    def progress(p) -> None:
        seen[:] = [p]
        bar(p)

    def stop(_signum, _frame):  # a job system's SIGTERM stops the sweep as Ctrl+C does
        raise KeyboardInterrupt

    try:
        old = signal.signal(signal.SIGTERM, stop)
    except ValueError:  # not the main thread
        old = None
    try:
        try:
            res = run_sweep(folder, name, args.corpora, args.out, mode=args.mode, metric=args.metric,
                            tokens=args.tokens, scheduler=args.scheduler, workers=args.workers, batch=args.batch,
                            max_tokens=args.max_tokens, progress=progress, means=means)
        finally:
            if old is not None:
                signal.signal(signal.SIGTERM, old)
    except KeyboardInterrupt:
        bar.end()
        where = f" after {seen[0].done:,} of {seen[0].total:,} documents" if seen else ""
        print(f"interrupted{where}: nothing written to {args.out}", file=sys.stderr)
        return 130
    except CorpusRunError as exc:
        bar.end()
        raise CliError(str(exc)) from None
    bar.end()
    unit = {"kl": "nats", "logit_diff": "logit", "cosine": "1 - cos"}[res.metric]
    print(f"{res.documents:,} of {res.total:,} documents swept ({res.mean.size} heads each, {res.mode}-ablated) in "
          f"{res.elapsed:.1f} s on {res.workers} worker thread(s); metric {res.metric} -> {args.out}")
    ranks = res.ranks()
    top = sorted(zip(*np.nonzero(ranks)), key=lambda lh: ranks[lh])[:5]
    print("most important: " + ", ".join(f"{a}.{b} {res.mean[a, b]:.4g} ± {res.std[a, b]:.2g} {unit}" for a, b in top))
    if res.failed:
        print(f"{len(res.failed):,} document(s) failed:", file=sys.stderr)
        for _index, doc, message in res.failed[:10]:
            print(f"  {doc}: {message}", file=sys.stderr)
        if len(res.failed) > 10:
            print(f"  ... and {len(res.failed) - 10:,} more", file=sys.stderr)
        return 1
    return 0
