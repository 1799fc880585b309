"""The Idefics3 / SmolVLM processor in numpy and Pillow: pictures -> tiles -> pixel values, and a prompt's
``<image>`` placeholders -> the expanded token sequence, as transformers' ``Idefics3Processor`` and
``SmolVLMProcessor`` make them with the PIL image processor (``Idefics3ImageProcessorPil``).

Image steps, in transformers' order and arithmetic: convert to RGB (transparency composited onto white);
resize so the longest edge is ``size["longest_edge"]`` (the other edge ``int`` of the aspect-kept length,
rounded up to even, at most 4096); with ``do_image_splitting`` resize again to whole multiples ``m`` of
``max_image_size["longest_edge"]`` and cut ``m x m`` tiles row by row, plus the whole picture squashed to
``m x m`` as the global image (a picture of one tile is that tile alone); without it, the picture
squashed to ``m x m``; rescale in float64 rounded to float32, normalise in float32; pad every frame to the
largest (all are ``m x m``) with ``pixel_attention_mask``.

Prompt expansion: each placeholder becomes, for a split picture, per tile
``<fake_token_around_image><row_R_col_C>`` + ``<image>`` x ``image_seq_len``, a ``\\n`` after each tile
row, then ``\\n<fake_token_around_image><global-img>`` + ``<image>`` x ``image_seq_len`` +
``<fake_token_around_image>``; a picture that is not split gets the last part without its leading
``\\n``. The placeholders must be as many as the pictures (transformers refuses otherwise, and so does
this module). :func:`tokenise` tokenises the expanded text with the checkpoint's tokenizer and BOS rule
and says for every token which picture, frame and part of the block it belongs to.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from dataclasses import dataclass

import numpy as np
from PIL import Image

from attnviz.checkpoints.config import MAX_INPUT_PIXELS, RESAMPLE_NAMES
from attnviz.checkpoints.decoder_text import SpecialTokens, encode
from attnviz.checkpoints.errors import CheckpointError
from attnviz.sources.errors import SourceError
from attnviz.sources.text import BpeTokenizer, TextTokens

MAX_IMAGE_SIZE = 4096  # transformers' cap on the first resize's longer edge
# The image processor's defaults (Idefics3ImageProcessorPil's class attributes) for keys a file leaves out
DEFAULTS = {
    "do_convert_rgb": True, "do_resize": True, "size": {"longest_edge": 4 * 364}, "resample": 1,
    "do_image_splitting": True, "max_image_size": {"longest_edge": 364}, "do_rescale": True,
    "rescale_factor": 1 / 255, "do_normalize": True, "image_mean": [0.5, 0.5, 0.5], "image_std": [0.5, 0.5, 0.5],
    "do_pad": True,
}
# Keys that say nothing about the arithmetic (bookkeeping, or settings of the video path)
IGNORED_KEYS = {"image_processor_type", "processor_class", "_processor_class", "return_row_col_info",
                "video_sampling", "data_format", "input_data_format", "return_tensors", "disable_grouping",
                "device", "backend", "image_seq_len"}
IMAGE_SEQ_LEN_DEFAULT = 169  # the processors' default image_seq_len


@dataclass(frozen=True)
class ImageSteps:
    """The image processor's settings, checked: what happens to a picture before the vision tower."""

    do_convert_rgb: bool  # composite transparency onto white and drop to three channels
    do_resize: bool  # first resize (to ``size``) at all
    longest_edge: int  # size["longest_edge"]: the first resize's longer edge (0 when size gives height/width)
    size_hw: tuple[int, int] | None  # size {"height", "width"}: the first resize's exact size instead
    resample: int  # PIL resampling code of every resize (1: LANCZOS)
    do_image_splitting: bool  # cut the picture into tiles plus a global image
    tile: int  # max_image_size["longest_edge"]: side m of every tile and of the global image
    do_rescale: bool
    rescale_factor: float  # 1/255: uint8 -> [0, 1]
    do_normalize: bool
    mean: tuple[float, float, float]  # per-channel mean subtracted after rescaling
    std: tuple[float, float, float]  # per-channel std divided by
    do_pad: bool  # pad the frames to a common size (a no-op here: every frame is tile x tile)
    ignored: tuple[str, ...] = ()  # unknown keys that were read as bookkeeping


