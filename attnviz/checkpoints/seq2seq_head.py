"""The language-model head of the encoder-decoders: the decoder's last hidden states -> next-token logits
over the target vocabulary, as transformers 5.24 computes them.

* BART, mBART, MarianMT: ``hidden @ W.T + final_logits_bias``, W the stored ``lm_head.weight`` when the
  config unties it (``tie_word_embeddings`` false), else the decoder's token table;
* T5: the shared table (transformers 5 ties T5's head to ``shared`` always), the hidden states first times
  d_model^-0.5 when config.json's ``scale_decoder_outputs`` says so (older files: unless
  ``tie_word_embeddings`` is false);
* mT5: the shared table, unscaled.
"""

from __future__ import annotations

import numpy as np

from attnviz.checkpoints.decoder import _W
from attnviz.checkpoints.errors import CheckpointError
from attnviz.checkpoints.layers import linear
from attnviz.checkpoints.parts import Part, PartView

HEAD_PREFIXES = ("",)  # lm_head.weight and final_logits_bias sit beside "model." in the file


def head_part(s) -> Part:
    """The head's tensors, every one optional (a tied head reads the token table instead)."""
    names = {"lm_head.weight": (s.dec_vocab_size, s.d_model)}
    if not s.t5_like:
        names["final_logits_bias"] = (1, s.dec_vocab_size)
    return Part("head", names, HEAD_PREFIXES, optional=frozenset(names))


def next_token_logits(ckpt, hidden: np.ndarray, dtype=None) -> np.ndarray:
    """(T, V) logits of every decoder row's next token from its last hidden states (T, d_model)."""
    s = ckpt.spec
    hidden = np.asarray(hidden)
    if hidden.ndim != 2 or hidden.shape[1] != s.d_model:
        raise CheckpointError(f"hidden must be (T, {s.d_model}): the decoder's last hidden states (got {hidden.shape})")
    dtype = np.dtype(dtype or hidden.dtype).type
    head = _W(PartView(ckpt.weights, "head"), dtype)
    body = _W(PartView(ckpt.weights, "s2s"), dtype)
    x = hidden.astype(dtype, copy=False)  # (T, C)
    table = "shared.weight" if s.shared_embeddings else "decoder.embed_tokens.weight"
    if s.t5_like:
        if s.scale_logits:
            x = x * dtype(s.d_model ** -0.5)
        return linear(x, body.matrix(table), None)  # (T, V)
    untied = not s.tied_head and "lm_head.weight" in PartView(ckpt.weights, "head")
    w = head.matrix("lm_head.weight") if untied else body.matrix(table)
    bias = head["final_logits_bias"][0] if "final_logits_bias" in PartView(ckpt.weights, "head") else None
    return linear(x, w, bias)  # (T, V)
