"""``config.json`` of a decoder LLM (Llama, Mistral, Qwen2, Qwen3, Gemma, Gemma 2, Gemma 3, GPT-NeoX /
Pythia, Phi-1/2, Phi-3, OLMo, OLMo 2, StableLM, Falcon, OPT, BLOOM, and the mixture-of-experts Mixtral,
Qwen2-MoE and Qwen3-MoE) -> a checked :class:`CheckpointConfig`.

They share one block (a norm, grouped-query attention with RoPE, an MLP, a final norm); what differs
(biases, q/k norms, sliding windows, head_dim, rope scaling and partial rotary, Gemma's (1 + w) norms,
scaled embeddings, extra norms around attention and MLP, soft-capped scores, a rotary base per layer
type, LayerNorm instead of RMSNorm, fused q/k/v projections, parallel attention and MLP, a plain MLP,
learned positions, ALiBi, a sparse mixture of experts in place of the MLP: :class:`MoeSpec`) is carried
in :class:`DecoderSpec`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from attnviz.checkpoints.errors import CheckpointError
from attnviz.checkpoints.model_config import CheckpointConfig, act_field, bool_field, float_field, int_field

# model_type -> (q/k/v bias default, q/k RMSNorm)
DECODER_TYPES = {"llama": (False, False), "mistral": (False, False), "qwen2": (True, False), "qwen3": (False, True)}
GEMMA_TYPES = ("gemma", "gemma2", "gemma3_text")
DECODER_TYPES |= {"gemma": (False, False), "gemma2": (False, False), "gemma3_text": (False, True)}
# the families of _parse_other: their own layer layouts, read by the same forward pass
OTHER_TYPES = ("gpt_neox", "phi", "phi3", "olmo", "olmo2", "stablelm", "falcon", "opt", "bloom")
DECODER_TYPES |= {t: (False, False) for t in OTHER_TYPES}
# sparse mixture-of-experts decoders: Mistral's, Qwen2's and Qwen3's attention, top-k routed SwiGLU experts
MOE_TYPES = ("mixtral", "qwen2_moe", "qwen3_moe")
DECODER_TYPES |= {"mixtral": (False, False), "qwen2_moe": (True, False), "qwen3_moe": (False, True)}
ROPE_TYPES = ("default", "linear", "llama3", "yarn", "dynamic", "longrope")
FAMILY = {"llama": "Llama", "mistral": "Mistral", "qwen2": "Qwen2", "qwen3": "Qwen3", "gemma": "Gemma",
          "gemma2": "Gemma 2", "gemma3_text": "Gemma 3", "gpt_neox": "GPT-NeoX", "phi": "Phi", "phi3": "Phi-3",
          "olmo": "OLMo", "olmo2": "OLMo 2", "stablelm": "StableLM", "falcon": "Falcon",
          "opt": "OPT", "bloom": "BLOOM", "mixtral": "Mixtral", "qwen2_moe": "Qwen2-MoE", "qwen3_moe": "Qwen3-MoE"}
# families whose attention rotates only part of each head when the config says so (partial_rotary_factor);
# transformers' Llama-style attention rotates the whole head and cannot run a factor below 1
PARTIAL_ROTARY_TYPES = ("gpt_neox", "phi", "phi3", "stablelm")
LAYER_TYPES = ("sliding_attention", "full_attention")  # the layer_types values the Gemma families use


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
    partial: float = 1.0  # share of each head's features that is rotated (partial_rotary_factor, rotary_pct)
    max_positions: int = 0  # dynamic: the context past which the base grows
    short_factor: tuple[float, ...] = ()  # longrope: per-frequency divisors up to original_max_positions
    long_factor: tuple[float, ...] = ()  # longrope: ... beyond it


@dataclass(frozen=True)
class MoeSpec:
    """A sparse mixture-of-experts MLP: per token a router picks ``top_k`` of ``n_experts`` SwiGLU experts."""

    n_experts: int  # routed experts per sparse layer (num_local_experts, num_experts)
    top_k: int  # experts each token is sent to (num_experts_per_tok)
    d_expert: int  # each expert's hidden width (Mixtral: intermediate_size; Qwen: moe_intermediate_size)
    norm_topk: bool  # the k chosen probabilities are divided by their sum (always for Mixtral)
    shared: int = 0  # width of the shared expert every token passes, behind a sigmoid gate (Qwen2-MoE); 0: none
    step: int = 1  # layer i is sparse when (i + 1) % step == 0 (decoder_sparse_step) ...
    dense_layers: frozenset[int] = frozenset()  # ... and i is not one of these (mlp_only_layers): they keep a dense MLP

    def sparse(self, layer: int) -> bool:
        """Layer ``layer`` routes its tokens to experts (else it has the dense MLP of intermediate_size)."""
        return self.n_experts > 0 and layer not in self.dense_layers and (layer + 1) % self.step == 0


@dataclass(frozen=True)
class DecoderSpec:
    """What a decoder block needs beyond CheckpointConfig's shared numbers."""

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

    n_head: int = 0  # query heads (CheckpointConfig.n_head), so the spec answers kv_head alone
    norm_plus_one: bool = False  # RMSNorm gains are (1 + w), computed in at least float32 (Gemma)
    embed_scale: bool = False  # token rows are multiplied by sqrt(d_model), a number in the compute dtype (Gemma)
    sandwich_norm: bool = False  # attention's output and the MLP's input and output are RMSNormed too (Gemma 2, 3)
    query_pre_attn_scalar: float = 0.0  # scores are scaled by this ** -0.5 (Gemma 2, 3); 0: by head_dim ** -0.5
    attn_softcap: float | None = None  # scaled scores become c tanh(s / c) before the mask (attn_logit_softcapping)
    final_softcap: float | None = None  # logits become c tanh(l / c) (final_logit_softcapping; no logits are computed)
    window_pattern: int = 0  # without layer_types: layer i slides unless (i + 1) % pattern == 0 (Gemma 2, 3)
    rope_local: RopeSpec | None = None  # rotary settings of the sliding layers when they differ (Gemma 3's local base)
    norm: str = "rms"  # "rms"; "layer": LayerNorm with weight and bias; "plain": LayerNorm without either (OLMo)
    qkv: str = "separate"  # "separate" q/k/v_proj; "fused": one qkv_proj, rows [q | k | v] (Phi-3, multi-query
    #                        Falcon); "per_head": one query_key_value, rows [q_h | k_h | v_h] head after head
    #                        (GPT-NeoX, the first Falcons); "grouped": per kv head its query heads, k, v (Falcon's
    #                        new decoder architecture)
    block: str = "sequential"  # "sequential"; "parallel": attention and MLP both read one norm of x and are
    #                            added to it together (Phi, StableLM's use_parallel_residual); "parallel2": each
    #                            reads its own norm of x (GPT-NeoX); "post": no input norms, the outputs of
    #                            attention and MLP are normed before they are added (OLMo 2)
    mlp: str = "gated"  # "gated": act(gate_proj) * up_proj; "fused_gated": gate_up_proj, gate first (Phi-3);
    #                     "plain": up_proj, act, down_proj (GPT-NeoX, Phi)
    qk_norm_kind: str = "head"  # with qk_norm: "head" RMSNorm of each head (Qwen3, Gemma 3); "whole": RMSNorm over
    #                             the whole projection, before the heads are split (OLMo 2); "head_layer": one
    #                             LayerNorm every head shares (Phi); "per_head_layer": a LayerNorm per head, no bias (StableLM)
    clip_qkv: float | None = None  # q, k and v clamped to [-c, c] after the projection (OLMo)
    head_bias: bool = False  # the LM head carries a bias (Phi)
    learned_positions: bool = False  # a learned position table added to the token rows instead of RoPE (OPT)
    position_offset: int = 0  # row of position 0 in that table (OPT: 2)
    alibi: bool = False  # ALiBi: slope_h * j added to the scaled scores instead of RoPE (BLOOM), see alibi_slopes
    embed_norm: bool = False  # a LayerNorm of the token rows before the first layer (BLOOM)
    moe: MoeSpec | None = None  # the sparse layers' mixture of experts (Mixtral, Qwen2-MoE, Qwen3-MoE)

    @property
    def scale(self) -> float:
        """The factor the q . k scores are multiplied by."""
        if self.query_pre_attn_scalar:
            return float(self.query_pre_attn_scalar) ** -0.5
        return float(self.head_dim) ** -0.5

    def rope_for(self, layer: int) -> RopeSpec:
        """The rotary settings of ``layer`` (Gemma 3: the local ones on sliding layers)."""
        return self.rope_local if self.rope_local is not None and self.window(layer) else self.rope

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
        if self.window_pattern:
            return self.sliding_window if (layer + 1) % self.window_pattern else 0
        return self.sliding_window if layer >= self.window_from else 0


