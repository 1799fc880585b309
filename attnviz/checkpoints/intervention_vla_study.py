"""What the window's Intervene tab computes for a SmolVLA policy, without Qt: the session's interventions (the fields
of ``attnviz.model.state.Interventions``) on one stack of the policy -- ``"vlm"`` (the VLM's layers over the
prefix: pictures, instruction, state) or ``"expert"`` (the action expert's layers over the action rows) -- turned
into the :class:`~attnviz.checkpoints.intervention_vla.VlaEdit` that
:func:`~attnviz.checkpoints.intervention_vla.vla_run` takes, the passes before and after and what changed
(:class:`VlaWindowEffects`): the action chunk's velocity (the largest change, the cosine, per action dimension),
the stack's maps before | after | difference and each head's largest change. The sweep ablates every head of the
stack in turn and ranks it by how far the action chunk moves.

A knockout removes the session's mask's forbidden edges (a (T, T) mask over the prefix and the actions, as the
Mask workspace's VLA preset lays them out) in the chosen layers (and heads) of the stack; a head patch copies a
head's output from the pass over a clean instruction of the same token count (the same pictures and state). Every
problem a person can cause is one :class:`CheckpointError` line.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attnviz.checkpoints.errors import CheckpointError
from attnviz.checkpoints.intervention_study import Sweep
from attnviz.checkpoints.intervention_vla import (STACK_NAMES, VlaEdit, VlaInput, check_stack, check_stack_head,
                                                  sequence_length, stack_size, vla_run)
from attnviz.checkpoints.interventions import Edit, cosine

VLA_METRICS = ("action_change", "action_cosine")  # the sweep's measures: max |Δ velocity|, 1 - cosine


@dataclass(frozen=True, eq=False)
class VlaWindowEffects:
    """One intervention on a policy as the window shows it."""

    stack: str
    before: object  # VlaPass
    after: object
    clean: object | None
    action_dim: int
    applied: tuple[str, ...]
    residual_change: np.ndarray  # (L + L_e,) ||after - before|| / ||before|| of the stream entering each layer
    residual_labels: tuple[str, ...]  # "V0", ... the VLM's layers, "X0", ... the expert's

    def _stack_maps(self, p) -> np.ndarray:
        """(L, nh, rows, T): the VLM's maps over the prefix (its own rows and keys), or the expert's action rows."""
        if self.stack == "vlm":
            Tp = p.T - p.action_attentions.shape[2]
            return p.attentions[:, :, :Tp, :Tp]
        return p.action_attentions

    def maps(self, which: str) -> np.ndarray:
        return self._stack_maps(self.before if which == "before" else self.after)

    def attention(self, layer: int, head: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        b = self.maps("before")[layer, head].astype(np.float64)
        a = self.maps("after")[layer, head].astype(np.float64)
        return b, a, a - b

    def attention_change(self) -> np.ndarray:
        """(L, nh): the largest absolute change of a weight in each head's map of the stack."""
        return np.abs(self.maps("after").astype(np.float64) - self.maps("before")).max(axis=(2, 3))

    @property
    def mask(self) -> np.ndarray:
        """(rows, T) bool: the keys each row of the stack's maps may see under the policy's block mask."""
        m = np.asarray(self.before.result.mask, dtype=bool)
        Ta = self.before.action_attentions.shape[2]
        Tp = m.shape[0] - Ta
        return m[:Tp, :Tp] if self.stack == "vlm" else m[Tp:, :]

    @property
    def actions_before(self) -> np.ndarray:
        return self.before.velocity[:, :self.action_dim].astype(np.float64)  # (Ta, action_dim)

    @property
    def actions_after(self) -> np.ndarray:
        return self.after.velocity[:, :self.action_dim].astype(np.float64)

    @property
    def max_abs_change(self) -> float:
        return float(np.abs(self.actions_after - self.actions_before).max(initial=0.0))

    @property
    def cosine(self) -> float:
        return cosine(self.actions_before, self.actions_after)

    def dimension_change(self) -> np.ndarray:
        """(action_dim,) the largest change of each action dimension's velocity over the chunk."""
        return np.abs(self.actions_after - self.actions_before).max(axis=0)


