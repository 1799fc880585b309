"""``config.json`` of the encoder-decoder families (MarianMT, BART, mBART, T5, mT5) -> a checked
:class:`Seq2SeqSpec`, and the tensors each family's forward pass reads.

Names are the base model's as transformers saves them (``encoder.layers.0.self_attn.q_proj.weight``
for the BART-likes, ``encoder.block.0.layer.0.SelfAttention.q.weight`` for T5), found in the file
under ``model.`` or no prefix (:data:`PREFIXES`).
"""

from __future__ import annotations

from dataclasses import dataclass

from attnviz.checkpoints.errors import CheckpointError
from attnviz.checkpoints.model_config import ACTIVATIONS, bool_field, eps_field, int_field

BART_TYPES = ("marian", "bart", "mbart")  # one block layout: q/k/v/out_proj, fc1/fc2, LayerNorms
T5_TYPES = ("t5", "mt5")  # mT5: T5 v1.1's layout under its own model_type
SEQ2SEQ_TYPES = BART_TYPES + T5_TYPES
NAMES = {"marian": "MarianMT", "bart": "BART", "mbart": "mBART", "t5": "T5", "mt5": "mT5",
         "whisper": "Whisper"}  # Whisper: its own spec (whisper_config), on these blocks; named here for lists
T5_PROJ_DEFAULT = {"t5": "relu", "mt5": "gated-gelu"}  # feed_forward_proj when config.json leaves it out
PREFIXES = ("model.", "")  # MarianMTModel / BartForConditionalGeneration keep the base model under "model."
POSITION_OFFSET = 2  # BART / mBART: learned position table rows start 2 after position 0 (fairseq's padding rows)
T5_MAX_TOKENS = 4096  # T5 has no position table: the longest text one pass takes (every map is kept)
T5_ACTIVATIONS = {"relu": "relu", "gelu": "gelu", "gelu_new": "gelu_new", "silu": "silu"}


@dataclass(frozen=True)
class Seq2SeqSpec:
    """The numbers of an encoder-decoder's two stacks and how their tokens start."""

    family: str  # "marian" | "bart" | "mbart" | "t5" | "mt5"
    d_model: int  # residual stream width of both stacks
    enc_layers: int  # L_enc of encoder_attentions (L_enc, nh_enc, T_enc, T_enc)
    dec_layers: int  # L_dec of decoder_attentions and cross_attentions
    enc_heads: int  # nh_enc
    dec_heads: int  # nh_dec (self- and cross-attention of the decoder)
    head_dim: int  # per-head width of the encoder (d_model / heads for the BART-likes; T5's d_kv, both stacks)
    enc_ff: int  # MLP width of the encoder
    dec_ff: int  # MLP width of the decoder
    act: str  # MLP activation (one of model_config.ACTIVATIONS)
    ln_eps: float  # LayerNorm (RMSNorm for T5) epsilon
    vocab_size: int  # rows of the (encoder's) token table
    dec_vocab_size: int  # rows of the decoder's token table (differs only for Marian with separate vocabularies)
    shared_embeddings: bool  # one token table for both stacks ("shared.weight")
    max_positions: int  # longest text either stack takes (T5: T5_MAX_TOKENS)
    decoder_start_token_id: int  # the decoder's first input id
    pad_token_id: int
    eos_token_id: int
    scale_embedding: bool  # token rows times sqrt(d_model) (Marian, mBART as configured)
    pre_norm: bool  # norms before each sublayer (mBART, T5) instead of after the residual sum (Marian, BART)
    gated: bool = False  # T5 v1.1: wo(act(wi_0 x) * wi_1 x)
    tied_head: bool = True  # the LM head is the decoder's token table (config tie_word_embeddings)
    scale_logits: bool = False  # T5: the decoder's output times d_model^-0.5 before its (shared) head
    buckets: int = 0  # T5: relative_attention_num_buckets
    max_distance: int = 0  # T5: relative_attention_max_distance

    @property
    def name(self) -> str:
        return NAMES[self.family]

    @property
    def t5_like(self) -> bool:
        """T5's layout (relative-position buckets, RMSNorm, unscaled scores): T5 and mT5."""
        return self.family in T5_TYPES


def _token_id(cfg: dict, key: str, default, vocab: int) -> int:
    v = int_field(cfg, key, default, minimum=0)
    if v >= vocab:
        raise CheckpointError(f"config.json: {key} {v} is outside the {vocab}-row token table")
    return v