def _rope(cfg: dict, max_positions: int, partial_default: float | None = None, theta_key: str = "rope_theta",
          head_dim: int = 0) -> RopeSpec:
    """The rotary settings of a one-setting family. ``partial_default``: the family's partial_rotary_factor
    when the config names none (None: the family rotates whole heads and refuses a factor below 1)."""
    params = cfg.get("rope_parameters")
    if params is None:
        params = cfg.get("rope_scaling")
    if params is None:
        params = {}
    if not isinstance(params, dict):
        raise CheckpointError(f"config.json: rope_scaling must be an object (got {params!r})")
    if any(isinstance(v, dict) for v in params.values()):
        raise CheckpointError("config.json: rotary settings per layer type are not supported")
    return _rope_params(params, cfg, max_positions, cfg.get(theta_key, cfg.get("rope_theta", 10000.0)),
                        "config.json rope_scaling", partial_default, head_dim)


def _partial(params: dict, cfg: dict, where: str, partial_default: float | None) -> float:
    held, src = (params, where) if "partial_rotary_factor" in params else (cfg, "config.json")
    key = "partial_rotary_factor"
    if key not in held and "rotary_pct" in cfg:  # GPT-NeoX's name for it
        held, src, key = cfg, "config.json", "rotary_pct"
    value = held.get(key)
    if value is None:
        return 1.0 if partial_default is None else partial_default
    f = float_field(held, key, None, src)
    if partial_default is None:
        if f not in (0.0, 1.0):
            raise CheckpointError(f"{src}: {key} {value!r} is not supported for this family (it rotates whole heads)")
        return 1.0
    if not 0 < f <= 1:
        raise CheckpointError(f"{src}: {key} must be in (0, 1] (got {value!r})")
    return f


