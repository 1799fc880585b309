"""What the window's Intervene tab computes for Swin, without Qt: the session's interventions (the fields of
``attnviz.model.state.Interventions``) turned into the :class:`~attnviz.checkpoints.interventions.Edit` that
:func:`~attnviz.checkpoints.intervention_swin.swin_run` takes -- heads addressed (layer, head) with the layer counted
over every stage (stage 0's blocks first) and the head checked against its stage's count -- the passes before and
after, and what changed (:class:`SwinEffects`): the cosine of the pooled output (the mean over the last stage's
tokens), the class logits when the folder holds a classifier, each layer's laid (T_s, T_s) map before | after |
difference, each head's largest change, and the residual stream's change entering each layer. The sweep ablates
every head of every stage in turn and ranks it by 1 - cosine of the pooled output.

A knockout removes the session's mask's forbidden edges from the chosen layers; the mask must be as wide as each of
those layers' stage (the Image tab's "Window mask → Mask workspace" writes one for a layer); edges no window holds
cannot exist and are left alone. Every problem a person can cause is one :class:`CheckpointError` line.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attnviz.checkpoints.errors import CheckpointError
from attnviz.checkpoints.intervention_study import Sweep
from attnviz.checkpoints.intervention_swin import check_swin_head, swin_layout, swin_run
from attnviz.checkpoints.interventions import Edit, cosine


def is_swin(c) -> bool:
    return getattr(c, "model_type", None) == "swin"


def shape(c, pixels_shape) -> tuple[int, int]:
    """(layers over every stage, the most heads of a stage) for pixels of ``pixels_shape`` (C, H, W)."""
    lay = swin_layout(c, (pixels_shape[1] // c.patch_size[0], pixels_shape[2] // c.patch_size[1]))
    return len(lay.heads), max(lay.heads)


@dataclass(frozen=True, eq=False)
class SwinEffects:
    """One intervention on Swin as the window shows it."""

    before: object  # SwinPass
    after: object
    cosine: float  # of the pooled output before and after
    residual_change: np.ndarray  # (L,) ||after - before|| / ||before|| of the stream entering each layer
    residual_labels: tuple[str, ...]  # "S0.0", ... stage and block of each layer
    applied: tuple[str, ...]
    has_overlay = False  # no class token to draw over the picture

    @property
    def heads_per_layer(self) -> tuple[int, ...]:
        return tuple(self.before.layout.heads)

    def attention(self, layer: int, head: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Layer ``layer``'s laid map of ``head`` before, after and their difference (T_s, T_s) float64."""
        layer, head = check_swin_head(self.before.layout, layer, head)
        b = np.asarray(self.before.attentions[layer][head], dtype=np.float64)
        a = np.asarray(self.after.attentions[layer][head], dtype=np.float64)
        return b, a, a - b

    def attention_change(self) -> np.ndarray:
        """(L, the most heads): each head's largest weight change; NaN where a stage has fewer heads."""
        heads = self.heads_per_layer
        out = np.full((len(heads), max(heads)), np.nan)
        for i, (b, a) in enumerate(zip(self.before.attentions, self.after.attentions)):
            out[i, :heads[i]] = np.abs(np.asarray(a, np.float64) - np.asarray(b, np.float64)).max(axis=(1, 2))
        return out

    @property
    def token_cosine(self) -> np.ndarray:
        hb, ha = self.before.hidden.astype(np.float64), self.after.hidden.astype(np.float64)
        return np.array([cosine(hb[t], ha[t]) for t in range(hb.shape[0])])

    @property
    def logits(self) -> tuple[np.ndarray, np.ndarray] | None:
        """(before, after) class logits, None without a classifier."""
        return None if self.before.logits is None else (self.before.logits, self.after.logits)


def _pooled(p) -> np.ndarray:
    return p.hidden.astype(np.float64).mean(axis=0)


def _knockout(lay, allowed, layers, heads) -> dict:
    if allowed is None:
        raise CheckpointError("a knockout needs the session's mask (the Mask workspace's design)")
    m = np.asarray(allowed)
    out = {}
    hs = sorted({check_swin_head(lay, 0, int(h))[1] for h in heads}) if heads else []
    for layer in layers:
        layer, _ = check_swin_head(lay, int(layer), 0)
        T = lay.grids[layer][0] * lay.grids[layer][1]
        if m.dtype != bool or m.shape != (T, T):
            raise CheckpointError(f"the session's mask is {m.shape[0] if m.ndim else 0} tokens wide; layer {layer} "
                                  f"(stage {lay.stage[layer]}) has {T} tokens: open its window mask from the Image "
                                  "tab (Window mask → Mask workspace), or knock out layers of one stage")
        ko = ~m
        if hs:
            for h in hs:
                check_swin_head(lay, layer, h)
            per = np.zeros((lay.heads[layer], T, T), dtype=bool)
            per[hs] = ko
            ko = per
        out[layer] = ko
    return out