def parse_seq2seq_config(cfg: dict) -> Seq2SeqSpec:
    """The checked spec of a marian / bart / mbart / t5 config.json."""
    family = cfg.get("model_type")
    if family not in SEQ2SEQ_TYPES:
        raise CheckpointError(f"config.json: model_type {family!r} is not an encoder-decoder family "
                              f"({', '.join(SEQ2SEQ_TYPES)})")
    if family in T5_TYPES:
        return _parse_t5(cfg, family)
    d = int_field(cfg, "d_model", 1024)
    eh, dh = int_field(cfg, "encoder_attention_heads", 16), int_field(cfg, "decoder_attention_heads", 16)
    for key, nh in (("encoder_attention_heads", eh), ("decoder_attention_heads", dh)):
        if d % nh:
            raise CheckpointError(f"config.json: d_model {d} is not divisible by {key} {nh}")
    act = cfg.get("activation_function", "gelu")
    if act not in ACTIVATIONS:
        raise CheckpointError(f"config.json: activation_function {act!r} is not supported ({', '.join(ACTIVATIONS)})")
    vocab = int_field(cfg, "vocab_size")
    shared = bool_field(cfg, "share_encoder_decoder_embeddings", True) if family == "marian" else True
    dec_vocab = vocab
    if family == "marian" and not shared and cfg.get("decoder_vocab_size") is not None:
        dec_vocab = int_field(cfg, "decoder_vocab_size")
    defaults = {"marian": (58100, 58100, 0), "bart": (2, 1, 2), "mbart": (None, 1, 2)}[family]
    start = cfg.get("decoder_start_token_id", defaults[0])
    if start is None:
        raise CheckpointError("config.json has no decoder_start_token_id: the decoder's first token is unknown "
                              "(mBART checkpoints name their target language code there)")
    return Seq2SeqSpec(
        family=family, d_model=d, enc_layers=int_field(cfg, "encoder_layers", 12),
        dec_layers=int_field(cfg, "decoder_layers", 12), enc_heads=eh, dec_heads=dh, head_dim=d // eh,
        enc_ff=int_field(cfg, "encoder_ffn_dim", 4096), dec_ff=int_field(cfg, "decoder_ffn_dim", 4096), act=act,
        ln_eps=1e-5, vocab_size=vocab, dec_vocab_size=dec_vocab, shared_embeddings=shared,
        max_positions=int_field(cfg, "max_position_embeddings", 1024),
        decoder_start_token_id=_token_id({"s": start}, "s", None, dec_vocab),
        pad_token_id=_token_id(cfg, "pad_token_id", defaults[1], vocab),
        eos_token_id=_token_id(cfg, "eos_token_id", defaults[2], dec_vocab),
        scale_embedding=bool_field(cfg, "scale_embedding", False), pre_norm=family == "mbart",
        tied_head=bool_field(cfg, "tie_word_embeddings", True))


def _parse_t5(cfg: dict, family: str) -> Seq2SeqSpec:
    proj = cfg.get("feed_forward_proj", T5_PROJ_DEFAULT[family])
    parts = proj.split("-") if isinstance(proj, str) else []
    gated = len(parts) == 2 and parts[0] == "gated"
    name = parts[-1] if parts and (len(parts) == 1 or gated) else None
    act = "gelu_new" if proj == "gated-gelu" else T5_ACTIVATIONS.get(name)
    if act is None:
        raise CheckpointError(f"config.json: feed_forward_proj {proj!r} is not supported (relu, gelu, gated-gelu, "
                              "gated-silu ...)")
    layers = int_field(cfg, "num_layers", 6)
    dec_layers = int_field(cfg, "num_decoder_layers", layers) if cfg.get("num_decoder_layers") is not None else layers
    nh = int_field(cfg, "num_heads", 8)
    vocab = int_field(cfg, "vocab_size", 32128)
    buckets = int_field(cfg, "relative_attention_num_buckets", 32, minimum=4)
    dist = int_field(cfg, "relative_attention_max_distance", 128)
    if dist <= buckets // 2:
        raise CheckpointError(f"config.json: relative_attention_max_distance {dist} must exceed half the {buckets} "
                              "buckets (the distances the decoder's buckets hold exactly)")
    d_ff = int_field(cfg, "d_ff", 2048)
    return Seq2SeqSpec(
        family=family, d_model=int_field(cfg, "d_model", 512), enc_layers=layers, dec_layers=dec_layers, enc_heads=nh,
        dec_heads=nh, head_dim=int_field(cfg, "d_kv", 64), enc_ff=d_ff, dec_ff=d_ff, act=act,
        ln_eps=eps_field(cfg, "layer_norm_epsilon", 1e-6), vocab_size=vocab, dec_vocab_size=vocab,
        shared_embeddings=True, max_positions=T5_MAX_TOKENS,
        decoder_start_token_id=_token_id(cfg, "decoder_start_token_id", 0, vocab),
        pad_token_id=_token_id(cfg, "pad_token_id", 0, vocab), eos_token_id=_token_id(cfg, "eos_token_id", 1, vocab),
        scale_embedding=False, pre_norm=True, gated=gated, buckets=buckets, max_distance=dist,
        scale_logits=family == "t5" and _t5_scales(cfg))


