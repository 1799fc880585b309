"""PaliGemma 1 and 2 (``PaliGemmaForConditionalGeneration``, model_type "paligemma"): a SigLIP vision tower's
last hidden state (after ``post_layernorm``), one linear projector, and Gemma (PaliGemma 1) or Gemma 2
(PaliGemma 2) reading the projected patches in place of the ``<image>`` tokens, every layer and head.

As transformers 5 runs it: the text tokens are embedded and scaled by sqrt(d_model) (in the weights'
dtype); the projected image features replace the image tokens' rows *unscaled* (older releases divided
them by sqrt(d_model) before the scale, the same numbers); positions count from 1; the mask is
prefix-LM: query i sees key j when j <= i, or when both are in the prefix (image tokens, BOS, prompt,
"\\n": token type 0). Gemma 2's sliding-window layers keep the window on the causal part only: there the
rule is (j <= i and j > i - window) or both in the prefix. Without a suffix the whole sequence is the
prefix and every token sees every other.

The sequence and the pixels are :mod:`.paligemma_processor`'s. Weights are read under transformers 5's
names (``vision_tower.*``, ``multi_modal_projector.linear.*``, ``language_model.model.*`` as it saves them;
``model.vision_tower.vision_model.*``, ``model.language_model.*`` in memory and in 4.5x files) and the
older ones (``vision_tower.vision_model.*``); the LM head is not read.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from attnviz.checkpoints import decoder as dec
from attnviz.checkpoints.config import MAX_ATTENTION_BYTES
from attnviz.checkpoints.decoder_config import parse_decoder_config
from attnviz.checkpoints.errors import CheckpointError
from attnviz.checkpoints.families import siglip_tensors, vision_tower_config
from attnviz.checkpoints.layers import linear
from attnviz.checkpoints.model_config import CheckpointConfig, int_field
from attnviz.checkpoints.multimodal import (MultimodalAttention, MultimodalCheckpoint, PatchGroup, check_segments,
                                            segments_from_runs)
from attnviz.checkpoints.paligemma_processor import ProcessorSpec, parse_processor, process, read_tokenizer
from attnviz.checkpoints.parts import Part, PartView, load_parts
from attnviz.checkpoints.vision import post_norm, vision_hidden_states
from attnviz.checkpoints.vlm_common import image_labels, read_processor, sub_config

TEXT_TYPES = {"gemma": "Gemma", "gemma2": "Gemma 2"}  # text_config model_type -> PaliGemma 1 / PaliGemma 2
MAX_TOKENS = 8192  # image + prompt + suffix tokens of one pass (every map of every layer is kept)
DEFAULT_IMAGE_TOKEN = 256000  # PaliGemmaConfig's image_token_index when config.json leaves it out
DEFAULT_PROJECTION = 2048  # PaliGemmaConfig's projection_dim

VISION_PREFIXES = ("vision_tower.", "model.vision_tower.vision_model.", "vision_tower.vision_model.", "model.vision_tower.")
PROJECTOR_PREFIXES = ("multi_modal_projector.", "model.multi_modal_projector.")
TEXT_PREFIXES = ("language_model.model.", "model.language_model.", "language_model.")
PROMPT_HINT = ("a task prefix, e.g. 'caption en', 'answer en what is in the picture?' or 'detect cube'; the image "
               "tokens and <bos> go before it and '\\n' after it (a suffix, the answer, is causal)")


@dataclass(frozen=True)
class PaliGemmaSpec:
    """A PaliGemma checkpoint's three parts and how they are joined."""

    vision: CheckpointConfig  # the SigLIP tower (kind "vit", no class token)
    text: CheckpointConfig  # Gemma or Gemma 2 (kind "decoder")
    processor: ProcessorSpec  # pixels and the sequence rule
    image_token_id: int  # id of the <image> tokens the projected patches replace

    @property
    def grid(self) -> tuple[int, int]:
        """(gh, gw) image tokens per column and row."""
        return self.vision.grid

    @property
    def generation(self) -> int:
        """1 (Gemma text model) or 2 (Gemma 2)."""
        return 2 if self.text.model_type == "gemma2" else 1


