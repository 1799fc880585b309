"""``config.json`` and tensor lists of the families beyond BERT, GPT-2 and ViT.

Encoders (kind "bert", post-LN): RoBERTa, XLM-RoBERTa, ELECTRA, DistilBERT, ALBERT, MPNet, DeBERTa (v1, v2, v3);
vision (kind "vit", pre-LN): the CLIP vision tower and the SigLIP vision tower (each alone or inside a
whole ``clip`` / ``siglip`` checkpoint), DINOv2, DINOv2 with registers, BEiT and Swin. :data:`TOWER_TYPES` are vision towers that only run inside a
vision-language model (Idefics3's and SmolVLM's SigLIP with per-image position buckets): they have a
config and a tensor list here, but no folder of their own opens. :func:`vision_tower_config` reads
the ``vision_config`` of such a model. :data:`UNSUPPORTED` says, for families people bring that are
still refused, what is missing.
"""

from __future__ import annotations

from dataclasses import replace

from attnviz.checkpoints.model_config import (LN_EPS_RANGE, CheckpointConfig, act_field, bool_field, float_field,
                                              int_field, pair_field)
from attnviz.checkpoints.errors import CheckpointError

ROBERTA_TYPES = ("roberta", "xlm-roberta")
ENCODER_TYPES = ROBERTA_TYPES + ("electra", "distilbert")
CLIP_TYPES = ("clip_vision_model", "clip")
SIGLIP_TYPES = ("siglip_vision_model", "siglip")
# SigLIP towers whose position ids are bucketised per image from a patch mask (Idefics3VisionEmbeddings)
TOWER_TYPES = ("idefics3_vision", "smolvlm_vision")
VISION_TYPES = CLIP_TYPES + ("dinov2",) + SIGLIP_TYPES
# ALBERT, MPNet and DeBERTa (v1, v2, v3) are parsed and listed by attnviz.checkpoints.encoders; DINOv2 with
# registers and BEiT below
ENCODER_TYPES += ("albert", "mpnet", "deberta-v2", "deberta")
VISION_TYPES += ("dinov2_with_registers", "beit")
# Swin (windowed attention over shifted windows, patch merging) is parsed and listed by attnviz.checkpoints.swin
VISION_TYPES += ("swin",)
FAMILY_KIND = {**{t: "bert" for t in ENCODER_TYPES}, **{t: "vit" for t in VISION_TYPES + TOWER_TYPES}}
# model_type -> the defaults transformers' config class gives the keys a saved config.json may omit
_TOWER_DEFAULTS = {
    "siglip_vision_model": dict(hidden_size=768, num_attention_heads=12, patch_size=16),
    "idefics3_vision": dict(hidden_size=1152, num_attention_heads=16, patch_size=32),
    "smolvlm_vision": dict(hidden_size=1152, num_attention_heads=16, patch_size=32),
}

# model_type -> what its forward pass needs that attnviz does not do (shown when it is refused)
UNSUPPORTED = {
    "swinv2": "scaled cosine attention and a position bias MLP",
}


def unsupported_reason(model_type) -> str:
    """'' or ' (needs ...)' for a model_type that is refused."""
    why = UNSUPPORTED.get(model_type) if isinstance(model_type, str) else None
    return f"; it needs {why}, which is not implemented" if why else ""


def _vision_common(cfg: dict, model_type: str, n_extra: int = 1, hidden: int = 768, heads: int = 12, **extra) -> dict:
    return dict(
        kind="vit", model_type=model_type, d_model=int_field(cfg, "hidden_size", hidden),
        n_layer=int_field(cfg, "num_hidden_layers", 12), n_head=int_field(cfg, "num_attention_heads", heads),
        image_size=pair_field(cfg, "image_size", 224), num_channels=int_field(cfg, "num_channels", 3), n_extra=n_extra,
        **extra,
    )


def _sub_config(cfg: dict, key: str) -> dict:
    sub = cfg.get(key, {})
    if not isinstance(sub, dict):
        raise CheckpointError(f"config.json: {key} must be a JSON object (got {type(sub).__name__})")
    return sub


