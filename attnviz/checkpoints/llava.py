"""LLaVA-1.5-style vision-language models (``LlavaForConditionalGeneration``): a CLIP vision tower, the
hidden state of its ``vision_feature_layer`` (the class token dropped under the "default" strategy), a
linear-GELU-linear projector, and a decoder LLM reading the projected patches where the prompt's
``<image>`` placeholder stood, expanded by the processor to one token per patch.

Token ids and pixel values follow transformers' ``LlavaProcessor`` (CLIP image processor, the
placeholder repeated ``(H/P)(W/P) + num_additional_image_tokens`` times, one fewer under "default");
the mask is the decoder's causal one. The language model may be any decoder attnviz reads, a mixture of
experts (Mixtral) included: its tensors are found under the family's own names (``block_sparse_moe.experts.{e}.w1``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from attnviz.checkpoints import decoder as dec
from attnviz.checkpoints.config import ImageConfig, parse_image_config
from attnviz.checkpoints.decoder_config import DECODER_TYPES, parse_decoder_config
from attnviz.checkpoints.decoder_text import encode
from attnviz.checkpoints.errors import CheckpointError
from attnviz.checkpoints.families import family_tensors, parse_family
from attnviz.checkpoints.layers import activation, linear
from attnviz.checkpoints.model_config import ACTIVATIONS, CheckpointConfig, bool_field, int_field
from attnviz.checkpoints.multimodal import (MultimodalAttention, MultimodalCheckpoint, PatchGroup, check_segments,
                                            segments_from_runs)
from attnviz.checkpoints.parts import Part, PartView, load_parts
from attnviz.checkpoints.preprocess import preprocess_image, seen_region
from attnviz.checkpoints.vision import vision_hidden_states
from attnviz.checkpoints.vlm_common import (check_ids, image_labels, read_processor, read_tokenizer, sub_config,
                                            text_segment_names, token_id)
from attnviz.sources.errors import SourceError

STRATEGIES = ("default", "full")  # vision_feature_select_strategy: drop the class token, or keep it
MAX_TOKENS = 8192  # prompt + image tokens one pass takes (every map of every layer is kept)

VISION_PREFIXES = ("vision_tower.vision_model.", "model.vision_tower.vision_model.", "vision_tower.", "model.vision_tower.")
PROJECTOR_PREFIXES = ("multi_modal_projector.", "model.multi_modal_projector.")
TEXT_PREFIXES = ("language_model.model.", "model.language_model.", "language_model.")


@dataclass(frozen=True)
class LlavaSpec:
    """A LLaVA checkpoint's three parts and how they are joined."""

    vision: CheckpointConfig  # the CLIP vision tower (kind "vit")
    text: CheckpointConfig  # the decoder LLM (kind "decoder")
    feature_layers: tuple[int, ...]  # hidden states the projector reads (negative: from the end), concatenated
    strategy: str  # "default" drops the class token's feature, "full" keeps it
    projector_act: str  # activation between the projector's two linear maps
    projector_bias: bool  # the projector's linear maps carry biases
    image_token_id: int  # id of the <image> placeholder the features replace
    image: ImageConfig  # the CLIP image processor's steps
    image_token: str  # the placeholder's text
    n_additional: int  # processor's num_additional_image_tokens (1: the class token position)

    @property
    def grid(self) -> tuple[int, int]:
        """(gh, gw) of the processed image."""
        H, W = self.image.size
        return H // self.vision.patch_size[0], W // self.vision.patch_size[1]

    @property
    def n_image_tokens(self) -> int:
        gh, gw = self.grid
        return gh * gw + self.n_additional - (1 if self.strategy == "default" else 0)

    def hidden_index(self, layer: int) -> int:
        """Index into the tower's hidden states (entry 0: its input; entry i: layer i's output)."""
        n = self.vision.n_layer + 1
        return layer + n if layer < 0 else layer