def parse_spec(cfg: dict, proc: dict, image_pp: dict, special: dict) -> PaliGemmaSpec:
    """config.json and the processor settings -> the checked spec (no tensor read yet)."""
    vcfg = dict(sub_config(cfg, "vision_config", "vision tower"))
    vcfg.setdefault("model_type", "siglip_vision_model")
    if vcfg["model_type"] != "siglip_vision_model":
        raise CheckpointError(f"config.json: vision_config model_type {vcfg['model_type']!r} is not PaliGemma's SigLIP "
                              "tower ('siglip_vision_model')")
    vision = vision_tower_config(vcfg)
    tcfg = dict(sub_config(cfg, "text_config", "language model"))
    tcfg.setdefault("model_type", "gemma")
    if tcfg["model_type"] not in TEXT_TYPES:
        raise CheckpointError(f"config.json: text_config model_type {tcfg['model_type']!r} is not a PaliGemma language "
                              f"model (supported: {', '.join(TEXT_TYPES)})")
    # PaliGemmaConfig sets use_bidirectional_attention on its text model; it only flips the attention modules'
    # is_causal flag (read by SDPA / flash), the mask comes from token types as below: not the decoder's concern
    tcfg.pop("use_bidirectional_attention", None)
    text = parse_decoder_config(tcfg)
    proj = int_field(cfg, "projection_dim", DEFAULT_PROJECTION)
    if proj != text.d_model:
        raise CheckpointError(f"config.json: projection_dim {proj} differs from the language model's hidden size "
                              f"{text.d_model}; the projected patches could not stand in for tokens")
    key = "image_token_index" if "image_token_index" in cfg else "image_token_id"
    image_token = int_field(cfg, key, DEFAULT_IMAGE_TOKEN, minimum=0)
    return PaliGemmaSpec(vision=vision, text=text, processor=parse_processor(proc, image_pp, vision, special),
                         image_token_id=image_token)


def _parts(spec: PaliGemmaSpec) -> list[Part]:
    dv, d = spec.vision.d_model, spec.text.d_model
    return [Part("vision", siglip_tensors(spec.vision), VISION_PREFIXES),
            Part("projector", {"linear.weight": (d, dv), "linear.bias": (d,)}, PROJECTOR_PREFIXES),
            Part("text", dec.decoder_tensors(spec.text), TEXT_PREFIXES)]


def load(folder: Path, cfg: dict, name: str | None) -> MultimodalCheckpoint:
    """A PaliGemma folder -> a checked MultimodalCheckpoint (weights stay memory-mapped)."""
    folder = Path(folder)
    name = name or folder.name
    proc, image_pp = read_processor(folder)
    tok, special, ids = read_tokenizer(folder, name)
    spec = parse_spec(cfg, proc, image_pp, special)
    got = tok.token_to_id("<image>")
    if got != spec.image_token_id:
        raise CheckpointError(f"tokenizer.json gives <image> the id {got}, but config.json's image_token_index is "
                              f"{spec.image_token_id}: tokenizer and model do not belong together")
    store = load_parts(folder, _parts(spec), "PaliGemma")
    v, t = spec.vision, spec.text
    H, W = spec.processor.image.size
    summary = (f"SigLIP {v.n_layer} layers x {v.n_head} heads ({H}x{W} px, {spec.processor.image_seq_length} image "
               f"tokens) + {TEXT_TYPES[t.model_type]}: {t.n_layer} layers x {t.n_head} heads "
               f"({t.decoder.n_kv_head} kv), d_model {t.d_model}, prefix-LM")
    return MultimodalCheckpoint(folder=folder, name=name, family="paligemma", spec=spec, weights=store, tokenizer=tok,
                                special_tokens=ids, runner=run, summary=summary, n_images=1, prompt_hint=PROMPT_HINT,
                                options=("suffix",))


def image_features(spec: PaliGemmaSpec, store, pixels: np.ndarray, dtype, kernel: str):
    """(vision maps (L_v, nh_v, P, P), projected patches (P, d_text)): SigLIP's last_hidden_state through the projector."""
    vw = PartView(store, "vision")
    atts, states = vision_hidden_states(spec.vision, vw, pixels, dtype=dtype, kernel=kernel)
    feats = post_norm(spec.vision, vw, states[-1], dtype=dtype)  # (P, dv)
    W = PartView(store, "projector")
    w = np.asarray(W["linear.weight"]).astype(dtype, copy=False)  # (d, dv)
    b = np.asarray(W["linear.bias"]).astype(dtype, copy=False)  # (d,)
    return atts, linear(feats.astype(dtype, copy=False), w, b)  # (P, d)


