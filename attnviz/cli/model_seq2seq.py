"""``attnviz-cli model inspect`` on an encoder-decoder (MarianMT, BART, mBART, T5): the source through the
encoder, ``--target`` teacher-forced through the decoder (the start token, then the target's tokens).

The .npz holds ``encoder_ids``, ``decoder_ids``, ``encoder_attentions`` (layers, heads, T_enc, T_enc),
``decoder_attentions`` (layers, heads, T_dec, T_dec), ``cross_attentions`` (layers, heads, T_dec, T_enc),
the tokens of both sides and ``target_ids`` (what each decoder row predicts).
"""

from __future__ import annotations

import numpy as np

from attnviz.cli import CliError


def inspect_seq2seq(ckpt, args) -> int:
    from attnviz.checkpoints import CheckpointError
    from attnviz.cli.npz_out import write_npz

    if args.text is None or args.image:
        raise CliError(f"{ckpt.name} is an encoder-decoder: give the source as --text (and the target as --target)")
    for flag in ("suffix", "state", "layer", "head"):
        if getattr(args, flag, None) is not None:
            raise CliError(f"--{flag} is not for encoder-decoders; {ckpt.name} writes every map whole")
    if args.chat:
        raise CliError(f"--chat is for decoder LLMs; {ckpt.name} is an encoder-decoder")
    try:
        res = ckpt.run(args.text, args.target or "", dtype=args.dtype, kernel=args.kernel)
    except CheckpointError as exc:
        raise CliError(str(exc)) from None
    write_npz(args.npz, {
        "encoder_ids": res.encoder_ids, "decoder_ids": res.decoder_ids, "target_ids": res.target_ids,
        "encoder_tokens": np.array(res.encoder_tokens, dtype=str), "decoder_tokens": np.array(res.decoder_tokens, dtype=str),
        "encoder_attentions": res.encoder_attentions, "decoder_attentions": res.decoder_attentions,
        "cross_attentions": res.cross_attentions})
    print(ckpt.describe() if hasattr(ckpt, "describe") else ckpt.name)
    print(f"source {len(res.encoder_ids)} tokens: {' '.join(res.encoder_tokens[:40])}")
    print(f"decoder {len(res.decoder_ids)} tokens: {' '.join(res.decoder_tokens[:40])}")
    L, nh, Td, Te = res.cross_attentions.shape
    print(f"cross_attentions ({L}, {nh}, {Td}, {Te}), encoder ({res.encoder_attentions.shape[0]} layers), "
          f"decoder ({res.decoder_attentions.shape[0]} layers) -> {args.npz}")
    return 0