def build_swin_edit(c, spec, lay, *, allowed=None) -> tuple[Edit, tuple[str, ...]]:
    if spec.patch != "none":
        raise CheckpointError("patching from a clean prompt runs on decoder LLMs; on Swin choose no patch "
                              "(attnviz-cli model ablate and the library's swin_patch_head patch from a second picture)")
    e = Edit()
    said = []
    heads = [check_swin_head(lay, layer, h) for layer, h in spec.heads]
    names = ", ".join(f"{a}.{b}" for a, b in heads)
    if heads and spec.mode == "scale":
        e.scale.update({lh: float(spec.factor) for lh in heads})
        said.append(f"{names} scaled by {spec.factor:g}")
    elif heads and spec.mode in ("zero", "mean"):
        e.ablate.update({lh: spec.mode for lh in heads})
        said.append(f"{names} {spec.mode}-ablated (the mean over the stage's tokens)" if spec.mode == "mean" else
                    f"{names} zero-ablated")
    elif heads:
        raise CheckpointError(f"intervention mode {spec.mode!r}: choose zero, mean or scale")
    if spec.knockout_layers:
        e.knockout.update(_knockout(lay, allowed, spec.knockout_layers, spec.knockout_heads))
        said.append(f"the mask's edges knocked out in layers {', '.join(map(str, spec.knockout_layers))} (the edges "
                    "no window holds cannot exist)")
    return e, tuple(said)


def swin_study(c, weights, pixels, spec, *, allowed=None, classifier=None) -> SwinEffects:
    """Swin's plain pass over ``pixels`` (C, H, W), the pass with ``spec`` applied, and what changed."""
    before = swin_run(c, weights, pixels, classifier=classifier)
    edit, applied = build_swin_edit(c, spec, before.layout, allowed=allowed)
    after = swin_run(c, weights, pixels, edit, classifier=classifier)
    lay = before.layout
    values, labels, block = [], [], 0
    for i, (b, a) in enumerate(zip(before.stream, after.stream)):
        b, d = np.asarray(b, np.float64), np.asarray(a, np.float64) - np.asarray(b, np.float64)
        values.append(np.sqrt((d * d).sum()) / max(np.sqrt((b * b).sum()), np.finfo(np.float64).tiny))
        block = 0 if i == 0 or lay.stage[i] != lay.stage[i - 1] else block + 1
        labels.append(f"S{lay.stage[i]}.{block}")
    return SwinEffects(before=before, after=after, cosine=cosine(_pooled(before), _pooled(after)),
                       residual_change=np.asarray(values), residual_labels=tuple(labels), applied=applied)


@dataclass(frozen=True, eq=False)
class SwinSweep(Sweep):
    """A Swin sweep: its grid is (L, the most heads); a stage's missing heads stay NaN and are not counted."""

    heads: tuple[int, ...] = ()  # each layer's stage's head count

    @property
    def complete(self) -> bool:
        return self.done == sum(self.heads)


def swin_sweep(c, weights, pixels, *, mode: str = "zero", factor: float = 0.0, cancelled=None,
               progress=None) -> SwinSweep:
    """Every head of every stage ablated alone (``mode`` zero or mean, or scaled by ``factor``), measured by
    1 - cosine of the pooled output; (L, the most heads), NaN where a stage has fewer heads or the sweep was
    cancelled (``cancelled()`` is asked between heads; ``progress(done, total)`` after each)."""
    if mode not in ("zero", "mean", "scale"):
        raise CheckpointError(f"ablation mode {mode!r}: choose zero, mean or scale")
    before = swin_run(c, weights, pixels)
    heads = before.layout.heads
    grid = np.full((len(heads), max(heads)), np.nan)
    total, done = int(sum(heads)), 0
    ref = _pooled(before)
    for layer, nh in enumerate(heads):
        for head in range(nh):
            if cancelled is not None and cancelled():
                return SwinSweep(grid, "cosine", mode, tuple(heads))
            e = Edit(scale={(layer, head): float(factor)}) if mode == "scale" else Edit(ablate={(layer, head): mode})
            grid[layer, head] = 1.0 - cosine(ref, _pooled(swin_run(c, weights, pixels, e)))
            done += 1
            if progress is not None:
                progress(done, total)
    return SwinSweep(grid, "cosine", mode, tuple(heads))


PIXELS_FILE = "intervention_pixels.npy"  # what the exported script loads, saved beside it


def swin_code(ckpt, pixels, spec, allowed=None, classifier: bool = False) -> dict:
    """The session's interventions on Swin as a PyTorch forward-hook script
    (:func:`attnviz.checkpoints.intervention_swin_code.swin_script`) over ``pixels`` (C, H, W), with the pixels it
    reads (``"pixels"``, saved as ``"pixels_file"`` beside it); TransformerLens has no Swin bridge."""
    from attnviz.checkpoints.intervention_swin_code import swin_script

    c = ckpt.config
    x = np.asarray(pixels, dtype=np.float32)
    lay = swin_layout(c, (x.shape[1] // c.patch_size[0], x.shape[2] // c.patch_size[1]))
    edit, _said = build_swin_edit(c, spec, lay, allowed=allowed)
    grids = {layer: lay.grids[layer] for layer in edit.knockout}
    from pathlib import Path

    folder = Path(ckpt.folder)
    model = str(folder.resolve()) if folder.is_dir() else str(folder)  # the script runs from where it is saved
    script = swin_script(model, PIXELS_FILE, list(lay.heads), ablate=dict(edit.ablate) or None,
                         scale=dict(edit.scale) or None, knockout=dict(edit.knockout) or None, grids=grids or None,
                         classifier=classifier)
    return {"pytorch": script, "lens": "", "pytorch_problem": "",
            "lens_problem": "TransformerLens has no bridge for Swin: the PyTorch script holds these edits",
            "pixels": x, "pixels_file": PIXELS_FILE}
