"""Idefics3 and SmolVLM (``Idefics3ForConditionalGeneration``, ``SmolVLMForConditionalGeneration``): a SigLIP
vision tower run on every tile of every picture (position ids bucketised per tile from its patch mask),
the connector (pixel shuffle by ``scale_factor``, then ``modality_projection`` without bias), and a Llama
decoder reading the projected features where the expanded prompt has its ``<image>`` tokens, under the
decoder's causal mask.

The processor's part (tiles, pixel values, the expanded prompt) is :mod:`attnviz.checkpoints.idefics3_processor`.
What a run returns (:class:`~attnviz.checkpoints.multimodal.MultimodalAttention`):

* segments: each picture's whole block, markers included, is ``"image"`` (``"image 1"``, ``"image 2"`` ...
  with several pictures); the runs of prompt text around them are ``"text"`` (``"text 1"``, ``"text 2"`` ...
  when there are several), BOS in the first;
* labels: an image token is ``"img r1c2 0,1"`` (the token at row 0, column 1 of tile row 1, column 2 as the
  ``<row_1_col_2>`` marker counts them), ``"img g 0,1"`` for the global image, ``"img2 ..."`` for the second
  picture; markers and text as the tokenizer writes them;
* patches: one PatchGroup per tile (``"tile 1,2"``) and one for the global image (``"global image"``; a
  picture that is not split is one group ``"image"``), its grid the one after the pixel shuffle and its
  box the part of the original picture it shows.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from attnviz.checkpoints import decoder as dec
from attnviz.checkpoints.decoder_config import DECODER_TYPES, parse_decoder_config
from attnviz.checkpoints.decoder_text import SpecialTokens, read_special
from attnviz.checkpoints.errors import CheckpointError
from attnviz.checkpoints.families import family_tensors, vision_tower_config
from attnviz.checkpoints.idefics3_processor import (IMAGE, IMAGE_SEQ_LEN_DEFAULT, ImageSteps, ProcessedImages,
                                                    PromptSpec, PromptTokens, check_placeholders, parse_image_steps,
                                                    process_images, tokenise)
from attnviz.checkpoints.json_file import MAX_JSON_BYTES, MAX_JSON_DEPTH
from attnviz.checkpoints.layers import linear
from attnviz.checkpoints.model_config import CheckpointConfig, int_field
from attnviz.checkpoints.multimodal import (MultimodalAttention, MultimodalCheckpoint, PatchGroup, check_segments,
                                            segments_from_runs)
from attnviz.checkpoints.parts import Part, PartView, load_parts
from attnviz.checkpoints.vision import patch_mask_from_pixels, post_norm, vision_hidden_states
from attnviz.checkpoints.vlm_common import read_bpe, read_processor, sub_config, token_id
from attnviz.jsontext import JsonRefused, loads_guarded, read_capped
from attnviz.sources.text import BpeTokenizer

FAMILY = {"idefics3": "Idefics3", "smolvlm": "SmolVLM"}
VISION_TYPE = {"idefics3": "idefics3_vision", "smolvlm": "smolvlm_vision"}
MAX_TOKENS = 8192  # prompt + image tokens of one pass (every map of every layer is kept)
MAX_MAP_BYTES = 8 << 30  # the language model's maps (L, nh, T, T) of one pass, at most
MAX_IMAGES = 8  # pictures one prompt may carry

# Where a saved Idefics3 / SmolVLM keeps each part (transformers 4.4x and 5 write the first; the others are
# the base model saved alone and a language model under the newer composite-model name)
VISION_PREFIXES = ("model.vision_model.", "vision_model.")
CONNECTOR_PREFIXES = ("model.connector.", "connector.")
TEXT_PREFIXES = ("model.text_model.", "text_model.", "model.language_model.", "language_model.")



@dataclass(frozen=True)
class Idefics3Spec:
    """An Idefics3 / SmolVLM checkpoint's parts and processor, checked against each other."""

    family: str  # "idefics3" | "smolvlm"
    vision: CheckpointConfig  # the SigLIP tower (model_type idefics3_vision / smolvlm_vision)
    text: CheckpointConfig  # the Llama decoder (kind "decoder")
    scale_factor: int  # the connector's pixel shuffle: s x s patches -> one token
    image_token_id: int  # id of <image>, the tokens the features replace
    steps: ImageSteps  # the image processor's settings
    prompt: PromptSpec  # the processor's markers and image_seq_len

    @property
    def patches_side(self) -> int:
        """Patches per side of a frame (a tile or the global image, both ``tile`` px square)."""
        return self.steps.tile // self.vision.patch_size[0]

    @property
    def tokens_side(self) -> int:
        """Image tokens per side of a frame after the pixel shuffle."""
        return self.patches_side // self.scale_factor