def parse_spec(cfg: dict, proc: dict, image_pp: dict, image_token_id: int | None) -> LlavaSpec:
    vcfg = dict(sub_config(cfg, "vision_config", "vision tower"))
    vcfg.setdefault("model_type", "clip_vision_model")
    if vcfg["model_type"] != "clip_vision_model":
        raise CheckpointError(f"config.json: vision_config model_type {vcfg['model_type']!r} is not supported for "
                              "LLaVA (a CLIP vision tower, 'clip_vision_model', is)")
    vision = parse_family(vcfg, "clip_vision_model")
    tcfg = dict(sub_config(cfg, "text_config", "language model"))
    tcfg.setdefault("model_type", "llama")
    if tcfg["model_type"] not in DECODER_TYPES:
        raise CheckpointError(f"config.json: text_config model_type {tcfg['model_type']!r} is not a supported decoder "
                              f"({', '.join(DECODER_TYPES)})")
    text = parse_decoder_config(tcfg)
    layers = cfg.get("vision_feature_layer", -2)
    layers = tuple(layers) if isinstance(layers, list) else (layers,)
    for v in layers:
        if isinstance(v, bool) or not isinstance(v, int) or not -(vision.n_layer + 1) <= v <= vision.n_layer:
            raise CheckpointError(f"config.json: vision_feature_layer {v!r} is not a hidden state of a "
                                  f"{vision.n_layer}-layer tower")
    strategy = cfg.get("vision_feature_select_strategy", "default")
    if strategy not in STRATEGIES:
        raise CheckpointError(f"config.json: vision_feature_select_strategy {strategy!r} is not one of {STRATEGIES}")
    if proc.get("vision_feature_select_strategy", strategy) != strategy:
        raise CheckpointError("processor_config.json and config.json disagree on vision_feature_select_strategy")
    act = cfg.get("projector_hidden_act", "gelu")
    if act not in ACTIVATIONS:
        raise CheckpointError(f"config.json: projector_hidden_act {act!r} is not supported ({', '.join(ACTIVATIONS)})")
    if image_token_id is None:
        image_token_id = int_field(cfg, "image_token_index", cfg.get("image_token_id"), minimum=0)
    ic = parse_image_config(image_pp, vision)
    patch = proc.get("patch_size", vision.patch_size[0])
    if patch != vision.patch_size[0]:
        raise CheckpointError(f"processor_config.json: patch_size {patch!r} differs from the vision tower's "
                              f"{vision.patch_size[0]}")
    token = proc.get("image_token", "<image>")
    if not isinstance(token, str) or not token:
        raise CheckpointError(f"processor_config.json: image_token must be a string (got {token!r})")
    n_add = int_field(proc, "num_additional_image_tokens", 0, minimum=0, where="processor_config.json")
    return LlavaSpec(vision=vision, text=text, feature_layers=layers, strategy=strategy, projector_act=act,
                     projector_bias=bool_field(cfg, "multimodal_projector_bias", True), image_token_id=image_token_id,
                     image=ic, image_token=token, n_additional=n_add)


def _projector_tensors(s: LlavaSpec) -> dict[str, tuple[int, ...]]:
    d_in, d = s.vision.d_model * len(s.feature_layers), s.text.d_model
    out = {"linear_1.weight": (d, d_in), "linear_2.weight": (d, d)}
    if s.projector_bias:
        out |= {"linear_1.bias": (d,), "linear_2.bias": (d,)}
    return out


