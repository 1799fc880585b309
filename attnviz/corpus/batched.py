"""Documents of similar length through a BERT encoder together, straight to their statistics.

A corpus of sentences spends most of a one-document pass on fixed costs: a kernel launch, a BLAS call
and a dozen numpy operations per step, each on a (T ~ 20, 384) array. Here a group of documents is
padded to its longest, stacked, and run as one pass: the linear maps take (B*T, C), attention takes
(B*nh, T, T) on the engine's float32 kernels with each document's padding keys masked, and each
layer's weights go straight into float64 row sums (:mod:`attnviz.corpus.stats`) instead of being kept
as (L, nh, T, T) maps. Padding changes nothing a document sees: a token's layer norm, linear maps and
activation read its own row only, and a padding key gets weight 0, so every valid row is the row of
the document's own pass up to float32 rounding (within 1e-6 of the float64 reference pass, tested).

Only plain BERT checkpoints (model_type "bert": MiniLM, BERT) go this way, the forward pass of
:func:`attnviz.checkpoints.forward.forward_bert`; every other family runs one document at a time.
"""

from __future__ import annotations

import math

import numpy as np

from attnviz.checkpoints import Checkpoint, CheckpointError
from attnviz.checkpoints.layers import AUTO, activation, layer_norm, linear, pick_kernel
from attnviz.corpus.stats import STATISTICS, HeadSums
from attnviz.engine import attention
from attnviz.engine.activations import gelu_erf

MAX_GROUP = 32  # documents per stacked pass: past this the fixed costs are amortised and memory grows
MAX_PAD = 0.25  # a group takes a longer document while its padded cells stay within 25 % of the real ones
MAX_GROUP_CELLS = 1 << 21  # B * T * T per group (x nh heads x 4 bytes of weights per layer): 8 MiB at 12 heads


def batchable(ckpt: Checkpoint) -> bool:
    """True for the checkpoints :func:`group_sums` runs: plain BERT encoders without soft-capping."""
    c = getattr(ckpt, "config", None)
    return getattr(ckpt, "kind", None) == "bert" and getattr(c, "model_type", None) == "bert"


def length_groups(lengths: list[int]) -> list[list[int]]:
    """Positions of ``lengths`` grouped for stacked passes: sorted by length, a group grows while its
    padding stays within MAX_PAD of its real tokens, MAX_GROUP documents and MAX_GROUP_CELLS."""
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    groups: list[list[int]] = []
    cur: list[int] = []
    real = 0
    for i in order:
        T = lengths[i]  # the longest so far (sorted)
        n = len(cur) + 1
        if cur and (n > MAX_GROUP or n * T * T > MAX_GROUP_CELLS or n * T * T > (1 + MAX_PAD) * (real + T * T)):
            groups.append(cur)
            cur, real = [], 0
        cur.append(i)
        real += T * T
    if cur:
        groups.append(cur)
    return groups