def _factors(params: dict, key: str, n: int, where: str) -> tuple[float, ...]:
    v = params.get(key)
    if not isinstance(v, list) or len(v) != n or not all(isinstance(x, (int, float)) and not isinstance(x, bool)
                                                          and x > 0 for x in v):
        raise CheckpointError(f"{where}: longrope needs {key}: {n} positive numbers, one per rotary frequency")
    return tuple(float(x) for x in v)


def _rope_params(params: dict, cfg: dict, max_positions: int, theta_default, where: str,
                 partial_default: float | None = None, head_dim: int = 0) -> RopeSpec:
    """One rotary settings object (rope_parameters / rope_scaling, or one layer type's) -> RopeSpec."""
    theta = float_field(params, "rope_theta", theta_default, where)
    rtype = params.get("rope_type", params.get("type", "default"))
    if rtype in ("su", "yarn") and cfg.get("model_type") == "phi3":  # Phi3Config reads both as longrope
        rtype = "longrope"
    if rtype not in ROPE_TYPES:
        raise CheckpointError(f"config.json: rope type {rtype!r} is not supported (supported: {', '.join(ROPE_TYPES)})")
    partial = _partial(params, cfg, where, partial_default)
    if not theta > 1:
        raise CheckpointError(f"config.json: rope_theta must be > 1 (got {theta})")
    kw = {"theta": theta, "rope_type": rtype, "partial": partial}
    if head_dim:
        rd = int(head_dim * partial)
        if rd < 2 or rd % 2:
            raise CheckpointError(f"config.json: partial_rotary_factor {partial:g} of head_dim {head_dim} rotates {rd} "
                                  "features; rotary embeddings need an even number, at least 2")
    if rtype == "dynamic":
        kw["factor"] = float_field(params, "factor", None, where)
        if not 1 <= kw["factor"] <= 1e6:
            raise CheckpointError(f"{where}: dynamic factor must be in [1, 1e6] (got {kw['factor']})")
        kw["max_positions"] = max_positions
        if head_dim and int(head_dim * partial) <= 2:
            raise CheckpointError(f"{where}: dynamic rope needs more than 2 rotated features per head")
    if rtype == "longrope":
        omp = cfg.get("original_max_position_embeddings", params.get("original_max_position_embeddings"))
        if omp is None and cfg.get("model_type") == "phi3":
            omp = 4096  # Phi3Config's default
        if omp is None:
            raise CheckpointError(f"{where}: longrope needs original_max_position_embeddings")
        omp = int_field({"original_max_position_embeddings": omp}, "original_max_position_embeddings", where=where)
        n = int(head_dim * partial) // 2 if head_dim else None
        if n is None:
            raise CheckpointError(f"{where}: longrope is not supported for this family")
        kw["short_factor"] = _factors(params, "short_factor", n, where)
        kw["long_factor"] = _factors(params, "long_factor", n, where)
        kw["original_max_positions"] = omp
        factor = params.get("factor")
        factor = max_positions / omp if factor is None else float_field(params, "factor", None, where)
        af = params.get("attention_factor")
        if af is None:
            af = 1.0 if factor <= 1.0 else math.sqrt(1 + math.log(factor) / math.log(omp))
        else:
            af = float_field(params, "attention_factor", None, where)
        if not (math.isfinite(af) and af > 0):
            raise CheckpointError(f"{where}: longrope attention_factor must be a positive number (got {af!r})")
        kw["factor"], kw["attention_factor"] = factor, af
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


def _context(max_positions: int, rope: RopeSpec) -> int:
    """The context a model is run to: max_position_embeddings, times the factor with dynamic rope (which
    raises its base to reach past it)."""
    return int(max_positions * rope.factor) if rope.rope_type == "dynamic" else max_positions


def _windows(cfg: dict, model_type: str, n_layer: int) -> tuple[int, int, tuple[str, ...] | None]:
    """(sliding window, first sliding layer, layer_types) as transformers reads them for the family."""
    if model_type == "llama":
        return 0, 0, None
    sw = cfg.get("sliding_window")
    if model_type in ("qwen2", "qwen3", "qwen2_moe", "qwen3_moe") and not cfg.get("use_sliding_window", False):
        sw = None
    if sw is None or (model_type == "qwen2_moe" and sw == 0):
        return 0, 0, None
    w = int_field(cfg, "sliding_window")
    if model_type in ("mistral", "mixtral", "qwen3_moe"):  # one sliding mask for every layer
        return w, 0, None
    if model_type == "qwen2_moe" and cfg.get("layer_types") is None:  # Qwen2MoeConfig: even layers below max_window_layers
        top = int_field(cfg, "max_window_layers", 28, minimum=0)
        types = ["sliding_attention" if (i + 1) % 2 and i < top else "full_attention" for i in range(n_layer)]
        return w, 0, tuple(types)
    types = cfg.get("layer_types")
    if types is None:
        return w, int_field(cfg, "max_window_layers", n_layer, minimum=0), None
    if not isinstance(types, list) or len(types) != n_layer or not all(isinstance(t, str) for t in types):
        raise CheckpointError(f"config.json: layer_types must list {n_layer} strings, one per layer")
    return w, 0, tuple(types)


