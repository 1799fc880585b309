"""``config.json`` of a decoder LLM (Llama, Mistral, Qwen2, Qwen3) -> a checked :class:`ModelConfig`.

The four share one block (RMSNorm, grouped-query attention with RoPE, SwiGLU MLP, final RMSNorm);
what differs (biases, q/k norms, sliding windows, head_dim, rope scaling) is carried in :class:`DecoderSpec`.
"""

from __future__ import annotations

from dataclasses import dataclass

from attnviz.checkpoints.errors import CheckpointError
from attnviz.checkpoints.model_config import ModelConfig, bool_field, float_field, int_field

# model_type -> (q/k/v bias default, q/k RMSNorm)
DECODER_TYPES = {"llama": (False, False), "mistral": (False, False), "qwen2": (True, False), "qwen3": (False, True)}
ROPE_TYPES = ("default", "linear", "llama3", "yarn")
FAMILY = {"llama": "Llama", "mistral": "Mistral", "qwen2": "Qwen2", "qwen3": "Qwen3"}


@dataclass(frozen=True)
class RopeSpec:
    """Rotary embedding settings, as transformers' rope utilities read them."""

    theta: float = 10000.0  # base of the frequencies
    rope_type: str = "default"  # one of ROPE_TYPES
    factor: float = 1.0  # linear / llama3 / yarn scaling factor
    low_freq_factor: float = 1.0  # llama3
    high_freq_factor: float = 4.0  # llama3
    original_max_positions: int = 0  # llama3 / yarn: the pre-training context length
    beta_fast: float = 32.0  # yarn
    beta_slow: float = 1.0  # yarn
    attention_factor: float | None = None  # yarn: cos/sin multiplier (None: from factor and mscale)
    mscale: float = 0.0  # yarn
    mscale_all_dim: float = 0.0  # yarn
    truncate: bool = True  # yarn: round the correction range to whole dimensions


@dataclass(frozen=True)
class DecoderSpec:
    """What a decoder block needs beyond ModelConfig's shared numbers."""

    n_kv_head: int  # key/value heads; query head h reads kv head h // (n_head // n_kv_head)
    head_dim: int  # width of each q/k/v head (Qwen3 and Mistral may set it apart from d_model / n_head)
    qkv_bias: bool  # q/k/v projections carry a bias (Qwen2, Llama with attention_bias)
    o_bias: bool  # output projection carries a bias (Llama with attention_bias)
    mlp_bias: bool  # gate/up/down carry biases (Llama's mlp_bias)
    qk_norm: bool  # RMSNorm over each head's q and k before the rotation (Qwen3)
    tied: bool  # the LM head is the embedding table (tie_word_embeddings)
    sliding_window: int  # keys j > i - w on sliding layers; 0: every layer attends to all earlier keys
    window_from: int  # layers from this index on slide (unless layer_types says otherwise)
    layer_types: tuple[str, ...] | None  # config.json's layer_types when given ("sliding_attention" ...)
    rope: RopeSpec

    n_head: int = 0  # query heads (ModelConfig.n_head), so the spec answers kv_head alone

    @property
    def group(self) -> int:
        """Query heads per key/value head."""
        return self.n_head // self.n_kv_head

    def kv_head(self, head: int) -> int:
        """The key/value head query head ``head`` shares."""
        return head // self.group

    def window(self, layer: int) -> int:
        """Sliding window of ``layer`` (0: full causal).  Computed per layer, so a config claiming
        10^9 layers builds nothing before its tensors are compared with the weights file."""
        if not self.sliding_window:
            return 0
        if self.layer_types is not None:
            return self.sliding_window if self.layer_types[layer] == "sliding_attention" else 0
        return self.sliding_window if layer >= self.window_from else 0


def _rope(cfg: dict, max_positions: int) -> RopeSpec:
    params = cfg.get("rope_parameters")
    if params is None:
        params = cfg.get("rope_scaling")
    if params is None:
        params = {}
    if not isinstance(params, dict):
        raise CheckpointError(f"config.json: rope_scaling must be an object (got {params!r})")
    if any(isinstance(v, dict) for v in params.values()):
        raise CheckpointError("config.json: rotary settings per layer type are not supported")
    where = "config.json rope_scaling"
    theta = float_field(params, "rope_theta", cfg.get("rope_theta", 10000.0), where)
    rtype = params.get("rope_type", params.get("type", "default"))
    if rtype not in ROPE_TYPES:
        raise CheckpointError(f"config.json: rope type {rtype!r} is not supported (supported: {', '.join(ROPE_TYPES)})")
    if float(params.get("partial_rotary_factor", cfg.get("partial_rotary_factor", 1.0)) or 1.0) != 1.0:
        raise CheckpointError("config.json: partial_rotary_factor other than 1 is not supported")
    if not theta > 1:
        raise CheckpointError(f"config.json: rope_theta must be > 1 (got {theta})")
    kw = {"theta": theta, "rope_type": rtype}
    if rtype in ("linear", "llama3", "yarn"):
        kw["factor"] = float_field(params, "factor", None if rtype != "yarn" else 1.0, where)
        if not 0 < kw["factor"] <= 1e6:
            raise CheckpointError(f"{where}: factor must be in (0, 1e6] (got {kw['factor']})")
    if rtype in ("llama3", "yarn"):
        omp = cfg.get("original_max_position_embeddings", params.get("original_max_position_embeddings", max_positions))
        kw["original_max_positions"] = int_field({"original_max_position_embeddings": omp}, "original_max_position_embeddings", where=where)
    if rtype == "llama3":
        kw["low_freq_factor"] = float_field(params, "low_freq_factor", None, where)
        kw["high_freq_factor"] = float_field(params, "high_freq_factor", None, where)
        if not kw["high_freq_factor"] > kw["low_freq_factor"] > 0:
            raise CheckpointError(f"{where}: llama3 needs high_freq_factor > low_freq_factor > 0")
    if rtype == "yarn":
        kw["beta_fast"] = float_field(params, "beta_fast", 32.0, where) or 32.0
        kw["beta_slow"] = float_field(params, "beta_slow", 1.0, where) or 1.0
        af = params.get("attention_factor")
        kw["attention_factor"] = None if af is None else float_field(params, "attention_factor", None, where)
        kw["mscale"] = float_field(params, "mscale", 0.0, where) if params.get("mscale") is not None else 0.0
        kw["mscale_all_dim"] = (float_field(params, "mscale_all_dim", 0.0, where)
                                if params.get("mscale_all_dim") is not None else 0.0)
        kw["truncate"] = bool_field(params, "truncate", True, where)
    return RopeSpec(**kw)


