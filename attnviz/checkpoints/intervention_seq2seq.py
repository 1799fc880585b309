"""Interventions on the encoder-decoders (MarianMT, BART, mBART, T5 and mT5, Whisper): heads of the encoder's self-attention,
the decoder's self-attention or its cross-attention zeroed, mean-ablated, scaled, set to given values or
patched, and attention edges knocked out, in the pass of :mod:`attnviz.checkpoints.seq2seq` (or
:mod:`~attnviz.checkpoints.seq2seq_t5`) itself: its ``encode`` and ``decode`` take an
:class:`~attnviz.checkpoints.interventions.Edit` per attention. Whisper's encoder reads log-mel frames instead of
source ids (:func:`whisper_run`).

A head's output is its slice of what the sublayer's ``out_proj`` reads, as a PyTorch forward pre-hook on
``model.encoder.layers.L.self_attn.out_proj``, ``model.decoder.layers.L.self_attn.out_proj`` or
``model.decoder.layers.L.encoder_attn.out_proj`` sees it (T5: ``encoder.block.L.layer.0.SelfAttention.o``,
``decoder.block.L.layer.0.SelfAttention.o``, ``decoder.block.L.layer.1.EncDecAttention.o``); a mean ablation takes the mean over that stack's
positions (the source tokens for the encoder, the target tokens for the decoder's two). The effect is read on the
next-token logits of every decoder row (teacher-forced: the decoder's first steps at once).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attnviz.checkpoints.errors import CheckpointError
from attnviz.checkpoints.interventions import Edit, check_head
from attnviz.checkpoints.parts import PartView
from attnviz.checkpoints import seq2seq, seq2seq_t5
from attnviz.checkpoints.seq2seq_head import next_token_logits

STACKS = ("encoder", "decoder", "cross")  # encoder self-attention, decoder self-attention, cross-attention


@dataclass(frozen=True, eq=False)
class Seq2SeqPass:
    """One (edited) pass of an encoder-decoder."""

    logits: np.ndarray  # (T_dec, V) float64: the next token after each decoder row
    encoder: np.ndarray  # (L_enc, nh, S, S) the encoder's self-attention
    decoder: np.ndarray  # (L_dec, nh, T, T) the decoder's causal self-attention
    cross: np.ndarray  # (L_dec, nh, T, S)
    heads: dict  # stack -> {layer: (nh, T, hd) head outputs before the edit} (when recorded)


class _Shape:
    """The layers and heads of one stack, as check_head reads them."""

    def __init__(self, n_layer: int, n_head: int):
        self.n_layer, self.n_head = n_layer, n_head


def stack_shape(ckpt, stack: str) -> _Shape:
    """The layers and heads of one attention of the model (for parse_heads and check_head)."""
    s = ckpt.spec
    if stack not in STACKS:
        raise CheckpointError(f"{stack!r} is not an attention of the model: choose {', '.join(STACKS)}")
    return _Shape(s.enc_layers, s.enc_heads) if stack == "encoder" else _Shape(s.dec_layers, s.dec_heads)


def _check(ckpt, edits: dict, S: int, T: int) -> dict:
    s = ckpt.spec
    shapes = {"encoder": (s.enc_layers, s.enc_heads, S, S), "decoder": (s.dec_layers, s.dec_heads, T, T),
              "cross": (s.dec_layers, s.dec_heads, T, S)}
    for stack, e in edits.items():
        if stack not in STACKS:
            raise CheckpointError(f"{stack!r} is not an attention of the model: choose {', '.join(STACKS)}")
        L, nh, rows, cols = shapes[stack]
        c = _Shape(L, nh)
        hd = s.head_dim if getattr(s, "t5_like", False) else s.d_model // nh
        for (layer, head), how in e.ablate.items():
            check_head(c, layer, head)
            if isinstance(how, str) and how not in ("zero", "mean"):
                raise CheckpointError(f"ablation mode {how!r}: choose zero or mean")
            if not isinstance(how, str) and np.shape(how) != (hd,):
                raise CheckpointError(f"the means of {stack} head {layer}.{head} must be {hd} numbers")
        for (layer, head), v in e.patch_heads.items():
            check_head(c, layer, head)
            if np.shape(v) != (rows, hd):
                raise CheckpointError(f"the patch of {stack} head {layer}.{head} is {np.shape(v)}; it must be "
                                      f"({rows}, {hd})")
        for (layer, head), f in e.scale.items():
            check_head(c, layer, head)
            if not np.isfinite(f):
                raise CheckpointError(f"the scale of {stack} head {layer}.{head} must be a finite number")
        for layer, ko in e.knockout.items():
            check_head(c, layer, 0)
            if np.shape(ko) not in ((rows, cols), (nh, rows, cols)) or np.asarray(ko).dtype != bool:
                raise CheckpointError(f"the {stack} knockout of layer {layer} is {np.shape(ko)}; it must be bool "
                                      f"({rows}, {cols})")
    return {stack: edits.get(stack) or Edit() for stack in STACKS}


def seq2seq_run(ckpt, src_ids, dec_ids, edits: dict | None = None, *, kernel: str = "auto",
                dtype=np.float32) -> Seq2SeqPass:
    """The encoder over source ids (S,), the decoder teacher-forced over ``dec_ids`` (T,) (its start token first), in
    ``dtype`` (the window's float32, or float64), with ``edits`` {stack: Edit} applied (stack one of STACKS; None:
    the plain pass)."""
    s = ckpt.spec
    src = np.asarray(src_ids, dtype=np.int64).reshape(-1)
    dec = np.asarray(dec_ids, dtype=np.int64).reshape(-1)
    if src.size == 0 or dec.size == 0:
        raise CheckpointError("an intervention needs a source token and a decoder token (the start token)")
    for ids, rows, side in ((src, s.vocab_size, "source"), (dec, s.dec_vocab_size, "target")):
        if ids.min() < 0 or ids.max() >= rows:
            raise CheckpointError(f"{side} token id {int(ids.max())} is outside the {rows}-row token table")
        if ids.size > s.max_positions:
            raise CheckpointError(f"{ids.size:,} {side} tokens are more than the {s.max_positions:,} positions")
    S, T = src.size, dec.size
    e = _check(ckpt, dict(edits or {}), S, T)
    weights = PartView(ckpt.weights, "s2s")
    fwd = seq2seq_t5 if s.t5_like else seq2seq
    enc, memory = fwd.encode(s, weights, src, dtype=dtype, kernel=kernel, edit=e["encoder"])  # (L, nh, S, S), (S, C)
    self_atts, cross, y = fwd.decode(s, weights, dec, memory, dtype=dtype, kernel=kernel, edit=e["decoder"],
                                     cross_edit=e["cross"])
    logits = next_token_logits(ckpt, y, dtype).astype(np.float64)  # (T, V)
    return Seq2SeqPass(logits=logits, encoder=enc, decoder=self_atts, cross=cross,
                       heads={k: dict(v.record) for k, v in e.items() if v.record is not None})


def whisper_run(ckpt, features, dec_ids, edits: dict | None = None, *, kernel: str = "auto",
                dtype=np.float32) -> Seq2SeqPass:
    """Whisper's encoder over log-mel ``features`` (n_mels, frames), its decoder teacher-forced over ``dec_ids`` (T,)
    (the prompt first), in ``dtype``, with ``edits`` {stack: Edit} applied (the encoder's heads act on its audio
    positions, frames / 2)."""
    from attnviz.checkpoints import whisper

    feats = np.asarray(features)
    dec = np.asarray(dec_ids, dtype=np.int64).reshape(-1)
    S = ckpt.spec.n_frames // 2  # audio positions: the second convolution has stride 2
    e = _check(ckpt, dict(edits or {}), S, dec.size)  # encode_features / decode check the features and the ids
    enc, memory = whisper.encode_features(ckpt, feats, dtype=dtype, kernel=kernel, edit=e["encoder"])
    self_atts, cross, y = whisper.decode(ckpt, dec, memory, dtype=dtype, kernel=kernel, edit=e["decoder"],
                                         cross_edit=e["cross"])
    logits = whisper.logits(ckpt, y).astype(np.float64)  # (T, V)
    return Seq2SeqPass(logits=logits, encoder=enc, decoder=self_atts, cross=cross,
                       heads={k: dict(v.record) for k, v in e.items() if v.record is not None})


def patch_seq2seq_head(ckpt, src_clean, src_corrupted, dec_ids, stack: str, layer: int, head: int):
    """(clean, corrupted, patched): the corrupted source's pass with ``stack`` head ``layer.head``'s output taken
    from the clean source's pass (the same number of source tokens; the same decoder ids)."""
    if np.size(src_clean) != np.size(src_corrupted):
        raise CheckpointError(f"the clean source has {np.size(src_clean)} tokens and the corrupted one "
                              f"{np.size(src_corrupted)}: patching needs the same length")
    rec = Edit(record={})
    clean = seq2seq_run(ckpt, src_clean, dec_ids, {stack: rec})
    corrupted = seq2seq_run(ckpt, src_corrupted, dec_ids)
    taken = rec.record[int(layer)][int(head)]
    patched = seq2seq_run(ckpt, src_corrupted, dec_ids, {stack: Edit(patch_heads={(int(layer), int(head)): taken})})
    return clean, corrupted, patched
