"""The numpy building blocks every forward pass shares: layer norm, activations, linear maps and
multi-head self-attention through :func:`attnviz.engine.attention`.

All functions take and return arrays in one dtype (the forward pass's, float32 or float64); shapes
use T tokens, C = d_model, nh heads of hs = C / nh.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.special import erf

from attnviz.checkpoints.errors import CheckpointError
from attnviz.engine import attention, jitcache

AUTO = "auto"
KERNEL_CHOICES = (AUTO, "reference", "naive", "flash")


# At most this many score cells (heads x queries x keys) per call run on the float64 reference while the
# engine's kernels are not compiled yet: compiling flash costs 40 s on a first start, while the reference
# (float64 BLAS products) adds about 50 ms per layer of 8 heads x 266 x 266 cells.
STAND_IN_CELLS = 1 << 22


def pick_kernel(kernel: str, softcap: float | None = None, cells: int | None = None) -> str:
    """The engine kernel a checkpoint pass runs: ``"auto"`` is flash (its maps recomputed from the
    log-sum-exp, 5-10x the float64 reference's speed and within 3e-7 of it in float32), or naive where
    the family soft-caps its scores (flash has no soft-capping); any other name is used as given.

    ``cells``: the call's heads x queries x keys. Until a warm-up has compiled the kernels
    (:func:`attnviz.engine.jitcache.is_warm`), "auto" calls of at most STAND_IN_CELLS cells run on the
    reference instead, so a first pass on a fresh installation does not wait for compilation."""
    if kernel == AUTO:
        if cells is not None and cells <= STAND_IN_CELLS and not jitcache.is_warm():
            return "reference"
        return "naive" if softcap else "flash"
    return kernel


def score_cells(q: np.ndarray, nh: int, Tk: int | None = None) -> int:
    """heads x queries x keys of an attention call on (Tq, nh*hs) queries (keys: Tk, default Tq)."""
    Tq = q.shape[0]
    return nh * Tq * (Tq if Tk is None else Tk)


def layer_norm(x: np.ndarray, w: np.ndarray, b: np.ndarray, eps: float) -> np.ndarray:
    """LayerNorm over the last axis with biased variance, as torch.nn.LayerNorm."""
    mu = x.mean(axis=-1, keepdims=True)  # (T, 1)
    xc = x - mu  # (T, C)
    var = (xc * xc).mean(axis=-1, keepdims=True)  # (T, 1)
    return xc / np.sqrt(var + x.dtype.type(eps)) * w + b  # (T, C)


def _gelu_erf(x):
    return 0.5 * x * (1.0 + erf(x / math.sqrt(2.0)))


GELU_CHUNK = 1 << 16  # values per pass of _gelu_tanh's eight steps: 256 KiB of float32 stays in the L2 cache


def _gelu_tanh(x):
    """0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), on one output buffer (x * x, not x ** 3: pow is
    several times slower and this runs over every MLP activation of Gemma and SigLIP). A large x goes by
    GELU_CHUNK values, so the eight steps run in cache instead of eight trips to memory (0.64x the time on
    266 x 16,384 float32, the same bits)."""
    c = math.sqrt(2.0 / math.pi)
    x = np.asarray(x)
    out = np.empty_like(x)  # (..., ff)
    if x.size <= GELU_CHUNK or not (x.flags.c_contiguous and np.issubdtype(x.dtype, np.floating)):
        _gelu_tanh_steps(x, out, c)
        return out
    flat_x, flat_out = x.reshape(-1), out.reshape(-1)
    for s in range(0, flat_x.size, GELU_CHUNK):
        _gelu_tanh_steps(flat_x[s:s + GELU_CHUNK], flat_out[s:s + GELU_CHUNK], c)
    return out


def _gelu_tanh_steps(x, t, c: float) -> None:
    np.multiply(x, x, out=t)
    t *= 0.044715 * c
    t += c
    t *= x  # sqrt(2/pi) (x + 0.044715 x^3)
    np.tanh(t, out=t)
    t += 1.0
    t *= x
    t *= 0.5


def _gelu_fast(x):
    return 0.5 * x * (1.0 + np.tanh(x * 0.7978845608 * (1.0 + 0.044715 * x * x)))


def _sigmoid(x):
    return 0.5 * (1.0 + np.tanh(0.5 * x))  # overflow-free logistic


# config activation name -> elementwise function (transformers' ACT2FN meanings)
ACT = {
    "gelu": _gelu_erf,  # exact GELU, x * Phi(x): BERT, ViT
    "gelu_new": _gelu_tanh,  # tanh approximation: GPT-2
    "gelu_pytorch_tanh": _gelu_tanh,
    "gelu_fast": _gelu_fast,
    "quick_gelu": lambda x: x * _sigmoid(1.702 * x),
    "relu": lambda x: np.maximum(x, 0),
    "silu": lambda x: x * _sigmoid(x),
    "swish": lambda x: x * _sigmoid(x),
}


def activation(name: str, x: np.ndarray) -> np.ndarray:
    """Apply the named activation, keeping the dtype of ``x``."""
    return ACT[name](x).astype(x.dtype, copy=False)


def linear(x: np.ndarray, w, b: np.ndarray | None) -> np.ndarray:
    """torch.nn.Linear: ``x @ w.T + b`` with ``w`` of shape (out, in): an array, or a stored bf16 matrix
    (:meth:`StoredTensors.matrix`) multiplied block by block when x is float32."""
    if hasattr(w, "matmul_t"):
        y = w.matmul_t(x) if x.dtype == np.float32 else x @ np.asarray(w, dtype=x.dtype).T  # (T, out)
    else:
        y = x @ w.T  # (T, out)
    return y if b is None else y + b


def conv1d(x: np.ndarray, w: np.ndarray, b: np.ndarray) -> np.ndarray:
    """GPT-2's Conv1D: ``x @ w + b`` with ``w`` of shape (in, out)."""
    return x @ w + b  # (T, out)


def split_heads(x: np.ndarray, nh: int) -> np.ndarray:
    """(T, C) -> (nh, T, hs)."""
    T, C = x.shape
    return np.ascontiguousarray(x.reshape(T, nh, C // nh).transpose(1, 0, 2))  # (nh, T, hs)


def merge_heads(x: np.ndarray) -> np.ndarray:
    """(nh, T, hs) -> (T, C)."""
    nh, T, hs = x.shape
    return x.transpose(1, 0, 2).reshape(T, nh * hs)  # (T, C)


def self_attention(q, k, v, nh: int, mask: np.ndarray | None, scale: float, kernel: str):
    """Multi-head attention of (T, C) projections; returns (merged output (T, C), weights (nh, T, T))."""
    kernel = pick_kernel(kernel, cells=score_cells(q, nh, k.shape[0]))
    res = attention(split_heads(q, nh), split_heads(k, nh), split_heads(v, nh), mask,
                    scale=scale, kernel=kernel, return_weights=True)
    if res.weights is None:
        raise CheckpointError(f"attention kernel {kernel!r} did not return weights; choose a kernel that does")
    return merge_heads(res.out).astype(q.dtype, copy=False), res.weights.astype(q.dtype, copy=False)