def _check_size(spec: PaliGemmaSpec, T: int) -> None:
    t = spec.text
    nbytes = t.n_layer * t.n_head * T * T * 4
    if nbytes > MAX_ATTENTION_BYTES:
        raise CheckpointError(f"the sequence has {T:,} tokens; {t.n_layer} layers x {t.n_head} heads of {T:,}x{T:,} "
                              f"attention maps would take {nbytes / 2**30:.1f} GiB (limit "
                              f"{MAX_ATTENTION_BYTES / 2**30:g} GiB)")


def run(ckpt: MultimodalCheckpoint, images: list, text: str, *, suffix: str | None = None, dtype=np.float32,
        kernel: str = "auto") -> MultimodalAttention:
    """One picture, a prompt (and a suffix) -> every map of the language model under its prefix-LM mask."""
    spec: PaliGemmaSpec = ckpt.spec
    dtype = np.dtype(dtype).type
    if len(images) != 1:
        raise CheckpointError(f"{ckpt.name} reads one picture with every prompt; {len(images)} were given")
    x = process(ckpt.tokenizer, spec.processor, images[0], text, suffix, image_token_id=spec.image_token_id,
                max_tokens=MAX_TOKENS)
    ids, types, is_image = x.ids, x.token_type_ids, x.is_image  # (T,) each
    T = int(ids.shape[0])
    vocab = spec.text.vocab_size
    text_ids = ids[~is_image]
    if text_ids.size and int(text_ids.max()) >= vocab:
        bad = int(text_ids.max())
        raise CheckpointError(f"token {ckpt.tokenizer.id_to_piece(bad)!r} (id {bad}) is outside the language model's "
                              f"{vocab}-row embedding table")
    _check_size(spec, T)
    vision_maps, feats = image_features(spec, ckpt.weights, x.pixels, dtype, kernel)  # (L_v, nh_v, P, P), (P, d)
    tw = PartView(ckpt.weights, "text")
    lookup = np.where(is_image, 0, ids) if spec.image_token_id >= vocab else ids  # (T,) an OOV image id reads row 0
    embeds = dec.embed_tokens(spec.text, tw, lookup, dtype)  # (T, d) before Gemma's sqrt(d) scale
    embeds[is_image] = feats / dec.embed_scale(spec.text, dtype)  # the pass's scale gives back the projector's rows
    masks = dec.block_sequence_masks(spec.text, np.where(types == 0, 0, -1))  # layer type -> (T, T)
    atts, hidden = dec.forward_decoder(spec.text, tw, ids, dtype=dtype, kernel=kernel, keep="weights", embeds=embeds,
                                       mask=masks, positions=np.arange(1, T + 1))  # PaliGemma counts from 1
    labels = list(x.labels)
    pos = np.flatnonzero(is_image)  # (P,)
    for p, lab in zip(pos, image_labels(spec.grid)):
        labels[p] = lab
    names = ["image" if im else ("prefix" if ty == 0 else "suffix") for im, ty in zip(is_image, types)]
    segments = segments_from_runs(names)
    check_segments(segments, T)
    H, W = x.rgb.shape[:2]
    patches = (PatchGroup(image=0, name="image", tokens=pos, grid=spec.grid, box=(0.0, 0.0, float(H), float(W))),)
    notes = ["prefix-LM: image, <bos>, prompt and '\\n' see each other both ways" +
             ("; the suffix is causal" if suffix is not None else "")]
    extra = {"token_type_ids": types}
    sliding = [i for i in range(spec.text.n_layer) if spec.text.decoder.window(i)]
    if sliding:
        notes.append(f"sliding window {spec.text.decoder.sliding_window} on layer{'s' if len(sliding) > 1 else ''} "
                     f"{', '.join(map(str, sliding))}: causal keys within it, the prefix still whole; the mask shown "
                     "is the global layers'")
        extra["sliding_mask"] = masks["sliding_attention"]
    return MultimodalAttention(
        model=ckpt.name, family="paligemma", tokens=list(x.pieces), labels=labels, special=x.special | is_image,
        ids=ids, attentions=atts, mask=masks["full_attention"], segments=segments,
        patches=patches, images=[x.rgb], hidden=hidden, pixels=x.pixels[None], vision_attentions=vision_maps[None],
        kv_group=spec.text.decoder.group, notes=tuple(notes), extra=extra)
