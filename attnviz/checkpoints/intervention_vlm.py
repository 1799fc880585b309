"""Interventions on a vision-language model's language model (PaliGemma 1 and 2, LLaVA, Idefics3, SmolVLM).

The pass is the one generation's prefill runs: the family's processor and vision tower give the rows entering
the language model (:func:`attnviz.checkpoints.generate.vlm_prefix`: image features in place of the image
tokens, PaliGemma's prefix-LM mask, its positions counted from 1), then
:func:`attnviz.checkpoints.generate._chunk` over the whole sequence with the
:class:`~attnviz.checkpoints.interventions.Edit` applied — the same edit points as a decoder LLM's pass: the
heads' outputs before ``o_proj`` (zero / mean / given means, scale, a clean prompt's output), the mask (a
knockout removes edges on top of the family's own mask, so each row renormalises), the residual stream entering
a layer. The picture is the same for the clean and the corrupted prompt; only the text differs, and both must
give the same number of tokens.

:func:`vlm_study` returns :class:`VlmEffects` (the fields and methods of
:class:`~attnviz.checkpoints.intervention_study.Effects`, plus the patch groups, so a query's attention over
the picture can be drawn before and after); :func:`vlm_sweep` ablates every head in turn;
:func:`export_vlm_code` writes the PyTorch forward-hook script (:mod:`attnviz.checkpoints.intervention_vlm_code`)
that reproduces an intervention with transformers.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attnviz.checkpoints.errors import CheckpointError
from attnviz.checkpoints.intervention_study import Effects
from attnviz.checkpoints.interventions import Edit, Pass, _check_edit, kl_divergence

FAMILIES = ("paligemma", "llava", "idefics3", "smolvlm")  # what vlm_prefix reads (generation's families)


def check_vlm(ckpt) -> None:
    """A vision-language checkpoint whose language model these interventions run on, or one line why not."""
    if getattr(ckpt, "kind", None) != "vlm":
        raise CheckpointError(f"{getattr(ckpt, 'name', ckpt)!r} is not a vision-language model")
    if getattr(ckpt, "family", None) not in FAMILIES:
        raise CheckpointError(f"{ckpt.name} is a {ckpt.family} policy; interventions on a vision-language model run "
                              "on PaliGemma, LLaVA, Idefics3 and SmolVLM")


@dataclass(frozen=True, eq=False)
class VlmInput:
    """A picture and a prompt as the language model reads them: the prefix and the text model's weights."""

    prefix: object  # generate.VlmPrefix
    weights: object  # the language model's weights with its head (generate.vlm_text_weights)

    @property
    def T(self) -> int:
        return int(self.prefix.ids.size)


def vlm_input(ckpt, images, text: str, weights=None) -> VlmInput:
    """The family's processor and vision tower on ``images`` and ``text`` (one line for a bad prompt or picture)."""
    from attnviz.checkpoints.generate import vlm_prefix, vlm_text_weights

    check_vlm(ckpt)
    if not isinstance(text, str):
        raise CheckpointError(f"the prompt must be text (got {type(text).__name__})")
    prefix = vlm_prefix(ckpt, list(images) if images is not None else [], text)
    if prefix.ids.size == 0:
        raise CheckpointError("an intervention needs at least one token")
    return VlmInput(prefix=prefix, weights=weights if weights is not None else vlm_text_weights(ckpt))


def vlm_run(ckpt, inp: VlmInput, edit: Edit | None = None, kernel: str = "auto") -> Pass:
    """The language model over the prefix of ``inp`` with ``edit`` applied (None: the plain pass)."""
    from attnviz.checkpoints.decoder import _W
    from attnviz.checkpoints.generate import KVCache, _chunk, logits

    c = ckpt.spec.text
    edit = edit or Edit()
    _check_edit(c, edit, inp.T)
    W = _W(inp.weights, np.float32)
    stream: list = []
    p = inp.prefix
    hidden, rows = _chunk(c, W, p.x, 0, KVCache([None] * c.n_layer, [None] * c.n_layer), kernel, stream, edit,
                          masks=p.masks, offset=p.offset)
    z = logits(c, inp.weights, hidden[-1:])[0]
    if not np.isfinite(z).all():
        raise CheckpointError("the edited pass gave logits that are not finite numbers")
    return Pass(logits=z, attentions=rows, stream=np.stack(stream), heads=dict(edit.record or {}))