def _bool(pp: dict, key: str, where: str) -> bool:
    v = pp.get(key, DEFAULTS[key])
    if not isinstance(v, bool):
        raise CheckpointError(f"{where}: {key!r} must be true or false (got {v!r}); the processor's steps depend on it")
    return v


def _edge(value, key: str, where: str, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 100_000:
        raise CheckpointError(f"{where}: {key} {what} must be a whole number of pixels, 1..100000 (got {value!r})")
    return value


def _triple(pp: dict, key: str, where: str) -> tuple[float, float, float]:
    v = pp.get(key, DEFAULTS[key])
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        v = [v] * 3
    if (not isinstance(v, list) or len(v) != 3
            or not all(isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) for x in v)):
        raise CheckpointError(f"{where}: {key!r} must be one number or three, one per RGB channel (got {v!r})")
    return tuple(float(x) for x in v)


def parse_image_steps(pp: dict, where: str = "the image processor config") -> ImageSteps:
    """An Idefics3 / SmolVLM image processor's settings (``processor_config.json``'s ``image_processor`` or
    ``preprocessor_config.json``) -> :class:`ImageSteps`; anything this module cannot reproduce exactly is
    refused in one line."""
    if not isinstance(pp, dict):
        raise CheckpointError(f"{where} must be a JSON object")
    steps = {k: _bool(pp, k, where) for k in ("do_convert_rgb", "do_resize", "do_image_splitting", "do_rescale",
                                               "do_normalize", "do_pad")}
    size = pp.get("size", DEFAULTS["size"])
    longest, size_hw = 0, None
    if not isinstance(size, dict):
        raise CheckpointError(f"{where}: 'size' must be an object with 'longest_edge' (got {size!r})")
    if size.get("longest_edge") is not None:
        longest = _edge(size["longest_edge"], "size", where, "longest_edge")
    elif size.get("height") is not None and size.get("width") is not None:
        size_hw = (_edge(size["height"], "size", where, "height"), _edge(size["width"], "size", where, "width"))
    else:
        raise CheckpointError(f"{where}: 'size' {size!r} has neither 'longest_edge' nor 'height' and 'width'; the "
                              "Idefics3 processor resizes by one of them")
    mis = pp.get("max_image_size", DEFAULTS["max_image_size"])
    if not isinstance(mis, dict) or "longest_edge" not in mis:
        raise CheckpointError(f"{where}: 'max_image_size' must be an object with 'longest_edge' (got {mis!r})")
    tile = _edge(mis["longest_edge"], "max_image_size", where, "longest_edge")
    resample = pp.get("resample", DEFAULTS["resample"])
    if isinstance(resample, bool) or not isinstance(resample, int) or resample not in RESAMPLE_NAMES:
        raise CheckpointError(f"{where}: resample {resample!r} is not a PIL resampling code "
                              f"({', '.join(f'{k} {v}' for k, v in RESAMPLE_NAMES.items())})")
    rf = pp.get("rescale_factor", DEFAULTS["rescale_factor"])
    if isinstance(rf, bool) or not isinstance(rf, (int, float)) or not math.isfinite(rf):
        raise CheckpointError(f"{where}: 'rescale_factor' must be a number (got {rf!r})")
    std = _triple(pp, "image_std", where)
    if steps["do_normalize"] and any(s == 0 for s in std):
        raise CheckpointError(f"{where}: 'image_std' {list(std)} has a zero; normalising would divide by it")
    unknown = sorted(k for k in pp if k not in DEFAULTS and k not in IGNORED_KEYS)
    switches = [k for k in unknown if k.startswith("do_") and pp[k] not in (False, None)]
    if switches:
        raise CheckpointError(f"{where}: {', '.join(repr(k) for k in switches)} "
                              f"{'is a step' if len(switches) == 1 else 'are steps'} the Idefics3 image processor "
                              "does not have; refusing rather than guessing what it does to the pixels")
    return ImageSteps(longest_edge=longest, size_hw=size_hw, resample=resample, tile=tile, rescale_factor=float(rf),
                      mean=_triple(pp, "image_mean", where), std=std, ignored=tuple(unknown), **steps)


# ---- pictures -------------------------------------------------------------------------------------------


