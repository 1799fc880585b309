"""Argument checking shared by the engine's public functions: shapes, dtypes, masks, scale.

Every problem raises ValueError naming the argument and the shape or value expected; what passes is
normalised to 3-D C-contiguous arrays of one float dtype (float32 or float64).
"""

from __future__ import annotations

import math
import numbers

import numpy as np

from attnviz.engine.blockmask import BlockMask, check_block
from attnviz.engine.fastexp import MAX_ABS_SCORE
from attnviz.engine.scan import scan


def float_dtype(*arrays: np.ndarray) -> np.dtype:
    """The engine dtype for these inputs: float32 if every input is at most float32, else float64."""
    for a in arrays:
        if a.dtype.kind == "c":
            raise ValueError(f"complex inputs are not supported (got dtype {a.dtype})")
        if a.dtype.kind not in "fiub":
            raise ValueError(f"inputs must be real numbers, got dtype {a.dtype}")
    if all(a.dtype.kind == "f" and a.dtype.itemsize <= 4 for a in arrays):
        return np.dtype(np.float32)
    return np.dtype(np.float64)


def as_heads(name: str, a, expected: str) -> np.ndarray:
    """``a`` as a 3-D array: 2-D means one head. ``expected`` names the shape for the error message."""
    a = np.asarray(a)
    if a.ndim == 2:
        return a[None]
    if a.ndim != 3:
        raise ValueError(f"{name} must have shape {expected} (or without the head axis), got shape {a.shape}")
    return a


def kernel_array(a, dtype=None) -> np.ndarray:
    """``a`` as a C-contiguous, writable array (numba compiles read-only arrays as a separate type)."""
    out = np.ascontiguousarray(a, dtype=dtype)
    return out if out.flags.writeable else out.copy()


SCAN_PARALLEL_CELLS = 1 << 18  # smaller arrays: numpy's two passes cost less than starting the threads


def row_scan(a: np.ndarray) -> tuple[bool, float]:
    """(every value finite, largest squared norm of a row along the last axis, in float64) of a
    C-contiguous float array; the norm is only meaningful when every value is finite."""
    if a.size == 0:
        return True, 0.0
    if a.size < SCAN_PARALLEL_CELLS:
        if not np.isfinite(a).all():
            return False, math.nan
        return True, float(np.max(np.einsum("...d,...d->...", a, a, dtype=np.float64)))
    bad, top = scan(a)
    return bad == 0, float(top)


def check_finite(name: str, a: np.ndarray) -> float:
    """ValueError when ``a`` holds NaN or inf; else its largest squared row norm (see :func:`row_scan`)."""
    finite, top = row_scan(a)
    if not finite:
        raise ValueError(f"{name} contains non-finite values (NaN or inf)")
    return top


def prepare_qkv(q, k, v):
    """Check q (nh, Tq, hs), k (nh, Tk, hs), v (nh, Tk, hv) (2-D: one head); return the 3-D arrays,
    squeeze, and the largest squared row norms of q and k (for :func:`check_score_range`)."""
    arrays = [np.asarray(a) for a in (q, k, v)]
    ndims = {a.ndim for a in arrays}
    if not ndims <= {2, 3} or len(ndims) != 1:
        raise ValueError("q, k and v must all be 3-D (nh, T, hs) or all 2-D (T, hs), got shapes "
                         f"q {arrays[0].shape}, k {arrays[1].shape}, v {arrays[2].shape}")
    squeeze = arrays[0].ndim == 2
    q3 = as_heads("q", arrays[0], "(nh, Tq, hs)")
    k3 = as_heads("k", arrays[1], "(nh, Tk, hs)")
    v3 = as_heads("v", arrays[2], "(nh, Tk, hv)")
    nh, Tq, hs = q3.shape
    if hs < 1:
        raise ValueError(f"q must have at least one feature: expected shape (nh, Tq, hs) with hs >= 1, got {q3.shape}")
    if k3.shape[0] != nh or k3.shape[2] != hs:
        raise ValueError(f"k must have shape (nh, Tk, hs) = ({nh}, Tk, {hs}) to match q {q3.shape}, got {k3.shape}")
    Tk = k3.shape[1]
    if v3.shape[0] != nh or v3.shape[1] != Tk:
        raise ValueError(f"v must have shape (nh, Tk, hv) = ({nh}, {Tk}, hv) to match k {k3.shape}, got {v3.shape}")
    dt = float_dtype(q3, k3, v3)
    out, norms = [], []
    for name, a in (("q", q3), ("k", k3), ("v", v3)):
        a = kernel_array(a, dt)
        norms.append(check_finite(name, a))
        out.append(a)
    return out[0], out[1], out[2], squeeze, (norms[0], norms[1])


def prepare_scale(scale, hs: int) -> float:
    """``scale`` as a finite float; None means 1 / sqrt(hs). A real number (int, float, numpy real scalar
    or 0-d real array), never a string or a bool."""
    if scale is None:
        return 1.0 / math.sqrt(hs)
    value = scale.item() if isinstance(scale, np.ndarray) and scale.ndim == 0 else scale
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise ValueError(f"scale must be a real number or None, got {scale!r}")
    s = float(value)
    if not math.isfinite(s):
        raise ValueError(f"scale must be finite, got {scale!r}")
    return s