def _marker_names(family: str, folder: Path) -> dict[str, str]:
    """The processor's marker strings: fixed for Idefics3; SmolVLM reads them from the tokenizer's attributes
    (tokenizer_config.json's keys or its ``extra_special_tokens`` object), with the same defaults."""
    names = {"image_token": "<image>", "fake_image_token": "<fake_token_around_image>",
             "global_image_token": "<global-img>"}
    if family != "smolvlm":
        return names
    cfg = _tokenizer_config(folder)
    extra = cfg.get("extra_special_tokens") if isinstance(cfg.get("extra_special_tokens"), dict) else {}
    for key in names:
        value = cfg.get(key, extra.get(key))
        if isinstance(value, dict):
            value = value.get("content")
        if value is not None:
            if not isinstance(value, str) or not value:
                raise CheckpointError(f"tokenizer_config.json: {key} must be a token string (got {value!r})")
            names[key] = value
    return names


def _tokenizer_config(folder: Path) -> dict:
    path = folder / "tokenizer_config.json"
    if not path.is_file():
        return {}
    try:
        cfg = loads_guarded(read_capped(path, MAX_JSON_BYTES), max_depth=MAX_JSON_DEPTH)
    except JsonRefused as exc:
        raise CheckpointError(f"{path} {exc}; not a tokenizer config") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise CheckpointError(f"{path} is not readable JSON ({type(exc).__name__})") from None
    return cfg if isinstance(cfg, dict) else {}


def read_bos(folder: Path, tok: BpeTokenizer) -> SpecialTokens:
    """BOS / EOS as transformers 5's tokenizer puts them around a text for this folder: whatever tokenizer.json's
    own post-processor adds (decoder_text.read_special's rule, the same for every decoder)."""
    return read_special(folder, tok, "idefics3")


def parse_spec(family: str, cfg: dict, proc: dict, image_pp: dict, tok: BpeTokenizer, folder: Path) -> Idefics3Spec:
    vcfg = dict(sub_config(cfg, "vision_config", "vision tower"))
    vcfg.setdefault("model_type", VISION_TYPE[family])
    if vcfg["model_type"] not in VISION_TYPE.values():
        raise CheckpointError(f"config.json: vision_config model_type {vcfg['model_type']!r} is not the SigLIP tower "
                              f"{FAMILY[family]} uses ({VISION_TYPE[family]!r})")
    vision = vision_tower_config(vcfg)
    if vision.num_channels != 3:
        raise CheckpointError(f"config.json: vision_config num_channels {vision.num_channels} is not supported (RGB only)")
    if vision.patch_size[0] != vision.patch_size[1]:
        raise CheckpointError(f"config.json: vision_config patch_size {vision.patch_size} is not square")
    tcfg = dict(sub_config(cfg, "text_config", "language model"))
    tcfg.setdefault("model_type", "llama")
    if tcfg["model_type"] not in DECODER_TYPES:
        raise CheckpointError(f"config.json: text_config model_type {tcfg['model_type']!r} is not a supported decoder "
                              f"({', '.join(DECODER_TYPES)})")
    text = parse_decoder_config(tcfg)
    scale = int_field(cfg, "scale_factor", 2)
    steps = parse_image_steps(image_pp, "processor_config.json image_processor" if "image_processor" in proc
                              else "preprocessor_config.json")
    seq = int_field(proc, "image_seq_len", IMAGE_SEQ_LEN_DEFAULT, where="processor_config.json")
    names = _marker_names(family, folder)
    prompt = PromptSpec(image_token=names["image_token"], fake_token=names["fake_image_token"],
                        global_token=names["global_image_token"], image_seq_len=seq)
    tid = token_id(tok, prompt.image_token, "image")
    token_id(tok, prompt.fake_token, "image marker")
    image_token_id = int_field(cfg, "image_token_id", cfg.get("image_token_index", 128257), minimum=0)
    if tid != image_token_id:
        raise CheckpointError(f"config.json: image_token_id {image_token_id} is not the tokenizer's {prompt.image_token} "
                              f"(id {tid}): config and tokenizer do not belong together")
    spec = Idefics3Spec(family=family, vision=vision, text=text, scale_factor=scale, image_token_id=tid, steps=steps,
                        prompt=prompt)
    p, g = vision.patch_size[0], spec.patches_side
    if g < 1:
        raise CheckpointError(f"the processor's tiles of {steps.tile} px are smaller than one {p} px patch")
    if g % scale:
        raise CheckpointError(f"a {steps.tile} px tile gives {g} x {g} patches of {p} px, which the pixel shuffle by "
                              f"scale_factor {scale} cannot group")
    if seq != spec.tokens_side ** 2:
        raise CheckpointError(f"processor_config.json: image_seq_len {seq} does not match the {spec.tokens_side ** 2} "
                              f"features of a tile ({steps.tile} px / {p} px patches / scale_factor {scale}, squared)")
    return spec


