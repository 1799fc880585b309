"""The numbers a checkpoint's forward pass needs (:class:`CheckpointConfig`) and the typed readers of
config.json values that every architecture's parser shares: each refusal names the key and what it
must be."""

from __future__ import annotations

import math
from dataclasses import dataclass

from attnviz.checkpoints.errors import CheckpointError

# Activation names a config may use (transformers' ACT2FN names) that the forward pass implements.
ACTIVATIONS = ("gelu", "gelu_new", "gelu_pytorch_tanh", "gelu_fast", "quick_gelu", "relu", "silu", "swish")

LN_EPS_RANGE = (1e-30, 0.1)  # LayerNorm epsilons in use are 1e-12 .. 1e-5; outside this range is not a model


@dataclass(frozen=True)
class CheckpointConfig:
    """The numbers a forward pass needs, under one set of names for all three architectures."""

    kind: str  # "bert" | "gpt2" | "vit": which forward pass runs the weights
    model_type: str  # config.json's model_type, kept for messages and display ("bert", "deit", ...)
    d_model: int  # width of the residual stream (hidden_size / n_embd)
    n_layer: int  # number of transformer blocks, the L of attentions (L, nh, T, T)
    n_head: int  # heads per block, the nh of attentions (L, nh, T, T)
    d_ff: int  # width of the MLP's hidden layer
    act: str  # MLP activation, one of ACTIVATIONS (GELU erf form is "gelu", tanh form "gelu_new")
    ln_eps: float  # LayerNorm epsilon; results depend on it at the 1e-6 level, so it is read, not assumed
    vocab_size: int = 0  # rows of the token embedding table (text models; 0 for ViT)
    max_positions: int = 0  # rows of the learned position table: the longest text the model accepts
    type_vocab_size: int = 0  # BERT token-type (segment) embedding rows; 0 when the model has none
    scale_by_layer: bool = False  # GPT-2 option: scores also divided by (layer index + 1)
    image_size: tuple[int, int] = (0, 0)  # (H, W) the ViT position table was trained for
    patch_size: tuple[int, int] = (0, 0)  # (P_h, P_w) of the ViT patch embedding
    num_channels: int = 0  # image channels the ViT patch embedding expects (3 for RGB)
    qkv_bias: bool = True  # ViT option: whether query/key/value projections carry a bias
    n_extra: int = 0  # tokens before the patches: 1 for ViT ([CLS]), 2 for DeiT ([CLS], distillation)
    padding_idx: int = -1  # RoBERTa / XLM-R: pad id; positions start at padding_idx + 1 (-1: positions from 0)
    embedding_size: int = 0  # ELECTRA: width of the embedding tables, projected to d_model (0: d_model)
    decoder: object = None  # decoder LLMs (kind "decoder"): a decoder_config.DecoderSpec, else None
    n_registers: int = 0  # DINOv2 with registers: register tokens after [CLS], counted in n_extra
    n_groups: int = 0  # ALBERT: sets of layer weights, layer i running group int(i / (n_layer / n_groups))
    rel_bias: str = ""  # scores gain a learned relative position bias: "mpnet" (T5-style buckets, one table for
    # every layer), "beit" (one table per layer) or "beit_shared" (BEiT's one table for every layer)
    rel_buckets: int = 0  # MPNet: rows of the relative position bias table (relative_attention_num_buckets)
    abs_positions: bool = True  # BEiT: use_absolute_position_embeddings (false: no position table at all)
    layer_scale: bool = False  # BEiT: lambda_1 / lambda_2 scale each residual branch (layer_scale_init_value > 0)
    final_norm: bool = True  # BEiT: last_hidden_state after a final LayerNorm (false with use_mean_pooling)
    spec: object = None  # DeBERTa v2 / v3: the encoders.DebertaSpec of its disentangled attention, else None

    @property
    def max_tokens(self) -> int:
        """The longest text the position table holds (RoBERTa's first padding_idx + 1 rows are never used)."""
        return self.max_positions - (self.padding_idx + 1)

    @property
    def head_size(self) -> int:
        """hs = d_model / n_head (a decoder's own head_dim)."""
        if self.decoder is not None:
            return self.decoder.head_dim
        return self.d_model // self.n_head

    @property
    def grid(self) -> tuple[int, int]:
        """(gh, gw) patch grid of a ViT, (0, 0) for text models."""
        if self.kind != "vit":
            return (0, 0)
        return (self.image_size[0] // self.patch_size[0], self.image_size[1] // self.patch_size[1])


def int_field(cfg: dict, key: str, default=None, minimum: int = 1, where: str = "config.json") -> int:
    value = cfg.get(key, default)
    if value is None:
        raise CheckpointError(f"{where} lacks {key!r}, which this architecture needs")
    if isinstance(value, bool) or not isinstance(value, int):
        raise CheckpointError(f"{where}: {key!r} must be a whole number (got {value!r})")
    if value < minimum:
        raise CheckpointError(f"{where}: {key!r} must be >= {minimum} (got {value})")
    return value


def float_field(cfg: dict, key: str, default=None, where: str = "config.json") -> float:
    value = cfg.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise CheckpointError(f"{where}: {key!r} must be a number (got {value!r})")
    if not math.isfinite(value):
        raise CheckpointError(f"{where}: {key!r} must be finite (got {value!r})")
    return float(value)


def eps_field(cfg: dict, key: str, default: float) -> float:
    """A LayerNorm epsilon: finite and in LN_EPS_RANGE (1e308 would overflow, 0 divide by zero)."""
    value = float_field(cfg, key, default)
    lo, hi = LN_EPS_RANGE
    if not lo <= value <= hi:
        raise CheckpointError(f"config.json: {key!r} is {value!r}; a layer norm epsilon must be between "
                              f"{lo:g} and {hi:g}")
    return value


def bool_field(cfg: dict, key: str, default: bool, where: str = "config.json") -> bool:
    value = cfg.get(key, default)
    if not isinstance(value, bool):
        raise CheckpointError(f"{where}: {key!r} must be true or false (got {value!r})")
    return value


def pair_field(cfg: dict, key: str, default=None) -> tuple[int, int]:
    value = cfg.get(key, default)
    if isinstance(value, (list, tuple)) and len(value) == 2:
        a, b = (int_field({key: v}, key) for v in value)
        return (a, b)
    v = int_field(cfg, key, default)
    return (v, v)


def act_field(cfg: dict, key: str, default: str) -> str:
    act = cfg.get(key, default)
    if act not in ACTIVATIONS:
        raise CheckpointError(f"config.json: activation {key}={act!r} is not supported (supported: {', '.join(ACTIVATIONS)})")
    return act
