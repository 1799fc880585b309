"""Screen-sized pictures of a long sequence's weights, whose matrices a response never holds: one
head's (or the mean's) overview of a block and small overviews of every head, with the pixels whose
cells are all masked set apart. Pure functions of the response; the heatmap panel runs them on a
worker thread.
"""

from __future__ import annotations

import numpy as np

from attnviz.model.display.head_grid import GRID_TILE
from attnviz.model.display.pooling import pool_max


def _expand_index(n_small: int, n_big: int) -> np.ndarray:
    """Which of ``n_small`` bins covers each of ``n_big`` pixels (as the overview expands)."""
    return (np.arange(n_big) * n_small) // n_big  # (n_big,)


def tiled_allowed_pixels(tm, head, out_shape, rows, cols) -> np.ndarray:
    """(H, W) bool: pixels of the block rows x cols whose cells touch a non-empty tile of a TiledMask
    (``head`` "mean" or None: any head). Tile-granular: a pixel over a partial tile counts as allowed."""
    from attnviz.engine.blockmask import EMPTY  # numba: loaded after the window paints

    (r0, r1), (c0, c1) = rows, cols
    H, W = out_shape
    st = tm.tile_state if head in ("mean", None) or tm.n_heads == 1 else tm.tile_state[head:head + 1]
    live = (st != EMPTY).any(axis=0).astype(np.int64)  # (nQ, nK)
    pre = np.zeros((live.shape[0] + 1, live.shape[1] + 1), dtype=np.int64)  # (nQ+1, nK+1) prefix sums
    pre[1:, 1:] = live.cumsum(0).cumsum(1)

    def bands(a, b, n, block):
        e = a + (np.arange(n + 1) * (b - a)) // n  # (n+1,) cell edges
        lo = e[:-1]
        hi = np.maximum(e[1:], lo + 1)  # at least one cell per pixel
        return lo // block, (hi - 1) // block + 1  # tile index ranges [t0, t1)

    y0, y1 = bands(r0, r1, H, tm.block_m)  # (H,), (H,)
    x0, x1 = bands(c0, c1, W, tm.block_n)  # (W,), (W,)
    count = (pre[y1[:, None], x1[None, :]] - pre[y0[:, None], x1[None, :]] - pre[y1[:, None], x0[None, :]]
             + pre[y0[:, None], x0[None, :]])  # (H, W) live tiles under each pixel
    return count > 0


def overview_image(resp, head, scale: float, reduce: str, out_shape, rows, cols) -> np.ndarray:
    """(H, W) overview of the weights of ``head`` ("mean": averaged over heads) over the block
    rows x cols, NaN where every covered cell is masked (pure; runs on a worker thread)."""
    from attnviz.engine.overview import attention_overview  # numba: loaded after the window paints

    r0, r1 = rows
    c0, c1 = cols
    mask = resp.mask
    tiled = resp.block_mask if mask is None else None  # a long sequence: the mask is held per tile
    if head == "mean":
        img = attention_overview(resp.q, resp.k, resp.lse, tiled if tiled is not None else mask, scale=scale,
                                 out_shape=out_shape, rows=rows, cols=cols, reduce=reduce).mean(axis=0)  # (H, W)
        if tiled is not None:
            return np.where(tiled_allowed_pixels(tiled, "mean", img.shape, rows, cols), img, np.nan).astype(np.float32)
        block = mask[r0:r1, c0:c1] if mask.ndim == 2 else mask[:, r0:r1, c0:c1].any(axis=0)
    else:
        if tiled is not None:
            th = tiled.heads(head, head + 1)
            img = attention_overview(resp.q[head], resp.k[head], resp.lse[head], th, scale=scale,
                                     out_shape=out_shape, rows=rows, cols=cols, reduce=reduce)  # (H, W)
            return np.where(tiled_allowed_pixels(th, None, img.shape, rows, cols), img, np.nan).astype(np.float32)
        m = mask if mask.ndim == 2 else mask[head]  # (Tq, Tk)
        img = attention_overview(resp.q[head], resp.k[head], resp.lse[head], m, scale=scale,
                                 out_shape=out_shape, rows=rows, cols=cols, reduce=reduce)  # (H, W)
        block = m[r0:r1, c0:c1]  # (R, C)
    H, W = img.shape
    _, ok = pool_max(np.zeros(block.shape, dtype=np.float32), block, (H, W))  # (H', W') any allowed
    ok = ok[_expand_index(ok.shape[0], H)][:, _expand_index(ok.shape[1], W)]  # (H, W)
    return np.where(ok, img, np.nan).astype(np.float32)


def overview_grid(resp, scale: float, reduce: str, tile: int = GRID_TILE) -> tuple[np.ndarray, np.ndarray]:
    """(maps (nh, h, w), allowed (nh, h, w)) small overviews of every head for the grid."""
    from attnviz.engine.overview import attention_overview  # numba: loaded after the window paints

    Tq, Tk = resp.Tq, resp.Tk
    shape = (min(tile, Tq), min(tile, Tk))
    tiled = resp.block_mask if resp.mask is None else None
    maps = attention_overview(resp.q, resp.k, resp.lse, tiled if tiled is not None else resp.mask, scale=scale,
                              out_shape=shape, reduce=reduce)  # (nh, h, w)
    if tiled is not None:
        ok = np.stack([tiled_allowed_pixels(tiled, h if tiled.n_heads > 1 else None, shape, (0, Tq), (0, Tk))
                       for h in range(maps.shape[0])])  # (nh, h, w)
    else:
        m = resp.mask if resp.mask.ndim == 3 else resp.mask[None]
        _, ok = pool_max(np.zeros(m.shape, dtype=np.float32), m, shape)  # (1|nh, h, w)
        ok = np.broadcast_to(ok, maps.shape)
    return np.where(ok, maps, 0.0).astype(np.float32), ok
