"""Run a loaded checkpoint on text or an image and return every layer's and head's attention.

:func:`run_text` tokenises with the checkpoint's own ``tokenizer.json`` (its post-processor adds
BERT's ``[CLS]`` ... ``[SEP]``; GPT-2 adds nothing) and :func:`run_image` preprocesses with the
checkpoint's own ``preprocessor_config.json``.  Both return a :class:`ModelAttention` holding
everything a view needs: token labels, which tokens are special, attentions (L, nh, T, T), the last
hidden state, and for ViT the patch grid and the number of tokens before the patches (0 for SigLIP,
whose tokens are all patches: no token of it is special).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attnviz.checkpoints.encoders import forward_encoder
from attnviz.checkpoints.errors import CheckpointError
from attnviz.checkpoints.families import ENCODER_TYPES
from attnviz.checkpoints.forward import forward_bert, forward_gpt2
from attnviz.checkpoints.layers import AUTO, KERNEL_CHOICES
from attnviz.checkpoints.loader import Checkpoint
from attnviz.checkpoints.preprocess import preprocess_image
from attnviz.checkpoints.vision import forward_vision
from attnviz.sources.errors import SourceError

DEFAULT_KERNEL = AUTO  # flash, or naive for soft-capped scores (layers.pick_kernel)


@dataclass(frozen=True, eq=False)
class ModelAttention:
    """One forward pass of a checkpoint: the tokens and every attention map."""

    model: str  # checkpoint display name
    kind: str  # "bert" | "gpt2" | "vit"
    tokens: list[str]  # (T,) token text: decoded pieces for text, "[CLS]" / "[DIST]" / "r,c" patches for ViT (SigLIP: "r,c" only)
    labels: list[str]  # (T,) tokens with whitespace made visible, for plot axes
    special: np.ndarray  # (T,) bool: [CLS], [SEP], <|endoftext|>, ViT's extra tokens
    attentions: np.ndarray  # (L, nh, T, T) softmax weights, rows = queries, columns = keys
    hidden: np.ndarray  # (T, d_model) last hidden state, as the Hugging Face base model returns it
    ids: np.ndarray | None = None  # (T,) int64 vocabulary ids (text models)
    spans: list[tuple[int, int]] | None = None  # (T,) character offsets into the text (text models)
    grid: tuple[int, int] | None = None  # (gh, gw) ViT patch grid; patch r, c is token n_extra + r * gw + c
    n_extra_tokens: int = 0  # ViT tokens before the patches: 1 ([CLS]), 2 (DeiT: [CLS], distillation), 0 (SigLIP)
    pixels: np.ndarray | None = None  # (3, H, W) float32 preprocessed image the ViT saw
    decoder: object = None  # decoder LLMs: the decoder_run.DecoderAttention (kv head of each head, summaries)
    # name -> (L, nh, T, T) score terms whose sum the softmax takes, for models whose scores are a sum of parts
    # (MPNet, BEiT: "content" and "position bias"); None for the others
    score_terms: dict | None = None

    @property
    def shape(self) -> tuple[int, int, int, int]:
        """(L, nh, T, T)."""
        return tuple(self.attentions.shape)


def _dtype(dtype):
    try:
        dt = None if dtype is None else np.dtype(dtype)
    except TypeError:
        dt = None
    if dt is None or dt.type not in (np.float32, np.float64):
        raise CheckpointError(f"forward dtype must be float32 or float64 (got {dtype!r})")
    return dt.type


def _kernel(kernel: str) -> str:
    if kernel not in KERNEL_CHOICES:
        raise CheckpointError(f"attention kernel {kernel!r} is not available (available: {', '.join(KERNEL_CHOICES)})")
    return kernel


def run_text(ckpt: Checkpoint, text: str, *, dtype=np.float32, kernel: str = DEFAULT_KERNEL) -> ModelAttention:
    """Tokenise ``text`` with the checkpoint's tokenizer and run the BERT-family, GPT-2 or decoder forward pass."""
    if ckpt.kind == "decoder":
        from attnviz.checkpoints.decoder_run import run_decoder

        dec = run_decoder(ckpt, text, dtype=_dtype(dtype), kernel=_kernel(kernel), mode="weights")
        return ModelAttention(model=ckpt.name, kind="decoder", tokens=dec.tokens, labels=dec.labels,
                              special=dec.special, attentions=dec.attentions, hidden=dec.hidden, ids=dec.ids,
                              spans=dec.spans, decoder=dec)
    if ckpt.kind not in ("bert", "gpt2"):
        raise CheckpointError(f"{ckpt.name} is a {ckpt.config.model_type} image model: give it an image, not text")
    dt, kernel = _dtype(dtype), _kernel(kernel)
    c = ckpt.config
    try:
        toks = ckpt.tokenizer.encode(text, add_special_tokens=True, max_tokens=c.max_tokens)
    except SourceError as exc:
        raise CheckpointError(f"{ckpt.name}: {exc}") from None
    if toks.ids.max() >= c.vocab_size:
        raise CheckpointError(f"token id {int(toks.ids.max())} is outside the model's {c.vocab_size}-row embedding table")
    terms: dict = {}
    if c.model_type in ENCODER_TYPES:
        atts, hidden = forward_encoder(c, ckpt.weights, toks.ids, dtype=dt, kernel=kernel, terms=terms)
    elif ckpt.kind == "bert":
        atts, hidden = forward_bert(c, ckpt.weights, toks.ids, dtype=dt, kernel=kernel)
    else:
        atts, hidden = forward_gpt2(c, ckpt.weights, toks.ids, dtype=dt, kernel=kernel)
    return ModelAttention(
        model=ckpt.name, kind=ckpt.kind, tokens=list(toks.pieces), labels=toks.labels(),
        special=np.asarray(toks.special, dtype=bool), attentions=atts, hidden=hidden,
        ids=toks.ids, spans=list(toks.spans), score_terms=terms or None,
    )