def vision_tower_config(vision_config: dict, defaults: dict | None = None) -> CheckpointConfig:
    """The CheckpointConfig of a vision-language model's ``vision_config`` (a CLIP or SigLIP tower, or
    Idefics3's / SmolVLM's SigLIP), checked as a folder's config.json is.

    ``defaults`` are values for the keys the saved dict may leave out (transformers writes only what
    differs from the composite model's own defaults, e.g. PaliGemma's 1152-wide SigLIP).
    """
    if not isinstance(vision_config, dict):
        raise CheckpointError(f"config.json: vision_config must be a JSON object (got {type(vision_config).__name__})")
    cfg = {**(defaults or {}), **vision_config}
    model_type = cfg.get("model_type")
    towers = CLIP_TYPES[:1] + SIGLIP_TYPES[:1] + TOWER_TYPES
    if model_type not in towers:
        raise CheckpointError(f"config.json: vision_config model_type {model_type!r} is not a supported vision tower "
                              f"(supported: {', '.join(towers)})")
    c = parse_family(cfg, model_type)
    if c.d_model % c.n_head:
        raise CheckpointError(f"config.json: vision_config hidden size {c.d_model} is not divisible by {c.n_head} heads")
    if not LN_EPS_RANGE[0] <= c.ln_eps <= LN_EPS_RANGE[1]:
        raise CheckpointError(f"config.json: vision_config layer_norm_eps is {c.ln_eps!r}; it must be between "
                              f"{LN_EPS_RANGE[0]:g} and {LN_EPS_RANGE[1]:g}")
    if model_type in TOWER_TYPES and c.grid[0] != c.grid[1]:
        raise CheckpointError(f"config.json: vision_config image_size {c.image_size} with patch_size {c.patch_size} gives a "
                              f"non-square {c.grid[0]}x{c.grid[1]} position grid; {model_type} buckets positions on a square one")
    return c


def parse_family(cfg: dict, model_type: str) -> CheckpointConfig:
    """The CheckpointConfig of one of :data:`FAMILY_KIND`'s model types (shared checks are the caller's)."""
    c = _parse(cfg, model_type)
    for axis, (s, p) in enumerate(zip(c.image_size, c.patch_size)):
        if p and s % p:
            raise CheckpointError(f"config.json: image_size {c.image_size} is not a multiple of patch_size {c.patch_size} (axis {axis})")
    return c


