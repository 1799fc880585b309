"""What ``config.json`` and ``preprocessor_config.json`` of a checkpoint folder say, checked.

:func:`parse_model_config` turns a Hugging Face ``config.json`` (BERT-family, GPT-2, ViT/DeiT and the
families of :mod:`.families`) into one frozen :class:`CheckpointConfig`; :func:`parse_image_config` turns a
ViT, CLIP, DINOv2 or SigLIP ``preprocessor_config.json`` into an :class:`ImageConfig`.  Anything missing, mistyped or unsupported raises
:class:`~attnviz.checkpoints.errors.CheckpointError` naming the key and what is supported.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from attnviz.checkpoints.decoder_config import DECODER_TYPES, parse_decoder_config
from attnviz.checkpoints.errors import CheckpointError
from attnviz.checkpoints.families import FAMILY_KIND, parse_family, unsupported_reason
from attnviz.checkpoints.model_config import (LN_EPS_RANGE, CheckpointConfig, act_field, bool_field, eps_field,
                                              float_field, int_field, pair_field)
from attnviz.checkpoints.json_file import MAX_JSON_BYTES, MAX_JSON_DEPTH, read_json  # noqa: F401 - re-exported

# model_type in config.json -> the forward pass that runs it
KIND_OF_MODEL_TYPE = {"bert": "bert", "gpt2": "gpt2", "vit": "vit", "deit": "vit"}
# Encoder and vision families read by attnviz.checkpoints.families (same kinds: text in, or image in)
KIND_OF_MODEL_TYPE |= {"roberta": "bert", "xlm-roberta": "bert", "electra": "bert", "distilbert": "bert",
                       "clip_vision_model": "vit", "clip": "vit", "dinov2": "vit", "siglip_vision_model": "vit",
                       "siglip": "vit", "albert": "bert", "mpnet": "bert", "deberta-v2": "bert", "deberta": "bert",
                       "dinov2_with_registers": "vit", "beit": "vit", "swin": "vit"}
SUPPORTED = ("BERT-family encoders (model_type 'bert', e.g. MiniLM; 'roberta', 'xlm-roberta', 'electra', 'distilbert', "
             "'albert', 'mpnet', 'deberta', 'deberta-v2'), "
             "GPT-2 ('gpt2') and vision transformers ('vit', 'deit', 'dinov2', 'dinov2_with_registers', 'beit', 'swin', "
             "'clip_vision_model', 'clip', "
             "'siglip_vision_model', 'siglip')")
SUPPORTED += ("; decoder LLMs Llama, Mistral, Qwen2, Qwen3, Gemma, Gemma 2, Gemma 3, GPT-NeoX / Pythia, Phi-1/2, "
              "Phi-3, OLMo, OLMo 2, StableLM, Falcon, OPT, BLOOM ('llama', 'mistral', 'qwen2', 'qwen3', 'gemma', "
              "'gemma2', 'gemma3_text', 'gpt_neox', 'phi', 'phi3', 'olmo', 'olmo2', 'stablelm', 'falcon', 'opt', "
              "'bloom'); encoder-decoders MarianMT, BART, mBART, T5, mT5 ('marian', "
              "'bart', 'mbart', 't5', 'mt5'); vision-language models LLaVA, PaliGemma, Idefics3 / SmolVLM and SmolVLA "
              "policies ('llava', 'paligemma', 'idefics3', 'smolvlm', 'smolvla')")

# PIL resampling codes a preprocessor config may name (transformers stores PIL's integer enum).
RESAMPLE_NAMES = {0: "nearest", 1: "lanczos", 2: "bilinear", 3: "bicubic", 4: "box", 5: "hamming"}


@dataclass(frozen=True)
class ImageConfig:
    """A ViT image processor's steps: resize, rescale, normalise (in that order)."""

    size: tuple[int, int]  # (H, W) every image is resized to; the patch grid follows from it
    do_resize: bool  # False: images must already have ``size``
    resample: int  # PIL resampling code for the resize (2 = bilinear, the ViT default)
    rescale_factor: float  # multiplies uint8 values (1/255 maps them to [0, 1])
    do_rescale: bool  # False: pixel values are used as 0..255
    image_mean: tuple[float, ...]  # per-channel mean subtracted after rescaling
    image_std: tuple[float, ...]  # per-channel std divided by after subtracting the mean
    do_normalize: bool  # False: mean/std are not applied
    shortest_edge: int = 0  # CLIP / DINOv2 processors: resize the short side to this (aspect kept), then crop
    crop_size: tuple[int, int] = (0, 0)  # (H, W) of the centre crop after the resize ((0, 0): none)
    resize_to: tuple[int, int] = (0, 0)  # DeiT-style: a fixed (H, W) resize before the centre crop ((0, 0): none)