def own_mask(inp: VlmInput) -> np.ndarray:
    """(T, T) bool: what the family lets query i see (PaliGemma's prefix both ways, else causal)."""
    masks = inp.prefix.masks
    if masks:
        return np.asarray(masks[0] if 0 in masks else next(iter(masks.values())), dtype=bool)
    return np.tril(np.ones((inp.T, inp.T), dtype=bool))


@dataclass(frozen=True, eq=False)
class VlmEffects(Effects):
    """One intervention on a vision-language model: :class:`Effects` plus where its image tokens sit."""

    patches: tuple = ()  # multimodal.PatchGroup of the sequence (one per picture or tile)
    images: list | None = None  # the (H, W, 3) uint8 pictures the groups' boxes refer to
    tokens: list | None = None  # (T,) token text (image tokens as the processor writes them)
    labels: list | None = None  # (T,) axis labels ("img r,c" for image tokens)
    is_image: np.ndarray | None = None  # (T,) bool
    mask: np.ndarray | None = None  # (T, T) bool the family's own mask (what a knockout restricts further)

    def overlay(self, layer: int, head: int, query: int = -1, group: int = 0) -> tuple[np.ndarray, np.ndarray]:
        """(before, after) (gh, gw) float64: query ``query``'s attention (``layer``, ``head``) over the image
        tokens of patch group ``group`` (negative ``query``: from the end)."""
        L, nh, T, _ = self.before.attentions.shape
        for what, v, n in (("layer", layer, L), ("head", head, nh)):
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or not 0 <= v < n:
                raise CheckpointError(f"{what} {v!r} is out of range: the model has {n} {what}s (0 to {n - 1})")
        if isinstance(query, bool) or not isinstance(query, (int, np.integer)) or not -T <= query < T:
            raise CheckpointError(f"query {query!r} is out of range: the sequence has {T} tokens (0 to {T - 1})")
        if not self.patches:
            raise CheckpointError("this prompt has no picture: there is no patch overlay")
        if isinstance(group, bool) or not isinstance(group, (int, np.integer)) or not 0 <= group < len(self.patches):
            raise CheckpointError(f"patch group {group!r} is out of range: the sequence has {len(self.patches)} "
                                  f"(0 to {len(self.patches) - 1})")
        g = self.patches[int(group)]
        q = int(query) % T
        return tuple(g.token_map(p.attentions[int(layer), int(head), q].astype(np.float64))
                     for p in (self.before, self.after))