def to_rgb(image, convert: bool = True) -> np.ndarray:
    """A picture -> (H, W, 3) uint8 as transformers' ``convert_to_rgb`` makes it.

    A PIL image of any mode: transparency (an alpha band, or a palette's transparent colour) composited
    onto white with ``Image.alpha_composite``, other modes (grey, CMYK, ...) through ``convert("RGB")``.
    A uint8 array (H, W), (H, W, 1), (H, W, 3) or (H, W, 4), channels last: grey repeated, RGBA blended
    onto white as ``round(a/255 * rgb + (1 - a/255) * 255)``.
    """
    if isinstance(image, Image.Image):
        try:
            image.load()
            if not convert:
                arr = np.asarray(image)
            elif "A" in image.getbands() or image.info.get("transparency") is not None:
                rgba = image.convert("RGBA")
                white = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
                arr = np.asarray(Image.alpha_composite(white, rgba).convert("RGB"))
            else:
                arr = np.asarray(image.convert("RGB"))
        except (OSError, ValueError) as exc:
            raise CheckpointError(f"the picture (PIL mode {image.mode}) cannot be read as RGB: {exc}") from None
        if arr.dtype != np.uint8 or arr.ndim != 3 or arr.shape[2] != 3:
            raise CheckpointError(f"the picture (PIL mode {image.mode}) is not 8-bit RGB; convert it first")
        return np.ascontiguousarray(arr)  # (H, W, 3)
    arr = np.asarray(image)
    if arr.dtype != np.uint8:
        raise CheckpointError(f"the picture must be uint8 pixels 0..255 (got dtype {arr.dtype})")
    if arr.ndim == 2:
        arr = arr[:, :, None]  # (H, W, 1)
    if arr.ndim != 3 or arr.shape[2] not in (1, 3, 4):
        raise CheckpointError(f"the picture must be (H, W), (H, W, 1), (H, W, 3) or (H, W, 4) pixels, channels last "
                              f"(got shape {arr.shape})")
    if arr.shape[0] < 1 or arr.shape[1] < 1:
        raise CheckpointError(f"the picture is empty (shape {arr.shape})")
    if arr.shape[2] == 1:
        arr = np.repeat(arr, 3, axis=2)  # (H, W, 3)
    elif arr.shape[2] == 4:
        if not convert:
            raise CheckpointError("the picture has an alpha channel and the processor does not convert to RGB")
        alpha = arr[:, :, 3:4] / 255  # (H, W, 1) float64
        arr = np.round(alpha * arr[:, :, :3] + (1 - alpha) * 255).astype(np.uint8)  # (H, W, 3)
    return np.ascontiguousarray(arr)  # (H, W, 3)


def _fit_longest(height: int, width: int, max_len: int) -> tuple[int, int]:
    """transformers' _resize_output_size_rescale_to_max_len (min_len 1): the longer edge to max_len, the
    other int(...) of the kept aspect, rounded up to even."""
    aspect = width / height
    if width >= height:
        width = max_len
        height = int(width / aspect)
        if height % 2 != 0:
            height += 1
    else:
        height = max_len
        width = int(height * aspect)
        if width % 2 != 0:
            width += 1
    return max(height, 1), max(width, 1)


def _below_cap(height: int, width: int, cap: int = MAX_IMAGE_SIZE) -> tuple[int, int]:
    """transformers' _resize_output_size_scale_below_upper_bound."""
    aspect = width / height
    if width >= height and width > cap:
        width = cap
        height = int(width / aspect)
    elif height > width and height > cap:
        height = cap
        width = int(height * aspect)
    return max(height, 1), max(width, 1)


def first_size(hw: tuple[int, int], s: ImageSteps) -> tuple[int, int]:
    """(H', W') of the first resize (``size``), or the picture's own size without ``do_resize``."""
    if not s.do_resize:
        return hw
    if s.size_hw is not None:
        return s.size_hw
    return _below_cap(*_fit_longest(hw[0], hw[1], s.longest_edge))