def patch_labels(grid: tuple[int, int], n_extra: int, n_registers: int = 0) -> list[str]:
    """Token labels of a ViT sequence: "[CLS]" (and "[DIST]"), DINOv2's register tokens "[REG0]" ... (counted in
    n_extra), then "r,c" for each patch, row-major (n_extra 0: patches only)."""
    extra = ["[CLS]", "[DIST]"][:n_extra - n_registers] + [f"[REG{i}]" for i in range(n_registers)]
    return extra + [f"{r},{c}" for r in range(grid[0]) for c in range(grid[1])]


def run_image(ckpt: Checkpoint, image, *, dtype=np.float32, kernel: str = DEFAULT_KERNEL) -> ModelAttention:
    """Preprocess an (H, W, 3) uint8 image as the checkpoint says and run the ViT forward pass; the extra tokens
    ([CLS], [DIST]) are the special ones, so a SigLIP sequence has none."""
    if ckpt.kind != "vit":
        raise CheckpointError(f"{ckpt.name} is a {ckpt.config.model_type} text model: give it text, not an image")
    dt, kernel = _dtype(dtype), _kernel(kernel)
    c = ckpt.config
    pixels = preprocess_image(image, ckpt.image)  # (3, H, W)
    terms: dict = {}
    atts, hidden, grid = forward_vision(c, ckpt.weights, pixels, dtype=dt, kernel=kernel, terms=terms)
    labels = patch_labels(grid, c.n_extra, c.n_registers)
    special = np.zeros(len(labels), dtype=bool)  # (T,)
    special[: c.n_extra] = True
    return ModelAttention(
        model=ckpt.name, kind="vit", tokens=labels, labels=list(labels), special=special, attentions=atts,
        hidden=hidden, grid=grid, n_extra_tokens=c.n_extra, pixels=pixels, score_terms=terms or None,
    )
