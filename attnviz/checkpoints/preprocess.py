"""An RGB image -> the pixel tensor a ViT checkpoint expects, following its own ``preprocessor_config.json``.

The steps and their arithmetic mirror the Hugging Face ViT image processor (Pillow backend): resize
the uint8 image with Pillow to the configured (H, W) and resampling filter (a non-square image is
stretched, as the model's processor does; CLIP and DINOv2 processors instead resize the short side and
crop the centre), multiply by ``rescale_factor`` in float64 and round to
float32, subtract the mean and divide by the std in float32, and move channels first.
"""

from __future__ import annotations

import numpy as np
from PIL import Image

from attnviz.checkpoints.config import MAX_INPUT_PIXELS, ImageConfig
from attnviz.checkpoints.errors import CheckpointError


def as_rgb_uint8(image) -> np.ndarray:
    """Check an image array and return it as (H, W, 3) uint8: grey (H, W) is repeated, RGBA drops alpha."""
    arr = np.asarray(image)
    if arr.dtype != np.uint8:
        raise CheckpointError(f"the image must be uint8 pixels 0..255 (got dtype {arr.dtype})")
    if arr.ndim == 2:
        arr = np.repeat(arr[:, :, None], 3, axis=2)  # (H, W, 3)
    if arr.ndim != 3 or arr.shape[2] not in (3, 4):
        raise CheckpointError(f"the image must be (H, W), (H, W, 3) or (H, W, 4) pixels (got shape {arr.shape})")
    if arr.shape[0] < 1 or arr.shape[1] < 1:
        raise CheckpointError(f"the image is empty (shape {arr.shape})")
    return np.ascontiguousarray(arr[:, :, :3])  # (H, W, 3)


def preprocess_image(image, ic: ImageConfig) -> np.ndarray:
    """(H, W, 3) uint8 -> (3, H', W') float32 pixel values, (H', W') = ``ic.size``."""
    rgb = as_rgb_uint8(image)  # (H, W, 3)
    H, W = ic.size
    if ic.shortest_edge:
        rgb = center_crop(resize_shortest_edge(rgb, ic.shortest_edge, ic.resample) if ic.do_resize else rgb, ic.crop_size)
    elif ic.resize_to != (0, 0):  # a fixed resize, then the centre crop (DeiT)
        rh, rw = ic.resize_to
        if ic.do_resize and rgb.shape[:2] != (rh, rw):
            rgb = np.asarray(Image.fromarray(rgb).resize((rw, rh), resample=ic.resample, reducing_gap=None))
        rgb = center_crop(rgb, ic.crop_size)
    elif ic.do_resize:
        if rgb.shape[:2] != (H, W):
            rgb = np.asarray(Image.fromarray(rgb).resize((W, H), resample=ic.resample, reducing_gap=None))  # (H', W', 3)
    elif rgb.shape[:2] != (H, W):
        raise CheckpointError(
            f"the model does not resize images and needs {H}x{W} pixels (got {rgb.shape[0]}x{rgb.shape[1]})"
        )
    x = rgb.astype(np.float32)  # (H', W', 3)
    if ic.do_rescale:
        x = (rgb.astype(np.float64) * ic.rescale_factor).astype(np.float32)  # (H', W', 3)
    if ic.do_normalize:
        mean = np.asarray(ic.image_mean, dtype=np.float32)  # (3,)
        std = np.asarray(ic.image_std, dtype=np.float32)  # (3,)
        x = (x - mean) / std  # (H', W', 3)
    return np.ascontiguousarray(x.transpose(2, 0, 1))  # (3, H', W')


def shortest_edge_size(hw: tuple[int, int], short: int) -> tuple[int, int]:
    """(H', W') with the short side ``short`` and the long side int(short * long / short_side), as transformers."""
    h, w = hw
    if w <= h:
        return int(short * h / w), short
    return short, int(short * w / h)


def resize_shortest_edge(rgb: np.ndarray, short: int, resample: int) -> np.ndarray:
    """(H, W, 3) uint8 resized with Pillow so its short side is ``short`` pixels."""
    H, W = shortest_edge_size(rgb.shape[:2], short)
    if H * W > MAX_INPUT_PIXELS:
        raise CheckpointError(
            f"the image is {rgb.shape[0]}x{rgb.shape[1]} px; with its short side resized to {short} px it would be "
            f"{H}x{W} px, more than {MAX_INPUT_PIXELS / 1e6:g} MP: crop it to a less elongated shape first"
        )
    if (H, W) == rgb.shape[:2]:
        return rgb
    return np.asarray(Image.fromarray(rgb).resize((W, H), resample=resample, reducing_gap=None))  # (H', W', 3)


def crop_box(hw: tuple[int, int], crop: tuple[int, int]) -> tuple[int, int]:
    """(top, left) of the centre crop, negative where the image is smaller than the crop (zero padding)."""
    return (hw[0] - crop[0]) // 2, (hw[1] - crop[1]) // 2


def center_crop(rgb: np.ndarray, crop: tuple[int, int]) -> np.ndarray:
    """The centre (ch, cw) of an (H, W, 3) image; black padding where it is smaller, as transformers pads."""
    H, W = rgb.shape[:2]
    ch, cw = crop
    top, left = crop_box((H, W), crop)
    if top >= 0 and left >= 0:
        return np.ascontiguousarray(rgb[top:top + ch, left:left + cw])
    nh, nw = max(ch, H), max(cw, W)
    canvas = np.zeros((nh, nw, rgb.shape[2]), dtype=rgb.dtype)  # (nh, nw, 3)
    tp, lp = -(-(nh - H) // 2), -(-(nw - W) // 2)  # ceil halves
    canvas[tp:tp + H, lp:lp + W] = rgb
    top, left = top + tp, left + lp
    return np.ascontiguousarray(canvas[max(0, top):min(nh, top + ch), max(0, left):min(nw, left + cw)])


def seen_region(hw: tuple[int, int], ic: ImageConfig, grid: tuple[int, int], patch_size: tuple[int, int]):
    """(top, left, bottom, right) in the original (H, W) image's pixels of what the patch grid covers:
    the whole image for a plain resize, the centre crop for a shortest-edge resize, less the pixels
    past the last whole patch (the patch convolution's stride never reaches them)."""
    H, W = hw
    if ic.shortest_edge and ic.do_resize:
        rh, rw = shortest_edge_size((H, W), ic.shortest_edge)
    elif ic.shortest_edge:
        rh, rw = H, W
    elif ic.resize_to != (0, 0):
        rh, rw = ic.resize_to if ic.do_resize else (H, W)
    else:
        rh, rw = ic.size if ic.do_resize else (H, W)
    sy, sx = H / rh, W / rw  # original pixels per resized pixel
    cropped = ic.shortest_edge or ic.resize_to != (0, 0)
    top, left = crop_box((rh, rw), ic.crop_size) if cropped else (0, 0)
    bottom, right = top + grid[0] * patch_size[0], left + grid[1] * patch_size[1]
    return (max(0.0, top * sy), max(0.0, left * sx), min(float(H), bottom * sy), min(float(W), right * sx))