def parse_model_config(cfg: dict) -> CheckpointConfig:
    """Check a config.json dict and return the CheckpointConfig of a supported architecture."""
    model_type = cfg.get("model_type")
    if model_type is None:
        raise CheckpointError("config.json has no 'model_type', so the architecture is unknown")
    if not isinstance(model_type, str):
        raise CheckpointError(f"config.json: 'model_type' must be a name such as \"llama\" (got {model_type!r})")
    if model_type in DECODER_TYPES:
        return parse_decoder_config(cfg)
    if model_type not in KIND_OF_MODEL_TYPE:
        arch = cfg.get("architectures")
        named = f"model_type {model_type!r}" + (f" (architectures {arch})" if arch else "")
        why = unsupported_reason(model_type)
        if why:  # one short line: what is missing (the whole list is what `attnviz-cli model list` is for)
            raise CheckpointError(f"config.json: {named} is not supported: {why.removeprefix('; ')}")
        raise CheckpointError(f"config.json: {named} is not supported: attnviz has no forward pass for it")
    kind = KIND_OF_MODEL_TYPE[model_type]
    if model_type in FAMILY_KIND:
        c = parse_family(cfg, model_type)
    elif kind == "bert":
        pet = cfg.get("position_embedding_type", "absolute")
        if pet != "absolute":
            raise CheckpointError(
                f"config.json: position_embedding_type {pet!r} is not supported; only 'absolute' BERT position tables are"
            )
        c = CheckpointConfig(
            kind=kind, model_type=model_type, d_model=int_field(cfg, "hidden_size"), n_layer=int_field(cfg, "num_hidden_layers"),
            n_head=int_field(cfg, "num_attention_heads"), d_ff=int_field(cfg, "intermediate_size"),
            act=act_field(cfg, "hidden_act", "gelu"), ln_eps=eps_field(cfg, "layer_norm_eps", 1e-12),
            vocab_size=int_field(cfg, "vocab_size"), max_positions=int_field(cfg, "max_position_embeddings", 512),
            type_vocab_size=int_field(cfg, "type_vocab_size", 2, minimum=0),
        )
    elif kind == "gpt2":
        d = int_field(cfg, "n_embd", cfg.get("hidden_size"))
        c = CheckpointConfig(
            kind=kind, model_type=model_type, d_model=d, n_layer=int_field(cfg, "n_layer"), n_head=int_field(cfg, "n_head"),
            d_ff=int_field(cfg, "n_inner", 4 * d) if cfg.get("n_inner") is not None else 4 * d,
            act=act_field(cfg, "activation_function", "gelu_new"), ln_eps=eps_field(cfg, "layer_norm_epsilon", 1e-5),
            vocab_size=int_field(cfg, "vocab_size"), max_positions=int_field(cfg, "n_positions", 1024),
            scale_by_layer=bool_field(cfg, "scale_attn_by_inverse_layer_idx", False),
        )
        if not bool_field(cfg, "scale_attn_weights", True):
            raise CheckpointError("config.json: scale_attn_weights=false is not supported (scores are always scaled by 1/sqrt(hs))")
    else:
        c = CheckpointConfig(
            kind=kind, model_type=model_type, d_model=int_field(cfg, "hidden_size"), n_layer=int_field(cfg, "num_hidden_layers"),
            n_head=int_field(cfg, "num_attention_heads"), d_ff=int_field(cfg, "intermediate_size"),
            act=act_field(cfg, "hidden_act", "gelu"), ln_eps=eps_field(cfg, "layer_norm_eps", 1e-12),
            image_size=pair_field(cfg, "image_size", 224), patch_size=pair_field(cfg, "patch_size", 16),
            num_channels=int_field(cfg, "num_channels", 3), qkv_bias=bool_field(cfg, "qkv_bias", True),
            n_extra=2 if model_type == "deit" else 1,
        )
        for axis, (s, p) in enumerate(zip(c.image_size, c.patch_size)):
            if s % p:
                raise CheckpointError(
                    f"config.json: image_size {c.image_size} is not a multiple of patch_size {c.patch_size} (axis {axis})"
                )
    if c.d_model % c.n_head:
        raise CheckpointError(f"config.json: hidden size {c.d_model} is not divisible by {c.n_head} heads")
    if not LN_EPS_RANGE[0] <= c.ln_eps <= LN_EPS_RANGE[1]:
        raise CheckpointError(f"config.json: the layer norm epsilon is {c.ln_eps!r}; it must be between "
                              f"{LN_EPS_RANGE[0]:g} and {LN_EPS_RANGE[1]:g}")
    return c


