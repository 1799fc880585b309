"""A SmolVLA policy folder as lerobot saves it -> a checked :class:`SmolVLASpec`.

The folder holds lerobot's ``config.json`` (``"type": "smolvla"``), ``model.safetensors`` and, from training,
``policy_preprocessor.json`` with the normaliser's statistics in a safetensors file beside it. The VLM's own
architecture is not in the policy's config: ``vlm_model_name`` names a SmolVLM folder (config.json, tokenizer,
processor files; ``load_vlm_weights: false`` reads no weights from it), found as a folder beside the policy's
files, as a path, or as a repo id in the local Hugging Face cache. Nothing is downloaded.

The expert's shapes follow lerobot 0.4.4 (``smolvlm_with_expert.py``): a copy of the VLM's text config with
``hidden_size * expert_width_multiplier`` and lerobot's ``get_intermediate_size``, ``num_expert_layers`` layers
(or as many as the VLM keeps, ``num_vlm_layers``), and on the cross-attention layers k/v projections that read
the VLM's keys and values.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from attnviz.checkpoints.config import read_json
from attnviz.checkpoints.decoder_config import parse_decoder_config
from attnviz.checkpoints.errors import CheckpointError
from attnviz.checkpoints.model_config import CheckpointConfig, bool_field, float_field, int_field

VLM_TYPES = ("smolvlm", "idefics3")  # config.json model_type of the VLM folder vlm_model_name names
VISION_DEFAULTS = {"hidden_size": 1152, "intermediate_size": 3072, "num_hidden_layers": 12, "num_attention_heads": 16,
                   "num_channels": 3, "image_size": 224, "patch_size": 32, "layer_norm_eps": 1e-6,
                   "hidden_act": "gelu_pytorch_tanh"}  # SmolVLMVisionConfig's defaults for keys a file leaves out
NORM_MODES = ("IDENTITY", "MEAN_STD", "MIN_MAX", "QUANTILES", "QUANTILE10")
NORM_EPS = 1e-8  # lerobot's NormalizerProcessorStep eps when the preprocessor does not say


@dataclass(frozen=True)
class VisionSpec:
    """SmolVLM's SigLIP-style vision tower."""

    d: int  # hidden size
    d_ff: int  # MLP width
    n_layer: int
    n_head: int
    image_size: int  # the size its position table was made for (num_patches_per_side * patch)
    patch: int  # square patch side in pixels
    eps: float  # LayerNorm eps
    act: str  # MLP activation


@dataclass(frozen=True)
class StateNorm:
    """How the preprocessor maps the raw robot state to what the model reads."""

    mode: str  # one of NORM_MODES
    a: np.ndarray | None  # (S,) mean / min / q01 / q10
    b: np.ndarray | None  # (S,) std / max / q99 / q90
    eps: float

    def apply(self, x: np.ndarray) -> np.ndarray:
        """lerobot's NormalizerProcessorStep arithmetic in float32."""
        x = x.astype(np.float32)
        if self.mode == "IDENTITY" or self.a is None:
            return x
        eps = np.float32(self.eps)
        if self.mode == "MEAN_STD":
            return (x - self.a) / (self.b + eps)
        denom = self.b - self.a  # (S,)
        denom = np.where(denom == 0, eps, denom).astype(np.float32)
        return (np.float32(2.0) * (x - self.a) / denom - np.float32(1.0)).astype(np.float32)


@dataclass(frozen=True)
class SmolVLASpec:
    """Everything a SmolVLA forward pass reads beyond its weights."""

    text: CheckpointConfig  # the VLM's Llama decoder, kind "decoder", n_layer = the layers the policy keeps
    expert: CheckpointConfig  # the action expert (same heads and head_dim, narrower, no embedding table)
    vision: VisionSpec
    scale_factor: int  # pixel-shuffle factor of the connector
    cameras: tuple[str, ...]  # image feature keys the user gives pictures for, in config order
    n_empty: int  # empty cameras lerobot adds as padded images: their image tokens are masked for every query
    state_dim: int  # length of the robot state the policy reads (observation.state)
    action_dim: int  # the action feature's length (the velocity keeps all max_action_dim columns)
    max_state_dim: int  # the state is zero-padded to this before state_proj
    max_action_dim: int  # noise and velocity width
    chunk: int  # action tokens (chunk_size)
    resize: tuple[int, int]  # resize_imgs_with_padding (width, height)
    tokenizer_max_length: int  # the instruction is truncated to this many tokens
    pad_to_max: bool  # pad_language_to "max_length": the pads are masked for every query, so left out
    image_special_tokens: bool  # add_image_special_tokens: <fake><global-img> before, <fake> after each image
    cross: tuple[bool, ...]  # per VLM layer: the expert cross-attends to the prefix only (else self-attention)
    expert_at: tuple[int, ...]  # per VLM layer: the expert layer run beside it, -1 for none
    min_period: float  # sine-cosine time embedding range
    max_period: float
    state_norm: StateNorm
    vlm_folder: Path  # where the SmolVLM config and tokenizer were read
    vlm_name: str  # vlm_model_name as config.json writes it

    @property
    def tokens_per_image(self) -> int:
        g = self.resize[0] // self.vision.patch // self.scale_factor
        return g * g

    @property
    def grid(self) -> tuple[int, int]:
        g = self.resize[0] // self.vision.patch // self.scale_factor
        return g, g


