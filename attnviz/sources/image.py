"""Images -> RGB pixels -> ViT patches, each step a plain function on numpy arrays.

:func:`load_image` reads any Pillow mode into ``uint8 (H, W, 3)``, :func:`prepare_image` brings the
sides to multiples of the patch size; patchify and PatchEmbedder are re-exported so this module is
the one import an image reader needs. Corrupt, truncated, empty or too-large input is a SourceError.
"""

from __future__ import annotations

import io
import math
import warnings
from pathlib import Path

import numpy as np
from PIL import Image, ImageOps

from attnviz.resources_path import resource_path
from attnviz.sources.errors import SourceError, positive_int
from attnviz.sources.patch_embed import PatchEmbedder
from attnviz.sources.patches import Patches, patchify, unpatchify

__all__ = [
    "BUNDLED_IMAGES",
    "DEFAULT_MAX_PIXELS",
    "PatchEmbedder",
    "Patches",
    "bundled_image",
    "load_image",
    "patchify",
    "prepare_image",
    "unpatchify",
]

DEFAULT_MAX_PIXELS = 40_000_000  # 40 MP: any camera photo fits; a decompression bomb does not
POLICIES = ("resize", "crop")
ALPHA_POLICIES = ("white", "drop")  # transparency composited over white, or ignored as convert("RGB") does
BUNDLED_IMAGES = ("river-scene.png", "harbour-wide.png")  # made by tools/make_demo_images.py


def bundled_image(name: str = "river-scene.png") -> Path:
    """Path of a demo image shipped in ``resources/images`` (see :data:`BUNDLED_IMAGES`)."""
    if name not in BUNDLED_IMAGES:
        raise SourceError(f"no bundled image called {name!r}; there are: {', '.join(BUNDLED_IMAGES)}")
    return resource_path("images", name)


# ---- loading --------------------------------------------------------------------------------------


def load_image(source, max_pixels: int | None = DEFAULT_MAX_PIXELS, alpha: str = "white") -> np.ndarray:
    """Read an image file (path, bytes or binary file object) into ``uint8 (H, W, 3)`` RGB, upright (EXIF).

    PNG, JPEG, WebP, BMP, GIF (first frame), TIFF (first page). ``max_pixels`` refuses larger images
    before decoding (None: only Pillow's own limit; its bomb warning is an error). ``alpha``: "white"
    composites over white, as a viewer shows it (stored colours under transparency are often black);
    "drop" ignores alpha as ``convert("RGB")``, i.e. the pixels transformers gives a checkpoint.
    """
    if max_pixels is not None:
        max_pixels = positive_int("max_pixels", max_pixels)
    if alpha not in ALPHA_POLICIES:
        raise SourceError(f"alpha must be one of {', '.join(ALPHA_POLICIES)} (got {alpha!r})")
    fp, what = _open_source(source)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            with Image.open(fp) as im:
                w, h = im.size
                if max_pixels is not None and w * h > max_pixels:
                    raise SourceError(
                        f"{what} is {w}x{h} = {w * h / 1e6:.1f} megapixels, more than the limit of "
                        f"{max_pixels / 1e6:g} MP; scale it down first (a file this size may be a decompression bomb)"
                    )
                im.seek(0)  # first frame of a GIF / WebP animation, first page of a TIFF
                im.load()
                im = _upright(im)
                rgb = _to_rgb(im, what, alpha)
    except SourceError:
        raise
    except (Image.DecompressionBombWarning, Image.DecompressionBombError) as exc:
        raise SourceError(f"{what} is refused as a possible decompression bomb: {exc}") from None
    except Image.UnidentifiedImageError:
        raise SourceError(
            f"{what} is not an image Pillow can read (expected PNG, JPEG, WebP, BMP, GIF or TIFF)"
        ) from None
    except Exception as exc:  # Pillow reports corrupt data with OSError, SyntaxError, ValueError, zlib.error ...
        raise SourceError(f"{what} is corrupt or truncated: {exc}") from None
    finally:
        if isinstance(fp, io.BufferedReader):
            fp.close()
    if rgb.shape[0] == 0 or rgb.shape[1] == 0:
        raise SourceError(f"{what} has no pixels ({rgb.shape[1]}x{rgb.shape[0]})")
    return rgb