def parse_decoder_config(cfg: dict) -> CheckpointConfig:
    """A decoder LLM's config.json (a model_type of :data:`DECODER_TYPES`) -> CheckpointConfig with ``decoder`` set."""
    model_type = cfg["model_type"]
    if model_type in GEMMA_TYPES:
        return _parse_gemma(cfg, model_type)
    if model_type in OTHER_TYPES:
        return _parse_other(cfg, model_type)
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
    qkv_bias = bias_default or attention_bias
    if model_type == "mixtral":  # MixtralAttention has no biases whatever the config says
        qkv_bias = attention_bias = False
    elif model_type == "qwen2_moe":  # Qwen2MoeConfig's own switch, for q/k/v only
        qkv_bias, attention_bias = bool_field(cfg, "qkv_bias", True), False
    w, first, types = _windows(cfg, model_type, n_layer)
    if model_type == "mixtral" and "rope_theta" not in cfg:  # MixtralConfig.default_theta
        cfg = {**cfg, "rope_theta": 1_000_000.0}
    spec = DecoderSpec(
        n_kv_head=nkv, head_dim=head_dim, qkv_bias=qkv_bias,
        o_bias=attention_bias and model_type in ("llama", "qwen3", "qwen3_moe"),
        mlp_bias=bool_field(cfg, "mlp_bias", False) if model_type not in MOE_TYPES else False,
        qk_norm=qk_norm, tied=bool_field(cfg, "tie_word_embeddings", False),
        sliding_window=w, window_from=first, layer_types=types, rope=_rope(cfg, max_pos, head_dim=head_dim), n_head=nh,
        moe=_moe(cfg, model_type) if model_type in MOE_TYPES else None,
    )
    return CheckpointConfig(
        kind="decoder", model_type=model_type, d_model=d, n_layer=n_layer, n_head=nh,
        d_ff=int_field(cfg, "intermediate_size"), act="silu", ln_eps=eps, vocab_size=int_field(cfg, "vocab_size"),
        max_positions=_context(max_pos, spec.rope), decoder=spec,
    )


# model_type -> (experts key, experts, top-k, expert width key or None for intermediate_size, its default)
# as the config classes of transformers 5.24 default them
MAX_EXPERTS = 4096  # published mixtures have 8 to a few hundred experts per layer
_MOE_DEFAULTS = {"mixtral": ("num_local_experts", 8, 2, None, None),
                 "qwen2_moe": ("num_experts", 60, 4, "moe_intermediate_size", 1408),
                 "qwen3_moe": ("num_experts", 128, 8, "moe_intermediate_size", 768)}


def _moe(cfg: dict, model_type: str) -> MoeSpec:
    """The mixture of experts of a Mixtral, Qwen2-MoE or Qwen3-MoE config.json."""
    key, n_default, k_default, width_key, width_default = _MOE_DEFAULTS[model_type]
    other = "num_experts" if key == "num_local_experts" else "num_local_experts"
    if key not in cfg and other in cfg:  # the config classes' attribute_map: Qwen3-MoE saves num_local_experts
        key = other
    n = int_field(cfg, key, n_default, minimum=1 if model_type == "mixtral" else 0)
    if n > MAX_EXPERTS:  # each is three tensors per layer, listed before the file is compared with the config
        raise CheckpointError(f"config.json: {key} {n:,} is more experts than attnviz reads ({MAX_EXPERTS:,})")
    k = int_field(cfg, "num_experts_per_tok", k_default)
    if n and k > n:
        raise CheckpointError(f"config.json: num_experts_per_tok {k} is more than the {n} experts ({key})")
    width = int_field(cfg, "intermediate_size") if width_key is None else int_field(cfg, width_key, width_default)
    if model_type == "mixtral":
        return MoeSpec(n_experts=n, top_k=k, d_expert=width, norm_topk=True)
    dense = cfg.get("mlp_only_layers")
    dense = [] if dense is None else dense
    if not isinstance(dense, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in dense):
        raise CheckpointError(f"config.json: mlp_only_layers must be a list of layer numbers (got {dense!r})")
    return MoeSpec(
        n_experts=n, top_k=k, d_expert=width, norm_topk=bool_field(cfg, "norm_topk_prob", False),
        shared=int_field(cfg, "shared_expert_intermediate_size", 5632, minimum=0) if model_type == "qwen2_moe" else 0,
        step=int_field(cfg, "decoder_sparse_step", 1), dense_layers=frozenset(dense))


# Gemma config classes' defaults (transformers 5.24), used where config.json leaves a key out
GEMMA_DEFAULTS = {
    "gemma": {"num_key_value_heads": 16, "max_position_embeddings": 8192},
    "gemma2": {"num_key_value_heads": 4, "max_position_embeddings": 8192, "attn_logit_softcapping": 50.0,
               "final_logit_softcapping": 30.0, "window_pattern": 2},
    "gemma3_text": {"num_key_value_heads": 4, "max_position_embeddings": 131_072, "attn_logit_softcapping": None,
                    "final_logit_softcapping": None, "window_pattern": 6},
}


def _softcap(cfg: dict, key: str, default) -> float | None:
    value = cfg.get(key, default)
    if value is None:
        return None
    value = float_field({key: value}, key)
    if not value > 0:
        raise CheckpointError(f"config.json: {key!r} must be a positive number or null (got {value!r})")
    return value


