"""Tiled masks: a bool attention mask kept per tile, never as a dense Tq x Tk array.

A dense mask at T = 65,536 is 4.3 GB, but the flash kernel reads cells of partial tiles only, so a
:class:`TiledMask` keeps each tile's state and the partial tiles' cells (causal, 64 x 128 tiles:
512 partial tiles, 4 MB). It is built band by band (:meth:`TiledMask.from_bands`), so the whole
mask never exists either.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from attnviz.engine.blockmask import EMPTY, FULL, PARTIAL, check_block, states_from_counts, tile_counts


@dataclass(frozen=True, eq=False)
class TiledMask:
    """A bool mask (True = query i may attend to key j) stored per tile of block_m x block_n.

    tile_state:  (nh or 1, nQ, nK) int8 EMPTY / PARTIAL / FULL.
    block_index: (nh or 1, nQ, nK) int32, the row of ``blocks`` holding a partial tile's cells, else -1.
    blocks:      (P, block_m, block_n) bool cells of the P partial tiles (False beyond Tq / Tk); writable
                 so the kernels read it without a copy: never modify it.
    fully:       (nh or 1, Tq) bool, query rows with no allowed key.
    """

    Tq: int
    Tk: int
    block_m: int
    block_n: int
    tile_state: np.ndarray
    block_index: np.ndarray
    blocks: np.ndarray
    fully: np.ndarray

    @classmethod
    def from_bands(cls, band: Callable[[int, int], np.ndarray], Tq: int, Tk: int, block_m: int,
                   block_n: int) -> "TiledMask":
        """Build from ``band(r0, r1)``: the dense rows r0:r1 of the mask, bool (r1-r0, Tk) or
        (nh, r1-r0, Tk) (the same number of heads for every band), asked for in order, block_m rows
        at a time."""
        bm, bn = check_block("block_m", block_m), check_block("block_n", block_n)
        Tq, Tk = int(Tq), int(Tk)
        if Tq < 1 or Tk < 1:
            raise ValueError(f"a tiled mask needs Tq, Tk >= 1, got {Tq}, {Tk}")
        nQ, nK = -(-Tq // bm), -(-Tk // bn)
        state = index = fully = None
        chunks: list[np.ndarray] = []
        n_blocks = 0
        for qi in range(nQ):
            r0, r1 = qi * bm, min((qi + 1) * bm, Tq)
            m = np.asarray(band(r0, r1))
            if m.ndim == 2:
                m = m[None]
            if m.dtype != np.bool_ or m.ndim != 3 or m.shape[1:] != (r1 - r0, Tk):
                raise ValueError(f"band({r0}, {r1}) must give bool ({r1 - r0}, {Tk}) or (nh, {r1 - r0}, {Tk}), "
                                 f"got {m.dtype} {m.shape}")
            if state is None:
                H = m.shape[0]
                state = np.empty((H, nQ, nK), dtype=np.int8)  # (H, nQ, nK)
                index = np.full((H, nQ, nK), -1, dtype=np.int32)  # (H, nQ, nK)
                fully = np.empty((H, Tq), dtype=np.bool_)  # (H, Tq)
            elif m.shape[0] != state.shape[0]:
                raise ValueError(f"band({r0}, {r1}) gave {m.shape[0]} heads, the first band {state.shape[0]}")
            fully[:, r0:r1] = ~m.any(axis=-1)
            st = states_from_counts(tile_counts(m, bm, bn), r1 - r0, Tk, bm, bn)  # (H, 1, nK)
            state[:, qi] = st[:, 0]
            hs, kjs = np.nonzero(st[:, 0] == PARTIAL)  # (p,), (p,)
            if hs.size:
                pad = np.zeros((m.shape[0], bm, nK * bn), dtype=np.bool_)  # (H, bm, nK*bn)
                pad[:, : r1 - r0, :Tk] = m
                tiles = pad.reshape(m.shape[0], bm, nK, bn).transpose(0, 2, 1, 3)  # (H, nK, bm, bn)
                chunks.append(np.ascontiguousarray(tiles[hs, kjs]))  # (p, bm, bn)
                index[hs, qi, kjs] = np.arange(n_blocks, n_blocks + hs.size, dtype=np.int32)
                n_blocks += hs.size
        blocks = np.concatenate(chunks) if chunks else np.zeros((1, bm, bn), dtype=np.bool_)  # (P, bm, bn)
        for a in (state, index, fully):
            a.setflags(write=False)  # blocks stay writable: the kernels read them as they are, never copied
        return cls(Tq, Tk, bm, bn, state, index, blocks, fully)

    @classmethod
    def from_dense(cls, dense, block_m: int, block_n: int) -> "TiledMask":
        """The tiled form of a bool (Tq, Tk) or (nh, Tq, Tk) mask."""
        d = np.asarray(dense)
        if d.dtype != np.bool_ or d.ndim not in (2, 3):
            raise ValueError(f"mask must be a bool (Tq, Tk) or (nh, Tq, Tk) array, got {d.dtype} {d.shape}")
        return cls.from_bands(lambda r0, r1: d[..., r0:r1, :], d.shape[-2], d.shape[-1], block_m, block_n)

    # ------------------------------------------------------------------ reading it back
    @property
    def n_heads(self) -> int:
        """1 for a mask shared by every head, else the number of heads."""
        return self.tile_state.shape[0]

    def rows(self, idx) -> np.ndarray:
        """The dense query rows ``idx`` (R,): bool (nh or 1, R, Tk)."""
        idx = np.asarray(idx, dtype=np.int64).reshape(-1)  # (R,)
        if idx.size and (idx.min() < 0 or idx.max() >= self.Tq):
            raise ValueError(f"rows must be in [0, {self.Tq})")
        H, bn = self.n_heads, self.block_n
        qi, r = idx // self.block_m, idx % self.block_m  # (R,), (R,)
        st = self.tile_state[:, qi]  # (H, R, nK)
        out = np.repeat(st == FULL, bn, axis=-1)[..., : self.Tk].copy()  # (H, R, Tk)
        hs, rs, kjs = np.nonzero(st == PARTIAL)
        for h, i, kj in zip(hs.tolist(), rs.tolist(), kjs.tolist()):
            j0 = kj * bn
            j1 = min(j0 + bn, self.Tk)
            out[h, i, j0:j1] = self.blocks[self.block_index[h, qi[i], kj], r[i], : j1 - j0]
        return out

    def to_dense(self) -> np.ndarray:
        """The whole mask, bool (nh or 1, Tq, Tk): for small masks and tests."""
        return self.rows(np.arange(self.Tq))

    def heads(self, h0: int, h1: int) -> "TiledMask":
        """Heads [h0, h1) of a per-head mask (itself for a shared one), sharing the blocks."""
        if self.n_heads == 1:
            return self
        return TiledMask(self.Tq, self.Tk, self.block_m, self.block_n, self.tile_state[h0:h1],
                         self.block_index[h0:h1], self.blocks, self.fully[h0:h1])

    def counts(self) -> dict[str, int]:
        """Number of empty, partial and full tiles, summed over heads."""
        return {"empty": int(np.count_nonzero(self.tile_state == EMPTY)),
                "partial": int(np.count_nonzero(self.tile_state == PARTIAL)),
                "full": int(np.count_nonzero(self.tile_state == FULL))}

    def sparsity(self) -> float:
        """Percent of tiles the flash kernel skips."""
        return 100.0 * float(np.mean(self.tile_state == EMPTY)) if self.tile_state.size else 0.0

    @property
    def nbytes(self) -> int:
        return int(self.tile_state.nbytes + self.block_index.nbytes + self.blocks.nbytes + self.fully.nbytes)

    def kernel_arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(tile_state, block_index, blocks) as writable arrays for the kernels; do not modify them."""
        arrays = getattr(self, "_kernel_arrays", None)
        if arrays is None:
            arrays = (np.array(self.tile_state), np.array(self.block_index), self.blocks)
            object.__setattr__(self, "_kernel_arrays", arrays)
        return arrays
