"""Interventions on Swin (windowed attention in stages joined by patch merging): ablate or scale heads, knock out
attention edges inside the windows, patch a head's output or the residual stream from a second picture.

Swin's stages differ in width, head count and token count, so a head is addressed as (layer, head) with
``layer`` the *global* block index over the stages (stage 0's blocks first, then stage 1's ...) and ``head``
checked against that layer's stage. A head's output is its slice of what SwinAttention's output projection
(transformers 5: ``encoder.layers.{s}.blocks.{b}.attention.o_proj``) reads, here put back in the stage's
row-major token order (T_s, hd_s), so "mean" ablation is the mean over the stage's tokens (every window's).

A knockout is a bool (T_s, T_s) (or (nh_s, T_s, T_s)) mask of removed edges in the stage's token order: only
the pairs some window holds exist, the rest are ignored. Removed edges are dropped before the softmax, so each
row renormalises over its window's keys left (a shifted window's pairs from other regions keep their -100). A
row left with no key gets weights 0 and output 0, as in the other families (transformers, given float32's minimum
on every key of a row, spreads it evenly instead: the hook script agrees only while every row keeps a key).

:func:`swin_run` returns each layer's laid (nh_s, T_s, T_s) map, the pooled output (the final LayerNorm's tokens
averaged, transformers' ``pooler_output``) and the class logits when a classifier is given
(:func:`swin_classifier` reads SwinForImageClassification's).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from attnviz.checkpoints.errors import CheckpointError
from attnviz.checkpoints.interventions import MODES, Edit
from attnviz.checkpoints.swin import SwinSpec, Windows, forward_swin, stage_windows, window_mask


@dataclass(frozen=True)
class SwinLayout:
    """Where each global layer of a Swin model sits, for one input size."""

    stage: tuple[int, ...]  # global layer -> its stage
    heads: tuple[int, ...]  # global layer -> its stage's head count
    widths: tuple[int, ...]  # global layer -> its stage's width C_s
    grids: tuple[tuple[int, int], ...]  # global layer -> its stage's (h_s, w_s) token grid
    windows: tuple[Windows, ...]  # global layer -> its windows

    @property
    def n_layer(self) -> int:
        return len(self.stage)

    def tokens(self, layer: int) -> int:
        h, w = self.grids[layer]
        return h * w

    def head_dim(self, layer: int) -> int:
        return self.widths[layer] // self.heads[layer]


def swin_layout(c, grid: tuple[int, int]) -> SwinLayout:
    """The layout of every global layer for an input of (gh, gw) patches (a grid Swin cannot cut is refused)."""
    sp: SwinSpec = c.spec
    stage, heads, widths, grids, wins = [], [], [], [], []
    for s, layers in enumerate(stage_windows(c, tuple(grid))):
        for win in layers:
            stage.append(s)
            heads.append(sp.heads[s])
            widths.append(sp.width(s))
            grids.append(win.grid)
            wins.append(win)
    return SwinLayout(tuple(stage), tuple(heads), tuple(widths), tuple(grids), tuple(wins))


def _layer_index(lay: SwinLayout, v) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or not 0 <= v < lay.n_layer:
        raise CheckpointError(f"layer {v!r} is out of range: this Swin has {lay.n_layer} layers over all its stages "
                              f"(0 to {lay.n_layer - 1}; stage 0's first)")
    return int(v)


def check_swin_head(lay: SwinLayout, layer, head) -> tuple[int, int]:
    """(layer, head) as ints, ``head`` checked against the head count of ``layer``'s stage; or one line naming the
    range."""
    layer = _layer_index(lay, layer)
    n = lay.heads[layer]
    if isinstance(head, bool) or not isinstance(head, (int, np.integer)) or not 0 <= head < n:
        raise CheckpointError(f"head {head!r} is out of range for layer {layer}: its stage ({lay.stage[layer]}) has "
                              f"{n} heads (0 to {n - 1})")
    return layer, int(head)


class SwinEdit:
    """An :class:`~attnviz.checkpoints.interventions.Edit` as :func:`attnviz.checkpoints.swin.forward_swin` reads
    it: the knockout cut into each layer's windows, the stream recorded per layer."""

    def __init__(self, edit: Edit, lay: SwinLayout):
        self.edit, self.lay = edit, lay
        self.stream: list[np.ndarray] = []  # the stream (T_s, C_s) entering each global layer

    def residual(self, g: int, x: np.ndarray) -> np.ndarray:
        x = self.edit.residual(g, x)
        self.stream.append(x)
        return x

    def window_mask(self, g: int, win: Windows, nh: int) -> np.ndarray | None:
        """(nW * nh, n, n) bool: the window pairs still allowed in layer g, None without a knockout there."""
        ko = self.edit.knockout.get(g)
        if ko is None:
            return None
        ko = np.asarray(ko, dtype=bool)
        t = win.tokens  # (nW, n)
        if ko.ndim == 2:
            cut = np.broadcast_to(ko[t[:, :, None], t[:, None, :]][:, None], (t.shape[0], nh, t.shape[1], t.shape[1]))
        else:  # (nh, T, T) -> (nh, nW, n, n) -> (nW, nh, n, n)
            cut = ko[:, t[:, :, None], t[:, None, :]].transpose(1, 0, 2, 3)
        return np.ascontiguousarray(~cut).reshape(-1, t.shape[1], t.shape[1])

    def merged(self, g: int, out: np.ndarray, nh: int) -> np.ndarray:
        return self.edit.merged(g, out, nh)