def _gemma_layers(cfg: dict, model_type: str, n_layer: int) -> tuple[int, tuple[str, ...] | None, int]:
    """(sliding window, layer_types or None, window pattern) of Gemma 2 / 3 as transformers 5.24 reads them."""
    types = cfg.get("layer_types")
    pattern = 0
    if types is not None:
        if not isinstance(types, list) or len(types) != n_layer or not all(t in LAYER_TYPES for t in types):
            raise CheckpointError(f"config.json: layer_types must list {n_layer} entries, one per layer, each "
                                  f"{' or '.join(map(repr, LAYER_TYPES))}")
        types = tuple(types)
        sliding = "sliding_attention" in types
    else:
        pattern = GEMMA_DEFAULTS[model_type]["window_pattern"]
        if model_type == "gemma3_text":
            pattern = int_field(cfg, "sliding_window_pattern", pattern)
        sliding = pattern != 1  # layer 0 slides unless the pattern is 1
    sw = cfg.get("sliding_window", 4096)
    if sw is None:
        if sliding:
            raise CheckpointError("config.json: sliding_window is null, but layer_types has sliding layers")
        return 0, types, pattern
    return int_field({"sliding_window": sw}, "sliding_window"), types, pattern


def _gemma_rope(cfg: dict, max_positions: int) -> tuple[RopeSpec, RopeSpec | None]:
    """(global, local) rotary settings: Gemma 3 keeps one per layer type (transformers 5.24's rope_parameters
    {"full_attention": ..., "sliding_attention": ...}, or the older rope_theta, rope_local_base_freq and
    rope_scaling, which applies to the global layers); Gemma and Gemma 2 one for every layer (local None)."""
    if cfg["model_type"] != "gemma3_text":
        return _rope(cfg, max_positions), None
    params = cfg.get("rope_parameters")
    if params is None:
        params = {}
    if not isinstance(params, dict):
        raise CheckpointError(f"config.json: rope_parameters must be an object (got {params!r})")
    per_type = {}
    for layer_type in ("full_attention", "sliding_attention"):
        p = params.get(layer_type)
        if p is None:
            p = {"rope_type": "default"}
        if not isinstance(p, dict):
            raise CheckpointError(f"config.json: rope_parameters[{layer_type!r}] must be an object (got {p!r})")
        per_type[layer_type] = dict(p)
    scaling = cfg.get("rope_scaling")
    if scaling is not None:
        if not isinstance(scaling, dict):
            raise CheckpointError(f"config.json: rope_scaling must be an object (got {scaling!r})")
        per_type["full_attention"].update(scaling)
    full = _rope_params(per_type["full_attention"], cfg, max_positions, cfg.get("rope_theta", 1_000_000.0),
                        "config.json rope_parameters['full_attention']")
    local = _rope_params(per_type["sliding_attention"], cfg, max_positions, cfg.get("rope_local_base_freq", 10_000.0),
                         "config.json rope_parameters['sliding_attention']")
    return full, local


def _parse_gemma(cfg: dict, model_type: str) -> CheckpointConfig:
    """A Gemma / Gemma 2 / Gemma 3 text config.json -> CheckpointConfig, read as transformers 5.24 reads it."""
    defaults = GEMMA_DEFAULTS[model_type]
    d = int_field(cfg, "hidden_size")
    nh = int_field(cfg, "num_attention_heads")
    nkv = int_field(cfg, "num_key_value_heads", defaults["num_key_value_heads"])
    n_layer = int_field(cfg, "num_hidden_layers")
    if nh % nkv:
        raise CheckpointError(f"config.json: {nh} attention heads are not a multiple of {nkv} key/value heads")
    head_dim = int_field(cfg, "head_dim", 256)
    if head_dim % 2:
        raise CheckpointError(f"config.json: head_dim {head_dim} must be even for rotary embeddings")
    if cfg.get("use_bidirectional_attention"):
        raise CheckpointError("config.json: use_bidirectional_attention true (attention to every token, not "
                              "causal) is not supported")
    if model_type == "gemma":
        act = act_field(cfg, "hidden_act", "gelu_pytorch_tanh")
        act = "gelu_pytorch_tanh" if act == "gelu" else act  # as GemmaConfig: the legacy name meant the tanh form
    else:
        act = act_field(cfg, "hidden_activation", "gelu_pytorch_tanh")
    max_pos = int_field(cfg, "max_position_embeddings", defaults["max_position_embeddings"])
    eps = float_field(cfg, "rms_norm_eps", 1e-6)
    if not 0 < eps < 1:
        raise CheckpointError(f"config.json: rms_norm_eps must be in (0, 1) (got {eps})")
    bias = bool_field(cfg, "attention_bias", False)
    rope, rope_local = _gemma_rope(cfg, max_pos)
    extra: dict = {}
    if model_type != "gemma":
        w, types, pattern = _gemma_layers(cfg, model_type, n_layer)
        qpas = float_field(cfg, "query_pre_attn_scalar", 256)
        if not qpas > 0:
            raise CheckpointError(f"config.json: 'query_pre_attn_scalar' must be positive (got {qpas!r})")
        extra = dict(
            sandwich_norm=True, query_pre_attn_scalar=qpas, sliding_window=w, layer_types=types, window_pattern=pattern,
            # Gemma 3's attention ignores attn_logit_softcapping in transformers 5.24 (its eager call passes none)
            attn_softcap=(_softcap(cfg, "attn_logit_softcapping", defaults["attn_logit_softcapping"])
                          if model_type == "gemma2" else None),
            final_softcap=_softcap(cfg, "final_logit_softcapping", defaults["final_logit_softcapping"]),
            rope_local=rope_local,
        )
    spec = DecoderSpec(
        n_kv_head=nkv, head_dim=head_dim, qkv_bias=bias, o_bias=bias, mlp_bias=False,
        qk_norm=DECODER_TYPES[model_type][1], tied=bool_field(cfg, "tie_word_embeddings", True),
        sliding_window=extra.pop("sliding_window", 0), window_from=0, layer_types=extra.pop("layer_types", None),
        rope=rope, n_head=nh, norm_plus_one=True, embed_scale=True, **extra,
    )
    return CheckpointConfig(
        kind="decoder", model_type=model_type, d_model=d, n_layer=n_layer, n_head=nh,
        d_ff=int_field(cfg, "intermediate_size"), act=act, ln_eps=eps, vocab_size=int_field(cfg, "vocab_size"),
        max_positions=_context(max_pos, spec.rope), decoder=spec,
    )


