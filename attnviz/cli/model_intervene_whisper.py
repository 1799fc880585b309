"""``attnviz-cli model ablate`` and ``model patch`` on Whisper: heads of the encoder's self-attention (over the audio
frames), the decoder's self-attention or the cross-attention edited, and the logits of every decoder row (the
prompt, then ``--target``'s tokens, teacher-forced) written before and after.

``ablate WHISPER --audio A [--target T] --heads L.H[,...] [--stack encoder|decoder|cross] --npz OUT`` writes
``logits_before``, ``logits_after`` (T_dec, V), ``attentions_after`` (the stack's maps), ``decoder_ids`` and ``kl``
(at the last decoder row); ``patch WHISPER --clean A1 --corrupted A2 --layer L --head H`` reads the clean and the
corrupted input as two audio files (the encoder always sees its whole window, so the two have the same length) and
writes ``logits_clean``, ``logits_corrupted`` and ``logits_patched``.
"""

from __future__ import annotations

import numpy as np

from attnviz.cli import CliError


def _features(ckpt, path: str, target: str, options: dict):
    from attnviz.checkpoints.whisper import run_whisper

    run = run_whisper(ckpt, path, target or "", **options)
    return run.features, run.decoder_ids


def cmd_whisper(args, ckpt) -> int:
    """``model ablate`` / ``model patch`` (``args.clean`` present) on a Whisper checkpoint."""
    from attnviz.checkpoints import CheckpointError
    from attnviz.checkpoints.intervention_seq2seq import stack_shape, whisper_run
    from attnviz.checkpoints.interventions import Edit, check_head, kl_divergence, parse_heads
    from attnviz.cli.npz_out import write_npz

    patching = hasattr(args, "clean")
    stack = args.stack or "encoder"
    if getattr(args, "means", None) is not None:
        raise CliError("--means holds a decoder LLM's or an encoder's head means; Whisper's heads are not swept: use "
                       "--mode mean (the mean over the stack's positions)")
    if getattr(args, "image", None):
        raise CliError(f"{ckpt.name} is a Whisper speech model: give --audio, not --image")
    options = {"language": getattr(args, "language", None), "task": getattr(args, "task", None)}
    try:
        if patching:
            paths = (args.clean, args.corrupted)
        else:
            if getattr(args, "text", None) is not None or not getattr(args, "audio", None):
                raise CliError(f"{ckpt.name} is a Whisper speech model: give the audio with --audio (and the text "
                               "to teacher-force with --target), not --text")
            paths = (args.audio,)
        inputs = [_features(ckpt, p, args.target, options) for p in paths]
        feats, dec = inputs[0]
        shape = stack_shape(ckpt, stack)
        if patching:
            layer, head = check_head(shape, args.layer, args.head)
            rec = Edit(record={})
            clean = whisper_run(ckpt, feats, dec, {stack: rec})
            corrupted = whisper_run(ckpt, inputs[1][0], dec)
            patched = whisper_run(ckpt, inputs[1][0], dec,
                                  {stack: Edit(patch_heads={(layer, head): rec.record[layer][head]})})
        else:
            heads = parse_heads(shape, args.heads)
            before = whisper_run(ckpt, feats, dec)
            after = whisper_run(ckpt, feats, dec, {stack: Edit(ablate={h: args.mode for h in heads})})
    except CheckpointError as exc:
        raise CliError(str(exc)) from None
    print(f"{ckpt.name}: Whisper, the {stack} attention; {dec.size} decoder rows "
          f"({' '.join(ckpt.piece(int(i)) for i in dec[:4])} ...)")
    if patching:
        write_npz(args.npz, {"decoder_ids": dec, "logits_clean": clean.logits, "logits_corrupted": corrupted.logits,
                             "logits_patched": patched.logits})
        print(f"{stack} head {layer}.{head} patched from {args.clean} into {args.corrupted} -> {args.npz}")
        return 0
    kl = kl_divergence(before.logits[-1], after.logits[-1])
    write_npz(args.npz, {"decoder_ids": dec, "heads": np.array(heads, dtype=np.int64), "logits_before": before.logits,
                         "logits_after": after.logits, "attentions_after": getattr(after, stack),
                         "kl": np.float64(kl)})
    print(f"{args.mode}-ablated {stack} heads {', '.join(f'{a}.{b}' for a, b in heads)}; KL(before || after) at the "
          f"last decoder row {kl:.4g} nats -> {args.npz}")
    return 0
