"""Interventions on a decoder LLM's (or GPT-2's) forward pass: ablate or scale heads, knock out attention edges,
patch a head's output or the residual stream from a second input; and what they change.

A head's output is its attention-weighted values (nh, T, hd) before the output projection, as a PyTorch
forward pre-hook on ``o_proj`` (GPT-2: ``attn.c_proj``) sees them (head h: columns h * hd .. (h + 1) * hd of
its input). Zero ablation sets it to 0, mean ablation to its mean over the input's positions (or given means,
e.g. a corpus's), scaling multiplies it. A knockout removes edges (query i may not see key j) before the softmax,
so each row renormalises over what is left; a row left with no key gets weights 0 and output 0. Patching
copies a head's output, or the residual stream entering a layer at chosen positions, from a clean input of
the same length.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from attnviz.checkpoints.decoder import _W, _check_ids, embed_scale
from attnviz.checkpoints.errors import CheckpointError
from attnviz.checkpoints.generate import KVCache, _chunk, logits
from attnviz.checkpoints.layers import merge_heads, split_heads

MODES = ("zero", "mean")


@dataclass
class Edit:
    """What to change in one pass (see the module doc). Heads are (layer, head) pairs."""

    ablate: dict = field(default_factory=dict)  # (layer, head) -> "zero" | "mean" | means (hd,) array
    scale: dict = field(default_factory=dict)  # (layer, head) -> factor
    knockout: dict = field(default_factory=dict)  # layer -> bool (T, T) or (nh, T, T): True = edge removed
    patch_heads: dict = field(default_factory=dict)  # (layer, head) -> (T, hd) output to put in
    patch_residual: dict = field(default_factory=dict)  # layer -> (positions, rows (len, C))
    record: dict | None = None  # when a dict: layer -> (nh, T, hd) head outputs of this pass (before edits)
    stream: list | None = None  # when a list: the stream entering each layer (an encoder's pass records it here)

    def residual(self, i: int, x: np.ndarray) -> np.ndarray:
        if i in self.patch_residual:
            pos, rows = self.patch_residual[i]
            x = x.copy()
            x[pos] = rows
        if self.stream is not None:
            self.stream.append(x)
        return x

    def mask(self, i: int, m: np.ndarray | None) -> np.ndarray | None:
        """Layer i's mask with the knocked-out edges removed; ``m`` None (an encoder that sees every key) is
        every edge."""
        ko = self.knockout.get(i)
        if ko is None:
            return m
        if m is None:
            return np.ascontiguousarray(~ko)
        return m & ~ko[..., :m.shape[-2], :m.shape[-1]]

    def merged(self, i: int, ctx: np.ndarray, nh: int) -> np.ndarray:
        """:meth:`heads` on the heads' merged outputs ctx (T, nh * hd), as an encoder's pass holds them."""
        out = self.heads(i, split_heads(ctx, nh))  # (nh, T, hd)
        return np.ascontiguousarray(merge_heads(out), dtype=ctx.dtype)

    def heads(self, i: int, out: np.ndarray) -> np.ndarray:
        if self.record is not None:
            self.record[i] = out.copy()
        mine = [(h, v) for (layer, h), v in self.ablate.items() if layer == i]
        scaled = [(h, f) for (layer, h), f in self.scale.items() if layer == i]
        patched = [(h, v) for (layer, h), v in self.patch_heads.items() if layer == i]
        if not (mine or scaled or patched):
            return out
        out = out.copy()
        for h, how in mine:
            if isinstance(how, str):
                out[h] = 0.0 if how == "zero" else out[h].mean(axis=0, keepdims=True)
            else:
                out[h] = np.asarray(how, dtype=out.dtype)[None, :]
        for h, f in scaled:
            out[h] *= out.dtype.type(f)
        for h, v in patched:
            out[h] = v
        return out


@dataclass(frozen=True, eq=False)
class Pass:
    """One (edited) pass: the last position's logits, every map, the residual streams, the heads' outputs."""

    logits: np.ndarray  # (vocab,) float64 at the last position
    attentions: np.ndarray  # (L, nh, T, T)
    stream: np.ndarray  # (L + 1, T, C) entering each layer and leaving the last
    heads: dict  # layer -> (nh, T, hd) before the edit (when recorded)


def check_head(c, layer, head) -> tuple[int, int]:
    """(layer, head) as ints, or one line naming the range."""
    for what, v, n in (("layer", layer, c.n_layer), ("head", head, c.n_head)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or not 0 <= v < n:
            raise CheckpointError(f"{what} {v!r} is out of range: the model has {n} {what}s (0 to {n - 1})")
    return int(layer), int(head)


def parse_heads(c, text: str) -> list[tuple[int, int]]:
    """``"0.1,3.2"`` -> [(0, 1), (3, 2)] checked against the model."""
    out = []
    for part in (p.strip() for p in str(text).split(",")):
        bits = part.split(".")
        if len(bits) != 2 or not all(b.strip().lstrip("-").isdigit() for b in bits):
            raise CheckpointError(f"{part!r} is not a head: write LAYER.HEAD, e.g. 0.3 (several: 0.3,2.1)")
        out.append(check_head(c, int(bits[0]), int(bits[1])))
    if not out:
        raise CheckpointError("no heads given: write LAYER.HEAD, e.g. 0.3")
    return out


def run(c, weights, ids, edit: Edit | None = None) -> Pass:
    """The decoder LLM (or GPT-2) over ``ids`` (T,) with ``edit`` applied (None: the plain pass)."""
    if np.size(ids) == 0:
        raise CheckpointError("an intervention needs at least one token")
    ids = _check_ids(c, ids)
    T = ids.size
    edit = edit or Edit()
    _check_edit(c, edit, T)
    if getattr(c, "kind", None) == "gpt2":
        from attnviz.checkpoints.intervention_gpt2 import gpt2_pass

        z, rows, stream = gpt2_pass(c, weights, ids, edit)
        return Pass(logits=z, attentions=rows, stream=stream, heads=dict(edit.record or {}))
    W = _W(weights, np.float32)
    x = W.rows("embed_tokens.weight", ids)
    scale = embed_scale(c, np.float32)
    if scale is not None:
        x = x * scale
    stream: list = []
    hidden, rows = _chunk(c, W, np.ascontiguousarray(x, dtype=np.float32), 0,
                          KVCache([None] * c.n_layer, [None] * c.n_layer), "auto", stream, edit)
    return Pass(logits=logits(c, weights, hidden[-1:])[0], attentions=rows, stream=np.stack(stream),
                heads=dict(edit.record or {}))


def _check_edit(c, e: Edit, T: int) -> None:
    hd = c.decoder.head_dim if getattr(c, "decoder", None) is not None else c.head_size
    for (layer, head), how in e.ablate.items():
        check_head(c, layer, head)
        if isinstance(how, str):
            if how not in MODES:
                raise CheckpointError(f"ablation mode {how!r}: choose {' or '.join(MODES)}")
        elif np.shape(how) != (hd,) or not np.isfinite(how).all():
            raise CheckpointError(f"the means of head {layer}.{head} must be {hd} finite numbers")
    for (layer, head), f in e.scale.items():
        check_head(c, layer, head)
        if isinstance(f, bool) or not isinstance(f, (int, float, np.floating)) or not np.isfinite(f):
            raise CheckpointError(f"the scale of head {layer}.{head} must be a finite number (got {f!r})")
    for layer, ko in e.knockout.items():
        check_head(c, layer, 0)
        shape = np.shape(ko)
        if shape not in ((T, T), (c.n_head, T, T)) or np.asarray(ko).dtype != bool:
            raise CheckpointError(f"the knockout mask of layer {layer} is {shape}; it must be bool ({T}, {T}) "
                                  f"or ({c.n_head}, {T}, {T}) for these {T} tokens")
    for (layer, head), v in e.patch_heads.items():
        check_head(c, layer, head)
        if np.shape(v) != (T, hd):
            raise CheckpointError(f"the patch of head {layer}.{head} is {np.shape(v)}; it must be ({T}, {hd}): "
                                  "the clean and the corrupted input must have the same length")
    for layer, (pos, rows) in e.patch_residual.items():
        check_head(c, layer, 0)
        if np.shape(rows) != (np.size(pos), c.d_model):
            raise CheckpointError(f"the residual patch of layer {layer} must be (positions, {c.d_model})")


def softmax(z: np.ndarray) -> np.ndarray:
    p = np.exp(z - z.max())
    return p / p.sum()


def kl_divergence(before: np.ndarray, after: np.ndarray) -> float:
    """KL(before || after) in nats of the next-token distributions of two logit vectors."""
    p, q = softmax(before), softmax(after)
    keep = p > 0
    return float(np.sum(p[keep] * (np.log(p[keep]) - np.log(np.maximum(q[keep], 1e-300)))))


def ablate(c, weights, ids, heads, mode: str = "zero") -> tuple[Pass, Pass]:
    """(before, after) of ablating ``heads`` [(layer, head), ...] with ``mode`` ("zero" or "mean")."""
    if mode not in MODES:
        raise CheckpointError(f"ablation mode {mode!r}: choose {' or '.join(MODES)}")
    before = run(c, weights, ids)
    after = run(c, weights, ids, Edit(ablate={check_head(c, *h): mode for h in heads}))
    return before, after


def patch_head(c, weights, clean_ids, corrupted_ids, layer: int, head: int) -> tuple[Pass, Pass, Pass]:
    """(clean, corrupted, patched): the corrupted input's pass with head ``layer.head``'s output taken
    from the clean input's pass (same length)."""
    layer, head = check_head(c, layer, head)
    if np.size(clean_ids) != np.size(corrupted_ids):
        raise CheckpointError(f"the clean input has {np.size(clean_ids)} tokens and the corrupted one "
                              f"{np.size(corrupted_ids)}: patching needs the same length")
    rec: dict = {}
    clean = run(c, weights, clean_ids, Edit(record=rec))
    corrupted = run(c, weights, corrupted_ids)
    patched = run(c, weights, corrupted_ids, Edit(patch_heads={(layer, head): rec[layer][head]}))
    return clean, corrupted, patched


