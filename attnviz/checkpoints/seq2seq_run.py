"""Encoder-decoder checkpoints (MarianMT, BART, mBART, T5, mT5): a folder -> :class:`Seq2SeqCheckpoint`, and a
teacher-forced pass over a source and a target text -> :class:`Seq2SeqAttention` with every layer's and
head's encoder self-attention, decoder self-attention and cross-attention.

Teacher forcing as transformers runs it when given the target as labels: the decoder reads the
target's ids shifted right, the model's ``decoder_start_token_id`` first (mBART: the target's last id,
its language code, wrapped to the front, as its own ``shift_tokens_right`` does), so row t of the decoder
maps is the step that predicts target token t.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from attnviz.checkpoints import seq2seq, seq2seq_t5
from attnviz.checkpoints.errors import CheckpointError
from attnviz.checkpoints.parts import Part, PartView, load_parts
from attnviz.checkpoints.seq2seq_head import head_part, next_token_logits
from attnviz.checkpoints.seq2seq_config import (PREFIXES, SEQ2SEQ_TYPES, Seq2SeqSpec, parse_seq2seq_config,
                                                seq2seq_tensors)
from attnviz.checkpoints.seq2seq_text import SeqTokenizer, encode_side, read_seq_tokenizer
from attnviz.sources.text import TextTokens

__all__ = ["SEQ2SEQ_TYPES", "Seq2SeqAttention", "Seq2SeqCheckpoint", "load_seq2seq", "run_seq2seq"]


@dataclass(frozen=True, eq=False)
class Seq2SeqCheckpoint:
    """A loaded encoder-decoder: its checked spec, mapped weights and tokenizer."""

    folder: Path
    name: str  # display name (the folder's unless given)
    spec: Seq2SeqSpec
    weights: object  # parts.load_parts store, canonical names "s2s/<name>"
    tokenizer: SeqTokenizer

    kind = "seq2seq"

    @property
    def family(self) -> str:
        return self.spec.family

    @property
    def n_params(self) -> int:
        return int(self.weights.n_params)

    @property
    def stored_dtype(self) -> str:
        return "+".join(n.lower() for n in self.weights.dtypes())

    def describe(self) -> str:
        s, n = self.spec, self.n_params
        size = f"{n / 1e6:.1f} M" if n >= 1e6 else f"{n:,}"
        return (f"{self.name}: {s.name}, encoder {s.enc_layers} layers x {s.enc_heads} heads, decoder {s.dec_layers} "
                f"layers x {s.dec_heads} heads, d_model {s.d_model}, {size} weights ({self.stored_dtype})")

    def run(self, source: str, target: str = "", **options) -> "Seq2SeqAttention":
        return run_seq2seq(self, source, target, **options)

    def logits(self, decoder_hidden: np.ndarray) -> np.ndarray:
        """(T_dec, V) next-token logits of each decoder row (see :mod:`.seq2seq_head`)."""
        return next_token_logits(self, decoder_hidden)


@dataclass(eq=False)
class Seq2SeqAttention:
    """One teacher-forced pass: the source through the encoder, the shifted target through the decoder."""

    model: str
    family: str
    encoder_tokens: list[str]  # (T_enc,) token text of the source (special tokens as written)
    encoder_ids: np.ndarray  # (T_enc,) int64, as transformers' tokenizer gives them
    decoder_tokens: list[str]  # (T_dec,) the start token, then the target's tokens but the last
    decoder_ids: np.ndarray  # (T_dec,) int64 decoder_input_ids: the start token, then the target's ids
    target_ids: np.ndarray  # (T_dec,) int64 labels: what each decoder row predicts (the target's ids, EOS last)
    encoder_attentions: np.ndarray  # (L_enc, nh_enc, T_enc, T_enc), rows = queries
    decoder_attentions: np.ndarray  # (L_dec, nh_dec, T_dec, T_dec), causal
    cross_attentions: np.ndarray  # (L_dec, nh_dec, T_dec, T_enc): decoder queries over the source tokens
    encoder_hidden: np.ndarray  # (T_enc, d_model) after the encoder's last layer (and final norm)
    decoder_hidden: np.ndarray  # (T_dec, d_model) after the decoder's last layer (and final norm)
    source: str = ""
    target: str = ""
    encoder_special: np.ndarray | None = None  # (T_enc,) bool: EOS, language codes ...
    decoder_special: np.ndarray | None = None  # (T_dec,) bool
    notes: tuple[str, ...] = field(default_factory=tuple)
    # T5: the relative-position term added to the self-attention scores of every layer, before the softmax:
    # {"encoder": (nh, T_enc, T_enc), "decoder": (nh, T_dec, T_dec)}; None for the other families
    position_bias: dict | None = None

    kind = "seq2seq"


def load_seq2seq(folder, cfg: dict, name: str | None = None) -> Seq2SeqCheckpoint:
    """A Marian / BART / mBART / T5 folder (config.json already read as ``cfg``) -> a checked checkpoint."""
    folder = Path(folder)
    name = name or folder.name
    spec = parse_seq2seq_config(cfg)
    tok = read_seq_tokenizer(folder, spec, name)
    store = load_parts(folder, [Part("s2s", seq2seq_tensors(spec), PREFIXES), head_part(spec)], spec.name)
    return Seq2SeqCheckpoint(folder=folder, name=name, spec=spec, weights=store, tokenizer=tok)


def _shift(spec: Seq2SeqSpec, labels: np.ndarray) -> np.ndarray:
    """decoder_input_ids of the labels: start + labels[:-1] (mBART: the last label wrapped to the front)."""
    first = labels[-1] if spec.family == "mbart" else spec.decoder_start_token_id
    return np.concatenate([[first], labels[:-1]]).astype(np.int64)


def _check_length(spec: Seq2SeqSpec, toks: TextTokens, side: str, ckpt: str) -> None:
    n = len(toks.ids)
    if n > spec.max_positions:
        what = "its position table holds" if not spec.t5_like else "one pass takes"
        raise CheckpointError(f"{ckpt}: the {side} text gives {n:,} tokens, more than the {spec.max_positions:,} "
                              f"{what}; shorten it")


def encode_source(ckpt: Seq2SeqCheckpoint, source, dtype) -> tuple[TextTokens, type]:
    """The checked source tokens and dtype of a pass (every bad input a CheckpointError)."""
    if not isinstance(ckpt, Seq2SeqCheckpoint):
        raise CheckpointError(f"{getattr(ckpt, 'name', ckpt)!r} is not an encoder-decoder checkpoint "
                              f"({', '.join(SEQ2SEQ_TYPES)})")
    dtype = np.dtype(dtype).type
    if dtype not in (np.float32, np.float64):
        raise CheckpointError(f"dtype must be float32 or float64 (got {np.dtype(dtype).name})")
    if not isinstance(source, str) or not source.strip():
        raise CheckpointError("the source text is empty; write the sentence to translate")
    src = encode_side(ckpt.tokenizer, source, "source")
    _check_length(ckpt.spec, src, "source", ckpt.name)
    _check_ids(src.ids, ckpt.spec.vocab_size, "source")
    return src, dtype


def _check_ids(ids: np.ndarray, rows: int, side: str) -> None:
    if ids.size and (ids.min() < 0 or ids.max() >= rows):
        raise CheckpointError(f"the {side} tokenizer gave id {int(ids.max())}, outside the {rows}-row token table")


def attention_result(ckpt: Seq2SeqCheckpoint, src: TextTokens, enc_atts, enc_hidden, dec_ids: np.ndarray,
                     labels: np.ndarray, dtype, kernel: str, *, source: str = "", target: str = "",
                     dec_pieces: list[str] | None = None, dec_special=None) -> Seq2SeqAttention:
    """The decoder run on ``dec_ids`` over the encoded source -> the whole result."""
    spec, tok = ckpt.spec, ckpt.tokenizer
    fwd = seq2seq_t5 if spec.t5_like else seq2seq
    dec_atts, cross, dec_hidden = fwd.decode(spec, PartView(ckpt.weights, "s2s"), dec_ids, enc_hidden, dtype=dtype,
                                             kernel=kernel)
    start_piece = tok.piece(dec_ids[0], "target")
    if dec_pieces is None:
        dec_pieces = [start_piece] + [tok.piece(i, "target") for i in dec_ids[1:]]
        dec_special = [True] + [False] * (len(dec_ids) - 1)
    return Seq2SeqAttention(
        model=ckpt.name, family=spec.family, encoder_tokens=list(src.pieces), encoder_ids=src.ids,
        decoder_tokens=list(dec_pieces), decoder_ids=dec_ids, target_ids=labels, encoder_attentions=enc_atts,
        decoder_attentions=dec_atts, cross_attentions=cross, encoder_hidden=enc_hidden, decoder_hidden=dec_hidden,
        source=source, target=target, encoder_special=np.asarray(src.special, dtype=bool),
        decoder_special=np.asarray(dec_special, dtype=bool),
        notes=(f"decoder starts with {start_piece!r} (id {int(dec_ids[0])})",),
        position_bias=_position_bias(ckpt, len(src.ids), len(dec_ids), dtype) if spec.t5_like else None)


def _position_bias(ckpt: Seq2SeqCheckpoint, T_enc: int, T_dec: int, dtype) -> dict[str, np.ndarray]:
    W = PartView(ckpt.weights, "s2s")
    out = {}
    for stack, T, both in (("encoder", T_enc, True), ("decoder", T_dec, False)):
        table = np.asarray(W[f"{stack}.block.0.layer.0.SelfAttention.relative_attention_bias.weight"]).astype(dtype)
        out[stack] = seq2seq_t5.position_bias(ckpt.spec, table, T, both)  # (nh, T, T)
    return out


def run_seq2seq(ckpt: Seq2SeqCheckpoint, source: str, target: str = "", *, dtype=np.float32,
                kernel: str = "auto") -> Seq2SeqAttention:
    """The source through the encoder, the target teacher-forced through the decoder -> every map of both."""
    src, dtype = encode_source(ckpt, source, dtype)
    spec = ckpt.spec
    tgt = encode_side(ckpt.tokenizer, "" if target is None else target, "target")
    _check_length(spec, tgt, "target", ckpt.name)
    labels = tgt.ids  # (T_dec,)
    dec_ids = _shift(spec, labels)  # (T_dec,)
    _check_ids(dec_ids, spec.dec_vocab_size, "target")
    fwd = seq2seq_t5 if spec.t5_like else seq2seq
    enc_atts, enc_hidden = fwd.encode(spec, PartView(ckpt.weights, "s2s"), src.ids, dtype=dtype, kernel=kernel)
    start_piece = ckpt.tokenizer.piece(dec_ids[0], "target")
    return attention_result(ckpt, src, enc_atts, enc_hidden, dec_ids, labels, dtype, kernel, source=source,
                            target=target or "", dec_pieces=[start_piece] + list(tgt.pieces[:-1]),
                            dec_special=[True] + list(tgt.special[:-1]))