# Per family: (activation key, its default, norm epsilon key, partial_rotary_factor default (None: whole heads))
_OTHER = {
    "gpt_neox": ("hidden_act", "gelu", "layer_norm_eps", 0.25),
    "phi": ("hidden_act", "gelu_new", "layer_norm_eps", 0.5),
    "phi3": ("hidden_act", "silu", "rms_norm_eps", 1.0),
    "olmo": ("hidden_act", "silu", None, None),
    "olmo2": ("hidden_act", "silu", "rms_norm_eps", None),
    "stablelm": ("hidden_act", "silu", "layer_norm_eps", 0.25),
    "falcon": ("activation", "gelu", "layer_norm_epsilon", None),
    "opt": ("activation_function", "relu", None, None),
    "bloom": (None, "gelu_fast", "layer_norm_epsilon", None),
}
BLOOM_CONTEXT = 2048  # BLOOM's config has no max_position_embeddings (ALiBi extrapolates); its training length


def alibi_slopes(n_head: int) -> list[float]:
    """BLOOM's ALiBi slopes (transformers' _get_alibi_slopes): 2^(-8 k / n) for the largest power of two n
    <= n_head, then the odd ones of the next power of two for the heads beyond it."""
    cp = 2 ** math.floor(math.log2(n_head))
    base = 2.0 ** (-(2.0 ** -(math.log2(cp) - 3)))
    slopes = [base ** k for k in range(1, cp + 1)]
    if cp != n_head:
        extra = 2.0 ** (-(2.0 ** -(math.log2(2 * cp) - 3)))
        slopes += [extra ** k for k in range(1, 1 + 2 * (n_head - cp), 2)]
    return slopes


def _opt_layout(cfg: dict, d: int) -> dict:
    """OPT: LayerNorm (without weight and bias when layer_norm_elementwise_affine is false), biases as
    enable_bias says, a ReLU MLP, learned positions from row 2, the head tied to the embedding."""
    proj = cfg.get("word_embed_proj_dim")
    if proj is not None and int_field(cfg, "word_embed_proj_dim") != d:
        raise CheckpointError(f"config.json: OPT with word_embed_proj_dim {proj} != hidden_size {d} (project_in / "
                              "project_out, OPT-350m) is not supported")
    if not bool_field(cfg, "do_layer_norm_before", True):
        raise CheckpointError("config.json: OPT with do_layer_norm_before false (norms after attention, OPT-350m) "
                              "is not supported")
    if bool_field(cfg, "_remove_final_layer_norm", False):
        raise CheckpointError("config.json: OPT with _remove_final_layer_norm true is not supported")
    bias = bool_field(cfg, "enable_bias", True)
    affine = bool_field(cfg, "layer_norm_elementwise_affine", True)
    return dict(norm="layer" if affine else "plain", qkv_bias=bias, o_bias=bias, mlp="plain", mlp_bias=bias,
                learned_positions=True, position_offset=2, tied=bool_field(cfg, "tie_word_embeddings", True))


def _d_ff(cfg: dict, model_type: str, d: int) -> int:
    if model_type == "bloom":
        return 4 * d
    if model_type == "opt":
        return int_field(cfg, "ffn_dim", 3072)
    if model_type == "falcon":  # FalconConfig: ffn_hidden_size, 4 x hidden_size when null
        return 4 * d if cfg.get("ffn_hidden_size") is None else int_field(cfg, "ffn_hidden_size")
    return int_field(cfg, "intermediate_size")


def _falcon_kv_heads(cfg: dict, nh: int) -> int:
    """Key/value heads of a Falcon: num_kv_heads in the new decoder architecture, 1 when multi-query, else nh."""
    if bool_field(cfg, "new_decoder_architecture", False):
        return nh if cfg.get("num_kv_heads") is None else int_field(cfg, "num_kv_heads")
    if bool_field(cfg, "multi_query", True):
        return 1
    kv = nh if cfg.get("num_kv_heads") is None else int_field(cfg, "num_kv_heads")
    if kv != nh:  # transformers' attention reshapes the keys to num_kv_heads: only nh fits the layout
        raise CheckpointError(f"config.json: Falcon without multi_query needs num_kv_heads = {nh} (got {kv})")
    return nh