def head_importance(c, weights, ids, metric=None, mode: str = "zero", cancelled=None, progress=None) -> np.ndarray:
    """(L, nh): the effect of ablating each head alone on ``metric(before, after)`` (default: the KL
    divergence of the next-token distributions). ``cancelled()`` stops the sweep (the rest stay NaN)."""
    metric = metric or (lambda b, a: kl_divergence(b.logits, a.logits))
    before = run(c, weights, ids)
    grid = np.full((c.n_layer, c.n_head), np.nan)
    for layer in range(c.n_layer):
        for head in range(c.n_head):
            if cancelled is not None and cancelled():
                return grid
            after = run(c, weights, ids, Edit(ablate={(layer, head): mode}))
            grid[layer, head] = metric(before, after)
            if progress is not None:
                progress(layer * c.n_head + head + 1, c.n_layer * c.n_head)
    return grid


# ---- encoders and vision models -------------------------------------------------------------------------

ENCODER_KINDS = ("bert", "vit")  # BERT family (BERT, RoBERTa, XLM-R, ELECTRA, DistilBERT) and vision transformers


@dataclass(frozen=True, eq=False)
class EncoderPass:
    """One (edited) pass of an encoder or a vision model."""

    attentions: np.ndarray  # (L, nh, T, T)
    hidden: np.ndarray  # (T, C) the base model's last hidden state
    stream: np.ndarray  # (L + 1, T, C) entering each layer, then the last hidden state
    heads: dict  # layer -> (nh, T, hd) before the edit (when recorded)
    n_extra: int  # tokens before the patches (vision: 1 class token, 2 for DeiT, 0 for SigLIP); text: 1 ([CLS] / <s>)
    grid: tuple[int, int] | None = None  # (gh, gw) patch grid of a vision model

    @property
    def pooled(self) -> np.ndarray:
        """(C,) float64: the class token's last hidden state ([CLS], <s>, ViT's class token); the mean over the
        tokens for a model without one (SigLIP)."""
        h = self.hidden.astype(np.float64)
        return h[0] if self.n_extra else h.mean(axis=0)


