"""A coarse overview of a long sequence's weights, cheap enough to draw at once while the full one
is computed: the overview of a few query rows spread evenly over the sequence (one per picture row,
the row at the centre of the band it stands for), over every key. Its cost is that of ``rows`` query
rows instead of Tq (2,900 tokens, 96 rows: about 3 % of the full overview's work); each pixel is the
exact max (or mean) over its keys of the one row it samples. Pure; the heatmap panel runs it on a
worker before the full overview.
"""

from __future__ import annotations

import numpy as np

#: picture rows (sampled query rows) of the coarse overview
COARSE_ROWS = 96


def sampled_rows(Tq: int, n: int) -> np.ndarray:
    """(min(n, Tq),) query rows at the centres of ``n`` equal bands of ``Tq`` rows (pixel y of an
    image of n rows stretched over Tq rows covers [y Tq / n, (y + 1) Tq / n))."""
    n = max(1, min(int(n), int(Tq)))
    y = np.arange(n, dtype=np.int64)
    return ((2 * y + 1) * Tq) // (2 * n)  # (n,)


def _mask_rows(resp, idx: np.ndarray):
    """The mask of query rows ``idx`` as dense bool, (n, Tk) or (nh, n, Tk); None when all allowed."""
    mask = resp.mask
    if mask is not None:
        return mask[idx] if mask.ndim == 2 else mask[:, idx]
    tm = resp.block_mask  # a long sequence: the mask is held per tile
    if tm is None:
        return None
    rows = tm.rows(idx)  # (nh or 1, n, Tk)
    return rows[0] if rows.shape[0] == 1 else rows


def _band_any(m: np.ndarray, W: int) -> np.ndarray:
    """(..., n, W') whether each of W' = min(W, Tk) key bands (the overview's own column bands) has an
    allowed cell, for a bool mask (..., n, Tk)."""
    Tk = m.shape[-1]
    Wp = min(W, Tk)
    starts = (np.arange(Wp, dtype=np.int64) * Tk) // Wp  # (W',)
    return np.add.reduceat(m.astype(np.int32), starts, axis=-1) > 0


def coarse_overview(resp, head, scale: float, reduce: str, width: int, rows: int = COARSE_ROWS) -> np.ndarray:
    """(n, W) picture of the weights of ``head`` ("mean": averaged over heads) over the whole
    matrix from ``n = min(rows, Tq)`` sampled query rows (:func:`sampled_rows`) and ``W = width``
    key bands; NaN where a sampled row may attend to no key of the band."""
    from attnviz.engine.overview import attention_overview  # numba: loaded after the window paints

    Tq, Tk = resp.Tq, resp.Tk
    idx = sampled_rows(Tq, rows)  # (n,)
    n, W = idx.size, int(width)
    m = _mask_rows(resp, idx)  # (n, Tk) | (nh, n, Tk) | None
    if head == "mean":
        q, lse = resp.q[:, idx], resp.lse[:, idx]  # (nh, n, hs), (nh, n)
        k = resp.k
    else:
        q, k, lse = resp.q[head, idx], resp.k[head], resp.lse[head, idx]  # (n, hs), (Tk, hs), (n,)
        if m is not None and m.ndim == 3:
            m = m[head]
    img = attention_overview(q, k, lse, m, scale=scale, out_shape=(n, W), reduce=reduce)  # ([nh,] n, W)
    if head == "mean":
        img = img.mean(axis=0)  # (n, W)
    if m is None:
        return img.astype(np.float32)
    ok = _band_any(m, W)  # ([nh,] n, W')
    if ok.ndim == 3:
        ok = ok.any(axis=0)
    if ok.shape[1] != W:  # fewer keys than pixels: the overview repeated its columns
        ok = ok[:, (np.arange(W) * ok.shape[1]) // W]
    return np.where(ok, img, np.nan).astype(np.float32)
