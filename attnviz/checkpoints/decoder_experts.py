"""The experts a mixture-of-experts decoder (Mixtral, Qwen2-MoE, Qwen3-MoE) routes each token to, layer by layer."""

from __future__ import annotations

import numpy as np

from attnviz.checkpoints.decoder import forward_decoder
from attnviz.checkpoints.decoder_moe import recording_experts
from attnviz.checkpoints.errors import CheckpointError
from attnviz.checkpoints.model_config import CheckpointConfig


def routed_experts(c: CheckpointConfig, weights, ids, **kw) -> tuple[np.ndarray, np.ndarray]:
    """(experts (L, T, k) int64, weights (L, T, k)) the routers pick for each layer and token of ``ids`` (T,),
    the most probable first; -1 and 0 on the layers that keep a dense MLP. ``kw`` go to
    :func:`~attnviz.checkpoints.decoder.forward_decoder`."""
    m = c.decoder.moe if c.decoder is not None else None
    if m is None:
        raise CheckpointError(f"{c.model_type} has no mixture of experts: it routes no tokens")
    with recording_experts() as rec:
        forward_decoder(c, weights, ids, **kw)
    return experts_from_record(c, rec, int(np.size(ids)), kw.get("dtype", np.float32))


def experts_from_record(c: CheckpointConfig, rec: dict, T: int, dtype=np.float32) -> tuple[np.ndarray, np.ndarray]:
    """(experts (L, T, k) int64, weights (L, T, k)) of what :func:`recording_experts` kept over a pass of T tokens
    (each layer's calls in order: chunks of a cached pass follow each other); -1 and 0 on the dense layers."""
    m = c.decoder.moe
    experts = np.full((c.n_layer, T, m.top_k), -1, dtype=np.int64)  # (L, T, k)
    probs = np.zeros((c.n_layer, T, m.top_k), dtype=dtype)  # (L, T, k)
    for layer, calls in rec.items():
        experts[layer] = np.concatenate([e for e, _ in calls])
        probs[layer] = np.concatenate([w for _, w in calls])
    return experts, probs


def routing_note(experts: np.ndarray, weights: np.ndarray, layer: int, token: int, label: str = "") -> str:
    """What the router of ``layer`` chose for ``token``, for a tooltip: "L1 · token 3 'cat': expert 5 (0.62),
    expert 2 (0.38)", or that the layer has a dense MLP (``experts`` (L, T, k) -1 there)."""
    head = f"L{layer} · token {token}" + (f" {label!r}" if label else "")
    row = experts[layer, token]
    if (row < 0).all():
        return f"{head}: a dense MLP (no router in this layer)"
    picks = ", ".join(f"expert {int(e)} ({float(w):.2f})" for e, w in zip(row, weights[layer, token]))
    return f"{head}: {picks}"


def run_routing(result) -> tuple[np.ndarray, np.ndarray] | None:
    """(experts (L, T, k), weights (L, T, k)) kept by a mixture-of-experts run — a ModelAttention whose
    ``decoder`` holds them, or a long input's DecoderAttention itself — or None for any other run."""
    if result is None:
        return None
    dec = getattr(result, "decoder", None) or result
    experts = getattr(dec, "experts", None)
    if experts is None:
        return None
    return experts, dec.expert_weights


def expert_load(experts: np.ndarray, layer: int, n_experts: int) -> np.ndarray:
    """(n_experts,) int: how many of the tokens the router of ``layer`` sends to each expert (any of its top-k)."""
    row = experts[layer].ravel()
    return np.bincount(row[row >= 0], minlength=n_experts)[:n_experts]