def check_encoder(c) -> None:
    if getattr(c, "kind", None) not in ENCODER_KINDS:
        raise CheckpointError(f"a {getattr(c, 'model_type', '?')} model is not an encoder or a vision model; these "
                              "interventions run on the BERT family and on vision transformers")


def encoder_run(c, weights, x, edit: Edit | None = None) -> EncoderPass:
    """An encoder over token ids ``x`` (T,), or a vision model over preprocessed pixels ``x`` (C, H, W), with
    ``edit`` applied (ablation, scaling, knockout; None: the plain pass)."""
    from attnviz.checkpoints.encoders import forward_encoder
    from attnviz.checkpoints.families import ENCODER_TYPES
    from attnviz.checkpoints.forward import forward_bert
    from attnviz.checkpoints.vision import forward_vision

    check_encoder(c)
    edit = edit or Edit()
    stream: list = []
    edit = Edit(ablate=edit.ablate, scale=edit.scale, knockout=edit.knockout, patch_heads=edit.patch_heads,
                patch_residual=edit.patch_residual, record=edit.record, stream=stream)
    grid = None
    if c.kind == "bert":
        ids = np.asarray(x)
        if ids.ndim != 1 or ids.size == 0 or not np.issubdtype(ids.dtype, np.integer):
            raise CheckpointError("an intervention on a text encoder needs at least one token id")
        if ids.min() < 0 or ids.max() >= c.vocab_size:
            raise CheckpointError(f"token id {int(ids.max())} is outside the model's {c.vocab_size}-row embedding table")
        ids = ids.astype(np.int64)
        T = ids.size
        _check_edit(c, edit, T)
        fwd = forward_encoder if c.model_type in ENCODER_TYPES else forward_bert
        atts, hidden = fwd(c, weights, ids, edit=edit)
        n_extra = 1
    else:
        pixels = np.asarray(x, dtype=np.float32)
        if pixels.ndim != 3:
            raise CheckpointError(f"a vision model's input is (channels, height, width) pixels, got {pixels.shape}")
        gh, gw = pixels.shape[1] // c.patch_size[0], pixels.shape[2] // c.patch_size[1]
        _check_edit(c, edit, c.n_extra + gh * gw)
        atts, hidden, grid = forward_vision(c, weights, pixels, edit=edit)
        n_extra = c.n_extra
    return EncoderPass(attentions=atts, hidden=hidden, stream=np.stack(stream[:c.n_layer] + [hidden]),
                       heads=dict(edit.record or {}), n_extra=n_extra, grid=grid)


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    """Cosine similarity of two vectors in float64 (1 when both are zero, 0 when only one is)."""
    a, b = np.asarray(a, dtype=np.float64).ravel(), np.asarray(b, dtype=np.float64).ravel()
    na, nb = np.linalg.norm(a), np.linalg.norm(b)
    if na == 0 or nb == 0:
        return 1.0 if na == nb else 0.0
    return float(np.clip(a @ b / (na * nb), -1.0, 1.0))