def parse_image_config(pp: dict, model: CheckpointConfig) -> ImageConfig:
    """Check a preprocessor_config.json dict against the model it feeds."""
    where = "preprocessor_config.json"
    size = pp.get("size", {"height": model.image_size[0], "width": model.image_size[1]})
    if isinstance(size, int) and not isinstance(size, bool):
        size = {"shortest_edge": size} if _int_is_shortest_edge(pp) else {"height": size, "width": size}
    short, crop = _shortest_edge_crop(pp, size, where)
    if short:
        hw = crop
    elif not isinstance(size, dict) or "height" not in size or "width" not in size:
        raise CheckpointError(
            f"{where}: size {size!r} is not supported; give {{'height': H, 'width': W}} (shortest-edge resizing is not "
            "supported without a centre crop: every image would get its own size)"
        )
    else:
        hw = (int_field(size, "height", where=where), int_field(size, "width", where=where))
    resize_to = (0, 0)
    if not short and bool_field(pp, "do_center_crop", False, where) and pp.get("crop_size") is not None:
        # a fixed resize then a centre crop (DeiT's processors: 256 x 256, then 224 x 224), as transformers
        # applies do_center_crop whatever form size takes
        c = pp["crop_size"]
        c = {"height": c, "width": c} if isinstance(c, int) and not isinstance(c, bool) else c
        if not isinstance(c, dict):
            raise CheckpointError(f"{where}: crop_size must be a number or {{'height': H, 'width': W}} (got {c!r})")
        resize_to, hw = hw, (int_field(c, "height", where=where), int_field(c, "width", where=where))
        crop = hw
    resample = pp.get("resample", 2)
    if resample not in RESAMPLE_NAMES:
        raise CheckpointError(f"{where}: resample {resample!r} is not a PIL resampling code (supported: {RESAMPLE_NAMES})")
    ch = model.num_channels
    mean = pp.get("image_mean", [0.5] * ch)
    std = pp.get("image_std", [0.5] * ch)
    for name, vals in (("image_mean", mean), ("image_std", std)):
        if isinstance(vals, (int, float)) and not isinstance(vals, bool):
            vals = [vals] * ch
        if not isinstance(vals, list) or len(vals) != ch:
            raise CheckpointError(f"{where}: {name} must list {ch} numbers, one per channel (got {vals!r})")
        for v in vals:
            float_field({name: v}, name, where=where)
        if name == "image_mean":
            mean = vals
        else:
            std = vals
    if any(s == 0 for s in std):
        raise CheckpointError(f"{where}: image_std must not contain 0 (got {std})")
    ic = ImageConfig(
        size=hw, do_resize=bool_field(pp, "do_resize", True, where), resample=int(resample),
        rescale_factor=float_field(pp, "rescale_factor", 1 / 255, where), do_rescale=bool_field(pp, "do_rescale", True, where),
        image_mean=tuple(float(m) for m in mean), image_std=tuple(float(s) for s in std),
        do_normalize=bool_field(pp, "do_normalize", True, where), shortest_edge=short, crop_size=crop,
        resize_to=resize_to,
    )
    gh, gw = model.grid
    if ic.size != model.image_size and gh != gw:
        raise CheckpointError(
            f"{where} resizes images to {ic.size[0]}x{ic.size[1]}, but the model's position embeddings are for "
            f"{model.image_size[0]}x{model.image_size[1]} ({gh}x{gw} patches); interpolating position embeddings "
            "from a non-square grid is not supported (transformers interpolates square grids only)"
        )
    if ic.size[0] < model.patch_size[0] or ic.size[1] < model.patch_size[1]:
        raise CheckpointError(f"{where}: images of {ic.size[0]}x{ic.size[1]} px are smaller than one patch {model.patch_size}")
    _check_input_size(ic, model, where)
    return ic