def _parse(cfg: dict, model_type: str) -> CheckpointConfig:
    if model_type in ("albert", "mpnet", "deberta-v2", "deberta"):
        from attnviz.checkpoints.encoders import parse_text_family

        return parse_text_family(cfg, model_type)
    if model_type in ("dinov2_with_registers", "beit"):
        return parse_vision_family(cfg, model_type)
    if model_type == "swin":
        from attnviz.checkpoints.swin import parse_swin

        return parse_swin(cfg)
    if model_type in ROBERTA_TYPES or model_type == "electra":
        pet = cfg.get("position_embedding_type", "absolute")
        if pet != "absolute":
            raise CheckpointError(f"config.json: position_embedding_type {pet!r} is not supported; only 'absolute' tables are")
        d = int_field(cfg, "hidden_size")
        pad = int_field(cfg, "pad_token_id", 1, minimum=0)
        c = CheckpointConfig(
            kind="bert", model_type=model_type, d_model=d, n_layer=int_field(cfg, "num_hidden_layers"),
            n_head=int_field(cfg, "num_attention_heads"), d_ff=int_field(cfg, "intermediate_size"),
            act=act_field(cfg, "hidden_act", "gelu"), ln_eps=float_field(cfg, "layer_norm_eps", 1e-12),
            vocab_size=int_field(cfg, "vocab_size"), max_positions=int_field(cfg, "max_position_embeddings", 512),
            type_vocab_size=int_field(cfg, "type_vocab_size", 2, minimum=0),
            padding_idx=pad if model_type in ROBERTA_TYPES else -1,
            embedding_size=int_field(cfg, "embedding_size", d) if model_type == "electra" else d,
        )
        if c.padding_idx >= c.max_positions - 1:
            raise CheckpointError(f"config.json: pad_token_id {pad} leaves no positions in a {c.max_positions}-row position table")
        if c.padding_idx >= c.vocab_size:
            raise CheckpointError(f"config.json: pad_token_id {pad} is outside the {c.vocab_size}-row embedding table")
        return c
    if model_type == "distilbert":  # LayerNorm epsilon fixed at 1e-12 in DistilBERT's code, not in its config
        return CheckpointConfig(
            kind="bert", model_type=model_type, d_model=int_field(cfg, "dim", 768), n_layer=int_field(cfg, "n_layers", 6),
            n_head=int_field(cfg, "n_heads", 12), d_ff=int_field(cfg, "hidden_dim", 3072), act=act_field(cfg, "activation", "gelu"),
            ln_eps=1e-12, vocab_size=int_field(cfg, "vocab_size"), max_positions=int_field(cfg, "max_position_embeddings", 512),
        )
    if model_type in CLIP_TYPES:
        if model_type == "clip":
            cfg = _sub_config(cfg, "vision_config")
        return CheckpointConfig(**_vision_common(
            cfg, model_type, d_ff=int_field(cfg, "intermediate_size", 3072), act=act_field(cfg, "hidden_act", "quick_gelu"),
            ln_eps=float_field(cfg, "layer_norm_eps", 1e-5), patch_size=pair_field(cfg, "patch_size", 32), qkv_bias=True))
    if model_type in SIGLIP_TYPES + TOWER_TYPES:  # no class token; the attention-pooling head ("head.*") is not read
        if model_type == "siglip":
            cfg = _sub_config(cfg, "vision_config")
        dflt = _TOWER_DEFAULTS["siglip_vision_model" if model_type in SIGLIP_TYPES else model_type]
        return CheckpointConfig(**_vision_common(
            cfg, model_type, n_extra=0, hidden=dflt["hidden_size"], heads=dflt["num_attention_heads"],
            d_ff=int_field(cfg, "intermediate_size", 3072), act=act_field(cfg, "hidden_act", "gelu_pytorch_tanh"),
            ln_eps=float_field(cfg, "layer_norm_eps", 1e-6), patch_size=pair_field(cfg, "patch_size", dflt["patch_size"]),
            qkv_bias=True))
    if model_type == "dinov2":
        if bool_field(cfg, "use_swiglu_ffn", False):
            raise CheckpointError("config.json: use_swiglu_ffn=true (the giant DINOv2's SwiGLU MLP) is not supported")
        d = int_field(cfg, "hidden_size", 768)
        ratio = float_field(cfg, "mlp_ratio", 4)
        if not ratio > 0:
            raise CheckpointError(f"config.json: 'mlp_ratio' must be > 0 (got {ratio})")
        return CheckpointConfig(**_vision_common(
            cfg, model_type, d_ff=max(1, int(d * ratio)), act=act_field(cfg, "hidden_act", "gelu"),
            ln_eps=float_field(cfg, "layer_norm_eps", 1e-6), patch_size=pair_field(cfg, "patch_size", 14),
            qkv_bias=bool_field(cfg, "qkv_bias", True)))
    raise CheckpointError(f"config.json: model_type {model_type!r} is not one of {', '.join(FAMILY_KIND)}")


def _ln(name: str, d: int) -> dict:
    return {f"{name}.weight": (d,), f"{name}.bias": (d,)}


def _lin(name: str, n_out: int, n_in: int, bias: bool = True) -> dict:
    out = {f"{name}.weight": (n_out, n_in)}
    if bias:
        out[f"{name}.bias"] = (n_out,)
    return out


def _bert_layers(c: CheckpointConfig) -> dict:
    d, ff, shapes = c.d_model, c.d_ff, {}
    for i in range(c.n_layer):
        p = f"encoder.layer.{i}."
        for qkv in ("query", "key", "value"):
            shapes |= _lin(p + f"attention.self.{qkv}", d, d)
        shapes |= _lin(p + "attention.output.dense", d, d) | _ln(p + "attention.output.LayerNorm", d)
        shapes |= _lin(p + "intermediate.dense", ff, d) | _lin(p + "output.dense", d, ff) | _ln(p + "output.LayerNorm", d)
    return shapes


def _pre_ln_layers(c: CheckpointConfig) -> dict:
    """The encoder layers CLIP and SigLIP share: layer_norm1, self_attn q/k/v/out_proj, layer_norm2, mlp fc1/fc2."""
    d, ff, shapes = c.d_model, c.d_ff, {}
    for i in range(c.n_layer):
        p = f"encoder.layers.{i}."
        shapes |= _ln(p + "layer_norm1", d) | _ln(p + "layer_norm2", d)
        for n in ("q_proj", "k_proj", "v_proj", "out_proj"):
            shapes |= _lin(p + f"self_attn.{n}", d, d)
        shapes |= _lin(p + "mlp.fc1", ff, d) | _lin(p + "mlp.fc2", d, ff)
    return shapes