def load(folder: Path, cfg: dict, name: str | None) -> MultimodalCheckpoint:
    """A LLaVA folder -> a checked MultimodalCheckpoint (weights stay memory-mapped)."""
    folder = Path(folder)
    name = name or folder.name
    proc, image_pp = read_processor(folder)
    tcfg = cfg.get("text_config") if isinstance(cfg.get("text_config"), dict) else {}
    tok, special = read_tokenizer(folder, name, tcfg.get("model_type", "llama"))
    token = proc.get("image_token", "<image>")
    tid = token_id(tok, token, "image") if isinstance(token, str) else None
    spec = parse_spec(cfg, proc, image_pp, tid)
    if tok.vocab_size > spec.text.vocab_size:
        raise CheckpointError(f"tokenizer.json has {tok.vocab_size} tokens but the language model's embedding table "
                              f"only {spec.text.vocab_size} rows: tokenizer and weights do not belong together")
    upto = max(spec.hidden_index(v) for v in spec.feature_layers)
    vision_names = {k: v for k, v in family_tensors(spec.vision).items()
                    if not k.startswith("encoder.layers.") or int(k.split(".")[2]) < upto}
    own = {n: dec.stored_name(spec.text, n) for n in dec.decoder_tensors(spec.text)}  # canonical -> the family's
    text_shapes = {own[n]: shape for n, shape in dec.decoder_tensors(spec.text).items()}
    parts = [Part("vision", vision_names, VISION_PREFIXES), Part("projector", _projector_tensors(spec), PROJECTOR_PREFIXES),
             Part("text", text_shapes, TEXT_PREFIXES)]
    store = load_parts(folder, parts, "LLaVA")
    if any(n != o for n, o in own.items()):  # Mixtral's block_sparse_moe ...: read under the canonical names
        _canonical_text_names(store, parts, own)
    v, t = spec.vision, spec.text
    summary = (f"CLIP {v.n_layer} layers x {v.n_head} heads (feature layer {', '.join(map(str, spec.feature_layers))}, "
               f"{spec.n_image_tokens} image tokens) + {t.model_type} {t.n_layer} layers x {t.n_head} heads, "
               f"d_model {t.d_model}")
    return MultimodalCheckpoint(folder=folder, name=name, family="llava", spec=spec, weights=store, tokenizer=tok,
                                special_tokens=special, runner=run, summary=summary, n_images=1,
                                prompt_hint=f"write {token} where the picture goes, e.g. 'USER: {token}\\nWhat is "
                                            "in the picture? ASSISTANT:'")


def _canonical_text_names(store, parts: list[Part], own: dict[str, str]) -> None:
    """Re-expose the text part's tensors, checked under the family's own names (a Mixtral language model keeps its
    experts in ``block_sparse_moe``), under the canonical names the decoder's forward pass reads."""
    keys = store.stored_names()
    alias = {}
    for part in parts:
        probe = next(iter(part.tensors))
        prefix = next(p for p in part.prefixes if p + probe in keys)  # load_parts found one
        names = own if part.name == "text" else {n: n for n in part.tensors}
        alias |= {f"{part.name}/{n}": prefix + o for n, o in names.items() if prefix + o in keys}
    store.select(alias)


def _features(spec: LlavaSpec, store, pixels: np.ndarray, dtype, kernel: str):
    """(vision maps (L', nh, P, P), projected features (n_image_tokens, d_text))."""
    upto = max(spec.hidden_index(v) for v in spec.feature_layers)
    atts, hs = vision_hidden_states(spec.vision, PartView(store, "vision"), pixels, dtype=dtype, kernel=kernel,
                                    upto=upto)
    feats = np.concatenate([hs[spec.hidden_index(v)] for v in spec.feature_layers], axis=-1)  # (1+P, dv*k)
    if spec.strategy == "default":
        feats = feats[1:]  # (P, dv*k): the class token's feature dropped
    W = PartView(store, "projector")

    def get(n):
        return np.asarray(W[n]).astype(dtype, copy=False) if n in W else None

    x = linear(feats.astype(dtype, copy=False), get("linear_1.weight"), get("linear_1.bias"))  # (P, d)
    x = linear(activation(spec.projector_act, x), get("linear_2.weight"), get("linear_2.bias"))  # (P, d)
    return atts, x