MAX_INPUT_PIXELS = 40_000_000  # a processor size (or a short-side resize) beyond this is refused before resizing
MAX_ATTENTION_BYTES = 2 << 30  # every layer's and head's (T, T) float32 maps of one image


def _check_input_size(ic: ImageConfig, model: CheckpointConfig, where: str) -> None:
    """Refuse a processor size whose pixels or whose attention maps (L, nh, T, T) would not fit."""
    H, W = ic.size
    if H * W > MAX_INPUT_PIXELS:
        raise CheckpointError(f"{where}: images of {H}x{W} px are more than {MAX_INPUT_PIXELS / 1e6:g} MP")
    T = model.n_extra + (H // model.patch_size[0]) * (W // model.patch_size[1])
    nbytes = model.n_layer * model.n_head * T * T * 4
    if nbytes > MAX_ATTENTION_BYTES:
        raise CheckpointError(
            f"{where}: images of {H}x{W} px give {T} tokens, and {model.n_layer} layers x {model.n_head} heads of "
            f"{T}x{T} attention maps would take {nbytes / 2**30:.1f} GiB (limit {MAX_ATTENTION_BYTES / 2**30:g} GiB)"
        )


# Image processors for which a bare number as ``size`` is the short side (transformers builds their size
# dict with default_to_square=False); for ViT's it is a square.
SHORTEST_EDGE_PROCESSORS = ("CLIPImageProcessor", "CLIPFeatureExtractor", "BitImageProcessor", "SiglipImageProcessor")


def _int_is_shortest_edge(pp: dict) -> bool:
    kind = pp.get("image_processor_type") or pp.get("feature_extractor_type") or ""
    kind = str(kind).removesuffix("Fast").removesuffix("Pil")
    return kind in SHORTEST_EDGE_PROCESSORS


def _shortest_edge_crop(pp: dict, size, where: str) -> tuple[int, tuple[int, int]]:
    """(shortest edge, crop (H, W)) of a CLIP / DINOv2-style processor, or (0, (0, 0)) for a fixed (H, W) resize."""
    if not (isinstance(size, dict) and "shortest_edge" in size and "height" not in size):
        return 0, (0, 0)
    if "longest_edge" in size:
        raise CheckpointError(f"{where}: size {size!r} with a longest edge is not supported")
    short = int_field(size, "shortest_edge", where=where)
    crop = pp.get("crop_size")
    if isinstance(crop, int) and not isinstance(crop, bool):
        crop = {"height": crop, "width": crop}
    if not bool_field(pp, "do_center_crop", False, where) or not isinstance(crop, dict):
        raise CheckpointError(
            f"{where}: shortest-edge resizing is not supported without a centre crop (every image would get its own size)"
        )
    return short, (int_field(crop, "height", where=where), int_field(crop, "width", where=where))