def siglip_tensors(c: CheckpointConfig) -> dict[str, tuple[int, ...]]:
    """Canonical name -> shape of every tensor a SigLIP tower reads (post_layernorm included; ``head.*`` not):
    the names inside ``vision_model.`` of a SiglipModel, or after a VLM's prefix such as
    ``model.vision_tower.vision_model.``."""
    d = c.d_model
    gh, gw = c.grid
    shapes = {"embeddings.patch_embedding.weight": (d, c.num_channels, *c.patch_size),
              "embeddings.patch_embedding.bias": (d,),
              "embeddings.position_embedding.weight": (gh * gw, d)}
    return shapes | _pre_ln_layers(c) | _ln("post_layernorm", d)


def family_tensors(c: CheckpointConfig) -> dict[str, tuple[int, ...]]:
    """Canonical tensor name -> shape for every tensor the forward pass of a family model reads."""
    if c.model_type in ("albert", "mpnet", "deberta-v2", "deberta"):
        from attnviz.checkpoints.encoders import text_family_tensors

        return text_family_tensors(c)
    if c.model_type in ("dinov2_with_registers", "beit"):
        return vision_family_tensors(c)
    if c.model_type == "swin":
        from attnviz.checkpoints.swin import swin_tensors

        return swin_tensors(c)
    d, ff = c.d_model, c.d_ff
    gh, gw = c.grid
    if c.model_type in ROBERTA_TYPES or c.model_type == "electra":
        e = c.embedding_size or d
        shapes = {"embeddings.word_embeddings.weight": (c.vocab_size, e),
                  "embeddings.position_embeddings.weight": (c.max_positions, e)}
        if c.type_vocab_size:
            shapes["embeddings.token_type_embeddings.weight"] = (c.type_vocab_size, e)
        shapes |= _ln("embeddings.LayerNorm", e)
        if e != d:
            shapes |= _lin("embeddings_project", d, e)
        return shapes | _bert_layers(c)
    if c.model_type == "distilbert":
        shapes = {"embeddings.word_embeddings.weight": (c.vocab_size, d),
                  "embeddings.position_embeddings.weight": (c.max_positions, d)} | _ln("embeddings.LayerNorm", d)
        for i in range(c.n_layer):
            p = f"transformer.layer.{i}."
            for n in ("q_lin", "k_lin", "v_lin", "out_lin"):
                shapes |= _lin(p + f"attention.{n}", d, d)
            shapes |= _ln(p + "sa_layer_norm", d) | _lin(p + "ffn.lin1", ff, d) | _lin(p + "ffn.lin2", d, ff)
            shapes |= _ln(p + "output_layer_norm", d)
        return shapes
    if c.model_type in CLIP_TYPES:  # post_layernorm is not listed: CLIP applies it to the pooled class token only
        shapes = {"embeddings.class_embedding": (d,),
                  "embeddings.patch_embedding.weight": (d, c.num_channels, *c.patch_size),
                  "embeddings.position_embedding.weight": (gh * gw + 1, d)} | _ln("pre_layrnorm", d)
        return shapes | _pre_ln_layers(c)
    if c.model_type in SIGLIP_TYPES + TOWER_TYPES:
        return siglip_tensors(c)
    if c.model_type == "dinov2":
        shapes = {"embeddings.cls_token": (1, 1, d), "embeddings.position_embeddings": (1, gh * gw + 1, d),
                  "embeddings.patch_embeddings.projection.weight": (d, c.num_channels, *c.patch_size),
                  "embeddings.patch_embeddings.projection.bias": (d,)}
        for i in range(c.n_layer):
            p = f"encoder.layer.{i}."
            shapes |= _ln(p + "norm1", d) | _ln(p + "norm2", d)
            for n in ("query", "key", "value"):
                shapes |= _lin(p + f"attention.attention.{n}", d, d, bias=c.qkv_bias)
            shapes |= _lin(p + "attention.output.dense", d, d) | _lin(p + "mlp.fc1", ff, d) | _lin(p + "mlp.fc2", d, ff)
            shapes[p + "layer_scale1.lambda1"] = (d,)
            shapes[p + "layer_scale2.lambda1"] = (d,)
        return shapes | _ln("layernorm", d)
    raise CheckpointError(f"no tensor list for model_type {c.model_type!r}")