def tiled_size(hw: tuple[int, int], tile: int) -> tuple[int, int]:
    """transformers' resize_for_vision_encoder: whole multiples of ``tile``, the second edge from the first's
    new length and the aspect."""
    height, width = hw
    aspect = width / height
    if width >= height:
        width = math.ceil(width / tile) * tile
        height = int(width / aspect)
        height = math.ceil(height / tile) * tile
    else:
        height = math.ceil(height / tile) * tile
        width = int(height * aspect)
        width = math.ceil(width / tile) * tile
    return height, width


def _resize(rgb: np.ndarray, hw: tuple[int, int], resample: int) -> np.ndarray:
    """(H, W, 3) uint8 -> (h, w, 3) with Pillow (always resampled, as transformers does)."""
    h, w = hw
    if h * w > MAX_INPUT_PIXELS:
        raise CheckpointError(f"the processor would resize the picture to {h}x{w} px, more than "
                              f"{MAX_INPUT_PIXELS / 1e6:g} MP")
    return np.asarray(Image.fromarray(rgb).resize((w, h), resample=resample, reducing_gap=None))  # (h, w, 3)


@dataclass(frozen=True)
class Frame:
    """One input of the vision tower: a tile of a picture, its global image, or the whole picture."""

    image: int  # which picture of the prompt
    row: int  # tile row from 0; -1 for the global image (or the picture not split)
    col: int  # tile column from 0; -1 likewise
    box: tuple[float, float, float, float]  # (top, left, bottom, right) it covers in the original picture's pixels

    @property
    def is_global(self) -> bool:
        return self.row < 0


@dataclass(frozen=True)
class ProcessedImages:
    """What the image processor gives for the pictures of one prompt."""

    pixel_values: np.ndarray  # (N, 3, H, W) float32, N frames of every picture in order (tiles row-major, then global)
    pixel_mask: np.ndarray  # (N, H, W) bool: True on real pixels (pixel_attention_mask)
    frames: tuple[Frame, ...]  # (N,) what each frame is
    layouts: tuple[tuple[int, int], ...]  # per picture (rows, cols) of tiles; (0, 0) when not split
    rgb: tuple[np.ndarray, ...]  # per picture the (H, W, 3) uint8 original after RGB conversion


def _frames_of(rgb: np.ndarray, index: int, s: ImageSteps) -> tuple[list[np.ndarray], tuple[int, int], list[Frame]]:
    H, W = rgb.shape[:2]
    m = s.tile
    hw = first_size((H, W), s)
    img = _resize(rgb, hw, s.resample) if s.do_resize else rgb  # (H', W', 3)
    whole = (0.0, 0.0, float(H), float(W))
    if not s.do_image_splitting:
        return [_resize(img, (m, m), s.resample)], (0, 0), [Frame(index, -1, -1, whole)]
    th, tw = tiled_size(img.shape[:2], m)
    img = _resize(img, (th, tw), s.resample)  # (th, tw, 3)
    if th <= m and tw <= m:
        return [img], (0, 0), [Frame(index, -1, -1, whole)]
    rows, cols = (th - m) // m + 1, (tw - m) // m + 1
    sy, sx = H / th, W / tw  # original pixels per resized pixel
    tiles, frames = [], []
    for r in range(rows):
        for c in range(cols):
            tiles.append(img[r * m:(r + 1) * m, c * m:(c + 1) * m])  # (m, m, 3)
            box = (r * m * sy, c * m * sx, min(H, (r + 1) * m * sy), min(W, (c + 1) * m * sx))
            frames.append(Frame(index, r, c, box))
    tiles.append(_resize(img, (m, m), s.resample))  # the global image: the whole picture squashed to m x m
    frames.append(Frame(index, -1, -1, whole))
    return tiles, (rows, cols), frames


def _to_pixels(frame: np.ndarray, s: ImageSteps) -> np.ndarray:
    """(h, w, 3) uint8 -> (3, h, w) float32: rescale in float64 rounded to float32, normalise in float32."""
    x = frame.transpose(2, 0, 1)  # (3, h, w) uint8
    if s.do_rescale:
        x = (x.astype(np.float64) * s.rescale_factor).astype(np.float32)  # (3, h, w)
    else:
        x = x.astype(np.float32)  # (3, h, w)
    if s.do_normalize:
        mean = np.asarray(s.mean, dtype=np.float32)[:, None, None]  # (3, 1, 1)
        std = np.asarray(s.std, dtype=np.float32)[:, None, None]  # (3, 1, 1)
        x = (x - mean) / std  # (3, h, w) float32
    return np.ascontiguousarray(x, dtype=np.float32)