def _segments_say(result, removed: np.ndarray) -> str:
    """'actions → state' style summary of the removed edges by segment."""
    names = []
    for s in result.segments:
        names.extend([s.name] * (s.stop - s.start))
    if len(names) != removed.shape[0]:
        return ""
    pairs = sorted({(names[i], names[j]) for i, j in zip(*np.nonzero(removed))})
    shown = ", ".join(f"{a} → {b}" for a, b in pairs[:4]) + (" …" if len(pairs) > 4 else "")
    return f" ({shown})" if shown else ""


def build_vla_edit(ckpt, spec, stack: str, T: int, *, allowed=None, clean=None, result=None):
    """(VlaEdit, what was applied) of ``spec`` on heads of ``stack``; ``clean``: the clean pass (a patch)."""
    check_stack(stack)
    n_layer, n_head = stack_size(ckpt, stack)
    e = Edit()
    said = []
    heads = [check_stack_head(ckpt, stack, layer, h) for layer, h in spec.heads]
    names = ", ".join(f"{a}.{b}" for a, b in heads)
    where = STACK_NAMES[stack]
    if heads and spec.mode in ("zero", "mean"):
        e.ablate.update({lh: spec.mode for lh in heads})
        said.append(f"heads {names} of {where} " + ("zeroed" if spec.mode == "zero" else
                                                    "set to their mean over the positions"))
    elif heads and spec.mode == "scale":
        e.scale.update({lh: float(spec.factor) for lh in heads})
        said.append(f"heads {names} of {where} scaled by {spec.factor:g}")
    elif heads:
        raise CheckpointError(f"intervention mode {spec.mode!r}: choose zero, mean or scale")
    if spec.knockout_layers:
        if allowed is None:
            raise CheckpointError("a knockout needs the session's mask (the Mask workspace's design)")
        m = np.asarray(allowed)
        if m.dtype != bool or m.shape != (T, T):
            raise CheckpointError(f"the session's mask is {m.shape[0] if m.ndim else 0} tokens wide; the policy's "
                                  f"run has {T} tokens (prefix and actions): design a {T} × {T} mask, e.g. with the "
                                  "Mask workspace's VLA preset")
        layers = [check_stack_head(ckpt, stack, int(layer), 0)[0] for layer in spec.knockout_layers]
        hs = [check_stack_head(ckpt, stack, 0, int(h))[1] for h in spec.knockout_heads]
        ko = ~m
        if hs:
            per = np.zeros((n_head, T, T), dtype=bool)
            per[hs] = ko
            ko = per
        e.knockout.update({layer: ko for layer in layers})
        n = int((~m).sum())
        said.append(f"{n} edge{'s' if n != 1 else ''} of the mask knocked out of {where}'s layer"
                    f"{'s' if len(layers) != 1 else ''} {', '.join(map(str, layers))}"
                    + (f", heads {', '.join(map(str, hs))}" if hs else "")
                    + (_segments_say(result, ~m) if result is not None else ""))
    if spec.patch == "head":
        if clean is None:
            raise CheckpointError("a patch needs the clean instruction: type it in the clean prompt field")
        layer, head = check_stack_head(ckpt, stack, spec.patch_layer, spec.patch_head)
        e.patch_heads[(layer, head)] = clean.heads[stack][layer][head]
        said.append(f"head {layer}.{head} of {where} patched from the clean instruction")
    elif spec.patch == "residual":
        raise CheckpointError("patching the residual stream runs on decoder LLMs; on a policy patch a head's output")
    elif spec.patch != "none":
        raise CheckpointError(f"patch {spec.patch!r}: choose none or head")
    edit = VlaEdit(**{stack: e})
    edit.vlm.stream, edit.expert.stream = [], []  # the streams entering each layer, for the residual change
    return edit, tuple(said)


