"""What PaliGemma's processor makes of one picture and a prompt, as transformers 5's ``PaliGemmaProcessor``
with its ``SiglipImageProcessor`` (Pillow backend) makes it: the token ids, the token types and the pixels.

* Pixels: the picture converted to RGB as the image processor does (transparency composited over white,
  grey and CMYK through Pillow's ``convert("RGB")``), stretched to the processor's height x width with its
  resampling filter, rescaled and normalised (:func:`attnviz.checkpoints.preprocess.preprocess_image`).
* Text: ``image_seq_length`` ``<image>`` tokens, ``<bos>``, the prompt and ``"\\n"``. A prompt that already
  holds the ``<image>`` placeholder keeps its text around it and gets ``<bos>`` right after it (so text
  written before the placeholder comes before the image tokens). A suffix (training targets) is tokenised
  on its own with ``<eos>`` after it and gets token type 1; the prefix has type 0.
* Tokeniser: the folder's ``tokenizer.json``, with the 1,024 location and 128 segmentation tokens the
  processor adds when it loads (``<loc0000>`` ... ``<seg127>``; ids after the file's own when the file
  lacks them) and BOS / EOS / ``<image>`` matched whole.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image
from tokenizers import AddedToken

from attnviz.checkpoints.config import ImageConfig, parse_image_config
from attnviz.checkpoints.decoder_text import SpecialTokens
from attnviz.checkpoints.errors import CheckpointError
from attnviz.checkpoints.json_file import read_json
from attnviz.checkpoints.model_config import CheckpointConfig, bool_field, int_field
from attnviz.checkpoints.preprocess import preprocess_image
from attnviz.sources.errors import SourceError
from attnviz.sources.text import BpeTokenizer

IMAGE_TOKEN = "<image>"
EXTRA_TOKENS = [f"<loc{i:0>4}>" for i in range(1024)] + [f"<seg{i:0>3}>" for i in range(128)]
PROCESSOR_CLASSES = ("PaliGemmaProcessor",)
IMAGE_PROCESSORS = ("SiglipImageProcessor", "SiglipImageProcessorPil", "SiglipImageProcessorFast")
# SiglipImageProcessor's class defaults: what a key left out (or null) in the saved settings means
SIGLIP_DEFAULTS = {"do_resize": True, "resample": 3, "do_rescale": True, "rescale_factor": 1 / 255,
                   "do_normalize": True, "image_mean": [0.5, 0.5, 0.5], "image_std": [0.5, 0.5, 0.5],
                   "do_convert_rgb": True}
# Steps SiglipImageProcessor can be told to take that PaliGemma's processor never uses
REFUSED_STEPS = ("do_center_crop", "do_pad")
GEMMA_SPECIAL = {"bos_token": "<bos>", "eos_token": "<eos>", "pad_token": "<pad>", "unk_token": "<unk>"}


@dataclass(frozen=True)
class ProcessorSpec:
    """The image processor's steps and the sequence rule's numbers."""

    image: ImageConfig  # resize (stretch) to the tower's input, rescale, normalise
    image_seq_length: int  # <image> tokens per picture, the tower's patches
    convert_rgb: bool  # do_convert_rgb: grey, CMYK and transparent pictures made RGB first
    bos: str  # the BOS token's text the processor writes after the image tokens
    eos: str  # the EOS token's text it writes after a suffix


@dataclass(frozen=True, eq=False)
class PaliGemmaInputs:
    """One processed (picture, prompt[, suffix]) as the model reads it."""

    ids: np.ndarray  # (T,) int64 input_ids, image tokens included
    token_type_ids: np.ndarray  # (T,) int64: 0 prefix (image + BOS + prompt + "\n"), 1 suffix
    pieces: list[str]  # (T,) token text ("<image>" for image tokens)
    labels: list[str]  # (T,) pieces with whitespace made visible
    special: np.ndarray  # (T,) bool: special tokens (BOS, EOS, <image>)
    is_image: np.ndarray  # (T,) bool: the <image> tokens the projected patches replace
    rgb: np.ndarray  # (H, W, 3) uint8: the picture after the RGB conversion, before resizing
    pixels: np.ndarray  # (3, H', W') float32 pixel_values


def parse_processor(proc: dict, image_pp: dict, vision: CheckpointConfig, special: dict) -> ProcessorSpec:
    """Check the processor and image processor settings against the SigLIP tower they feed."""
    where = "processor_config.json" if "image_processor" in proc else "preprocessor_config.json"
    cls = proc.get("processor_class", image_pp.get("processor_class"))
    if cls is not None and cls not in PROCESSOR_CLASSES:
        raise CheckpointError(f"{where}: processor_class {cls!r} is not PaliGemma's processor "
                              f"({', '.join(PROCESSOR_CLASSES)})")
    kind = image_pp.get("image_processor_type")
    if kind is not None and kind not in IMAGE_PROCESSORS:
        raise CheckpointError(f"{where}: image_processor_type {kind!r} is not supported for PaliGemma "
                              f"(supported: {', '.join(IMAGE_PROCESSORS)})")
    for step in REFUSED_STEPS:
        if image_pp.get(step):
            raise CheckpointError(f"{where}: {step} is set, which PaliGemma's image processor does not do; "
                                  "the picture is only stretched to the model's size")
    size = image_pp.get("size")
    if size is not None and not (isinstance(size, dict) and set(size) == {"height", "width"}):
        raise CheckpointError(f"{where}: size {size!r} is not supported; PaliGemma's processor stretches every picture "
                              "to {'height': H, 'width': W}")
    pp = {**SIGLIP_DEFAULTS, **{k: v for k, v in image_pp.items() if v is not None}}
    pp.setdefault("size", {"height": vision.image_size[0], "width": vision.image_size[1]})
    ic = parse_image_config(pp, vision)
    if ic.size != vision.image_size:
        raise CheckpointError(f"{where}: pictures are resized to {ic.size[0]}x{ic.size[1]} px, but the vision tower's "
                              f"position embeddings are for {vision.image_size[0]}x{vision.image_size[1]} (PaliGemma "
                              "does not interpolate them)")
    if "image_seq_length" not in image_pp:
        raise CheckpointError(f"{where}: the image processor has no image_seq_length (how many <image> tokens a picture "
                              "becomes), which PaliGemma's processor needs")
    n = int_field(image_pp, "image_seq_length", where=where)
    gh, gw = vision.grid
    if n != gh * gw:
        raise CheckpointError(f"{where}: image_seq_length {n} differs from the {gh}x{gw} = {gh * gw} patches of the "
                              "vision tower; image tokens and image features would not match")
    return ProcessorSpec(image=ic, image_seq_length=n, convert_rgb=bool_field(pp, "do_convert_rgb", True, where),
                         bos=special["bos_token"], eos=special["eos_token"])


def _token_text(value, default: str) -> str:
    if isinstance(value, dict):
        value = value.get("content")
    return value if isinstance(value, str) and value else default


def read_tokenizer(folder: Path, name: str) -> tuple[BpeTokenizer, dict, SpecialTokens]:
    """(tokenizer as the processor leaves it, {bos_token, eos_token, ...: text}, BOS/EOS ids)."""
    path = Path(folder) / "tokenizer.json"
    if not path.is_file():
        raise CheckpointError(f"the tokenizer is missing: {path} not found (PaliGemma needs tokenizer.json)")
    try:
        tok = BpeTokenizer.from_file(path, name=name)
    except SourceError as exc:
        raise CheckpointError(str(exc)) from None
    cfg: dict = {}
    cfg_path = Path(folder) / "tokenizer_config.json"
    if cfg_path.is_file():
        cfg = read_json(cfg_path, "the tokenizer config")
    special = {k: _token_text(cfg.get(k), v) for k, v in GEMMA_SPECIAL.items()}
    inner = tok.tokenizer
    for role in ("bos_token", "eos_token"):
        if inner.token_to_id(special[role]) is None:
            raise CheckpointError(f"tokenizer.json has no {role[:3].upper()} token {special[role]!r}, which PaliGemma's "
                                  "processor writes")
    if inner.token_to_id(IMAGE_TOKEN) is None:
        raise CheckpointError(f"tokenizer.json has no {IMAGE_TOKEN} token, which PaliGemma's processor writes")
    # transformers registers the named special tokens and <image> as whole tokens, then adds the location and
    # segmentation tokens (plain, normalised) when the processor loads
    names = [special[k] for k in GEMMA_SPECIAL if inner.token_to_id(special[k]) is not None] + [IMAGE_TOKEN]
    inner.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in names])
    inner.add_tokens(EXTRA_TOKENS)
    tok = BpeTokenizer(inner, name=name)
    ids = SpecialTokens(bos_id=tok.token_to_id(special["bos_token"]), eos_id=tok.token_to_id(special["eos_token"]),
                        add_bos=False, add_eos=False, has_chat_template=False)
    return tok, special, ids


def to_rgb(image, convert: bool = True) -> np.ndarray:
    """A picture -> (H, W, 3) uint8 as the image processor's RGB conversion leaves it.

    Pillow images: transparency (an alpha band, or a palette / grey transparency key) composited over
    white, every other mode through ``convert("RGB")`` (grey, CMYK, palette, YCbCr). Arrays (channels last,
    uint8): (H, W) and (H, W, 1) grey repeated, (H, W, 4) RGBA composited over white."""
    if isinstance(image, Image.Image):
        if image.width < 1 or image.height < 1:
            raise CheckpointError(f"the picture is empty ({image.width}x{image.height})")
        if not convert:
            arr = np.asarray(image)
        elif "A" in image.getbands() or image.info.get("transparency") is not None:
            rgba = image.convert("RGBA")
            white = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
            arr = np.asarray(Image.alpha_composite(white, rgba).convert("RGB"))  # (H, W, 3)
        else:
            arr = np.asarray(image.convert("RGB"))  # (H, W, 3)
    else:
        arr = np.asarray(image)
        if arr.dtype != np.uint8:
            raise CheckpointError(f"the picture must be uint8 pixels 0..255 (got dtype {arr.dtype})")
        if arr.ndim == 3 and arr.shape[2] == 1:
            arr = arr[:, :, 0]  # (H, W)
        if arr.ndim not in (2, 3) or (arr.ndim == 3 and arr.shape[2] not in (3, 4)):
            raise CheckpointError(f"the picture must be (H, W), (H, W, 1), (H, W, 3) or (H, W, 4) pixels, channels last "
                                  f"(got shape {arr.shape})")
        if arr.shape[0] < 1 or arr.shape[1] < 1:
            raise CheckpointError(f"the picture is empty (shape {arr.shape})")
        if convert and arr.ndim == 2:
            arr = np.repeat(arr[:, :, None], 3, axis=2)  # (H, W, 3)
        elif convert and arr.shape[2] == 4:
            alpha = arr[:, :, 3:4] / 255.0  # (H, W, 1)
            arr = np.rint(alpha * arr[:, :, :3] + (1.0 - alpha) * 255.0).astype(np.uint8)  # (H, W, 3) over white
    if arr.ndim != 3 or arr.shape[2] != 3:
        raise CheckpointError(f"the picture has {1 if arr.ndim == 2 else arr.shape[2]} channels and the image processor "
                              "does not convert it to RGB (do_convert_rgb is false); give an RGB picture")
    return np.ascontiguousarray(arr, dtype=np.uint8)  # (H, W, 3)


def prefix_text(text: str, spec: ProcessorSpec) -> str:
    """The prefix as the processor writes it before tokenising: placeholder, BOS, prompt, newline, and the
    placeholder repeated once per image token."""
    if not isinstance(text, str):
        raise CheckpointError(f"the prompt must be text (got {type(text).__name__})")
    n = text.count(IMAGE_TOKEN)
    if n > 1:
        raise CheckpointError(f"the prompt has {n} {IMAGE_TOKEN} placeholders but PaliGemma takes one picture; leave it "
                              f"out (the processor puts the picture first) or write it once")
    if n == 0:
        full = f"{IMAGE_TOKEN}{spec.bos}{text}\n"
    else:
        at = text.rfind(IMAGE_TOKEN) + len(IMAGE_TOKEN)
        full = f"{text[:at]}{spec.bos}{text[at:]}\n"
    return full.replace(IMAGE_TOKEN, IMAGE_TOKEN * spec.image_seq_length)


def process(tok: BpeTokenizer, spec: ProcessorSpec, image, text: str, suffix: str | None = None, *,
            image_token_id: int, max_tokens: int) -> PaliGemmaInputs:
    """One picture, a prompt and an optional suffix -> ids, token types and pixels as the processor makes them."""
    if suffix is not None and not isinstance(suffix, str):
        raise CheckpointError(f"the suffix must be text (got {type(suffix).__name__})")
    if suffix is not None and IMAGE_TOKEN in suffix:
        raise CheckpointError(f"the suffix contains {IMAGE_TOKEN}; the picture's tokens belong to the prefix only")
    rgb = to_rgb(image, spec.convert_rgb)  # (H, W, 3)
    pixels = preprocess_image(rgb, spec.image)  # (3, H', W')
    try:
        parts = [tok.encode(prefix_text(text, spec), max_tokens=max_tokens)]
        if suffix is not None:
            parts.append(tok.encode(suffix + spec.eos, max_tokens=max_tokens))
    except SourceError as exc:
        raise CheckpointError(str(exc)) from None
    ids = np.concatenate([p.ids for p in parts])  # (T,)
    if ids.shape[0] > max_tokens:
        raise CheckpointError(f"prompt and suffix give {ids.shape[0]:,} tokens, more than the limit of {max_tokens:,}")
    types = np.concatenate([np.full(len(p), i, dtype=np.int64) for i, p in enumerate(parts)])  # (T,)
    is_image = ids == image_token_id  # (T,)
    where = np.flatnonzero(is_image)
    if where.size != spec.image_seq_length or where[-1] - where[0] + 1 != where.size:
        raise CheckpointError(f"the prompt's text turns into {IMAGE_TOKEN} tokens of its own; the placeholder may "
                              "appear only once, for the picture")
    return PaliGemmaInputs(
        ids=ids.astype(np.int64), token_type_ids=types, pieces=[s for p in parts for s in p.pieces],
        labels=[s for p in parts for s in p.labels()], special=np.array([f for p in parts for f in p.special], dtype=bool),
        is_image=is_image, rgb=rgb, pixels=pixels)