def check_swin_edit(lay: SwinLayout, e: Edit) -> None:
    """Every request of ``e`` against this Swin's stages: one line for the first bad one."""
    for (layer, head), how in e.ablate.items():
        layer, head = check_swin_head(lay, layer, head)
        hd = lay.head_dim(layer)
        if isinstance(how, str):
            if how not in MODES:
                raise CheckpointError(f"ablation mode {how!r}: choose {' or '.join(MODES)}")
        elif np.shape(how) != (hd,) or not np.isfinite(how).all():
            raise CheckpointError(f"the means of head {layer}.{head} must be {hd} finite numbers")
    for (layer, head), f in e.scale.items():
        check_swin_head(lay, layer, head)
        if isinstance(f, bool) or not isinstance(f, (int, float, np.floating)) or not np.isfinite(f):
            raise CheckpointError(f"the scale of head {layer}.{head} must be a finite number (got {f!r})")
    for layer, ko in e.knockout.items():
        layer = _layer_index(lay, layer)
        T, nh = lay.tokens(layer), lay.heads[layer]
        shape = np.shape(ko)
        if shape not in ((T, T), (nh, T, T)) or np.asarray(ko).dtype != bool:
            h, w = lay.grids[layer]
            raise CheckpointError(f"the knockout mask of layer {layer} is {shape}; it must be bool ({T}, {T}) or "
                                  f"({nh}, {T}, {T}): stage {lay.stage[layer]} has {h}x{w} tokens and {nh} heads")
    for (layer, head), v in e.patch_heads.items():
        layer, head = check_swin_head(lay, layer, head)
        want = (lay.tokens(layer), lay.head_dim(layer))
        if np.shape(v) != want:
            raise CheckpointError(f"the patch of head {layer}.{head} is {np.shape(v)}; it must be {want}: the clean "
                                  "and the corrupted picture must have the same size")
    for layer, (pos, rows) in e.patch_residual.items():
        layer = _layer_index(lay, layer)
        if np.shape(rows) != (np.size(pos), lay.widths[layer]):
            raise CheckpointError(f"the residual patch of layer {layer} must be (positions, {lay.widths[layer]})")


@dataclass(frozen=True, eq=False)
class SwinPass:
    """One (edited) Swin pass."""

    layout: SwinLayout
    attentions: list  # per global layer (nh_s, T_s, T_s): its windows' weights laid into the stage's map
    hidden: np.ndarray  # (T_last, C_last) the last hidden state (after the final LayerNorm)
    stream: list  # per global layer (T_s, C_s): the stream entering it (after any residual patch)
    heads: dict  # layer -> (nh_s, T_s, hd_s) before the edit (when recorded)
    logits: np.ndarray | None  # (labels,) float64 when a classifier was given

    @property
    def pooled(self) -> np.ndarray:
        """(C_last,) float64: the mean of the last hidden state over the tokens (transformers' pooler_output)."""
        return self.hidden.astype(np.float64).mean(axis=0)

    def stage_attentions(self, stage: int) -> np.ndarray:
        """(L_s, nh_s, T_s, T_s): the maps of one stage's layers."""
        return np.stack([a for a, s in zip(self.attentions, self.layout.stage) if s == stage])