def _connector_tensors(spec: Idefics3Spec) -> dict[str, tuple[int, ...]]:
    return {"modality_projection.proj.weight": (spec.text.d_model, spec.vision.d_model * spec.scale_factor ** 2)}


def load(folder: Path, cfg: dict, name: str | None) -> MultimodalCheckpoint:
    """An Idefics3 / SmolVLM folder -> a checked MultimodalCheckpoint (weights stay memory-mapped)."""
    folder = Path(folder)
    family = cfg.get("model_type")
    if family not in FAMILY:
        raise CheckpointError(f"config.json: model_type {family!r} is not Idefics3 or SmolVLM")
    name = name or folder.name
    proc, image_pp = read_processor(folder)
    tok = read_bpe(folder, name, FAMILY[family])
    special = read_bos(folder, tok)
    spec = parse_spec(family, cfg, proc, image_pp, tok, folder)
    if tok.vocab_size > spec.text.vocab_size:
        raise CheckpointError(f"tokenizer.json has {tok.vocab_size} tokens but the language model's embedding table "
                              f"only {spec.text.vocab_size} rows: tokenizer and weights do not belong together")
    parts = [Part("vision", family_tensors(spec.vision), VISION_PREFIXES),
             Part("connector", _connector_tensors(spec), CONNECTOR_PREFIXES),
             Part("text", dec.decoder_tensors(spec.text), TEXT_PREFIXES)]
    store = load_parts(folder, parts, FAMILY[family])
    v, t = spec.vision, spec.text
    summary = (f"SigLIP {v.n_layer} layers x {v.n_head} heads ({spec.steps.tile} px tiles, {spec.prompt.image_seq_len} "
               f"tokens each) + {t.model_type} {t.n_layer} layers x {t.n_head} heads, d_model {t.d_model}")
    token = spec.prompt.image_token
    return MultimodalCheckpoint(
        folder=folder, name=name, family=family, spec=spec, weights=store, tokenizer=tok, special_tokens=special,
        runner=run, summary=summary, n_images=MAX_IMAGES, options=("vision_attentions",),
        prompt_hint=f"write {token} where each picture goes, e.g. 'User:{token}What is in the picture?"
                    "<end_of_utterance>\\nAssistant:'")


# ---- the forward pass -----------------------------------------------------------------------------------