def _falcon_layout(cfg: dict) -> dict:
    """The block and fused q/k/v layout of a Falcon, as FalconDecoderLayer reads its flags."""
    bias = bool_field(cfg, "bias", False)
    new = bool_field(cfg, "new_decoder_architecture", False)
    parallel = bool_field(cfg, "parallel_attn", True)
    n_ln = cfg.get("num_ln_in_parallel_attn")
    n_ln = (2 if new else 1) if n_ln is None else int_field(cfg, "num_ln_in_parallel_attn")
    if new and not parallel:
        raise CheckpointError("config.json: Falcon's new_decoder_architecture with parallel_attn false is not supported")
    if new:
        block, qkv = ("parallel2" if n_ln == 2 else "parallel"), "grouped"
    else:
        block = "parallel" if parallel else "sequential"
        qkv = "fused" if bool_field(cfg, "multi_query", True) else "per_head"
    return dict(norm="layer", qkv=qkv, block=block, mlp="plain", qkv_bias=bias, o_bias=bias, mlp_bias=bias,
                tied=bool_field(cfg, "tie_word_embeddings", True))


def _parse_other(cfg: dict, model_type: str) -> CheckpointConfig:
    """GPT-NeoX, Phi, Phi-3, OLMo, OLMo 2, StableLM, Falcon, OPT and BLOOM, read as transformers 5.24 reads them."""
    act_key, act_default, eps_key, partial_default = _OTHER[model_type]
    if model_type == "bloom":  # BloomConfig's own names (n_embed: the old name of hidden_size) and defaults
        cfg = {**cfg, "hidden_size": cfg.get("hidden_size", cfg.get("n_embed", 64)),
               "num_attention_heads": cfg.get("n_head", 8), "num_hidden_layers": cfg.get("n_layer", 2),
               "max_position_embeddings": BLOOM_CONTEXT}
    d = int_field(cfg, "hidden_size")
    nh = int_field(cfg, "num_attention_heads")
    nkv = (nh if model_type in ("gpt_neox", "bloom") or cfg.get("num_key_value_heads") is None
           else int_field(cfg, "num_key_value_heads"))
    if model_type == "falcon":
        nkv = _falcon_kv_heads(cfg, nh)
    n_layer = int_field(cfg, "num_hidden_layers")
    if d % nh:
        raise CheckpointError(f"config.json: hidden size {d} is not divisible by {nh} heads")
    if nh % nkv:
        raise CheckpointError(f"config.json: {nh} attention heads are not a multiple of {nkv} key/value heads")
    head_dim = d // nh
    act = act_default if act_key is None else act_field(cfg, act_key, act_default)
    max_pos = int_field(cfg, "max_position_embeddings", 2048 if model_type != "phi3" else 4096)
    eps = 1e-5 if eps_key is None else float_field(cfg, eps_key, 1e-5)  # OLMo's, OPT's LayerNorms: eps 1e-5 in code
    if not 0 < eps < 1:
        raise CheckpointError(f"config.json: {eps_key} must be in (0, 1) (got {eps})")
    if model_type in ("opt", "bloom"):  # no rotary embeddings: a learned position table (OPT), ALiBi (BLOOM)
        rope = RopeSpec()
    elif model_type == "gpt_neox":
        params = cfg.get("rope_parameters", cfg.get("rope_scaling"))
        params = {} if params is None else params
        if not isinstance(params, dict):
            raise CheckpointError(f"config.json: rope_parameters must be an object (got {params!r})")
        rope = _rope_params(params, cfg, max_pos, cfg.get("rotary_emb_base", cfg.get("rope_theta", 10000.0)),
                            "config.json rope_parameters", partial_default, head_dim)
    else:
        rope = _rope(cfg, max_pos, partial_default, head_dim=head_dim)
    bias = bool_field(cfg, "attention_bias", model_type == "gpt_neox")
    if model_type == "falcon":
        if bool_field(cfg, "alibi", False):
            raise CheckpointError("config.json: Falcon with alibi true is not supported (ALiBi score biases)")
        bias = bool_field(cfg, "bias", False)
    kw: dict = dict(n_kv_head=nkv, head_dim=head_dim, qkv_bias=bias, o_bias=bias, mlp_bias=False, qk_norm=False,
                    tied=bool_field(cfg, "tie_word_embeddings", False), sliding_window=0, window_from=0,
                    layer_types=None, rope=rope, n_head=nh)
    if model_type == "gpt_neox":
        parallel = bool_field(cfg, "use_parallel_residual", True)
        kw |= dict(norm="layer", qkv="per_head", mlp="plain", mlp_bias=True,
                   block="parallel2" if parallel else "sequential")
    elif model_type == "phi":
        kw |= dict(norm="layer", qkv_bias=True, o_bias=True, mlp="plain", mlp_bias=True, block="parallel",
                   qk_norm=bool_field(cfg, "qk_layernorm", False), qk_norm_kind="head_layer", head_bias=True)
    elif model_type == "phi3":
        sw = cfg.get("sliding_window")
        kw |= dict(qkv="fused", qkv_bias=False, o_bias=False, mlp="fused_gated",
                   sliding_window=0 if sw is None else int_field(cfg, "sliding_window"))
    elif model_type == "olmo":
        clip = cfg.get("clip_qkv")
        if clip is not None:
            clip = float_field(cfg, "clip_qkv", None)
            if not clip > 0:
                raise CheckpointError(f"config.json: clip_qkv must be a positive number or null (got {clip!r})")
        kw |= dict(norm="plain", clip_qkv=clip)
    elif model_type == "olmo2":
        kw |= dict(block="post", qk_norm=True, qk_norm_kind="whole")
    elif model_type == "falcon":
        kw |= _falcon_layout(cfg)
    elif model_type == "opt":
        kw |= _opt_layout(cfg, d)
    elif model_type == "bloom":
        if bool_field(cfg, "apply_residual_connection_post_layernorm", False):
            raise CheckpointError("config.json: BLOOM with apply_residual_connection_post_layernorm true is not supported")
        if bool_field(cfg, "slow_but_exact", False) and int_field(cfg, "pretraining_tp", 1) > 1:
            raise CheckpointError("config.json: BLOOM with slow_but_exact true (sliced tensor-parallel sums) is not supported")
        kw |= dict(norm="layer", qkv="per_head", mlp="plain", qkv_bias=True, o_bias=True, mlp_bias=True, alibi=True,
                   embed_norm=True, tied=bool_field(cfg, "tie_word_embeddings", True))
    else:  # stablelm
        kw |= dict(norm="layer", qkv_bias=bool_field(cfg, "use_qkv_bias", False), o_bias=False,
                   qk_norm=bool_field(cfg, "qk_layernorm", False), qk_norm_kind="per_head_layer",
                   block="parallel" if bool_field(cfg, "use_parallel_residual", False) else "sequential")
    if act not in ("silu", "swish") and kw.get("mlp", "gated") != "plain":
        raise CheckpointError(f"config.json: {act_key} {act!r} is not supported for {model_type} (its gated MLP uses 'silu')")
    return CheckpointConfig(
        kind="decoder", model_type=model_type, d_model=d, n_layer=n_layer, n_head=nh,
        d_ff=_d_ff(cfg, model_type, d), act=act, ln_eps=eps, vocab_size=int_field(cfg, "vocab_size"),
        max_positions=_context(max_pos, rope), decoder=DecoderSpec(**kw),
    )