def process_images(images, s: ImageSteps, max_frames: int = 1024) -> ProcessedImages:
    """The pictures of one prompt (PIL images or uint8 arrays, see :func:`to_rgb`) -> pixel values of every frame."""
    rgbs, frames, pixels, layouts = [], [], [], []
    for i, image in enumerate(images):
        rgb = to_rgb(image, s.do_convert_rgb)  # (H, W, 3)
        if rgb.shape[0] * rgb.shape[1] > MAX_INPUT_PIXELS:
            raise CheckpointError(f"picture {i + 1} is {rgb.shape[0]}x{rgb.shape[1]} px, more than "
                                  f"{MAX_INPUT_PIXELS / 1e6:g} MP; scale it down first")
        tiles, layout, fr = _frames_of(rgb, i, s)
        if len(frames) + len(tiles) > max_frames:
            raise CheckpointError(f"the pictures give more than {max_frames} tiles; lower the processor's size or "
                                  "give fewer pictures")
        rgbs.append(rgb)
        layouts.append(layout)
        frames.extend(fr)
        pixels.extend(_to_pixels(t, s) for t in tiles)
    if not pixels:
        z = np.zeros((0, 3, s.tile, s.tile), dtype=np.float32)  # (0, 3, m, m)
        return ProcessedImages(z, np.zeros((0, s.tile, s.tile), dtype=bool), (), (), ())
    Hm = max(p.shape[1] for p in pixels)
    Wm = max(p.shape[2] for p in pixels)
    pv = np.zeros((len(pixels), 3, Hm, Wm), dtype=np.float32)  # (N, 3, Hm, Wm): padding is zeros, bottom and right
    mask = np.zeros((len(pixels), Hm, Wm), dtype=bool)  # (N, Hm, Wm)
    for n, p in enumerate(pixels):
        pv[n, :, :p.shape[1], :p.shape[2]] = p
        mask[n, :p.shape[1], :p.shape[2]] = True
    return ProcessedImages(pv, mask, tuple(frames), tuple(layouts), tuple(rgbs))


# ---- the prompt -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PromptSpec:
    """The processor's own settings and marker strings."""

    image_token: str  # "<image>": the placeholder, and the token each image feature replaces
    fake_token: str  # "<fake_token_around_image>": opens every tile and closes the block
    global_token: str  # "<global-img>": opens the global image
    image_seq_len: int  # image tokens per frame (processor_config.json's image_seq_len)


# Roles of the pieces of an expanded image block (what each character run of the expanded text is)
FAKE, TILE_TAG, GLOBAL_TAG, IMAGE, NEWLINE, TEXT = "fake", "tile tag", "global tag", "image", "newline", "text"


@dataclass(frozen=True)
class Piece:
    """A run of the expanded text: [start, stop) characters, what it is, and of which picture / frame."""

    start: int
    stop: int
    role: str  # one of FAKE, TILE_TAG, GLOBAL_TAG, IMAGE, NEWLINE, TEXT
    image: int = -1  # picture index (-1 for the prompt's own text)
    frame: int = -1  # frame index into ProcessedImages.frames (-1 for the block's markers between frames' ones)


def _block(spec: PromptSpec, layout: tuple[int, int], image: int, first_frame: int) -> list[tuple[str, str, int]]:
    """(text, role, frame) runs of one picture's replacement string, as get_image_prompt_string writes it."""
    rows, cols = layout
    f = first_frame
    out: list[tuple[str, str, int]] = []
    if rows or cols:
        for r in range(rows):
            for c in range(cols):
                out += [(spec.fake_token, FAKE, f), (f"<row_{r + 1}_col_{c + 1}>", TILE_TAG, f)]
                out += [(spec.image_token, IMAGE, f)] * spec.image_seq_len
                f += 1
            out.append(("\n", NEWLINE, -1))
        out.append(("\n", NEWLINE, -1))
    out += [(spec.fake_token, FAKE, f), (spec.global_token, GLOBAL_TAG, f)]
    out += [(spec.image_token, IMAGE, f)] * spec.image_seq_len
    out.append((spec.fake_token, FAKE, -1))
    return out


