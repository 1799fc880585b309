"""What the window's Intervene tab computes, without Qt: a session's interventions (an object with the fields of
``attnviz.model.state.Interventions``: heads, mode, factor, knockout layers and heads, patch kind, layer,
head and positions, the clean prompt) turned into one :class:`~attnviz.checkpoints.interventions.Edit` of a
decoder LLM's pass, the pass before and after it, and what changed: the next-token top-k with
probabilities, the KL divergence, the logit difference of two tokens, every layer's attention before,
after and their difference, and the residual stream's change entering each layer. The head-importance
sweep ablates every head in turn and ranks them. Every problem a person can cause is one
:class:`CheckpointError` line.

Encoders (the BERT family) and vision models (ViT, DeiT, DINOv2, CLIP, SigLIP) take the same heads and
knockout (no patch) through :func:`encoder_study`: the effect is the cosine of the pooled / class-token output
before and after, each token's cosine, the maps, and for a vision model with a class token its attention over
the patches before and after (:class:`EncoderEffects`); their sweep measures 1 - that cosine.

Knockout: the session's mask (bool, True = query i may see key j, as the Mask workspace designs it) must be
(T, T) for the T tokens of the prompt; the edges it forbids are removed before the softmax in the chosen
layers (and heads), on top of the model's own causal mask.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attnviz.checkpoints.errors import CheckpointError
from attnviz.checkpoints.interventions import (ENCODER_KINDS, EncoderPass, Edit, Pass, check_head, cosine,
                                               encoder_run, kl_divergence, run, softmax)

TOP_K = 5
MAPS_BUDGET = 768 << 20  # bytes of (L, nh, T, T) float32 maps one study may hold (before, after, clean)
METRICS = ("kl", "logit_diff", "cosine")  # the sweep's effect measures: KL(before || after), drop of logit(a) -
# logit(b) (decoder LLMs); 1 - cosine of the pooled / class-token output before and after (encoders, vision models)


@dataclass(frozen=True, eq=False)
class Effects:
    """One intervention's passes and what changed."""

    ids: np.ndarray  # (T,) the corrupted (intervened) input
    before: Pass  # the plain pass
    after: Pass  # the pass with the edit
    clean: Pass | None  # the clean prompt's pass (a patch), else None
    kl: float  # KL(before || after) of the next-token distributions, nats
    residual_change: np.ndarray  # (L + 1,) ||after - before|| / ||before|| of the stream entering each layer (and leaving the last)
    applied: tuple[str, ...]  # what was changed, one short phrase each

    def top(self, which: str = "before", k: int = TOP_K) -> list[tuple[int, float]]:
        """The ``k`` most likely next tokens (id, probability) of the pass ``which`` ("before" / "after" / "clean")."""
        return top_k(getattr(self, which).logits, k)

    def logit_difference(self, a: int, b: int) -> tuple[float, float]:
        """(before, after) of logit(a) - logit(b) at the last position."""
        return logit_difference(self.before.logits, a, b), logit_difference(self.after.logits, a, b)

    def attention(self, layer: int, head: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(before, after, after - before) of one head's (T, T) weights."""
        b = self.before.attentions[layer, head].astype(np.float64)
        a = self.after.attentions[layer, head].astype(np.float64)
        return b, a, a - b

    def attention_change(self) -> np.ndarray:
        """(L, nh): the largest absolute change of a weight in each head's map."""
        return np.abs(self.after.attentions.astype(np.float64) - self.before.attentions).max(axis=(2, 3))


@dataclass(frozen=True, eq=False)
class EncoderEffects:
    """One intervention on an encoder or a vision model: its passes and what changed."""

    before: EncoderPass
    after: EncoderPass
    cosine: float  # cosine of the pooled / class-token output before and after (1: unchanged)
    token_cosine: np.ndarray  # (T,) cosine of each token's last hidden state before and after
    residual_change: np.ndarray  # (L + 1,) as Effects.residual_change
    applied: tuple[str, ...]

    attention = Effects.attention
    attention_change = Effects.attention_change

    @property
    def has_overlay(self) -> bool:
        """A vision model with a class token: its attention can be drawn over the picture."""
        return self.before.grid is not None and self.before.n_extra > 0

    def overlay(self, layer: int, head: int) -> tuple[np.ndarray, np.ndarray]:
        """(before, after) (gh, gw): the class token's attention to each patch in ``layer``, ``head``."""
        if not self.has_overlay:
            raise CheckpointError("only a vision model with a class token has a class-token overlay")
        gh, gw = self.before.grid
        n = self.before.n_extra
        return tuple(p.attentions[layer, head, 0, n:].astype(np.float64).reshape(gh, gw)
                     for p in (self.before, self.after))


@dataclass(frozen=True, eq=False)
class Sweep:
    """A head-importance sweep: the metric of each head ablated alone, NaN for heads not reached (cancelled)."""

    grid: np.ndarray  # (L, nh)
    metric: str  # "kl" or "logit_diff"
    mode: str  # how each head was ablated: "zero", "mean" or "scale"

    @property
    def done(self) -> int:
        return int(np.isfinite(self.grid).sum())

    @property
    def complete(self) -> bool:
        return self.done == self.grid.size

    def ranking(self) -> list[tuple[int, int, float]]:
        """(layer, head, value) of every head reached, the largest effect first (by absolute value)."""
        L, nh = self.grid.shape
        cells = [(layer, h, float(self.grid[layer, h])) for layer in range(L) for h in range(nh)
                 if np.isfinite(self.grid[layer, h])]
        return sorted(cells, key=lambda t: (-abs(t[2]), t[0], t[1]))

    def ranks(self) -> np.ndarray:
        """(L, nh) rank of each head (1 = largest effect), 0 where not reached."""
        out = np.zeros(self.grid.shape, dtype=np.int64)
        for r, (layer, h, _v) in enumerate(self.ranking(), start=1):
            out[layer, h] = r
        return out


def top_k(logits: np.ndarray, k: int = TOP_K) -> list[tuple[int, float]]:
    """(token id, probability) of the ``k`` largest probabilities, most likely first (ties: lower id first)."""
    p = softmax(np.asarray(logits, dtype=np.float64))
    order = np.argsort(-p, kind="stable")[:k]
    return [(int(t), float(p[t])) for t in order]


def logit_difference(logits: np.ndarray, a: int, b: int) -> float:
    return float(np.float64(logits[a]) - np.float64(logits[b]))


def token_id(ckpt, text: str) -> int:
    """The vocabulary id a person means by ``text``: ``#123`` an id; else a piece of the vocabulary as written
    (``Ġbank``), or a text the tokenizer makes into exactly one token (`` bank``)."""
    text = str(text)
    vocab = int(ckpt.config.vocab_size)
    if text.strip().startswith("#") and text.strip()[1:].isdigit():
        i = int(text.strip()[1:])
        if not 0 <= i < vocab:
            raise CheckpointError(f"token id {i} is out of range: the vocabulary has {vocab:,} tokens (0 to {vocab - 1:,})")
        return i
    if not text:
        raise CheckpointError("name a token: a piece of the vocabulary, a word that is one token, or #ID")
    tok = ckpt.tokenizer
    direct = tok.token_to_id(text)
    if direct is not None and 0 <= direct < vocab:
        return int(direct)
    ids = tok.encode(text, add_special_tokens=False).ids
    if len(ids) != 1:
        raise CheckpointError(f"{text!r} is {len(ids)} tokens for this tokenizer, not one: write a piece of the "
                              "vocabulary, a word with its leading space, or #ID")
    return int(ids[0])


def check_size(c, T: int, passes: int = 3) -> None:
    """Refuse an input whose every (L, nh, T, T) map, ``passes`` times, would not fit :data:`MAPS_BUDGET`."""
    need = passes * c.n_layer * c.n_head * T * T * 4
    if need > MAPS_BUDGET:
        most = int((MAPS_BUDGET / (passes * c.n_layer * c.n_head * 4)) ** 0.5)
        raise CheckpointError(f"{T:,} tokens are too many for an intervention on this model: every map of every pass "
                              f"is held (at most about {most:,} tokens); shorten the text")


def knockout(c, allowed, T: int, layers, heads=()) -> dict:
    """{layer: removed edges} from the mask ``allowed`` (bool (T, T), or (nh, T, T) per head), restricted to
    ``heads`` of the model (() every head). A mask of another size is one line saying both sizes."""
    if allowed is None:
        raise CheckpointError("there is no mask to knock out edges with: design one in the Mask workspace")
    m = np.asarray(allowed)
    if m.dtype != bool or m.ndim not in (2, 3):
        raise CheckpointError(f"the knockout mask must be a bool (T, T) matrix, got {m.dtype} {m.shape}")
    if m.shape[-2:] != (T, T):
        raise CheckpointError(f"the mask is {m.shape[-2]} x {m.shape[-1]} tokens, the prompt has {T}: design a "
                              f"{T} x {T} mask in the Mask workspace (the same text as a source) or change the prompt")
    if m.ndim == 3:
        if m.shape[0] != c.n_head:
            raise CheckpointError(f"the mask has per-head designs for {m.shape[0]} heads, the model has {c.n_head}")
        removed = ~m  # (nh, T, T)
    else:
        removed = np.broadcast_to(~m, (c.n_head, T, T))
    heads = tuple(int(h) for h in heads)
    for h in heads:
        check_head(c, 0, h)
    if heads:
        keep = np.zeros(c.n_head, dtype=bool)
        keep[list(heads)] = True
        removed = removed & keep[:, None, None]
    removed = np.ascontiguousarray(removed)
    out = {}
    for layer in layers:
        layer, _ = check_head(c, int(layer), 0)
        out[layer] = removed if (heads or m.ndim == 3) else np.ascontiguousarray(~m)
    return out


def build_edit(c, spec, T: int, *, allowed=None, clean: Pass | None = None,
               means=None) -> tuple[Edit, tuple[str, ...]]:
    """The core edit of ``spec`` for T tokens, and a phrase per part of it. ``clean`` is the clean prompt's
    recorded pass, needed by a patch; ``means`` (L, nh, hd), with mode "mean", are the values the heads are set
    to (a corpus's means, :func:`check_means`) instead of their means over this input's positions."""
    e = Edit()
    said = []
    heads = [check_head(c, layer, h) for layer, h in spec.heads]
    if heads:
        names = ", ".join(f"{layer}.{h}" for layer, h in heads)
        if spec.mode == "scale":
            e.scale.update({lh: float(spec.factor) for lh in heads})
            said.append(f"{names} scaled by {spec.factor:g}")
        elif spec.mode == "mean" and means is not None:
            m = check_means(c, means)
            e.ablate.update({lh: m[lh] for lh in heads})
            said.append(f"{names} set to the corpus means")
        elif spec.mode in ("zero", "mean"):
            e.ablate.update({lh: spec.mode for lh in heads})
            said.append(f"{names} {spec.mode}-ablated")
        else:
            raise CheckpointError(f"intervention mode {spec.mode!r}: choose zero, mean or scale")
    if spec.knockout_layers:
        e.knockout.update(knockout(c, allowed, T, spec.knockout_layers, spec.knockout_heads))
        which = "every head" if not spec.knockout_heads else "heads " + ", ".join(map(str, spec.knockout_heads))
        said.append(f"the mask's edges knocked out in layers {', '.join(map(str, spec.knockout_layers))} ({which})")
    if spec.patch != "none":
        if clean is None:
            raise CheckpointError("a patch needs the clean prompt: type it in the clean prompt field")
        if clean.stream.shape[1] != T:
            raise CheckpointError(f"the clean prompt has {clean.stream.shape[1]} tokens and the corrupted one {T}: "
                                  "patching needs the same length")
        if spec.patch == "head":
            layer, h = check_head(c, spec.patch_layer, spec.patch_head)
            e.patch_heads[(layer, h)] = clean.heads[layer][h]
            said.append(f"head {layer}.{h} patched from the clean prompt")
        elif spec.patch == "residual":
            layer, _ = check_head(c, spec.patch_layer, 0)
            pos = np.arange(T) if not spec.patch_positions else np.asarray(spec.patch_positions, dtype=np.int64)
            if pos.size and pos.max() >= T:
                raise CheckpointError(f"patch position {int(pos.max())} is out of range: the prompt has {T} tokens "
                                      f"(0 to {T - 1})")
            e.patch_residual[layer] = (pos, clean.stream[layer][pos])
            where = "every position" if not spec.patch_positions else "positions " + ", ".join(map(str, pos.tolist()))
            said.append(f"the residual stream entering layer {layer} patched from the clean prompt at {where}")
        else:
            raise CheckpointError(f"patch {spec.patch!r}: choose none, head or residual")
    return e, tuple(said)


def residual_change(before: Pass, after: Pass) -> np.ndarray:
    """(L + 1,) relative change ||after - before||_F / ||before||_F of the stream entering each layer."""
    b = before.stream.astype(np.float64)
    d = after.stream.astype(np.float64) - b
    den = np.sqrt((b * b).sum(axis=(1, 2)))
    return np.sqrt((d * d).sum(axis=(1, 2))) / np.maximum(den, np.finfo(np.float64).tiny)


def study(c, weights, ids, spec, *, allowed=None, clean_ids=None, means=None) -> Effects:
    """The plain pass over ``ids``, the pass with ``spec`` applied, and what changed (``means``: see
    :func:`build_edit`)."""
    ids = np.asarray(ids, dtype=np.int64).reshape(-1)
    if ids.size == 0:
        raise CheckpointError("an intervention needs at least one token")
    T = int(ids.size)
    patching = spec.patch != "none"
    check_size(c, T, 3 if patching else 2)
    clean = None
    if patching:
        if clean_ids is None or np.size(clean_ids) == 0:
            raise CheckpointError("a patch needs the clean prompt: type it in the clean prompt field")
        if np.size(clean_ids) != T:
            raise CheckpointError(f"the clean prompt has {np.size(clean_ids)} tokens and the corrupted one {T}: "
                                  "patching needs the same length")
        clean = run(c, weights, clean_ids, Edit(record={}))
    edit, applied = build_edit(c, spec, T, allowed=allowed, clean=clean, means=means)
    before = run(c, weights, ids)
    after = run(c, weights, ids, edit)
    return Effects(ids=ids, before=before, after=after, clean=clean,
                   kl=kl_divergence(before.logits, after.logits),
                   residual_change=residual_change(before, after), applied=applied)


def encoder_study(c, weights, x, spec, *, allowed=None, means=None) -> EncoderEffects:
    """An encoder's or a vision model's plain pass over ``x`` (token ids (T,), or pixels (C, H, W)), the pass with
    ``spec`` applied (ablation, scaling, knockout; a patch runs on decoder LLMs only), and what changed."""
    if spec.patch != "none":
        raise CheckpointError("patching from a clean prompt runs on decoder LLMs; on encoders and vision models "
                              "choose no patch")
    before = encoder_run(c, weights, x)
    T = before.hidden.shape[0]
    check_size(c, T, 2)
    edit, applied = build_edit(c, spec, T, allowed=allowed, means=means)
    after = encoder_run(c, weights, x, edit)
    hb, ha = before.hidden.astype(np.float64), after.hidden.astype(np.float64)
    tok = np.array([cosine(hb[t], ha[t]) for t in range(T)])
    return EncoderEffects(before=before, after=after, cosine=cosine(before.pooled, after.pooled), token_cosine=tok,
                          residual_change=residual_change(before, after), applied=applied)


def head_dim(c) -> int:
    """The size of one head's output (what the output projection reads per head)."""
    return c.decoder.head_dim if getattr(c, "decoder", None) is not None else c.head_size


def check_means(c, means) -> np.ndarray:
    """Per-head output means (L, nh, hd) checked against the model: one line naming both shapes."""
    m = np.asarray(means, dtype=np.float64)
    want = (c.n_layer, c.n_head, head_dim(c))
    if m.shape != want:
        raise CheckpointError(f"the head means are {m.shape}, this model's heads need {want} (layers, heads, head "
                              "size): they come from another model")
    if not np.isfinite(m).all():
        raise CheckpointError("the head means are not all finite numbers")
    return m


def default_metric(c) -> str:
    """The sweep's metric for a model: "cosine" for encoders and vision models, else "kl"."""
    return "cosine" if getattr(c, "kind", None) in ENCODER_KINDS else "kl"


def sweep(c, weights, ids, *, mode: str = "zero", factor: float = 0.0, metric: str = "kl", tokens=None,
          cancelled=None, progress=None, means=None, record: dict | None = None) -> Sweep:
    """Every head ablated alone (``mode`` zero or mean; or scaled by ``factor``): ``metric`` "kl" (KL of the
    next-token distributions, nats) or "logit_diff" (how much logit(a) - logit(b), ``tokens`` = (a, b), drops)
    for a decoder LLM over ids; "cosine" (1 - cosine of the pooled / class-token output) for an encoder over
    ids or a vision model over pixels ``ids`` (C, H, W).
    ``cancelled()`` stops between heads (the rest stay NaN); ``progress(done, total)`` after each head.
    ``means`` (L, nh, hd), with mode "mean": each head is set to these means (e.g. a corpus's) instead of its
    mean over this input's positions. ``record``, a dict, receives the plain pass's head outputs
    (layer -> (nh, T, hd))."""
    if metric not in METRICS:
        raise CheckpointError(f"metric {metric!r}: choose {', '.join(METRICS)}")
    encoder = getattr(c, "kind", None) in ENCODER_KINDS
    if encoder and metric != "cosine":
        raise CheckpointError(f"metric {metric!r} reads next-token logits; an encoder or a vision model is measured by "
                              "the cosine of its pooled output (metric cosine)")
    if not encoder and metric == "cosine":
        raise CheckpointError("the cosine of the pooled output measures encoders and vision models; a decoder LLM is "
                              "measured by kl or logit_diff")
    if mode not in ("zero", "mean", "scale"):
        raise CheckpointError(f"ablation mode {mode!r}: choose zero, mean or scale")
    if mode == "scale" and not np.isfinite(factor):
        raise CheckpointError(f"the scale factor must be a finite number (got {factor!r})")
    if means is not None:
        means = check_means(c, means)
        if mode != "mean":
            raise CheckpointError("head means are for mean ablation: choose mode mean")
    if metric == "logit_diff":
        if tokens is None or len(tokens) != 2:
            raise CheckpointError("the logit difference needs two tokens")
        a, b = (int(t) for t in tokens)
        for t in (a, b):
            if not 0 <= t < c.vocab_size:
                raise CheckpointError(f"token id {t} is out of range: the vocabulary has {c.vocab_size:,} tokens")
    if encoder:
        before = encoder_run(c, weights, ids, Edit(record=record))
        check_size(c, before.hidden.shape[0], 2)
        step = lambda e: encoder_run(c, weights, ids, e)  # noqa: E731
    else:
        ids = np.asarray(ids, dtype=np.int64).reshape(-1)
        check_size(c, int(ids.size), 2)
        before = run(c, weights, ids, Edit(record=record) if record is not None else None)
        step = lambda e: run(c, weights, ids, e)  # noqa: E731
    grid = np.full((c.n_layer, c.n_head), np.nan)
    total = c.n_layer * c.n_head
    for layer in range(c.n_layer):
        for head in range(c.n_head):
            if cancelled is not None and cancelled():
                return Sweep(grid, metric, mode)
            how = mode if means is None else means[layer, head]
            e = Edit(scale={(layer, head): float(factor)}) if mode == "scale" else Edit(ablate={(layer, head): how})
            after = step(e)
            if metric == "kl":
                grid[layer, head] = kl_divergence(before.logits, after.logits)
            elif metric == "cosine":
                grid[layer, head] = 1.0 - cosine(before.pooled, after.pooled)
            else:
                grid[layer, head] = logit_difference(before.logits, a, b) - logit_difference(after.logits, a, b)
            if progress is not None:
                progress(layer * c.n_head + head + 1, total)
    return Sweep(grid, metric, mode)


#: families whose transformers forward takes a 4-D additive attention mask as given (checked against goldens);
#: OPT's positions and BLOOM's ALiBi are derived from the mask, so a knockout there has no mask form
MASK_KNOCKOUT_TYPES = ("llama", "mistral", "qwen2", "qwen3", "gemma", "gemma2", "gemma3_text", "gpt2")


#: encoder and vision families whose exported hook script was run as written (tools/make_encoder_intervention_goldens.py
#: scripts), and BERT, whose transformers module RoBERTa's copies
ENCODER_EXPORT_TYPES = ("bert", "roberta", "xlm-roberta", "electra", "distilbert", "vit", "deit", "dinov2",
                        "clip_vision_model", "siglip_vision_model")
PIXELS_FILE = "interventions_pixels.npy"  # what a vision model's script reads its pixels from (saved beside it)


def export_encoder_code(folder: str, x, spec, c, *, allowed=None, means=None, pixels_file: str = PIXELS_FILE) -> dict:
    """:func:`export_code` for an encoder over token ids ``x`` (T,) or a vision model over pixels ``x`` (C, H, W):
    the PyTorch script of :func:`attnviz.checkpoints.intervention_code.encoder_script` printing the pooled output
    before and after the edits and their cosine; for a vision model ``"pixels"`` holds the (C, H, W) float32 array
    the script reads from ``pixels_file``. For BERT, RoBERTa and XLM-R ``"lens"`` holds the same edits as
    TransformerLens 4 hooks (:func:`attnviz.checkpoints.intervention_code.lens_encoder_script`, printing what the
    PyTorch script prints); for the other models ``"lens_problem"`` says why not."""
    from attnviz.checkpoints.intervention_code import LENS_ENCODER_ADAPTERS, encoder_script, lens_encoder_script

    out = {"pytorch": "", "lens": "", "pytorch_problem": "", "lens_problem": lens_encoder_problem(c, spec)}
    if spec.patch != "none":
        out["pytorch_problem"] = "patching runs on decoder LLMs; choose no patch"
        return out
    if c.model_type not in ENCODER_EXPORT_TYPES:
        out["pytorch_problem"] = (f"the hook script is checked on {', '.join(ENCODER_EXPORT_TYPES)}; a {c.model_type} "
                                  "model keeps its attention output projection elsewhere (or shares it between layers)")
        return out
    heads = [check_head(c, layer, h) for layer, h in spec.heads]
    ablate = {lh: spec.mode for lh in heads} if spec.mode in ("zero", "mean") else {}
    if spec.mode == "mean" and means is not None:
        m = check_means(c, means)
        ablate = {lh: m[lh] for lh in heads}
    scale = {lh: float(spec.factor) for lh in heads} if spec.mode == "scale" else {}
    vision = c.kind == "vit"
    pixels = np.asarray(x, dtype=np.float32) if vision else None
    T = encoder_tokens(c, x)
    ko = None
    if spec.knockout_layers:
        if spec.knockout_heads:
            out["pytorch_problem"] = "a knockout on some heads only is not exported; choose every head to export it"
            return out
        ko = knockout(c, allowed, T, spec.knockout_layers)
    kw = {"pixels": pixels_file} if vision else {"ids": [int(t) for t in np.asarray(x).reshape(-1)]}
    try:
        out["pytorch"] = encoder_script(str(folder), pooled_first=not vision or c.n_extra > 0, ablate=ablate,
                                        scale=scale, knockout=ko, n_layer=c.n_layer, **kw)
    except ValueError as exc:
        out["pytorch_problem"] = str(exc)
    if vision and out["pytorch"]:
        out["pixels"] = np.ascontiguousarray(pixels)
        out["pixels_file"] = pixels_file
    if not out["lens_problem"]:
        try:
            out["lens"] = lens_encoder_script(str(folder), kw["ids"], LENS_ENCODER_ADAPTERS[c.model_type],
                                              ablate=ablate, scale=scale, knockout=ko, n_layer=c.n_layer)
        except ValueError as exc:
            out["lens_problem"] = str(exc)
    return out


def lens_encoder_problem(c, spec) -> str:
    """Why an encoder's or a vision model's interventions have no TransformerLens script ("" when they have one)."""
    from attnviz.checkpoints.intervention_code import LENS_ENCODER_ADAPTERS

    if spec.patch != "none":
        return "patching runs on decoder LLMs; choose no patch"
    if c.kind == "vit":
        return (f"the TransformerLens script is written for decoder LLMs and the text encoders BERT, RoBERTa and "
                f"XLM-R (TransformerLens 4 also adapts ViT and DeiT, not exported yet, and has no adapter for "
                f"DINOv2, CLIP or SigLIP); for {c.model_type} the PyTorch script holds these edits")
    if c.model_type not in LENS_ENCODER_ADAPTERS:
        return (f"TransformerLens 4 has no adapter for {c.model_type}: its TransformerBridge lays out BERT and RoBERTa "
                "(and XLM-R, which has RoBERTa's modules) only, and HookedEncoder was removed in TransformerLens 4.0; "
                "the PyTorch script holds these edits")
    if spec.knockout_layers and spec.knockout_heads:
        return "a knockout on some heads only is not exported; choose every head to export it"
    return ""


def encoder_tokens(c, x) -> int:
    """T: the tokens an encoder sees for ids ``x``, or a vision model for pixels ``x`` (C, H, W)."""
    if c.kind != "vit":
        return int(np.size(x))
    shape = np.shape(x)
    return c.n_extra + (shape[1] // c.patch_size[0]) * (shape[2] // c.patch_size[1])


def export_code(folder: str, ids, spec, c, *, allowed=None, means=None) -> dict[str, str]:
    """{"pytorch": script or "", "lens": script or "", "pytorch_problem": why not or "", "lens_problem": ...}: the
    forward-hook scripts of attnviz.checkpoints.intervention_code reproducing ``spec`` on ``ids``. What a
    snippet cannot express (a patch; a knockout on some layers or heads only, or in a family whose transformers
    forward reads a 4-D mask as something else; for TransformerLens, a family its bridge refuses or that is not
    checked, :func:`lens_decoder_problem`) is said instead of a script that would compute something else. An encoder or a vision model (``ids`` its
    token ids or pixels): :func:`export_encoder_code`. ``means`` (L, nh, hd), with mode "mean": the
    heads are set to these values (a corpus's means), written into the scripts."""
    from attnviz.checkpoints.intervention_code import lens_script, pytorch_script

    if getattr(c, "kind", None) in ENCODER_KINDS:
        return export_encoder_code(folder, ids, spec, c, allowed=allowed, means=means)
    ids = [int(t) for t in np.asarray(ids).reshape(-1)]
    T = len(ids)
    heads = [check_head(c, layer, h) for layer, h in spec.heads]
    ablate = {lh: spec.mode for lh in heads} if spec.mode in ("zero", "mean") else {}
    if spec.mode == "mean" and means is not None:
        m = check_means(c, means)
        ablate = {lh: m[lh] for lh in heads}
    scale = {lh: float(spec.factor) for lh in heads} if spec.mode == "scale" else {}
    out = {"pytorch": "", "lens": "", "pytorch_problem": "", "lens_problem": ""}
    if spec.patch != "none":
        what = "a head's output" if spec.patch == "head" else "the residual stream"
        problem = (f"patching {what} from a clean prompt needs two passes and has no one-hook form here; "
                   "the ablation and knockout parts export once the patch is off")
        out["pytorch_problem"] = out["lens_problem"] = problem
        return out
    ko = None
    if spec.knockout_layers:
        if spec.knockout_heads:
            out["pytorch_problem"] = ("a knockout on some heads only has no attention-mask form; choose every head "
                                      "to export it")
        elif c.model_type not in MASK_KNOCKOUT_TYPES:
            out["pytorch_problem"] = (f"a knockout is exported as a 4-D attention mask, which transformers' "
                                      f"{c.model_type} reads as something else (positions or ALiBi come from the "
                                      "mask); the ablations export once the knockout is off")
        else:
            ko = knockout(c, allowed, T, spec.knockout_layers)
    if not out["pytorch_problem"]:
        try:
            out["pytorch"] = pytorch_script(str(folder), ids, ablate=ablate, scale=scale, knockout=ko,
                                            n_layer=c.n_layer)
        except ValueError as exc:
            out["pytorch_problem"] = str(exc)
    out["lens_problem"] = lens_decoder_problem(c)
    if not out["lens_problem"] and spec.knockout_layers and ko is None:
        out["lens_problem"] = out["pytorch_problem"]  # the knockout goes in as the PyTorch script's 4-D mask
    if not out["lens_problem"]:
        try:
            out["lens"] = lens_script(str(folder), ids, ablate=ablate, scale=scale, knockout=ko, n_layer=c.n_layer)
        except ValueError as exc:
            out["lens_problem"] = str(exc)
    return out


#: decoder families whose exported TransformerLens script was run as written with TransformerLens 4
#: (tools/make_decoder_lens_goldens.py) and gave attnviz's logits
LENS_DECODER_TYPES = ("llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe", "gemma", "gemma2",
                      "gemma3_text", "gpt2", "gpt_neox", "phi3", "olmo", "olmo2", "stablelm", "falcon", "opt",
                      "bloom")


def lens_decoder_problem(c) -> str:
    """Why a decoder LLM has no TransformerLens script ("" when it has one)."""
    t = c.model_type
    d = getattr(c, "decoder", None)
    if t == "phi" and d is not None and d.qk_norm:
        return ("TransformerLens 4's Phi adapter has no LayerNorm of the queries and keys (qk_layernorm), and its "
                "bridge refuses this model; the PyTorch script holds these edits")
    if t == "falcon" and d is not None and d.qkv == "grouped":
        return (f"TransformerLens 4's Falcon adapter splits the fused query-key-value projection for one key-value "
                f"head; this Falcon (new decoder architecture) has {d.n_kv_head}, and the bridge fails; the PyTorch "
                "script holds these edits")
    if t not in LENS_DECODER_TYPES:
        return (f"the TransformerLens script is checked on {', '.join(LENS_DECODER_TYPES)}; {t} is not yet; the "
                "PyTorch script holds these edits")
    return ""
