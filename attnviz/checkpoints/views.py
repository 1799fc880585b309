"""What the pretrained-model views draw, as plain functions on a checkpoint's :class:`ModelAttention`:
head matrices, per-head summaries, the ViT overlay (class-token attention, one patch's attention, the
mean attention each patch receives, or rollout; a model without a class token, SigLIP, has no class-token
view and its rollout is the mean over every query row), the image as the model saw it, and default inputs from the session's sources. No Qt, so that the tests check the
arrays the widgets of :mod:`attnviz.ui.model_view` draw.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from PIL import Image

from attnviz.checkpoints import (HeadSummaries, ImageConfig, ModelAttention, attention_rollout,
                                 cls_attention_maps)
from attnviz.checkpoints.analysis import query_attention_maps, received_attention_maps
from attnviz.checkpoints.preprocess import seen_region
from attnviz.sources.errors import SourceError
from attnviz.sources.image import load_image

DEFAULT_SENTENCE = "The river bank was steep after the rain."

# summary key -> (HeadSummaries field, label in menus and titles, short label on colour bars and readouts)
SUMMARY_METRICS = {
    "entropy": ("entropy", "entropy (nats)", "entropy"),
    "special": ("to_special", "attention to special tokens", "to special"),
    "self": ("to_self", "attention to self", "to self"),
    "previous": ("to_previous", "attention to previous token", "to previous"),
    "first": ("to_first", "attention to first token (sinks)", "to first"),  # decoder LLMs
    "distance": ("distance", "mean attention distance (tokens)", "distance"),  # decoder LLMs
}


def available_metrics(summaries: HeadSummaries) -> list[str]:
    """The SUMMARY_METRICS keys ``summaries`` has values for (the decoder-only ones are None elsewhere)."""
    return [k for k, (field, _l, _s) in SUMMARY_METRICS.items() if getattr(summaries, field) is not None]

# class token's attention in one layer; one patch's; the mean each patch receives; rollout through all layers
OVERLAY_MODES = ("cls", "patch", "received", "rollout")
HEAD_FUSIONS = ("mean", "max", "min")


def head_matrix(result: ModelAttention, layer: int, head) -> np.ndarray:
    """(T, T) weights of ``head`` (an index, or "mean" over heads) in ``layer``."""
    L, nh = result.attentions.shape[:2]
    if not 0 <= int(layer) < L:
        raise ValueError(f"layer {layer} is out of range for {L} layers")
    if head == "mean":
        return result.attentions[int(layer)].mean(axis=0)  # (T, T)
    if not 0 <= int(head) < nh:
        raise ValueError(f"head {head} is out of range for {nh} heads")
    return result.attentions[int(layer), int(head)]  # (T, T)


def summary_matrix(summaries: HeadSummaries, metric: str) -> np.ndarray:
    """(L, nh) values of the summary ``metric`` (a key of SUMMARY_METRICS)."""
    if metric not in SUMMARY_METRICS:
        raise ValueError(f"unknown head summary {metric!r}; choose one of {', '.join(SUMMARY_METRICS)}")
    m = getattr(summaries, SUMMARY_METRICS[metric][0])  # (L, nh)
    if m is None:
        raise ValueError(f"the head summary {metric!r} is computed for decoder LLMs only")
    return m


def summary_line(summaries: HeadSummaries, layer: int, head: int) -> str:
    """Every statistic of one head the summaries have, for a status line."""
    parts = [f"{SUMMARY_METRICS[k][2]} {summary_matrix(summaries, k)[layer, head]:.3f}" for k in available_metrics(summaries)]
    return f"layer {layer} · head {head}:  " + "  ·  ".join(parts)


@dataclass(frozen=True)
class OverlaySpec:
    """Which attention is drawn over a ViT's image."""

    mode: str = "cls"  # "cls": class token -> patches; "patch": patch -> patches; "received"; "rollout"
    layer: int = -1  # layer of the one-layer views (negative counts from the end: DINO uses the last)
    head: int | str = "mean"  # head of the one-layer views, or "mean" over heads
    fusion: str = "mean"  # how rollout combines a layer's heads: mean, max or min
    discard_ratio: float = 0.0  # share of each fused matrix's lowest entries rollout sets to zero
    patch: int = 0  # the query patch of the "patch" view, row-major over the grid (token n_extra + patch)