def _describe_positions(c: CheckpointConfig) -> str:
    s = c.decoder
    if s.learned_positions:
        return "learned positions"
    if s.alibi:
        return "ALiBi"
    if s.rope_local is not None:
        return (f"{_describe_rope(s.rope_local)} base {s.rope_local.theta:g} on sliding layers, "
                f"{_describe_rope(s.rope)} base {s.rope.theta:g} on global layers")
    return _describe_rope(s.rope)


def _describe_rope(r: RopeSpec) -> str:
    out = "rope" if r.rope_type == "default" else f"rope {r.rope_type} x{r.factor:g}"
    return out if r.partial == 1 else f"{out} on {r.partial:g} of each head"


def describe_decoder(c: CheckpointConfig) -> str:
    """The decoder's attention in a phrase: 'GQA 8 q / 2 kv heads, hs 64, rope llama3 x8'; Gemma 2's
    'GQA 8 q / 4 kv heads, hs 256, rope, window 4096 on alternate layers, softcap 50'."""
    s = c.decoder
    att = (f"GQA {c.n_head} q / {s.n_kv_head} kv head{'s' if s.n_kv_head > 1 else ''}" if s.n_kv_head < c.n_head else f"{c.n_head} heads")
    rope = _describe_positions(c)
    extra = ", q/k norm" if s.qk_norm else ""
    extra += ", q/k/v bias" if s.qkv_bias else ""
    extra += f", window {s.sliding_window}" if s.sliding_window else ""
    if s.sliding_window and s.layer_types is None and s.window_pattern:
        p = s.window_pattern
        extra += " on alternate layers" if p == 2 else (f" on {p - 1} of every {p} layers" if p > 2 else "")
    elif s.sliding_window and s.layer_types is not None and c.model_type in GEMMA_TYPES:
        extra += f" on {sum(t == 'sliding_attention' for t in s.layer_types)} of {c.n_layer} layers"
    if s.query_pre_attn_scalar and s.query_pre_attn_scalar != s.head_dim:
        extra += f", scale 1/√{s.query_pre_attn_scalar:g}"
    extra += f", softcap {s.attn_softcap:g}" if s.attn_softcap else ""
    extra += {"parallel": ", parallel attention and MLP", "parallel2": ", parallel attention and MLP",
              "post": ", norms after attention and MLP"}.get(s.block, "")
    extra += ", LayerNorm" if s.norm != "rms" else ""
    if s.moe is not None:
        m = s.moe
        sparse = sum(m.sparse(i) for i in range(min(c.n_layer, 10_000)))
        extra += f", top-{m.top_k} of {m.n_experts} experts"
        extra += " + a shared expert" if m.shared else ""
        extra += f" on {sparse} of {c.n_layer} layers" if sparse != c.n_layer and c.n_layer <= 10_000 else ""
    return f"{att}, hs {s.head_dim}, {rope}{extra}"