def vlm_study(ckpt, images, text, spec, *, allowed=None, clean_text=None, means=None, result=None) -> VlmEffects:
    """The plain pass of the language model over ``images`` + ``text``, the pass with ``spec`` applied (an object
    with the fields of ``attnviz.model.state.Interventions``), and what changed. ``allowed``: the (T, T) bool
    mask of a knockout (True = query i may see key j) for the T tokens of the expanded sequence;
    ``clean_text``: the clean prompt of a patch (same picture, same token count); ``means`` (L, nh, hd): the
    values of mean ablation. ``result``: the window's forward pass of this picture and prompt (its patch
    groups and labels), computed here when None."""
    from attnviz.checkpoints.intervention_study import build_edit, check_size, residual_change

    check_vlm(ckpt)
    c = ckpt.spec.text
    images = list(images) if images is not None else []
    inp = vlm_input(ckpt, images, text)
    T = inp.T
    patching = spec.patch != "none"
    check_size(c, T, 3 if patching else 2)
    clean = None
    if patching:
        if not isinstance(clean_text, str) or not clean_text.strip():
            raise CheckpointError("a patch needs the clean prompt: type it in the clean prompt field")
        clean_in = vlm_input(ckpt, images, clean_text, inp.weights)
        if clean_in.T != T:
            raise CheckpointError(f"the clean prompt has {clean_in.T} tokens and the corrupted one {T} (with the "
                                  "picture's): patching needs the same length")
        clean = vlm_run(ckpt, clean_in, Edit(record={}))
    edit, applied = build_edit(c, spec, T, allowed=allowed, clean=clean, means=means)
    before = vlm_run(ckpt, inp)
    after = vlm_run(ckpt, inp, edit)
    res = result if result is not None else ckpt.run(images, text)  # tokens, labels and patch groups
    if not np.array_equal(np.asarray(res.ids), inp.prefix.ids):
        raise CheckpointError("the forward pass given is of another picture or prompt; run this one first")
    return VlmEffects(ids=inp.prefix.ids, before=before, after=after, clean=clean,
                      kl=kl_divergence(before.logits, after.logits), residual_change=residual_change(before, after),
                      applied=applied, patches=tuple(res.patches), images=list(res.images), tokens=list(res.tokens),
                      labels=list(res.labels), is_image=np.asarray(inp.prefix.is_image, dtype=bool),
                      mask=own_mask(inp))


def vlm_sweep(ckpt, images, text, *, mode: str = "zero", factor: float = 0.0, metric: str = "kl", tokens=None,
              cancelled=None, progress=None):
    """Every head of the language model ablated alone over ``images`` + ``text`` (``mode`` zero or mean, or scaled
    by ``factor``), measured by ``metric`` "kl" (KL of the next-token distributions, nats) or "logit_diff" (the
    drop of logit(a) - logit(b), ``tokens`` = (a, b)); ``cancelled()`` stops between heads (the rest stay
    NaN), ``progress(done, total)`` after each head. An :class:`~attnviz.checkpoints.intervention_study.Sweep`."""
    from attnviz.checkpoints.intervention_study import Sweep, check_size, logit_difference

    check_vlm(ckpt)
    c = ckpt.spec.text
    if metric not in ("kl", "logit_diff"):
        raise CheckpointError(f"metric {metric!r}: a vision-language model is measured by its next-token logits, "
                              "choose kl or logit_diff")
    if mode not in ("zero", "mean", "scale"):
        raise CheckpointError(f"ablation mode {mode!r}: choose zero, mean or scale")
    if mode == "scale" and (isinstance(factor, bool) or not isinstance(factor, (int, float, np.floating))
                            or not np.isfinite(factor)):
        raise CheckpointError(f"the scale factor must be a finite number (got {factor!r})")
    if metric == "logit_diff":
        if tokens is None or len(tokens) != 2:
            raise CheckpointError("the logit difference needs two tokens")
        a, b = (int(t) for t in tokens)
        for t in (a, b):
            if not 0 <= t < c.vocab_size:
                raise CheckpointError(f"token id {t} is out of range: the vocabulary has {c.vocab_size:,} tokens")
    inp = vlm_input(ckpt, images, text)
    check_size(c, inp.T, 2)
    before = vlm_run(ckpt, inp)
    grid = np.full((c.n_layer, c.n_head), np.nan)
    total = c.n_layer * c.n_head
    for layer in range(c.n_layer):
        for head in range(c.n_head):
            if cancelled is not None and cancelled():
                return Sweep(grid, metric, mode)
            e = Edit(scale={(layer, head): float(factor)}) if mode == "scale" else Edit(ablate={(layer, head): mode})
            after = vlm_run(ckpt, inp, e)
            if metric == "kl":
                grid[layer, head] = kl_divergence(before.logits, after.logits)
            else:
                grid[layer, head] = logit_difference(before.logits, a, b) - logit_difference(after.logits, a, b)
            if progress is not None:
                progress(layer * c.n_head + head + 1, total)
    return Sweep(grid, metric, mode)


IMAGE_FILES = "interventions_image{i}.png"  # what an exported script opens (the window saves the pictures beside it)