def overlay_modes(result: ModelAttention) -> tuple[str, ...]:
    """The OVERLAY_MODES a result can draw: no class-token view without a class token."""
    return OVERLAY_MODES if result.n_extra_tokens else tuple(m for m in OVERLAY_MODES if m != "cls")


def default_overlay(result: ModelAttention) -> str:
    """The class token's view (DINO's), or without one the mean attention each patch receives."""
    return "cls" if result.n_extra_tokens else "received"


def vit_overlay(result: ModelAttention, spec: OverlaySpec) -> tuple[np.ndarray, tuple[float, float]]:
    """(gh, gw) map drawn over the image and its colour levels (low, high)."""
    if result.grid is None:
        raise ValueError(f"{result.model} is not an image model: there is no patch grid to draw on")
    if spec.mode not in OVERLAY_MODES:
        raise ValueError(f"unknown overlay {spec.mode!r}; choose one of {', '.join(OVERLAY_MODES)}")
    n_extra = result.n_extra_tokens
    if spec.mode == "rollout":
        roll = attention_rollout(result.attentions, head_fusion=spec.fusion, discard_ratio=spec.discard_ratio,
                                 grid=result.grid, n_extra=n_extra)
        return roll.patch_map, (0.0, 1.0)  # divided by its maximum: 1 is the most attended patch
    if spec.mode == "cls":
        if not n_extra:
            raise ValueError(f"{result.model} has no class token; choose one of {', '.join(overlay_modes(result))}")
        maps = cls_attention_maps(result.attentions, spec.layer, result.grid, n_extra)  # (nh, gh, gw)
    elif spec.mode == "patch":
        n_patch = result.grid[0] * result.grid[1]
        if not 0 <= int(spec.patch) < n_patch:
            raise ValueError(f"patch {spec.patch} is out of range for {n_patch} patches")
        maps = query_attention_maps(result.attentions, spec.layer, result.grid, n_extra, n_extra + int(spec.patch))
    else:
        maps = received_attention_maps(result.attentions, spec.layer, result.grid, n_extra)  # (nh, gh, gw)
    if spec.head == "mean":
        m = maps.mean(axis=0)  # (gh, gw)
    else:
        if not 0 <= int(spec.head) < maps.shape[0]:
            raise ValueError(f"head {spec.head} is out of range for {maps.shape[0]} heads")
        m = maps[int(spec.head)]  # (gh, gw)
    m = np.asarray(m, dtype=np.float64)
    lo, hi = float(m.min()), float(m.max())
    return m, (lo, hi if hi > lo else lo + 1.0)


def overlay_caption(result: ModelAttention, spec: OverlaySpec) -> str:
    """What the overlay shows, in words (the legend above the image)."""
    L, _nh, T, _ = result.attentions.shape
    if spec.mode == "rollout":
        rows = "[CLS]" if result.n_extra_tokens else f"the mean over all {T} query rows (no class token)"
        return f"rollout of {rows} through {L} layers ({spec.fusion} over heads), / its max"
    head = "mean over heads" if spec.head == "mean" else f"head {spec.head}"
    if spec.mode == "patch":
        r, c = divmod(spec.patch, result.grid[1])
        return f"patch {r},{c} → patches (click another), layer {spec.layer}, {head}"
    if spec.mode == "received":
        return f"mean attention each patch receives over all {T} queries, layer {spec.layer}, {head}"
    return f"[CLS] → patches, layer {spec.layer}, {head}"