def _open_source(source):
    """(file object, description for messages) for a path, bytes or binary file object."""
    if isinstance(source, (bytes, bytearray, memoryview)):
        data = bytes(source)
        if not data:
            raise SourceError("image data is empty (0 bytes)")
        return io.BytesIO(data), "the image data"
    if isinstance(source, (str, Path)):
        path = Path(source)
        if path.is_dir():
            raise SourceError(f"{path} is a folder, not an image file")
        if not path.is_file():
            raise SourceError(f"image file not found: {path}")
        if path.stat().st_size == 0:
            raise SourceError(f"image file {path.name} is empty (0 bytes)")
        return open(path, "rb"), f"image file {path.name}"
    if hasattr(source, "read"):
        return source, "the image stream"
    raise SourceError(f"cannot read an image from a {type(source).__name__}; give a path or bytes")


def _upright(im: Image.Image) -> Image.Image:
    """Apply the EXIF orientation tag (cameras store portrait photos sideways)."""
    try:
        return ImageOps.exif_transpose(im) or im
    except Exception:  # an unreadable EXIF block is not a reason to refuse the pixels
        return im


def _to_rgb(im: Image.Image, what: str, alpha: str = "white") -> np.ndarray:
    mode = im.mode
    if mode.startswith("I;16") or mode in ("I", "F"):
        return _high_depth_grey(np.asarray(im), mode, what)
    has_alpha = mode == "P" and "transparency" in im.info or mode in ("PA", "LA", "RGBa", "La")
    if alpha == "drop" and (has_alpha or mode == "RGBA"):
        if mode != "RGBA" and mode != "LA":  # the same colours as convert("RGB"), without Pillow's palette warning
            im = im.convert("RGBA")
        return np.ascontiguousarray(np.asarray(im.convert("RGB"), dtype=np.uint8))  # (H, W, 3) alpha ignored
    if has_alpha:
        im = im.convert("RGBA")
        mode = "RGBA"
    if mode == "RGBA":
        rgba = np.asarray(im, dtype=np.float64)  # (H, W, 4)
        alpha = rgba[..., 3:4] / 255.0  # (H, W, 1)
        over_white = rgba[..., :3] * alpha + 255.0 * (1.0 - alpha)  # (H, W, 3)
        return np.ascontiguousarray(np.rint(over_white).astype(np.uint8))
    return np.ascontiguousarray(np.asarray(im.convert("RGB"), dtype=np.uint8))  # (H, W, 3)


def _high_depth_grey(a: np.ndarray, mode: str, what: str) -> np.ndarray:
    """16/32-bit integer or float grey (H, W) -> uint8 RGB (H, W, 3); NaN or infinity is refused.

    I;16 scales 0..65535; I / F read as 8-bit when in 0..255, I as 16-bit when in 0..65535, F as 0..1
    when in it; anything else is stretched from its minimum to its maximum.
    """
    a = a.astype(np.float64)  # (H, W)
    if not np.isfinite(a).all():
        raise SourceError(f"{what} (mode {mode}) contains NaN or infinite pixel values")
    lo, hi = (float(a.min()), float(a.max())) if a.size else (0.0, 0.0)
    if mode.startswith("I;16"):
        unit = a / 65535.0
    elif lo >= 0 and hi <= 255 and (mode == "I" or hi > 1):
        unit = a / 255.0
    elif mode == "F" and lo >= 0 and hi <= 1:
        unit = a
    elif mode == "I" and lo >= 0 and hi <= 65535:
        unit = a / 65535.0
    elif hi > lo:
        unit = (a - lo) / (hi - lo)
    else:
        unit = np.zeros_like(a)
    grey = np.rint(np.clip(unit, 0.0, 1.0) * 255.0).astype(np.uint8)  # (H, W)
    return np.ascontiguousarray(np.repeat(grey[:, :, None], 3, axis=2))  # (H, W, 3)