def expand_prompt(spec: LlavaSpec, text: str, n_images: int) -> str:
    """The prompt with each placeholder repeated once per image token, as LlavaProcessor writes it."""
    n = text.count(spec.image_token)
    if n_images and n == 0:
        raise CheckpointError(f"the prompt has no {spec.image_token} placeholder: write it where the picture goes, "
                              f"e.g. 'USER: {spec.image_token}\\nWhat is in the picture? ASSISTANT:'")
    if n != n_images:
        raise CheckpointError(f"the prompt has {n} {spec.image_token} placeholder{'s' if n != 1 else ''} but "
                              f"{n_images} image{'s were' if n_images != 1 else ' was'} given; write one per image")
    return text.replace(spec.image_token, spec.image_token * spec.n_image_tokens)


def run(ckpt: MultimodalCheckpoint, images: list, text: str, *, dtype=np.float32,
        kernel: str = "auto") -> MultimodalAttention:
    """One image (or none) and a prompt carrying the placeholder -> every map of the language model."""
    spec: LlavaSpec = ckpt.spec
    dtype = np.dtype(dtype).type
    if not isinstance(text, str) or not text.strip():
        raise CheckpointError("the prompt is empty; write a question about the picture")
    prompt = expand_prompt(spec, text, len(images))
    try:
        toks = encode(ckpt.tokenizer, ckpt.special_tokens, prompt, MAX_TOKENS, model=ckpt.name)
    except SourceError as exc:
        raise CheckpointError(f"{ckpt.name}: {exc}") from None
    ids = toks.ids  # (T,)
    check_ids(ids, spec.text.vocab_size)
    is_image = ids == spec.image_token_id  # (T,)
    if int(is_image.sum()) != spec.n_image_tokens * len(images):
        raise CheckpointError(f"the prompt's text itself contains {spec.image_token!r}; it may appear only as the "
                              "placeholder")
    text_w = PartView(ckpt.weights, "text")
    embeds = dec.embed_tokens(spec.text, text_w, ids, dtype)  # (T, d)
    pixels = vision_maps = None
    patches: tuple[PatchGroup, ...] = ()
    labels = toks.labels()
    if images:
        pixels = preprocess_image(images[0], spec.image)  # (3, H, W)
        vision_maps, feats = _features(spec, ckpt.weights, pixels, dtype, kernel)
        embeds[is_image] = feats
        pos = np.flatnonzero(is_image)  # (n_image_tokens,)
        grid_pos = pos[1:] if spec.strategy == "full" else pos  # the class token's feature first under "full"
        box = seen_region(np.asarray(images[0]).shape[:2], spec.image, spec.grid, spec.vision.patch_size)
        patches = (PatchGroup(image=0, name="image", tokens=grid_pos, grid=spec.grid, box=box),)
        names = image_labels(spec.grid)
        if spec.strategy == "full":
            names = ["img cls"] + names
        for p, lab in zip(pos, names):
            labels[p] = lab
    atts, hidden = dec.forward_decoder(spec.text, text_w, ids, dtype=dtype, kernel=kernel, embeds=embeds)
    T = len(ids)
    special = np.asarray(toks.special, dtype=bool) | is_image  # (T,)
    segments = segments_from_runs(text_segment_names(is_image))
    check_segments(segments, T)
    windows = {spec.text.decoder.window(i) for i in range(spec.text.n_layer)}
    notes = [f"vision feature layer {', '.join(map(str, spec.feature_layers))} ({spec.strategy} strategy)"]
    if windows != {0}:
        notes.append(f"sliding windows {sorted(windows)}: the mask shown is the full causal one")
    return MultimodalAttention(
        model=ckpt.name, family="llava", tokens=list(toks.pieces), labels=labels, special=special, ids=ids,
        attentions=atts, mask=dec.causal_mask(T), segments=segments, patches=patches,
        images=[np.asarray(im) for im in images], hidden=hidden,
        pixels=None if pixels is None else pixels[None], vision_attentions=None if vision_maps is None else vision_maps[None],
        kv_group=spec.text.decoder.group, notes=tuple(notes))