def vla_window_study(ckpt, inp: VlaInput, spec, stack: str, *, allowed=None) -> VlaWindowEffects:
    """The plain pass over ``inp``, the pass with ``spec`` applied on ``stack``, and what changed; a patch takes
    the clean pass over ``spec.clean`` as the instruction (the same pictures, state, noise and t)."""
    check_stack(stack)
    Tp, Ta = sequence_length(ckpt, inp.text)
    clean = None
    if spec.patch == "head":
        text = spec.clean.strip()
        if not text:
            raise CheckpointError("a patch needs the clean instruction: type it in the clean prompt field")
        Tc = sum(sequence_length(ckpt, text))
        if Tc != Tp + Ta:
            raise CheckpointError(f"the clean instruction gives {Tc} tokens and this one {Tp + Ta}: patching needs "
                                  "the same length")
        clean = vla_run(ckpt, VlaInput(images=inp.images, text=text, state=inp.state, noise_seed=inp.noise_seed,
                                       time=inp.time), record=True)
    plain = VlaEdit(vlm=Edit(stream=[]), expert=Edit(stream=[]))
    before = vla_run(ckpt, inp, plain)
    edit, applied = build_vla_edit(ckpt, spec, stack, Tp + Ta, allowed=allowed, clean=clean, result=before.result)
    after = vla_run(ckpt, inp, edit)
    values, labels = [], []
    for name, tag in (("vlm", "V"), ("expert", "X")):
        for i, (b, a) in enumerate(zip(getattr(plain, name).stream, getattr(edit, name).stream)):
            b = np.asarray(b, dtype=np.float64)
            d = np.asarray(a, dtype=np.float64) - b
            values.append(np.sqrt((d * d).sum()) / max(np.sqrt((b * b).sum()), np.finfo(np.float64).tiny))
            labels.append(f"{tag}{i}")
    return VlaWindowEffects(stack=stack, before=before, after=after, clean=clean,
                            action_dim=int(ckpt.spec.action_dim), applied=applied,
                            residual_change=np.asarray(values), residual_labels=tuple(labels))


def vla_window_sweep(ckpt, inp: VlaInput, stack: str, *, mode: str = "zero", factor: float = 0.0,
                     metric: str = "action_change", cancelled=None, progress=None) -> Sweep:
    """Every head of ``stack`` ablated alone (``mode`` zero or mean, or scaled by ``factor``), measured on the action
    chunk: "action_change" (the largest |Δ velocity|) or "action_cosine" (1 - cosine before / after).
    ``cancelled()`` stops between heads (the rest stay NaN); ``progress(done, total)`` after each head."""
    check_stack(stack)
    if metric not in VLA_METRICS:
        raise CheckpointError(f"metric {metric!r}: a policy is measured by {' or '.join(VLA_METRICS)}")
    if mode not in ("zero", "mean", "scale"):
        raise CheckpointError(f"ablation mode {mode!r}: choose zero, mean or scale")
    n_layer, n_head = stack_size(ckpt, stack)
    dim = int(ckpt.spec.action_dim)
    before = vla_run(ckpt, inp).velocity[:, :dim].astype(np.float64)
    grid = np.full((n_layer, n_head), np.nan)
    for layer in range(n_layer):
        for head in range(n_head):
            if cancelled is not None and cancelled():
                return Sweep(grid, metric, mode)
            e = Edit(scale={(layer, head): float(factor)}) if mode == "scale" else Edit(ablate={(layer, head): mode})
            after = vla_run(ckpt, inp, VlaEdit(**{stack: e})).velocity[:, :dim].astype(np.float64)
            grid[layer, head] = (float(np.abs(after - before).max(initial=0.0)) if metric == "action_change"
                                 else 1.0 - cosine(before, after))
            if progress is not None:
                progress(layer * n_head + head + 1, grid.size)
    return Sweep(grid, metric, mode)