def model_pixels(pixels: np.ndarray, ic: ImageConfig) -> np.ndarray:
    """(H, W, 3) uint8 image the model saw: its (3, H, W) input with normalisation and rescaling undone."""
    x = np.asarray(pixels, dtype=np.float64).transpose(1, 2, 0)  # (H, W, 3)
    if ic.do_normalize:
        x = x * np.asarray(ic.image_std) + np.asarray(ic.image_mean)  # (H, W, 3)
    if ic.do_rescale:
        x = x / ic.rescale_factor
    return np.clip(np.round(x), 0, 255).astype(np.uint8)  # (H, W, 3)


def display_patch(grid: tuple[int, int], target_px: int = 448) -> int:
    """Side in display pixels of one patch, so the longer side of the grid is about ``target_px``."""
    return max(8, int(round(target_px / max(grid))))


def display_image(rgb: np.ndarray | None, pixels: np.ndarray, ic: ImageConfig, grid: tuple[int, int],
                  patch_px: int, model_view: bool, patch_size: tuple[int, int] | None = None) -> np.ndarray:
    """(gh * patch_px, gw * patch_px, 3) uint8 image to draw under the patch grid.

    ``model_view``: the model's own input pixels, enlarged without smoothing (what it saw, pixel for
    pixel); otherwise the part of the original ``rgb`` the patches cover (all of it stretched, or the
    centre crop of a shortest-edge processor) resized to the same frame, which stays sharp.
    """
    gh, gw = grid
    size = (gw * patch_px, gh * patch_px)  # PIL (width, height)
    ph, pw = patch_size or (pixels.shape[1] // gh, pixels.shape[2] // gw)  # the model's patch size
    if model_view or rgb is None:
        seen = model_pixels(pixels[:, : gh * ph, : gw * pw], ic)  # what the patches cover
        return np.asarray(Image.fromarray(seen).resize(size, Image.Resampling.NEAREST))
    top, left, bottom, right = seen_region(rgb.shape[:2], ic, grid, (ph, pw))  # a centre crop, or all of it
    img = Image.fromarray(np.ascontiguousarray(rgb[:, :, :3]))
    return np.asarray(img.resize(size, Image.Resampling.BILINEAR, box=(left, top, right, bottom)))


def session_text(state) -> str:
    """The first text source's text, or the default sentence."""
    for s in getattr(state, "sources", ()):
        if getattr(s, "kind", "") == "text" and s.text.strip():
            return s.text
    return DEFAULT_SENTENCE


def session_image(state) -> tuple[str, np.ndarray] | None:
    """(name, RGB uint8) of the first image source whose bytes decode, or None."""
    for s in getattr(state, "sources", ()):
        if getattr(s, "kind", "") == "image" and s.data:
            try:
                return s.name, load_image(s.data, alpha="drop")
            except SourceError:
                continue
    return None


def grid_label(result: ModelAttention, ic: ImageConfig, patch_size: tuple[int, int],
               trained_grid: tuple[int, int] | None = None) -> str:
    """One line on how the image became tokens."""
    gh, gw = result.grid
    H, W = ic.size
    ph, pw = patch_size
    extra = ", ".join(result.tokens[: result.n_extra_tokens])
    extra = f" + {result.n_extra_tokens} extra ({extra})" if result.n_extra_tokens else " (no class token)"
    side = f"{ph} px" if ph == pw else f"{ph}x{pw} px"
    crop = (f", short side resized to {ic.shortest_edge} px and centre-cropped" if ic.shortest_edge else
            f", resized to {ic.resize_to[0]}x{ic.resize_to[1]} px and centre-cropped" if ic.resize_to != (0, 0) else "")
    interp = (f"; position embeddings interpolated from {trained_grid[0]}x{trained_grid[1]}"
              if trained_grid is not None and tuple(trained_grid) != tuple(result.grid) else "")
    return (f"model input {H}x{W} px (height x width{crop}) → grid {gh}x{gw} of {side} patches = {gh * gw} tokens"
            f"{extra}{interp}")

