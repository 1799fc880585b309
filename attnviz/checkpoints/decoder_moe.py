"""The sparse mixture-of-experts MLP of Mixtral, Qwen2-MoE and Qwen3-MoE, as transformers 5.24 runs it.

Per token a router (``mlp.gate``, d_model -> experts) gives a softmax over the experts in float32; the
``top_k`` most probable are kept (equal probabilities ordered as ``torch.topk`` on CPU orders them:
:mod:`attnviz.checkpoints.topk`), their
probabilities renormalised to sum 1 when the spec says so (always for Mixtral), and the token's output
is the sum of those experts' SwiGLU outputs ``down(silu(gate x) * up x)`` weighted by them, added up
expert after expert. Qwen2-MoE adds a shared expert every token passes, scaled by
``sigmoid(shared_expert_gate x)``. Which layers are sparse is :meth:`MoeSpec.sparse`; the others keep
the dense MLP of the decoder pass.

:func:`recording_experts` collects the routers' choices around any pass (generation's cached chunks
included); :func:`attnviz.checkpoints.decoder_experts.routed_experts` gives them per layer and token.

Tensors go by Qwen2-MoE's names (``mlp.experts.N.gate_proj``); :func:`stored_moe_name` gives Mixtral's
(``block_sparse_moe.experts.N.w1``, ``w3``, ``w2``), the names its checkpoints carry.
"""

from __future__ import annotations

import re
from contextlib import contextmanager
from contextvars import ContextVar

import numpy as np

from attnviz.checkpoints.decoder_config import MoeSpec
from attnviz.checkpoints.layers import activation, linear
from attnviz.checkpoints.model_config import CheckpointConfig
from attnviz.checkpoints.topk import topk_rows

_MIXTRAL_EXPERT = re.compile(r"\.mlp\.experts\.(\d+)\.(gate|up|down)_proj\.")
_MIXTRAL_W = {"gate": "w1", "up": "w3", "down": "w2"}
# layer -> [(experts (n, k), weights (n, k)) per call] while recording_experts() is open
_RECORD: ContextVar[dict | None] = ContextVar("attnviz_moe_record", default=None)


@contextmanager
def recording_experts():
    """Within the block every sparse layer's routing is kept: yields {layer: [(experts (n, k), weights (n, k)),
    ...]}, one entry per call of that layer (one for a whole pass, one per chunk of a cached generation)."""
    rec: dict = {}
    token = _RECORD.set(rec)
    try:
        yield rec
    finally:
        _RECORD.reset(token)


def moe_tensors(c: CheckpointConfig, layer: int) -> dict[str, tuple[int, ...]]:
    """Canonical name -> shape of the tensors of sparse layer ``layer``'s mixture (router, experts, shared expert)."""
    m: MoeSpec = c.decoder.moe
    d, w = c.d_model, m.d_expert
    p = f"layers.{layer}.mlp."
    shapes = {p + "gate.weight": (m.n_experts, d)}
    for e in range(m.n_experts):
        q = f"{p}experts.{e}."
        shapes |= {q + "gate_proj.weight": (w, d), q + "up_proj.weight": (w, d), q + "down_proj.weight": (d, w)}
    if m.shared:
        q = p + "shared_expert."
        shapes |= {q + "gate_proj.weight": (m.shared, d), q + "up_proj.weight": (m.shared, d),
                   q + "down_proj.weight": (d, m.shared), p + "shared_expert_gate.weight": (1, d)}
    return shapes


def stored_moe_name(c: CheckpointConfig, name: str) -> str:
    """The name canonical tensor ``name`` has in the family's files: Mixtral keeps its mixture in
    ``block_sparse_moe`` with experts ``w1`` (gate), ``w3`` (up) and ``w2`` (down); the Qwen families as named."""
    if c.model_type != "mixtral" or ".mlp." not in name:
        return name
    name = _MIXTRAL_EXPERT.sub(lambda g: f".block_sparse_moe.experts.{g[1]}.{_MIXTRAL_W[g[2]]}.", name)
    return name.replace(".mlp.gate.", ".block_sparse_moe.gate.")


def route(c: CheckpointConfig, W, layer: int, h: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(experts (n, k) int64, weights (n, k) in the dtype of h) the router of ``layer`` picks for rows h (n, C):
    the most probable first, probabilities from a float32 softmax, renormalised when the spec says so."""
    m: MoeSpec = c.decoder.moe
    logits = linear(h, W.matrix(f"layers.{layer}.mlp.gate.weight"), None).astype(np.float32)  # (n, E)
    z = np.exp(logits - logits.max(axis=-1, keepdims=True))  # (n, E)
    probs = z / z.sum(axis=-1, keepdims=True)  # (n, E) float32
    experts = topk_rows(probs, m.top_k)  # (n, k), ties ordered as torch.topk orders them
    top = np.take_along_axis(probs, experts, axis=-1)  # (n, k)
    if m.norm_topk:
        top = top / top.sum(axis=-1, keepdims=True)
    return experts.astype(np.int64), top.astype(h.dtype)


def _swiglu(c: CheckpointConfig, W, prefix: str, x: np.ndarray) -> np.ndarray:
    """down(act(gate x) * up x) of the expert whose tensors start with ``prefix``, on rows x (n, C) -> (n, C)."""
    g = activation(c.act, linear(x, W.matrix(prefix + "gate_proj.weight"), None))  # (n, w)
    g *= linear(x, W.matrix(prefix + "up_proj.weight"), None)
    return linear(g, W.matrix(prefix + "down_proj.weight"), None)  # (n, C)


def moe_mlp(c: CheckpointConfig, W, layer: int, h: np.ndarray) -> np.ndarray:
    """Sparse layer ``layer``'s mixture of experts on rows h (n, C) -> (n, C)."""
    p = f"layers.{layer}.mlp."
    experts, weights = route(c, W, layer, h)  # (n, k) each
    rec = _RECORD.get()
    if rec is not None:
        rec.setdefault(layer, []).append((experts, weights))
    out = np.zeros_like(h)  # (n, C)
    for e in np.unique(experts):  # expert after expert, as transformers adds them up
        tok, slot = np.nonzero(experts == e)  # the tokens sent to e and where e stands in their top-k
        out[tok] += _swiglu(c, W, f"{p}experts.{int(e)}.", h[tok]) * weights[tok, slot, None]
    if c.decoder.moe.shared:
        gate = linear(h, W.matrix(p + "shared_expert_gate.weight"), None)  # (n, 1)
        sig = (1.0 / (1.0 + np.exp(-gate.astype(np.float64)))).astype(h.dtype)  # (n, 1)
        out = out + sig * _swiglu(c, W, p + "shared_expert.", h)
    return out