def _t5_scales(cfg: dict) -> bool:
    """Whether T5 multiplies the decoder's output by d_model^-0.5 before its head: config.json's
    scale_decoder_outputs as transformers 5 writes it, else unless tie_word_embeddings is false (older files:
    T5 v1.0 scales, v1.1 does not)."""
    if "scale_decoder_outputs" in cfg:
        return bool_field(cfg, "scale_decoder_outputs", True)
    return cfg.get("tie_word_embeddings", True) is not False


def _lin(shapes: dict, name: str, n_out: int, n_in: int, bias: bool = True) -> None:
    shapes[name + ".weight"] = (n_out, n_in)
    if bias:
        shapes[name + ".bias"] = (n_out,)


def _ln(shapes: dict, name: str, d: int, bias: bool = True) -> None:
    shapes[name + ".weight"] = (d,)
    if bias:
        shapes[name + ".bias"] = (d,)


def embedding_names(s: Seq2SeqSpec) -> dict[str, tuple[int, ...]]:
    """The token tables: ``shared.weight``, or the encoder's and decoder's own (Marian with separate vocabularies)."""
    if s.shared_embeddings:
        return {"shared.weight": (s.vocab_size, s.d_model)}
    return {"encoder.embed_tokens.weight": (s.vocab_size, s.d_model),
            "decoder.embed_tokens.weight": (s.dec_vocab_size, s.d_model)}


def seq2seq_tensors(s: Seq2SeqSpec) -> dict[str, tuple[int, ...]]:
    """Canonical name -> shape of every tensor the family's forward pass reads (layers first, so the file's
    prefix is found from a tensor every layout has)."""
    if s.t5_like:
        return _t5_tensors(s)
    d, shapes = s.d_model, {}
    for stack, n, ff in (("encoder", s.enc_layers, s.enc_ff), ("decoder", s.dec_layers, s.dec_ff)):
        for i in range(n):
            p = f"{stack}.layers.{i}."
            attns = ("self_attn", "encoder_attn") if stack == "decoder" else ("self_attn",)
            for a in attns:
                for m in ("q_proj", "k_proj", "v_proj", "out_proj"):
                    _lin(shapes, p + f"{a}.{m}", d, d)
                _ln(shapes, p + f"{a}_layer_norm", d)
            _lin(shapes, p + "fc1", ff, d)
            _lin(shapes, p + "fc2", d, ff)
            _ln(shapes, p + "final_layer_norm", d)
        if s.family != "marian":  # Marian's positions are sinusoids, computed
            shapes[f"{stack}.embed_positions.weight"] = (s.max_positions + POSITION_OFFSET, d)
            _ln(shapes, f"{stack}.layernorm_embedding", d)
        if s.pre_norm:
            _ln(shapes, f"{stack}.layer_norm", d)
    return shapes | embedding_names(s)


def _t5_tensors(s: Seq2SeqSpec) -> dict[str, tuple[int, ...]]:
    d, inner, shapes = s.d_model, s.enc_heads * s.head_dim, {}
    for stack, n in (("encoder", s.enc_layers), ("decoder", s.dec_layers)):
        for i in range(n):
            p = f"{stack}.block.{i}.layer."
            attns = ("SelfAttention", "EncDecAttention") if stack == "decoder" else ("SelfAttention",)
            for j, a in enumerate(attns):
                for m in ("q", "k", "v"):
                    _lin(shapes, p + f"{j}.{a}.{m}", inner, d, bias=False)
                _lin(shapes, p + f"{j}.{a}.o", d, inner, bias=False)
                _ln(shapes, p + f"{j}.layer_norm", d, bias=False)
                if i == 0 and a == "SelfAttention":
                    shapes[p + f"{j}.SelfAttention.relative_attention_bias.weight"] = (s.buckets, s.enc_heads)
            f = f"{p}{len(attns)}."
            if s.gated:
                _lin(shapes, f + "DenseReluDense.wi_0", s.enc_ff, d, bias=False)
                _lin(shapes, f + "DenseReluDense.wi_1", s.enc_ff, d, bias=False)
            else:
                _lin(shapes, f + "DenseReluDense.wi", s.enc_ff, d, bias=False)
            _lin(shapes, f + "DenseReluDense.wo", d, s.enc_ff, bias=False)
            _ln(shapes, f + "layer_norm", d, bias=False)
        _ln(shapes, f"{stack}.final_layer_norm", d, bias=False)
    return shapes | {"shared.weight": (s.vocab_size, d)}