def check_placeholders(spec: PromptSpec, text: str, n_images: int) -> None:
    """transformers' rule: as many placeholders as pictures (none without pictures), else refused."""
    n = text.count(spec.image_token)
    if n == n_images:
        return
    tok = spec.image_token
    given = f"{n_images} picture{'s were' if n_images > 1 else ' was'} given"
    if n_images == 0:
        raise CheckpointError(f"the prompt has {n} {tok} placeholder{'s' if n != 1 else ''} but no picture was given; "
                              f"give one picture per {tok}, or remove them")
    if n == 0:
        raise CheckpointError(f"the prompt has no {tok} placeholder but {given}; write {tok} where each picture goes, "
                              f"e.g. 'User:{tok}What is in the picture?'")
    raise CheckpointError(f"the prompt has {n} {tok} placeholders but {given}; write one {tok} per picture")


def expand_prompt(spec: PromptSpec, text: str, processed: ProcessedImages) -> tuple[str, tuple[Piece, ...]]:
    """The prompt with every placeholder replaced by its picture's block, and the runs it is made of."""
    check_placeholders(spec, text, len(processed.layouts))
    parts = text.split(spec.image_token)
    pieces: list[Piece] = []
    out: list[str] = []
    at = frame = 0

    def add(s: str, role: str, image: int = -1, fr: int = -1):
        nonlocal at
        if s:
            pieces.append(Piece(at, at + len(s), role, image, fr))
            out.append(s)
            at += len(s)

    for i, part in enumerate(parts):
        add(part, TEXT)
        if i < len(processed.layouts):
            for s, role, fr in _block(spec, processed.layouts[i], i, frame):
                add(s, role, i, fr)
            rows, cols = processed.layouts[i]
            frame += rows * cols + 1
    return "".join(out), tuple(pieces)


@dataclass(frozen=True)
class PromptTokens:
    """The expanded prompt as tokens, and each token's place in it."""

    tokens: TextTokens  # ids, pieces, spans (into the expanded text), special flags
    text: str  # the expanded text
    role: tuple[str, ...]  # (T,) role of the piece each token comes from (TEXT for the prompt and BOS / EOS)
    image: np.ndarray  # (T,) int64 picture of each token, -1 outside the image blocks
    frame: np.ndarray  # (T,) int64 frame of each image token (and its tile's markers), -1 otherwise
    is_bos: np.ndarray  # (T,) bool: the BOS (or EOS) the tokenizer config adds


def tokenise(spec: PromptSpec, tok: BpeTokenizer, special: SpecialTokens, text: str, processed: ProcessedImages,
             max_tokens: int, model: str = "the model") -> PromptTokens:
    """Expand the prompt and tokenise it with BOS / EOS as the tokenizer config says (transformers' tokenizer call
    with add_special_tokens=True); every token is assigned to the run its first character comes from."""
    if not isinstance(text, str):
        raise CheckpointError(f"the prompt must be text (got {type(text).__name__})")
    expanded, pieces = expand_prompt(spec, text, processed)
    if not expanded.strip():
        raise CheckpointError("the prompt is empty; write a question about the picture")
    try:
        toks = encode(tok, special, expanded, max_tokens, model=model)
    except SourceError as exc:
        raise CheckpointError(f"{model}: {exc}") from None
    T = len(toks)
    starts = [p.start for p in pieces]
    role, image, frame = [], np.full(T, -1, dtype=np.int64), np.full(T, -1, dtype=np.int64)  # (T,), (T,)
    is_bos = np.zeros(T, dtype=bool)  # (T,)
    for t, (a, _) in enumerate(toks.spans):
        added = (special.add_bos and t == 0) or (special.add_eos and t == T - 1)
        k = bisect_right(starts, a) - 1
        if added or k < 0 or a >= pieces[k].stop:  # BOS / EOS, or a token past the last run (an empty span)
            role.append(TEXT)
            is_bos[t] = added
            continue
        p = pieces[k]
        role.append(p.role)
        image[t], frame[t] = p.image, p.frame
    return PromptTokens(tokens=toks, text=expanded, role=tuple(role), image=image, frame=frame, is_bos=is_bos)
