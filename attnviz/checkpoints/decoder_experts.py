"""The experts a mixture-of-experts decoder (Mixtral, Qwen2-MoE, Qwen3-MoE) routes each token to, layer by layer."""

from __future__ import annotations

import numpy as np

from attnviz.checkpoints.decoder import forward_decoder
from attnviz.checkpoints.decoder_moe import recording_experts
from attnviz.checkpoints.errors import CheckpointError
from attnviz.checkpoints.model_config import ModelConfig


def routed_experts(c: ModelConfig, weights, ids, **kw) -> tuple[np.ndarray, np.ndarray]:
    """(experts (L, T, k) int64, weights (L, T, k)) the routers pick for each layer and token of ``ids`` (T,),
    the most probable first; -1 and 0 on the layers that keep a dense MLP. ``kw`` go to
    :func:`~attnviz.checkpoints.decoder.forward_decoder`."""
    m = c.decoder.moe if c.decoder is not None else None
    if m is None:
        raise CheckpointError(f"{c.model_type} has no mixture of experts: it routes no tokens")
    T = int(np.size(ids))
    experts = np.full((c.n_layer, T, m.top_k), -1, dtype=np.int64)  # (L, T, k)
    probs = np.zeros((c.n_layer, T, m.top_k), dtype=kw.get("dtype", np.float32))  # (L, T, k)
    with recording_experts() as rec:
        forward_decoder(c, weights, ids, **kw)
    for layer, calls in rec.items():
        experts[layer] = np.concatenate([e for e, _ in calls])
        probs[layer] = np.concatenate([w for _, w in calls])
    return experts, probs
