"""The exact-form GELU, x Phi(x), of a float32 array in one compiled pass (BERT's feed-forward activation).

Phi(x) = erfc(-x / sqrt 2) / 2, with erfc(z) = t exp(-z^2 + c0 + t (c1 + t (c2 + ... t c9))), t = 1 / (1 + z / 2)
for z >= 0: the Chebyshev fit of Numerical Recipes' ``erfcc``, relative error under 1.2e-7, also in the tails
(Phi(-|x|) is computed directly, never as 1 - Phi(|x|)). The exponential is :func:`attnviz.engine.fastexp.exp2`,
so the loop is SIMD code; numpy's version of the same formula makes about thirty passes over the array.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from attnviz.engine.fastexp import FASTMATH, LOG2E, exp2

ERFC_POLY = (-1.26551223, 1.00002368, 0.37409196, 0.09678418, -0.18628806, 0.27886807, -1.13520398, 1.48851587,
             -0.82215223, 0.17087277)
_C = tuple(np.float32(c) for c in ERFC_POLY)


@njit(cache=True, fastmath=FASTMATH, error_model="numpy")  # numpy: no zero-division branch per element
def _gelu_erf_f32(x, out):  # x, out: (n,) float32
    c0, c1, c2, c3, c4, c5, c6, c7, c8, c9 = _C
    r2 = np.float32(1.0 / math.sqrt(2.0))
    half, one, log2e = np.float32(0.5), np.float32(1.0), np.float32(LOG2E)
    for i in range(x.shape[0]):
        xi = x[i]
        z = abs(xi) * r2
        t = one / (one + half * z)
        p = t * c9 + c8
        p = p * t + c7
        p = p * t + c6
        p = p * t + c5
        p = p * t + c4
        p = p * t + c3
        p = p * t + c2
        p = p * t + c1
        p = p * t + c0
        lo = half * t * exp2((p - z * z) * log2e)  # Phi(-|x|) = erfc(|x| / sqrt 2) / 2
        out[i] = xi * (lo if xi < 0 else one - lo)


def gelu_erf(x: np.ndarray) -> np.ndarray:
    """x Phi(x) of a float32 array of any shape (a new array); NaN and infinities are not expected."""
    a = np.ascontiguousarray(x, dtype=np.float32)
    out = np.empty_like(a)
    _gelu_erf_f32(a.reshape(-1), out.reshape(-1))
    return out