def intermediate_size(hidden: int, ffn_dim_multiplier: int = 4, multiple_of: int = 256) -> int:
    """lerobot's get_intermediate_size for the expert's MLP."""
    h = int(2 * hidden / 3)
    h = int(ffn_dim_multiplier * h)
    return multiple_of * ((h + multiple_of - 1) // multiple_of)


def resolve_vlm(folder: Path, name) -> Path:
    """The SmolVLM folder ``vlm_model_name`` names: beside the policy, a path, or a cached repo id."""
    if not isinstance(name, str) or not name:
        raise CheckpointError("config.json: 'vlm_model_name' must name the SmolVLM the policy is built on")
    for cand in (folder / name, Path(name).expanduser()):
        if (cand / "config.json").is_file():
            return cand
    if name.count("/") == 1:
        from attnviz.checkpoints.hub_cache import cache_dir, cached_models

        for rid, snap in cached_models():
            if rid == name:
                return snap
        raise CheckpointError(f"the policy's VLM {name!r} is neither a folder beside it nor in the local Hugging Face "
                              f"cache ({cache_dir()}); nothing is downloaded without asking: "
                              f"`attnviz-cli model fetch {name}` brings it")
    raise CheckpointError(f"the policy's VLM {name!r} is not a folder with a config.json (looked beside the policy "
                          "and as a path)")


def _features(cfg: dict, key: str) -> dict:
    feats = cfg.get(key)
    if not isinstance(feats, dict):
        raise CheckpointError(f"config.json: {key!r} must be an object of the policy's features")
    for k, f in feats.items():
        if not isinstance(f, dict) or not isinstance(f.get("shape"), list) or not isinstance(f.get("type"), str):
            raise CheckpointError(f"config.json: feature {k!r} must have a 'type' and a 'shape' list")
    return feats


def _vision(vcfg: dict) -> VisionSpec:
    v = {**VISION_DEFAULTS, **vcfg}
    where = "the VLM's vision_config"
    spec = VisionSpec(d=int_field(v, "hidden_size", where=where), d_ff=int_field(v, "intermediate_size", where=where),
                      n_layer=int_field(v, "num_hidden_layers", where=where),
                      n_head=int_field(v, "num_attention_heads", where=where),
                      image_size=int_field(v, "image_size", where=where), patch=int_field(v, "patch_size", where=where),
                      eps=float_field(v, "layer_norm_eps", where=where), act=v["hidden_act"])
    from attnviz.checkpoints.layers import ACT

    if spec.act not in ACT:
        raise CheckpointError(f"{where}: hidden_act {spec.act!r} is not supported")
    if int_field(v, "num_channels", where=where) != 3:
        raise CheckpointError(f"{where}: only RGB (num_channels 3) is supported")
    if spec.d % spec.n_head:
        raise CheckpointError(f"{where}: hidden_size {spec.d} is not a multiple of {spec.n_head} heads")
    return spec


def _state_norm(folder: Path, cfg: dict, state_dim: int) -> StateNorm:
    """The state's normalisation from policy_preprocessor.json (absent: the state is used as given)."""
    pre = folder / "policy_preprocessor.json"
    mode = "IDENTITY"
    mapping = cfg.get("normalization_mapping") or {}
    if isinstance(mapping, dict):
        mode = mapping.get("STATE", "IDENTITY")
    if not pre.is_file():
        return StateNorm("IDENTITY", None, None, NORM_EPS)
    p = read_json(pre, "the policy's preprocessor")
    step = next((s for s in p.get("steps", []) if isinstance(s, dict) and s.get("registry_name") == "normalizer_processor"),
                None)
    if step is None:
        return StateNorm("IDENTITY", None, None, NORM_EPS)
    conf = step.get("config") or {}
    mode = (conf.get("norm_map") or {}).get("STATE", mode)
    if mode not in NORM_MODES:
        raise CheckpointError(f"policy_preprocessor.json: state normalisation {mode!r} is not supported "
                              f"({', '.join(NORM_MODES)} are)")
    eps = float_field(conf, "eps", NORM_EPS, where="policy_preprocessor.json")
    if mode == "IDENTITY":
        return StateNorm(mode, None, None, eps)
    state_file = step.get("state_file")
    if not isinstance(state_file, str) or not (folder / state_file).is_file():
        raise CheckpointError(f"policy_preprocessor.json names the normaliser's statistics file {state_file!r}, "
                              "which is not in the folder")
    from attnviz.checkpoints.safetensors_file import StoredTensors

    store = StoredTensors([folder / state_file])
    names = {"MEAN_STD": ("mean", "std"), "MIN_MAX": ("min", "max"), "QUANTILES": ("q01", "q99"),
             "QUANTILE10": ("q10", "q90")}[mode]
    arrs = []
    for n in names:
        key = f"observation.state.{n}"
        if key not in store.stored_names():
            return StateNorm("IDENTITY", None, None, eps)  # lerobot leaves a feature without stats unchanged
        a = np.asarray(store[key], dtype=np.float32).reshape(-1)  # (S,)
        if a.shape != (state_dim,) or not np.all(np.isfinite(a)):
            raise CheckpointError(f"{state_file}: {key} must hold {state_dim} finite numbers (got shape {a.shape})")
        arrs.append(a)
    return StateNorm(mode, arrs[0], arrs[1], eps)


def parse_smolvla(folder: Path, cfg: dict) -> SmolVLASpec:
    """lerobot's SmolVLA config.json (and the VLM it names) -> SmolVLASpec; every problem a CheckpointError."""
    folder = Path(folder)
    if bool_field(cfg, "adapt_to_pi_aloha", False):
        raise CheckpointError("config.json: adapt_to_pi_aloha (Aloha joint flips) is not supported")
    if cfg.get("rtc_config") not in (None, {}) and (cfg.get("rtc_config") or {}).get("enabled"):
        raise CheckpointError("config.json: real-time chunking (rtc_config) is not supported")
    feats = _features(cfg, "input_features")
    outs = _features(cfg, "output_features")
    visual = [k for k, f in feats.items() if f["type"] == "VISUAL"]
    n_empty = int_field(cfg, "empty_cameras", 0, minimum=0)
    cameras = tuple(k for k in visual if not k.split(".")[-1].startswith("empty_camera_"))
    if not cameras:
        raise CheckpointError("config.json: the policy has no camera (VISUAL) input feature")
    state = [k for k, f in feats.items() if f["type"] == "STATE"]
    if state != ["observation.state"]:
        raise CheckpointError("config.json: the policy must read one state feature, 'observation.state'")
    state_dim = int(np.prod(feats["observation.state"]["shape"]))
    act = [k for k, f in outs.items() if f["type"] == "ACTION"]
    if len(act) != 1:
        raise CheckpointError("config.json: the policy must have one ACTION output feature")
    action_dim = int(np.prod(outs[act[0]]["shape"]))
    max_state = int_field(cfg, "max_state_dim", 32)
    max_action = int_field(cfg, "max_action_dim", 32)
    if state_dim > max_state or action_dim > max_action:
        raise CheckpointError(f"config.json: state ({state_dim}) or action ({action_dim}) is longer than "
                              f"max_state_dim {max_state} / max_action_dim {max_action}")
    resize = cfg.get("resize_imgs_with_padding", [512, 512])
    if (not isinstance(resize, list) or len(resize) != 2 or not all(isinstance(r, int) and r > 0 for r in resize)):
        raise CheckpointError("config.json: resize_imgs_with_padding must be [width, height] (null is not supported)")
    pad = cfg.get("pad_language_to", "longest")
    if pad not in ("longest", "max_length"):
        raise CheckpointError(f"config.json: pad_language_to {pad!r} is not supported ('longest', 'max_length')")
    mode = cfg.get("attention_mode", "cross_attn")
    if not isinstance(mode, str):
        raise CheckpointError("config.json: attention_mode must be a string")

    vlm_name = cfg.get("vlm_model_name", "HuggingFaceTB/SmolVLM2-500M-Video-Instruct")
    vlm_folder = resolve_vlm(folder, vlm_name)
    vcfg = read_json(vlm_folder / "config.json", "the VLM's config")
    if vcfg.get("model_type") not in VLM_TYPES:
        raise CheckpointError(f"{vlm_folder / 'config.json'}: model_type {vcfg.get('model_type')!r} is not a SmolVLM "
                              f"({', '.join(VLM_TYPES)})")
    tcfg = dict(vcfg.get("text_config") or {})
    tcfg.setdefault("model_type", "llama")
    if tcfg["model_type"] != "llama":
        raise CheckpointError(f"the VLM's text_config model_type {tcfg['model_type']!r} is not supported (llama is)")
    text_full = parse_decoder_config(tcfg)
    keep = int_field(cfg, "num_vlm_layers", 16, minimum=-(10**9))
    n_vlm = text_full.n_layer if keep <= 0 else min(keep, text_full.n_layer)
    text = replace(text_full, n_layer=n_vlm)
    s = text.decoder
    if s.qk_norm or s.o_bias or s.mlp_bias:
        raise CheckpointError("the VLM's text model has biases or q/k norms lerobot's SmolVLA layers do not use")
    mult = float_field(cfg, "expert_width_multiplier", 0.75)
    d_e = int(text.d_model * mult)
    if d_e < 2:
        raise CheckpointError(f"config.json: expert_width_multiplier {mult} leaves the expert {d_e} wide")
    n_exp = int_field(cfg, "num_expert_layers", -1, minimum=-(10**9))
    n_exp = n_vlm if n_exp <= 0 else n_exp
    if n_vlm % n_exp:
        raise CheckpointError(f"config.json: {n_vlm} VLM layers are not a multiple of {n_exp} expert layers")
    expert = replace(text, d_model=d_e, d_ff=intermediate_size(d_e), n_layer=n_exp)
    every = int_field(cfg, "self_attn_every_n_layers", 2, minimum=-(10**9))
    cross_mode = "cross" in mode
    multiple = n_vlm // n_exp
    expert_at = tuple(-1 if (multiple > 0 and i > 0 and i % multiple) else i // multiple for i in range(n_vlm))
    cross = tuple(cross_mode and not (every > 0 and i % every == 0) for i in range(n_vlm))
    vision = _vision(dict(vcfg.get("vision_config") or {}))
    scale = int_field(vcfg, "scale_factor", 2)
    w, h = resize
    if w != h or w % (vision.patch * scale):
        raise CheckpointError(f"config.json: resize_imgs_with_padding {resize} must be square and a multiple of "
                              f"patch {vision.patch} x scale_factor {scale} (the connector's pixel shuffle needs it)")
    if vision.image_size // vision.patch < 1:
        raise CheckpointError("the VLM's vision_config: image_size is smaller than one patch")
    min_p, max_p = float_field(cfg, "min_period", 4e-3), float_field(cfg, "max_period", 4.0)
    if not 0 < min_p < max_p or d_e % 2:
        raise CheckpointError("config.json: the time embedding needs 0 < min_period < max_period and an even expert width")
    return SmolVLASpec(
        text=text, expert=expert, vision=vision, scale_factor=scale, cameras=cameras, n_empty=n_empty,
        state_dim=state_dim, action_dim=action_dim, max_state_dim=max_state, max_action_dim=max_action,
        chunk=int_field(cfg, "chunk_size", 50), resize=(w, h),
        tokenizer_max_length=int_field(cfg, "tokenizer_max_length", 48), pad_to_max=pad == "max_length",
        image_special_tokens=bool_field(cfg, "add_image_special_tokens", False), cross=cross, expert_at=expert_at,
        min_period=min_p, max_period=max_p, state_norm=_state_norm(folder, cfg, state_dim),
        vlm_folder=vlm_folder, vlm_name=vlm_name)


def image_marker_names(vlm_folder: Path) -> tuple[str, str]:
    """(fake image token, global image token) as the VLM's tokenizer config names them."""
    fake, glob = "<fake_token_around_image>", "<global-img>"
    path = vlm_folder / "tokenizer_config.json"
    if path.is_file():
        try:
            tc = read_json(path, "the tokenizer config")
        except CheckpointError:  # the VLM's loader says what is wrong with it; the markers keep their defaults
            tc = {}
        extra = tc.get("extra_special_tokens") if isinstance(tc, dict) else None
        if isinstance(extra, dict):
            fake = extra.get("fake_image_token", fake) if isinstance(extra.get("fake_image_token", fake), str) else fake
            glob = extra.get("global_image_token", glob) if isinstance(extra.get("global_image_token", glob), str) else glob
    return fake, glob


def check_time(t) -> float:
    """The flow time as a float in [0, 1] (t = 1 is pure noise, where lerobot's sampling starts)."""
    if isinstance(t, bool) or not isinstance(t, (int, float, np.floating, np.integer)) or not math.isfinite(float(t)):
        raise CheckpointError(f"the flow time t must be a number in [0, 1] (got {t!r})")
    if not 0.0 <= float(t) <= 1.0:
        raise CheckpointError(f"the flow time t must be in [0, 1] (got {float(t):g}): t = 1 is pure noise, t = 0 the action")
    return float(t)