# ---- bringing the size to multiples of P ----------------------------------------------------------


def _check_rgb(rgb) -> np.ndarray:
    rgb = np.asarray(rgb)
    if rgb.ndim != 3 or rgb.shape[2] != 3:
        raise SourceError(f"expected an RGB image array of shape (H, W, 3) (got shape {rgb.shape})")
    if rgb.dtype != np.uint8:
        raise SourceError(f"expected uint8 RGB pixels, as load_image returns (got dtype {rgb.dtype})")
    return rgb


def prepare_image(rgb, patch: int, policy: str = "resize", target: tuple[int, int] | None = None) -> np.ndarray:
    """Return ``uint8 (H', W', 3)`` with H' and W' multiples of ``patch``; SourceError below one patch
    or for a target P does not divide.

    "resize": each side to its nearest multiple of P (at least one), or exactly to ``target`` (aspect
    may change). "crop": centre-crop down to multiples of P, or scale just enough to cover ``target``
    keeping the aspect and centre-crop to it (ViT's usual "resize shorter side, centre crop").
    """
    rgb = _check_rgb(rgb)
    P = positive_int("patch size", patch)
    if policy not in POLICIES:
        raise SourceError(f"unknown image policy {policy!r}; use one of: {', '.join(POLICIES)}")
    H, W = rgb.shape[:2]
    if H < P or W < P:
        raise SourceError(
            f"image is smaller than one {P}x{P} patch (got {H}x{W}, height x width); "
            "use a larger image or a smaller patch size"
        )
    if target is not None:
        tH, tW = _check_target(target, P)
        if policy == "resize":
            return _resize(rgb, tH, tW)
        s = max(tH / H, tW / W)
        sH, sW = max(tH, math.ceil(H * s - 1e-9)), max(tW, math.ceil(W * s - 1e-9))
        scaled = rgb if (sH, sW) == (H, W) else _resize(rgb, sH, sW)  # (sH, sW, 3)
        return _centre_crop(scaled, tH, tW)
    if policy == "resize":
        nH, nW = max(P, _nearest_multiple(H, P)), max(P, _nearest_multiple(W, P))
        return rgb.copy() if (nH, nW) == (H, W) else _resize(rgb, nH, nW)
    return _centre_crop(rgb, (H // P) * P, (W // P) * P)


def _check_target(target, P: int) -> tuple[int, int]:
    try:
        tH, tW = (int(v) for v in target)
    except (TypeError, ValueError):
        raise SourceError(f"target must be a (height, width) pair (got {target!r})") from None
    if tH <= 0 or tW <= 0:
        raise SourceError(f"target size must be positive (got {tH}x{tW})")
    if tH * tW > DEFAULT_MAX_PIXELS:
        raise SourceError(f"target size {tH}x{tW} is more than {DEFAULT_MAX_PIXELS / 1e6:g} megapixels; "
                          "choose a smaller target")
    if tH % P or tW % P:
        raise SourceError(
            f"patch size {P} does not divide the target size {tH}x{tW} (height x width); "
            f"choose a target that is a multiple of {P}, e.g. "
            f"{max(P, _nearest_multiple(tH, P))}x{max(P, _nearest_multiple(tW, P))}"
        )
    return tH, tW


def _nearest_multiple(n: int, P: int) -> int:
    """The multiple of P nearest to n, halves rounded up (104 -> 112 for P = 16)."""
    return (2 * n + P) // (2 * P) * P


def _resize(rgb: np.ndarray, H: int, W: int) -> np.ndarray:
    out = Image.fromarray(rgb).resize((W, H), resample=Image.Resampling.BICUBIC)
    return np.ascontiguousarray(np.asarray(out, dtype=np.uint8))  # (H, W, 3)


def _centre_crop(rgb: np.ndarray, H: int, W: int) -> np.ndarray:
    top, left = (rgb.shape[0] - H) // 2, (rgb.shape[1] - W) // 2
    return np.ascontiguousarray(rgb[top : top + H, left : left + W])  # (H, W, 3)