def swin_classifier(folder) -> tuple[np.ndarray, np.ndarray] | None:
    """(weight (labels, C_last), bias (labels,)) of a SwinForImageClassification folder's ``classifier``; None when
    the folder holds the base model only."""
    from attnviz.checkpoints.safetensors_file import StoredTensors, weight_files

    store = StoredTensors(weight_files(Path(folder)))
    if "classifier.weight" not in store:
        return None
    w = np.asarray(store["classifier.weight"], dtype=np.float32)
    b = (np.asarray(store["classifier.bias"], dtype=np.float32) if "classifier.bias" in store
         else np.zeros(w.shape[0], np.float32))
    if w.ndim != 2 or b.shape != (w.shape[0],) or not (np.isfinite(w).all() and np.isfinite(b).all()):
        raise CheckpointError(f"{folder}: the classifier is {w.shape} with a {b.shape} bias; it must be (labels, C) "
                              "and (labels,), finite")
    return w, b


def swin_run(c, weights, pixels, edit: Edit | None = None, classifier=None) -> SwinPass:
    """Swin over preprocessed pixels (C, H, W) with ``edit`` applied (None: the plain pass); ``classifier`` None or
    (weight, bias) of :func:`swin_classifier`, whose logits the pass then holds."""
    if getattr(c, "model_type", None) != "swin":
        raise CheckpointError(f"a {getattr(c, 'model_type', '?')} model is not Swin")
    pixels = np.asarray(pixels, dtype=np.float32)
    if pixels.ndim != 3:
        raise CheckpointError(f"a vision model's input is (channels, height, width) pixels, got {pixels.shape}")
    gh, gw = pixels.shape[1] // c.patch_size[0], pixels.shape[2] // c.patch_size[1]
    if gh < 1 or gw < 1:
        raise CheckpointError(f"the model input is {pixels.shape[1]}x{pixels.shape[2]} px, smaller than one patch")
    lay = swin_layout(c, (gh, gw))
    edit = edit or Edit()
    check_swin_edit(lay, edit)
    se = SwinEdit(edit, lay)
    stages, hidden = forward_swin(c, weights, pixels, edit=se)
    maps = [m for st in stages for m in st.maps()]
    logits = None
    if classifier is not None:
        w, b = classifier
        if w.shape[1] != hidden.shape[1]:
            raise CheckpointError(f"the classifier reads {w.shape[1]} features; the model's last stage has "
                                  f"{hidden.shape[1]}")
        pooled = hidden.astype(np.float64).mean(axis=0)  # (C_last,)
        logits = w.astype(np.float64) @ pooled + b  # (labels,) float64
    return SwinPass(layout=lay, attentions=maps, hidden=hidden, stream=se.stream, heads=dict(edit.record or {}),
                    logits=logits)


def swin_patch_head(c, weights, clean, corrupted, heads, classifier=None) -> tuple[SwinPass, SwinPass, SwinPass]:
    """(clean, corrupted, patched): the corrupted picture's pass with each of ``heads`` [(layer, head)]'s output
    taken from the clean picture's pass (the same size)."""
    clean, corrupted = np.asarray(clean, dtype=np.float32), np.asarray(corrupted, dtype=np.float32)
    if clean.shape != corrupted.shape:
        raise CheckpointError(f"the clean picture is {clean.shape} and the corrupted one {corrupted.shape}: patching "
                              "needs the same size")
    rec: dict = {}
    a = swin_run(c, weights, clean, Edit(record=rec), classifier)
    heads = [check_swin_head(a.layout, *h) for h in heads]
    b = swin_run(c, weights, corrupted, classifier=classifier)
    p = swin_run(c, weights, corrupted, Edit(patch_heads={(ly, h): rec[ly][h] for ly, h in heads}), classifier)
    return a, b, p


def parse_swin_heads(lay: SwinLayout, text: str) -> list[tuple[int, int]]:
    """``"0.1,4.3"`` -> [(0, 1), (4, 3)], layers global, each head checked against its stage."""
    out = []
    for part in (p.strip() for p in str(text).split(",")):
        bits = part.split(".")
        if len(bits) != 2 or not all(b.strip().lstrip("-").isdigit() for b in bits):
            raise CheckpointError(f"{part!r} is not a head: write LAYER.HEAD, e.g. 0.1 (the layer counted over all "
                                  "the stages; several: 0.1,3.0)")
        out.append(check_swin_head(lay, int(bits[0]), int(bits[1])))
    return out


def window_knockout(lay: SwinLayout, layer: int, ko: np.ndarray) -> np.ndarray:
    """``ko`` (T_s, T_s) or (nh_s, T_s, T_s) with only the edges some window of ``layer`` holds (the others cannot
    exist): what a hook script needs to write."""
    return np.asarray(ko, dtype=bool) & window_mask(lay.windows[layer])


__all__ = ["SwinEdit", "SwinLayout", "SwinPass", "check_swin_edit", "check_swin_head", "parse_swin_heads",
           "swin_classifier", "swin_layout", "swin_patch_head", "swin_run", "window_knockout"]