def prepare_softcap(softcap) -> float:
    """``softcap`` as a float: 0.0 for None (no cap), else a finite positive real number (a cap c turns every
    scaled score s into c tanh(s / c))."""
    if softcap is None:
        return 0.0
    value = softcap.item() if isinstance(softcap, np.ndarray) and softcap.ndim == 0 else softcap
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise ValueError(f"softcap must be a positive real number or None, got {softcap!r}")
    c = float(value)
    if not (math.isfinite(c) and c > 0):
        raise ValueError(f"softcap must be a positive finite number or None, got {softcap!r}")
    return c


def check_score_range(norms: tuple[float, float], scale: float) -> float:
    """The bound max |q_i| |k_j| |scale| >= every |scaled score|, from the largest squared row norms of q
    and k (:func:`prepare_qkv`; 0 for an empty q or k); ValueError when it exceeds MAX_ABS_SCORE."""
    if norms[0] == 0 or norms[1] == 0:  # an empty or all-zero q or k: every score is 0
        return 0.0
    qn, kn = math.sqrt(norms[0]), math.sqrt(norms[1])
    if qn * kn * abs(scale) > MAX_ABS_SCORE:
        raise ValueError(f"q and k are too large: scaled scores could reach {qn * kn * abs(scale):.3g}, "
                         f"the engine accepts at most {MAX_ABS_SCORE:.0e}")
    return qn * kn * abs(scale)


def prepare_mask(mask, nh: int, Tq: int, Tk: int):
    """Check a mask against (nh, Tq, Tk). Returns (dense3 or None, BlockMask or None).

    dense3 is a C-contiguous (nh or 1, Tq, Tk) bool array; None means every key is allowed.
    """
    if mask is None:
        return None, None
    if isinstance(mask, BlockMask):
        dense = mask.kernel_arrays()[0]
        block = mask
    else:
        dense = np.asarray(mask)
        block = None
        if dense.dtype != np.bool_:
            raise ValueError(f"mask must be a bool array of shape ({Tq}, {Tk}) or ({nh}, {Tq}, {Tk}), "
                             f"got dtype {dense.dtype}")
    if dense.ndim == 2:
        dense = dense[None]
    if dense.ndim != 3 or dense.shape[1:] != (Tq, Tk) or dense.shape[0] not in (1, nh):
        raise ValueError(f"mask must have shape ({Tq}, {Tk}) or ({nh}, {Tq}, {Tk}) (queries x keys), "
                         f"got {np.shape(mask.dense if block is not None else mask)}")
    return kernel_array(dense), block


def prepare_rows(rows, Tq: int) -> np.ndarray:
    """Query rows to recompute: None (all), a slice, or a sequence of indices -> (R,) int64 in [0, Tq)."""
    if rows is None:
        return np.arange(Tq, dtype=np.int64)
    if isinstance(rows, slice):
        return np.arange(Tq, dtype=np.int64)[rows]
    idx = np.asarray(rows)
    if idx.ndim == 0:
        idx = idx[None]
    if idx.ndim != 1 or idx.dtype.kind not in "iu":
        raise ValueError(f"rows must be None, a slice or a 1-D sequence of query indices, got {rows!r}")
    if idx.size and (idx.min() < -Tq or idx.max() >= Tq):
        raise ValueError(f"rows must index queries in [0, {Tq}), got values from {idx.min()} to {idx.max()}")
    return np.where(idx < 0, idx + Tq, idx).astype(np.int64)


def prepare_block(name: str, value) -> int | None:
    """A tile size: None (choose automatically) or a positive integer."""
    return None if value is None else check_block(name, value)


def prepare_qk_lse(q, k, lse, scale):
    """Check the inputs of a weight recomputation from an attention result.

    q (nh, Tq, hs), k (nh, Tk, hs), lse (nh, Tq) (2-D q/k and 1-D lse: one head); ``scale`` as for
    :func:`attention`. Returns (q3, k3, lse3, s, squeeze): 3-D C-contiguous q/k and (nh, Tq) lse of one
    float dtype, and s = |scale| >= 0 with q negated when the scale was negative (the same scores).
    """
    q_arr, k_arr = np.asarray(q), np.asarray(k)
    if q_arr.ndim != k_arr.ndim or q_arr.ndim not in (2, 3):
        raise ValueError(f"q and k must both be (nh, T, hs) or both (T, hs), got {q_arr.shape} and {k_arr.shape}")
    squeeze = q_arr.ndim == 2
    q3 = as_heads("q", q_arr, "(nh, Tq, hs)")
    k3 = as_heads("k", k_arr, "(nh, Tk, hs)")
    nh, Tq, hs = q3.shape
    if k3.shape[0] != nh or k3.shape[2] != hs:
        raise ValueError(f"k must have shape ({nh}, Tk, {hs}) to match q {q3.shape}, got {k3.shape}")
    lse_arr = np.asarray(lse)
    lse3 = lse_arr[None] if lse_arr.ndim == 1 else lse_arr
    if lse3.shape != (nh, Tq):
        raise ValueError(f"lse must have shape ({nh}, {Tq}) (one value per query row), got {lse_arr.shape}")
    if np.isnan(lse3).any() or np.isposinf(lse3).any():
        raise ValueError("lse must be finite or -inf (a fully masked row)")
    dt = float_dtype(q3, k3)
    q3 = kernel_array(q3, dt)  # (nh, Tq, hs)
    k3 = kernel_array(k3, dt)  # (nh, Tk, hs)
    check_finite("q", q3)
    check_finite("k", k3)
    s = prepare_scale(scale, hs)
    if s < 0:  # softmax(s * scale) with scale < 0 is softmax(-s * |scale|): the kernels need c >= 0
        q3, s = -q3, -s
    return q3, k3, kernel_array(lse3, dt), s, squeeze
