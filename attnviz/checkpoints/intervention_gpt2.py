"""GPT-2's forward pass with an intervention applied: :func:`attnviz.checkpoints.forward.forward_gpt2` with an
:class:`~attnviz.checkpoints.interventions.Edit` (the stream entering each layer, the causal mask, the heads'
merged outputs before ``attn.c_proj``), the residual streams kept and the last position's logits read through
the tied embedding (transformers' GPT2LMHeadModel; an untied ``lm_head.weight`` when the checkpoint has one).
"""

from __future__ import annotations

import numpy as np

from attnviz.checkpoints.errors import CheckpointError
from attnviz.checkpoints.forward import _Cast, forward_gpt2
from attnviz.checkpoints.layers import linear


def gpt2_pass(c, weights, ids: np.ndarray, edit, kernel: str = "auto"):
    """(logits (vocab,) float64 at the last position, attentions (L, nh, T, T), stream (L + 1, T, C)) of GPT-2
    over token ids (T,) in float32 with ``edit`` applied."""
    T = ids.shape[0]
    if c.max_positions and T > c.max_positions:
        raise CheckpointError(f"{T:,} tokens are more than GPT-2's {c.max_positions:,} learned positions")
    stream: list = []
    atts, hidden = forward_gpt2(c, weights, ids, dtype=np.float32, kernel=kernel, edit=edit, stream=stream)
    W = _Cast(weights, np.float32)
    head = W["lm_head.weight"] if "lm_head.weight" in weights else W["wte.weight"]  # (vocab, C)
    last = np.ascontiguousarray(hidden[-1:], dtype=np.float32)  # (1, C) after ln_f
    return linear(last, head, None)[0].astype(np.float64), atts, np.stack(stream)