def _windows(cfg: dict, model_type: str, n_layer: int) -> tuple[int, int, tuple[str, ...] | None]:
    """(sliding window, first sliding layer, layer_types) as transformers reads them for the family."""
    if model_type == "llama":
        return 0, 0, None
    sw = cfg.get("sliding_window")
    if model_type in ("qwen2", "qwen3") and not cfg.get("use_sliding_window", False):
        sw = None
    if sw is None:
        return 0, 0, None
    w = int_field(cfg, "sliding_window")
    if model_type == "mistral":
        return w, 0, None
    types = cfg.get("layer_types")
    if types is None:
        return w, int_field(cfg, "max_window_layers", n_layer, minimum=0), None
    if not isinstance(types, list) or len(types) != n_layer or not all(isinstance(t, str) for t in types):
        raise CheckpointError(f"config.json: layer_types must list {n_layer} strings, one per layer")
    return w, 0, tuple(types)


def parse_decoder_config(cfg: dict) -> ModelConfig:
    """A Llama / Mistral / Qwen2 / Qwen3 config.json -> ModelConfig with ``decoder`` set."""
    model_type = cfg["model_type"]
    bias_default, qk_norm = DECODER_TYPES[model_type]
    d = int_field(cfg, "hidden_size")
    nh = int_field(cfg, "num_attention_heads")
    nkv = int_field(cfg, "num_key_value_heads", nh)
    n_layer = int_field(cfg, "num_hidden_layers")
    if nh % nkv:
        raise CheckpointError(f"config.json: {nh} attention heads are not a multiple of {nkv} key/value heads")
    head_dim = cfg.get("head_dim")
    head_dim = d // nh if head_dim is None else int_field(cfg, "head_dim")
    if head_dim % 2:
        raise CheckpointError(f"config.json: head_dim {head_dim} must be even for rotary embeddings")
    act = cfg.get("hidden_act", "silu")
    if act not in ("silu", "swish"):
        raise CheckpointError(f"config.json: hidden_act {act!r} is not supported for {model_type} (SwiGLU uses 'silu')")
    max_pos = int_field(cfg, "max_position_embeddings", 2048)
    eps = float_field(cfg, "rms_norm_eps", 1e-6)
    if not 0 < eps < 1:
        raise CheckpointError(f"config.json: rms_norm_eps must be in (0, 1) (got {eps})")
    attention_bias = bool_field(cfg, "attention_bias", False)
    w, first, types = _windows(cfg, model_type, n_layer)
    spec = DecoderSpec(
        n_kv_head=nkv, head_dim=head_dim, qkv_bias=bias_default or attention_bias,
        o_bias=attention_bias and model_type in ("llama", "qwen3"), mlp_bias=bool_field(cfg, "mlp_bias", False),
        qk_norm=qk_norm, tied=bool_field(cfg, "tie_word_embeddings", False),
        sliding_window=w, window_from=first, layer_types=types, rope=_rope(cfg, max_pos), n_head=nh,
    )
    return ModelConfig(
        kind="decoder", model_type=model_type, d_model=d, n_layer=n_layer, n_head=nh,
        d_ff=int_field(cfg, "intermediate_size"), act="silu", ln_eps=eps, vocab_size=int_field(cfg, "vocab_size"),
        max_positions=max_pos, decoder=spec,
    )


def describe_decoder(c: ModelConfig) -> str:
    """The decoder's attention in a phrase: 'GQA 8 q / 2 kv heads, hs 64, rope llama3 x8'."""
    s = c.decoder
    att = (f"GQA {c.n_head} q / {s.n_kv_head} kv head{'s' if s.n_kv_head > 1 else ''}" if s.n_kv_head < c.n_head else f"{c.n_head} heads")
    rope = "rope" if s.rope.rope_type == "default" else f"rope {s.rope.rope_type} x{s.rope.factor:g}"
    extra = ", q/k norm" if s.qk_norm else ""
    extra += ", q/k/v bias" if s.qkv_bias else ""
    extra += f", window {s.sliding_window}" if s.sliding_window else ""
    return f"{att}, hs {s.head_dim}, {rope}{extra}"