def export_vlm_code(folder: str, images, text: str, spec, ckpt, *, allowed=None, means=None, clean_text=None,
                    image_files=None) -> dict:
    """{"pytorch": script or "", "pytorch_problem": why not or "", "lens": "", "lens_problem": why not, "images":
    the pictures the script opens, "image_files": their names}: the forward-hook script of
    :func:`attnviz.checkpoints.intervention_vlm_code.vlm_script` reproducing ``spec`` on ``images`` + ``text``
    (a patch takes ``clean_text``). ``image_files`` (default :data:`IMAGE_FILES`) are the paths the script opens;
    save ``images`` there. A request attnviz itself refuses is one CheckpointError line; what the script cannot
    express the same way is said in ``pytorch_problem``."""
    from attnviz.checkpoints.intervention_study import check_means, knockout
    from attnviz.checkpoints.intervention_vlm_code import vlm_script
    from attnviz.checkpoints.interventions import check_head

    check_vlm(ckpt)
    c = ckpt.spec.text
    images = list(images) if images is not None else []
    files = list(image_files) if image_files is not None else [IMAGE_FILES.format(i=i) for i in range(len(images))]
    if len(files) != len(images):
        raise CheckpointError(f"{len(images)} pictures but {len(files)} file names for the script")
    out = {"pytorch": "", "pytorch_problem": "", "lens": "", "images": images, "image_files": files,
           "lens_problem": "TransformerLens has no vision-language models; the PyTorch script holds these edits"}
    inp = vlm_input(ckpt, images, text)
    T = inp.T
    heads = [check_head(c, layer, h) for layer, h in spec.heads]
    if spec.mode not in ("zero", "mean", "scale"):
        raise CheckpointError(f"intervention mode {spec.mode!r}: choose zero, mean or scale")
    ablate = {lh: spec.mode for lh in heads} if spec.mode in ("zero", "mean") else {}
    if spec.mode == "mean" and means is not None:
        m = check_means(c, means)
        ablate = {lh: m[lh] for lh in heads}
    scale = {lh: float(spec.factor) for lh in heads} if spec.mode == "scale" else {}
    ko = None
    if spec.knockout_layers:
        ko = knockout(c, allowed, T, spec.knockout_layers, spec.knockout_heads)
        own = own_mask(inp)
        for layer, removed in ko.items():
            left = own & ~np.asarray(removed)
            if not left.any(axis=-1).all():
                out["pytorch_problem"] = (f"the knockout leaves a query of layer {layer} no key at all: attnviz gives "
                                          "that row no weight, transformers spreads it over the removed keys; keep a "
                                          "key in every row to export it")
                return out
    kw = {}
    if spec.patch != "none":
        if not isinstance(clean_text, str) or not clean_text.strip():
            raise CheckpointError("a patch needs the clean prompt: type it in the clean prompt field")
        clean = vlm_input(ckpt, images, clean_text, inp.weights)
        if clean.T != T:
            raise CheckpointError(f"the clean prompt has {clean.T} tokens and the corrupted one {T} (with the "
                                  "picture's): patching needs the same length")
        kw = {"clean_prompt": clean_text, "clean_ids": clean.prefix.ids.tolist()}
        if spec.patch == "head":
            kw["patch_head"] = check_head(c, spec.patch_layer, spec.patch_head)
        elif spec.patch == "residual":
            layer, _ = check_head(c, spec.patch_layer, 0)
            pos = [int(p) for p in spec.patch_positions]
            if pos and max(pos) >= T:
                raise CheckpointError(f"patch position {max(pos)} is out of range: the prompt has {T} tokens "
                                      f"(0 to {T - 1})")
            kw["patch_residual"] = (layer, pos or None)
        else:
            raise CheckpointError(f"patch {spec.patch!r}: choose none, head or residual")
    out["pytorch"] = vlm_script(str(folder), files, text, inp.prefix.ids.tolist(), family=ckpt.family, ablate=ablate,
                                scale=scale, knockout=ko, **kw)
    return out
