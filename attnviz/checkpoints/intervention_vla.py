"""Interventions on a SmolVLA robot policy: edit the VLM prefix's heads or the action expert's, and see the
action chunk move.

The pass is the one :func:`attnviz.checkpoints.vla_smolvla.run` computes (and lerobot's golden records): the
VLM over the prefix (images, instruction, state), then the action expert at one flow time t and noise seed,
giving the velocity v_t (Ta, max_action_dim) whose first ``action_dim`` columns are the action chunk's.

Heads are addressed (layer, head) per stack: ``"vlm"`` (the VLM text layers over the prefix, L layers) or
``"expert"`` (the action expert's layers over the action rows, L_e layers; nh heads of the VLM's head width
each). A head's output is its attention-weighted values before ``o_proj``, as a PyTorch forward pre-hook there
sees them (head h: columns h * hd .. (h + 1) * hd of its input): zero ablation sets it to 0, mean ablation to
its mean over the stack's positions (the Tp prefix tokens, or the Ta action tokens) or to given (hd,) means,
scaling multiplies it, patching copies it from a second input's pass (another state, picture or instruction
with the same token count; same noise seed and t unless that input says otherwise).

A knockout is a bool (T, T) mask over the whole sequence (T = Tp + Ta, the order of the run's tokens; True =
the edge removed), or (nh, T, T) per head, applied to chosen layers of one stack before the softmax, on top of
the policy's own block mask: a VLM layer reads its prefix block [:Tp, :Tp], an expert layer its action rows
[Tp:, :Tp + Ta] (a cross-attention layer the [Tp:, :Tp] part). :func:`block_knockout` builds the natural ones
from the run's segments, e.g. the actions not seeing the state. Each row renormalises over the keys left; a
row left with none gets weights 0 and output 0 (lerobot's eager attention would spread it evenly instead).

Editing a VLM head changes the keys and values the expert reads, so the velocity moves with either stack.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from attnviz.checkpoints.errors import CheckpointError
from attnviz.checkpoints.interventions import MODES, Edit, cosine

STACKS = ("vlm", "expert")
STACK_NAMES = {"vlm": "the VLM", "expert": "the action expert"}


def check_vla(ckpt) -> None:
    """A SmolVLA policy, or one line why not."""
    if getattr(ckpt, "kind", None) != "vlm" or getattr(ckpt, "family", None) != "smolvla":
        raise CheckpointError(f"{getattr(ckpt, 'name', ckpt)!r} is not a SmolVLA policy; these interventions run on "
                              "lerobot's SmolVLA")


def check_stack(stack) -> str:
    if stack not in STACKS:
        raise CheckpointError(f"stack {stack!r}: choose {' or '.join(STACKS)} (the VLM's prefix layers or the "
                              "action expert's)")
    return stack


def stack_size(ckpt, stack: str) -> tuple[int, int]:
    """(layers, heads) of one stack."""
    spec = ckpt.spec
    n_layer = spec.text.n_layer if check_stack(stack) == "vlm" else spec.expert.n_layer
    return int(n_layer), int(spec.text.n_head)


def check_stack_head(ckpt, stack: str, layer, head) -> tuple[int, int]:
    """(layer, head) as ints in range of ``stack``, or one line naming the range."""
    n_layer, n_head = stack_size(ckpt, stack)
    for what, v, n in (("layer", layer, n_layer), ("head", head, n_head)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or not 0 <= v < n:
            raise CheckpointError(f"{stack} {what} {v!r} is out of range: {STACK_NAMES[stack]} has {n} {what}s "
                                  f"(0 to {n - 1})")
    return int(layer), int(head)


def parse_stack_heads(ckpt, text: str, stack: str = "vlm") -> list[tuple[int, int]]:
    """``"0.1,3.2"`` -> [(0, 1), (3, 2)] checked against ``stack``."""
    out = []
    for part in (p.strip() for p in str(text).split(",")):
        bits = part.split(".")
        if len(bits) != 2 or not all(b.strip().lstrip("-").isdigit() for b in bits):
            raise CheckpointError(f"{part!r} is not a head: write LAYER.HEAD, e.g. 0.3 (several: 0.3,2.1)")
        out.append(check_stack_head(ckpt, stack, int(bits[0]), int(bits[1])))
    if not out:
        raise CheckpointError("no heads given: write LAYER.HEAD, e.g. 0.3")
    return out


@dataclass(frozen=True)
class VlaInput:
    """What one policy pass reads: a picture per camera, the instruction, the robot state, noise seed and t."""

    images: tuple  # (H, W, 3) uint8 each, one per camera in config order
    text: str
    state: tuple  # (state_dim,) numbers
    noise_seed: int = 0
    time: float = 1.0


def vla_input(ckpt, images, text: str, *, state, noise_seed: int = 0, time: float = 1.0) -> VlaInput:
    """The inputs of a pass of policy ``ckpt`` (the pass itself checks the pictures, the instruction, the seed and
    t, each in one line)."""
    check_vla(ckpt)
    if state is None:
        raise CheckpointError(f"the policy needs the robot state: {ckpt.spec.state_dim} numbers (--state x,y,...)")
    try:
        st = tuple(float(v) for v in np.asarray(list(state), dtype=np.float64).reshape(-1))
    except (TypeError, ValueError):
        raise CheckpointError(f"the robot state must be {ckpt.spec.state_dim} numbers (got {state!r})") from None
    return VlaInput(images=tuple(images or ()), text=text, state=st, noise_seed=noise_seed, time=time)


def sequence_length(ckpt, text: str) -> tuple[int, int]:
    """(Tp, Ta): the prefix tokens and the action tokens of a pass over instruction ``text``, as run lays them
    out (each camera's image tokens and markers, the instruction as tokenised, the state; the chunk)."""
    from attnviz.checkpoints.vla_smolvla import _instruction_ids

    spec = ckpt.spec
    ids, _, _ = _instruction_ids(ckpt.tokenizer, text, spec.tokenizer_max_length)
    marks = 3 if spec.image_special_tokens else 0  # <fake><global-img> before, <fake> after
    Tp = len(spec.cameras) * (spec.tokens_per_image + marks) + spec.n_empty * marks + int(ids.size) + 1
    return Tp, int(spec.chunk)


@dataclass
class VlaEdit:
    """What to change in one policy pass, per stack (see the module doc). Knockouts are over the whole (T, T)
    sequence; patches are (Tp, hd) for the VLM's heads and (Ta, hd) for the expert's."""

    vlm: Edit = field(default_factory=Edit)
    expert: Edit = field(default_factory=Edit)

    def stack(self, name: str) -> Edit:
        return self.vlm if check_stack(name) == "vlm" else self.expert


def _check_stack_edit(ckpt, stack: str, e: Edit, T: int, rows: int) -> None:
    """One line for whatever in ``e`` does not fit ``stack`` over a T-token sequence (``rows``: its positions)."""
    n_layer, n_head = stack_size(ckpt, stack)
    hd = ckpt.spec.text.decoder.head_dim
    for (layer, head), how in e.ablate.items():
        check_stack_head(ckpt, stack, layer, head)
        if isinstance(how, str):
            if how not in MODES:
                raise CheckpointError(f"ablation mode {how!r}: choose {' or '.join(MODES)}")
        elif np.shape(how) != (hd,) or not np.isfinite(np.asarray(how, dtype=np.float64)).all():
            raise CheckpointError(f"the means of {stack} head {layer}.{head} must be {hd} finite numbers")
    for (layer, head), f in e.scale.items():
        check_stack_head(ckpt, stack, layer, head)
        if isinstance(f, bool) or not isinstance(f, (int, float, np.integer, np.floating)) or not np.isfinite(f):
            raise CheckpointError(f"the scale of {stack} head {layer}.{head} must be a finite number (got {f!r})")
    for layer, ko in e.knockout.items():
        check_stack_head(ckpt, stack, layer, 0)
        shape = np.shape(ko)
        if shape not in ((T, T), (n_head, T, T)) or np.asarray(ko).dtype != bool:
            raise CheckpointError(f"the knockout mask of {stack} layer {layer} is {shape}; it must be bool ({T}, {T}) "
                                  f"or ({n_head}, {T}, {T}) for this policy's {T} tokens (prefix and actions)")
    for (layer, head), v in e.patch_heads.items():
        check_stack_head(ckpt, stack, layer, head)
        if np.shape(v) != (rows, hd):
            raise CheckpointError(f"the patch of {stack} head {layer}.{head} is {np.shape(v)}; it must be ({rows}, {hd}): "
                                  "the clean and the corrupted input must have the same token count")
    if e.patch_residual:
        raise CheckpointError("residual-stream patching is not offered on a SmolVLA policy; patch a head's output")
    if e.stream is not None and not isinstance(e.stream, list):
        raise CheckpointError("an edit's stream records into a list (the stream entering each layer)")


@dataclass(frozen=True)
class _Pair:
    """The per-stack edits run() reads, in each stack's own coordinates."""

    vlm: Edit
    expert: Edit


def _local(e: Edit, rows: slice) -> Edit:
    """``e`` with its (T, T) knockouts cut to the stack's rows (the columns cut by the layer's own mask)."""
    return Edit(ablate=e.ablate, scale=e.scale, patch_heads=e.patch_heads, record=e.record, stream=e.stream,
                knockout={i: np.ascontiguousarray(np.asarray(ko, dtype=bool)[..., rows, :])
                          for i, ko in e.knockout.items()})


@dataclass(frozen=True, eq=False)
class VlaPass:
    """One (edited) policy pass."""

    velocity: np.ndarray  # (Ta, max_action_dim) v_t; its first action_dim columns the action chunk's
    attentions: np.ndarray  # (L, nh, T, T): the VLM's maps over the prefix, the expert's in the action rows
    action_attentions: np.ndarray  # (L_e, nh, Ta, T) the expert's maps
    heads: dict  # "vlm" / "expert" -> {layer: (nh, rows, hd) head outputs before the edit} (when recorded)
    result: object  # the run's MultimodalAttention (tokens, labels, segments, mask)

    @property
    def T(self) -> int:
        return int(self.attentions.shape[-1])


def vla_run(ckpt, inp: VlaInput, edit: VlaEdit | None = None, *, dtype=np.float32, kernel: str = "auto",
            record: bool = False) -> VlaPass:
    """The policy pass over ``inp`` with ``edit`` applied (None: the plain pass); ``record`` keeps every head's
    output (what a patch takes from a clean input)."""
    from attnviz.checkpoints import vla_smolvla

    check_vla(ckpt)
    Tp, Ta = sequence_length(ckpt, inp.text)
    T = Tp + Ta
    edit = edit or VlaEdit()
    _check_stack_edit(ckpt, "vlm", edit.vlm, T, Tp)
    _check_stack_edit(ckpt, "expert", edit.expert, T, Ta)
    recs = {"vlm": {}, "expert": {}} if record else {"vlm": edit.vlm.record, "expert": edit.expert.record}
    vlm_e = _local(Edit(**{**edit.vlm.__dict__, "record": recs["vlm"]}), slice(0, Tp))
    exp_e = _local(Edit(**{**edit.expert.__dict__, "record": recs["expert"]}), slice(Tp, T))
    res = vla_smolvla.run(ckpt, list(inp.images), inp.text, dtype=dtype, kernel=kernel, state=list(inp.state),
                          noise_seed=inp.noise_seed, time=inp.time, edit=_Pair(vlm_e, exp_e))
    if res.attentions.shape[-1] != T:  # the layout counted here is the run's
        raise CheckpointError(f"the pass laid out {res.attentions.shape[-1]} tokens where {T} were expected")
    v = np.asarray(res.extra["velocity"])
    if not np.isfinite(v).all():
        raise CheckpointError("the edited pass gave a velocity that is not finite numbers")
    return VlaPass(velocity=v, attentions=res.attentions, action_attentions=res.action_attentions,
                   heads={k: dict(r or {}) for k, r in recs.items()}, result=res)


@dataclass(frozen=True, eq=False)
class VlaEffects:
    """One intervention on a policy: the plain pass, the edited one (and the clean one of a patch)."""

    before: VlaPass
    after: VlaPass
    action_dim: int
    clean: VlaPass | None = None
    applied: str = ""

    @property
    def actions_before(self) -> np.ndarray:
        return self.before.velocity[:, :self.action_dim].astype(np.float64)  # (Ta, action_dim)

    @property
    def actions_after(self) -> np.ndarray:
        return self.after.velocity[:, :self.action_dim].astype(np.float64)  # (Ta, action_dim)

    @property
    def max_abs_change(self) -> float:
        """Largest change of the action chunk's velocity (the first action_dim columns)."""
        return float(np.abs(self.actions_after - self.actions_before).max(initial=0.0))

    @property
    def cosine(self) -> float:
        """Cosine of the action chunk's velocity before and after (flattened)."""
        return cosine(self.actions_before, self.actions_after)

    @property
    def map_change(self) -> np.ndarray:
        """(L,) the largest change of each VLM layer's maps (its action rows the expert's beside it)."""
        d = np.abs(self.after.attentions.astype(np.float64) - self.before.attentions.astype(np.float64))
        return d.reshape(d.shape[0], -1).max(axis=1)

    @property
    def expert_map_change(self) -> np.ndarray:
        """(L_e,) the largest change of each expert layer's maps."""
        d = np.abs(self.after.action_attentions.astype(np.float64) - self.before.action_attentions.astype(np.float64))
        return d.reshape(d.shape[0], -1).max(axis=1)


def vla_study(ckpt, inp: VlaInput, edit: VlaEdit, *, clean: VlaPass | None = None, applied: str = "",
              dtype=np.float32, kernel: str = "auto") -> VlaEffects:
    """The plain pass and the pass with ``edit`` applied, over ``inp``."""
    before = vla_run(ckpt, inp, dtype=dtype, kernel=kernel)
    after = vla_run(ckpt, inp, edit, dtype=dtype, kernel=kernel)
    return VlaEffects(before=before, after=after, action_dim=int(ckpt.spec.action_dim), clean=clean, applied=applied)


def _heads_text(stack: str, heads) -> str:
    return f"{stack} heads " + ", ".join(f"{a}.{b}" for a, b in heads)


def vla_ablate(ckpt, inp: VlaInput, heads, *, stack: str = "vlm", mode: str = "zero", means=None,
               dtype=np.float32, kernel: str = "auto") -> VlaEffects:
    """Ablate ``heads`` [(layer, head), ...] of ``stack``: ``mode`` zero or mean (over the stack's positions), or
    ``means`` {(layer, head): (hd,)} when given."""
    check_stack(stack)
    if mode not in MODES:
        raise CheckpointError(f"ablation mode {mode!r}: choose {' or '.join(MODES)}")
    heads = [check_stack_head(ckpt, stack, *h) for h in heads]
    how = {h: (mode if means is None else means[h]) for h in heads}
    edit = VlaEdit(**{stack: Edit(ablate=how)})
    return vla_study(ckpt, inp, edit, applied=f"{mode}-ablated {_heads_text(stack, heads)}", dtype=dtype, kernel=kernel)


def vla_scale(ckpt, inp: VlaInput, heads, factor: float, *, stack: str = "vlm", dtype=np.float32,
              kernel: str = "auto") -> VlaEffects:
    """Multiply the outputs of ``heads`` of ``stack`` by ``factor``."""
    check_stack(stack)
    heads = [check_stack_head(ckpt, stack, *h) for h in heads]
    edit = VlaEdit(**{stack: Edit(scale={h: factor for h in heads})})
    return vla_study(ckpt, inp, edit, applied=f"{_heads_text(stack, heads)} scaled by {factor:g}", dtype=dtype,
                     kernel=kernel)


def vla_knockout(ckpt, inp: VlaInput, removed, *, stack: str = "expert", layers=None, heads=None,
                 dtype=np.float32, kernel: str = "auto") -> VlaEffects:
    """Remove the edges ``removed`` (bool (T, T), True = removed) in ``layers`` of ``stack`` (None: every layer),
    in ``heads`` only when given (the other heads keep every edge)."""
    check_stack(stack)
    n_layer, n_head = stack_size(ckpt, stack)
    ko = np.asarray(removed)
    if ko.dtype != bool or ko.ndim != 2:
        T = sum(sequence_length(ckpt, inp.text))
        raise CheckpointError(f"the knockout mask is {ko.dtype} {ko.shape}; it must be bool ({T}, {T}) for this "
                              "policy's tokens (prefix and actions)")
    layers = list(range(n_layer)) if layers is None else [check_stack_head(ckpt, stack, i, 0)[0] for i in layers]
    if heads is not None:
        hs = sorted({check_stack_head(ckpt, stack, 0, h)[1] for h in heads})
        per = np.zeros((n_head, *ko.shape), dtype=bool)  # (nh, T, T)
        per[hs] = ko
        ko = per
    edit = VlaEdit(**{stack: Edit(knockout={i: ko for i in layers})})
    where = f"{stack} layers {', '.join(map(str, layers))}" + ("" if heads is None else f", heads {', '.join(map(str, hs))}")
    return vla_study(ckpt, inp, edit, applied=f"{int(np.asarray(removed).sum())} edges knocked out in {where}",
                     dtype=dtype, kernel=kernel)


def vla_patch(ckpt, clean: VlaInput, corrupted: VlaInput, layer: int, head: int, *, stack: str = "vlm",
              dtype=np.float32, kernel: str = "auto") -> VlaEffects:
    """The corrupted input's pass with head ``layer.head`` of ``stack`` taken from the clean input's pass (the
    same token count): before = corrupted, after = patched, clean = clean."""
    check_stack(stack)
    layer, head = check_stack_head(ckpt, stack, layer, head)
    Tc, Tx = (sum(sequence_length(ckpt, i.text)) for i in (clean, corrupted))
    if Tc != Tx:
        raise CheckpointError(f"the clean input has {Tc} tokens and the corrupted one {Tx}: patching needs the same "
                              "token count (instructions of the same length)")
    c = vla_run(ckpt, clean, dtype=dtype, kernel=kernel, record=True)
    edit = VlaEdit(**{stack: Edit(patch_heads={(layer, head): c.heads[stack][layer][head]})})
    eff = vla_study(ckpt, corrupted, edit, clean=c, dtype=dtype, kernel=kernel,
                    applied=f"{stack} head {layer}.{head} patched from the clean input")
    return eff


def block_knockout(result, queries: str, keys: str) -> np.ndarray:
    """(T, T) bool: every edge from the tokens of segment ``queries`` to those of segment ``keys`` removed (the
    run's segment names: images, language, state, actions)."""
    names = [s.name for s in result.segments]
    T = int(result.mask.shape[0])
    out = np.zeros((T, T), dtype=bool)
    for what, name in (("query", queries), ("key", keys)):
        if name not in names:
            raise CheckpointError(f"{what} segment {name!r} is not in this pass: it has {', '.join(dict.fromkeys(names))}")
    for sq in result.segments:
        if sq.name != queries:
            continue
        for sk in result.segments:
            if sk.name == keys:
                out[sq.start:sq.stop, sk.start:sk.stop] = True
    return out