# ---- DINOv2 with registers and BEiT --------------------------------------------------------------------


def parse_vision_family(cfg: dict, model_type: str) -> CheckpointConfig:
    """The CheckpointConfig of a DINOv2-with-registers or BEiT config.json (defaults: transformers' config class's)."""
    if model_type == "dinov2_with_registers":
        c = parse_family({"patch_size": 16, **cfg}, "dinov2")
        r = int_field(cfg, "num_register_tokens", 4, minimum=0)
        return replace(c, model_type=model_type, n_extra=1 + r, n_registers=r)
    if model_type == "beit":
        if bool_field(cfg, "add_fpn", False):
            raise CheckpointError("config.json: add_fpn=true (BEiT's detection neck) is not supported")
        use_rel = bool_field(cfg, "use_relative_position_bias", False)
        use_shared = bool_field(cfg, "use_shared_relative_position_bias", False)
        return CheckpointConfig(
            kind="vit", model_type=model_type, d_model=int_field(cfg, "hidden_size", 768),
            n_layer=int_field(cfg, "num_hidden_layers", 12), n_head=int_field(cfg, "num_attention_heads", 12),
            d_ff=int_field(cfg, "intermediate_size", 3072), act=act_field(cfg, "hidden_act", "gelu"),
            ln_eps=float_field(cfg, "layer_norm_eps", 1e-12), image_size=pair_field(cfg, "image_size", 224),
            patch_size=pair_field(cfg, "patch_size", 16), num_channels=int_field(cfg, "num_channels", 3), n_extra=1,
            rel_bias="beit_shared" if use_shared else ("beit" if use_rel else ""),
            abs_positions=bool_field(cfg, "use_absolute_position_embeddings", False),
            layer_scale=float_field(cfg, "layer_scale_init_value", 0.1) > 0,
            final_norm=not bool_field(cfg, "use_mean_pooling", True))
    raise CheckpointError(f"config.json: model_type {model_type!r} is not dinov2_with_registers or beit")


def vision_family_tensors(c: CheckpointConfig) -> dict[str, tuple[int, ...]]:
    """Canonical tensor name -> shape of every tensor DINOv2-with-registers' or BEiT's forward pass reads."""
    d, ff = c.d_model, c.d_ff
    gh, gw = c.grid
    if c.model_type == "dinov2_with_registers":
        shapes = family_tensors(replace(c, model_type="dinov2"))
        shapes["embeddings.register_tokens"] = (1, c.n_registers, d)
        return shapes
    if c.model_type == "beit":
        n_rel = (2 * gh - 1) * (2 * gw - 1) + 3
        shapes = {"embeddings.cls_token": (1, 1, d),
                  "embeddings.patch_embeddings.projection.weight": (d, c.num_channels, *c.patch_size),
                  "embeddings.patch_embeddings.projection.bias": (d,)}
        if c.abs_positions:
            shapes["embeddings.position_embeddings"] = (1, gh * gw + 1, d)
        if c.rel_bias == "beit_shared":
            shapes["encoder.relative_position_bias.relative_position_bias_table"] = (n_rel, c.n_head)
        for i in range(c.n_layer):
            p = f"encoder.layer.{i}."
            for n in ("layernorm_before", "layernorm_after"):
                shapes |= {p + n + ".weight": (d,), p + n + ".bias": (d,)}
            for n in ("query", "key", "value"):
                shapes[p + f"attention.attention.{n}.weight"] = (d, d)
            shapes[p + "attention.attention.query.bias"] = shapes[p + "attention.attention.value.bias"] = (d,)
            if c.rel_bias == "beit":
                shapes[p + "attention.attention.relative_position_bias.relative_position_bias_table"] = (n_rel, c.n_head)
            shapes |= {p + "attention.output.dense.weight": (d, d), p + "attention.output.dense.bias": (d,),
                       p + "intermediate.dense.weight": (ff, d), p + "intermediate.dense.bias": (ff,),
                       p + "output.dense.weight": (d, ff), p + "output.dense.bias": (d,)}
            if c.layer_scale:
                shapes[p + "lambda_1"] = shapes[p + "lambda_2"] = (d,)
        if c.final_norm:
            shapes |= {"layernorm.weight": (d,), "layernorm.bias": (d,)}
        return shapes
    raise CheckpointError(f"no tensor list for model_type {c.model_type!r}")