def pixel_shuffle(x: np.ndarray, s: int) -> np.ndarray:
    """Idefics3Connector.pixel_shuffle of one frame: (g*g, d) -> (g*g / s^2, d*s^2), s x s neighbours side by side,
    the result row-major over the (g/s, g/s) grid."""
    seq, d = x.shape
    g = int(seq ** 0.5)
    x = x.reshape(g, g // s, d * s)  # (h, w/s, d*s)
    x = x.transpose(1, 0, 2).reshape(g // s, g // s, d * s * s)  # (w/s, h/s, d*s*s)
    return x.transpose(1, 0, 2).reshape(seq // (s * s), d * s * s)  # (g*g/s^2, d*s^2)


def image_features(spec: Idefics3Spec, store, processed: ProcessedImages, dtype, kernel: str, keep_maps: bool):
    """(features (N * image_seq_len, d_text), vision maps (N, L_v, nh_v, P, P) or None) of every frame."""
    W = PartView(store, "vision")
    proj = np.asarray(PartView(store, "connector")["modality_projection.proj.weight"]).astype(dtype, copy=False)
    feats, maps = [], []
    for n in range(processed.pixel_values.shape[0]):
        pv = processed.pixel_values[n]  # (3, H, W)
        if not pv.any():  # transformers drops an all-zero frame as batch padding, then has too few features
            raise CheckpointError(f"frame {n + 1}'s pixel values are all zero, which transformers takes for padding and "
                                  "drops; the image processor's mean and std make this picture vanish")
        pm = patch_mask_from_pixels(processed.pixel_mask[n], spec.vision.patch_size)  # (gh, gw)
        atts, states = vision_hidden_states(spec.vision, W, pv, dtype=dtype, kernel=kernel, patch_mask=pm)
        h = post_norm(spec.vision, W, states[-1], dtype=dtype)  # (P, d_v)
        if h.shape[0] != spec.patches_side ** 2:
            raise CheckpointError(f"frame {n + 1} gives {h.shape[0]} patches, not the {spec.patches_side ** 2} of a "
                                  f"{spec.steps.tile} px tile")
        feats.append(linear(pixel_shuffle(h, spec.scale_factor), proj, None))  # (image_seq_len, d_text)
        if keep_maps:
            maps.append(atts)  # (L_v, nh_v, P, P)
    return np.concatenate(feats, axis=0), (np.stack(maps) if keep_maps else None)  # (N*seq, d), (N, L_v, nh, P, P)


def _frame_name(spec: Idefics3Spec, processed: ProcessedImages, f: int) -> tuple[str, str]:
    """(PatchGroup name, label prefix) of frame f: ("tile 1,2", "img r1c2"), ("global image", "img g")."""
    fr = processed.frames[f]
    img = "img" + (str(fr.image + 1) if len(processed.layouts) > 1 else "")
    if fr.is_global:
        split = processed.layouts[fr.image] != (0, 0)
        return ("global image" if split else "image"), f"{img} g"
    return f"tile {fr.row + 1},{fr.col + 1}", f"{img} r{fr.row + 1}c{fr.col + 1}"


def _segment_names(pt: PromptTokens, n_images: int) -> list[str]:
    """(T,) segment of each token: the picture's block, or the run of text it is in."""
    T = len(pt.role)
    names: list[str] = []
    runs, prev_text = 0, False
    for t in range(T):
        if pt.image[t] >= 0:
            names.append("image" if n_images == 1 else f"image {pt.image[t] + 1}")
            prev_text = False
        else:
            if not prev_text:
                runs += 1
            names.append(f"text {runs}")
            prev_text = True
    if runs == 1:
        names = ["text" if n.startswith("text ") else n for n in names]
    return names


def run(ckpt: MultimodalCheckpoint, images: list, text: str, *, dtype=np.float32, kernel: str = "auto",
        vision_attentions: bool = False) -> MultimodalAttention:
    """Pictures (PIL images or uint8 arrays) and a prompt with one ``<image>`` per picture -> every map of the
    language model over the expanded sequence."""
    spec: Idefics3Spec = ckpt.spec
    dtype = np.dtype(dtype).type
    if dtype not in (np.float32, np.float64):
        raise CheckpointError(f"dtype must be float32 or float64 (got {np.dtype(dtype).name})")
    if not isinstance(text, str):
        raise CheckpointError(f"the prompt must be text (got {type(text).__name__})")
    check_placeholders(spec.prompt, text, len(images))  # before any picture is resized
    processed = process_images(images, spec.steps)
    pt = tokenise(spec.prompt, ckpt.tokenizer, ckpt.special_tokens, text, processed, MAX_TOKENS, model=ckpt.name)
    ids = pt.tokens.ids  # (T,)
    T = int(ids.shape[0])
    c = spec.text
    need = c.n_layer * c.n_head * T * T * np.dtype(dtype).itemsize  # bytes of the (L, nh, T, T) maps
    if need > MAX_MAP_BYTES:
        raise CheckpointError(f"{T:,} tokens would need {need / 2**30:.1f} GiB for the {c.n_layer} x {c.n_head} maps; "
                              "give fewer or smaller pictures")
    if ids.size and int(ids.max()) >= c.vocab_size:
        raise CheckpointError(f"token id {int(ids.max())} is outside the language model's {c.vocab_size}-row "
                              "embedding table: tokenizer and weights do not belong together")
    is_image = ids == spec.image_token_id  # (T,)
    role_image = np.array([r == IMAGE for r in pt.role], dtype=bool)  # (T,)
    n_feat = processed.pixel_values.shape[0] * spec.prompt.image_seq_len
    if not np.array_equal(is_image, role_image) or int(is_image.sum()) != n_feat:
        raise CheckpointError(f"the prompt's text itself contains {spec.prompt.image_token!r} tokens (or the tokenizer "
                              "splits the placeholder); it may appear only as the placeholder, once per picture")
    text_w = PartView(ckpt.weights, "text")
    embeds = dec.embed_tokens(c, text_w, ids, dtype)  # (T, d)
    vision_maps = None
    labels = pt.tokens.labels()
    patches: list[PatchGroup] = []
    if processed.frames:
        feats, vision_maps = image_features(spec, ckpt.weights, processed, dtype, kernel, vision_attentions)
        embeds[is_image] = feats  # masked_scatter: the features in sequence order
        pos = np.flatnonzero(is_image)  # (N * seq,)
        gs, seq = spec.tokens_side, spec.prompt.image_seq_len
        cover = spec.patches_side * spec.vision.patch_size[0] / spec.steps.tile  # share of a tile the patches cover
        for f, fr in enumerate(processed.frames):
            tokens = pos[f * seq:(f + 1) * seq]  # (seq,)
            if not np.all(pt.frame[tokens] == f):
                raise CheckpointError(f"frame {f + 1}'s image tokens are not where the processor put them")
            name, prefix = _frame_name(spec, processed, f)
            top, left, bottom, right = fr.box
            box = (top, left, top + (bottom - top) * cover, left + (right - left) * cover)
            patches.append(PatchGroup(image=fr.image, name=name, tokens=tokens, grid=(gs, gs), box=box))
            for k, p in enumerate(tokens):
                labels[p] = f"{prefix} {k // gs},{k % gs}"
    atts, hidden = dec.forward_decoder(c, text_w, ids, dtype=dtype, kernel=kernel, embeds=embeds)
    in_block = pt.image >= 0  # (T,) markers, newlines and image tokens of the pictures' blocks
    special = np.asarray(pt.tokens.special, dtype=bool) | in_block  # (T,)
    segments = segments_from_runs(_segment_names(pt, len(processed.layouts)))
    check_segments(segments, T)
    notes = []
    for i, (rows, cols) in enumerate(processed.layouts):
        what = f"{rows} x {cols} tiles + the global image" if rows else "not split"
        notes.append(f"picture {i + 1}: {what}, {spec.steps.tile} px frames, {spec.prompt.image_seq_len} tokens each")
    if spec.steps.ignored:
        notes.append(f"processor settings read as bookkeeping: {', '.join(spec.steps.ignored)}")
    windows = {c.decoder.window(i) for i in range(c.n_layer)}
    if windows != {0}:
        notes.append(f"sliding windows {sorted(windows)}: the mask shown is the full causal one")
    return MultimodalAttention(
        model=ckpt.name, family=spec.family, tokens=list(pt.tokens.pieces), labels=labels, special=special, ids=ids,
        attentions=atts, mask=dec.causal_mask(T), segments=segments, patches=tuple(patches),
        images=list(processed.rgb), hidden=hidden,
        pixels=processed.pixel_values if processed.frames else None, vision_attentions=vision_maps,
        kv_group=c.decoder.group, notes=tuple(notes))