def _row_sums(w: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Float64 sums over each document's valid query rows of one layer's weights.

    w (B, nh, T, T) float32, rows queries, padding keys already 0; lengths (B,) -> (B, nh, 5) in STATISTICS order."""
    B, nh, T, _ = w.shape
    a = w.astype(np.float64)  # (B, nh, T, T)
    valid = (np.arange(T)[None, :] < lengths[:, None]).astype(np.float64)  # (B, T) real query rows
    pos = np.arange(T)
    dist = np.abs(pos[:, None] - pos[None, :]).astype(np.float64)  # (T, T) |i - j|
    logw = np.log(np.where(a > 0, a, 1.0))  # (B, nh, T, T), 0 where w == 0
    per_row = np.empty((len(STATISTICS), B, nh, T))  # (5, B, nh, T)
    per_row[0] = -(a * logw).sum(axis=-1)  # entropy of each row
    per_row[1] = a[..., 0]  # w_i0
    per_row[2] = np.diagonal(a, axis1=-2, axis2=-1)  # w_ii
    per_row[3, ..., 0] = 0.0  # row 0 has no previous token
    per_row[3, ..., 1:] = np.diagonal(a, offset=-1, axis1=-2, axis2=-1)  # w_i,i-1
    per_row[4] = (a * dist).sum(axis=-1)  # sum_j w_ij |i - j|
    return np.einsum("sbht,bt->bhs", per_row, valid)  # (B, nh, 5)


def group_sums(ckpt: Checkpoint, ids: list[np.ndarray], kernel: str = AUTO) -> list[HeadSums]:
    """Each document's :class:`HeadSums` for token ids (T_b,) of one group, in one stacked float32 pass."""
    c = ckpt.config
    w = ckpt.weights
    B = len(ids)
    lengths = np.array([len(x) for x in ids], dtype=np.int64)  # (B,)
    T = int(lengths.max())
    C, nh, hs = c.d_model, c.n_head, c.head_size
    f32 = np.float32

    def W(name: str) -> np.ndarray:
        return w[name].astype(f32, copy=False)

    tok = np.zeros((B, T), dtype=np.int64)  # (B, T) padding reads row 0: any row would do, its keys are masked
    for b, x in enumerate(ids):
        tok[b, :len(x)] = x
    x = w["embeddings.word_embeddings.weight"][tok.reshape(-1)].astype(f32, copy=False).reshape(B, T, C)
    if c.type_vocab_size:
        x = x + w["embeddings.token_type_embeddings.weight"][0].astype(f32, copy=False)  # segment 0 everywhere
    x = x + w["embeddings.position_embeddings.weight"][:T].astype(f32, copy=False)  # (B, T, C)
    x = layer_norm(x.reshape(B * T, C), W("embeddings.LayerNorm.weight"), W("embeddings.LayerNorm.bias"), c.ln_eps)
    keys = np.arange(T)[None, :] < lengths[:, None]  # (B, T) real keys
    mask = None
    if (lengths != T).any():  # (B*nh, T, T) each document's heads see its own real keys only
        mask = np.ascontiguousarray(np.broadcast_to(keys[:, None, None, :], (B, nh, T, T)).reshape(B * nh, T, T))
    scale = 1.0 / math.sqrt(hs)
    kern = pick_kernel(kernel)  # flash (naive where a family soft-caps; BERT does not)
    sums = np.empty((B, c.n_layer, nh, len(STATISTICS)))  # (B, L, nh, 5)

    def heads(y: np.ndarray) -> np.ndarray:  # (B*T, C) -> (B*nh, T, hs)
        return np.ascontiguousarray(y.reshape(B, T, nh, hs).transpose(0, 2, 1, 3)).reshape(B * nh, T, hs)

    for i in range(c.n_layer):
        p = f"encoder.layer.{i}."
        q, k, v = (heads(linear(x, W(p + f"attention.self.{n}.weight"), W(p + f"attention.self.{n}.bias")))
                   for n in ("query", "key", "value"))  # 3 x (B*nh, T, hs)
        res = attention(q, k, v, mask, scale=scale, kernel=kern, return_weights=True)
        if res.weights is None:
            raise CheckpointError(f"attention kernel {kern!r} did not return weights")
        sums[:, i] = _row_sums(res.weights.reshape(B, nh, T, T), lengths)
        if i == c.n_layer - 1:  # the statistics are complete: the last block's output is not needed
            break
        ctx = res.out.astype(f32, copy=False).reshape(B, nh, T, hs).transpose(0, 2, 1, 3).reshape(B * T, C)
        a = linear(ctx, W(p + "attention.output.dense.weight"), W(p + "attention.output.dense.bias"))  # (B*T, C)
        x = layer_norm(a + x, W(p + "attention.output.LayerNorm.weight"), W(p + "attention.output.LayerNorm.bias"),
                       c.ln_eps)
        h = linear(x, W(p + "intermediate.dense.weight"), W(p + "intermediate.dense.bias"))  # (B*T, ff)
        h = gelu_erf(h) if c.act == "gelu" else activation(c.act, h)
        h = linear(h, W(p + "output.dense.weight"), W(p + "output.dense.bias"))  # (B*T, C)
        x = layer_norm(h + x, W(p + "output.LayerNorm.weight"), W(p + "output.LayerNorm.bias"), c.ln_eps)
    if not np.isfinite(sums).all():
        raise CheckpointError("the pass gave non-finite attention weights")
    return [HeadSums(sums[b], rows=int(n), prev_rows=int(n) - 1, documents=1) for b, n in enumerate(lengths)]
