"""Block masks: a dense bool mask plus, for one tile size, which tiles are empty, partial or full.

A tile covers ``block_m`` queries x ``block_n`` keys of the real (unpadded) extent; the last tile row or
column is smaller when T is not a multiple of the block size. An empty tile (no allowed cell) is skipped
by the flash kernel, a full tile (every cell allowed) runs without reading the mask, a partial tile
reads it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit, prange

from attnviz.engine.runtime import parallel_section

EMPTY = 0  # no allowed cell: skipped
PARTIAL = 1  # some cells allowed: the kernel reads the mask
FULL = 2  # every cell allowed: no mask test


@njit(nogil=True, cache=True)
def _tile_row_counts(dense, block_m, block_n, counts, t):
    """counts[h, a, :] for work item t = h * nQ + a: allowed cells of each tile of that tile row."""
    _, Tq, Tk = dense.shape
    nQ = counts.shape[1]
    nK = counts.shape[2]
    h = t // nQ
    a = t - h * nQ
    for b in range(nK):
        counts[h, a, b] = 0
    for i in range(a * block_m, min((a + 1) * block_m, Tq)):
        row = dense[h, i]  # (Tk,) uint8 0/1
        for b in range(nK):
            j0 = b * block_n
            j1 = min(j0 + block_n, Tk)
            n = 0
            for j in range(j0, j1):  # a plain byte sum: vectorised
                n += row[j]
            counts[h, a, b] += n


_LO8 = np.uint64(0x00FF00FF00FF00FF)
_ONES16 = np.uint64(0x0001000100010001)


@njit(nogil=True, cache=True)
def _tile_row_counts_words(words, block_m, block_n, counts, t):
    """:func:`_tile_row_counts` reading the mask 8 cells at a time: words (nh, Tq, Tk // 8) uint64 is the
    0/1 bytes of a mask with Tk and block_n multiples of 8 and block_n <= 2040. Words are added as they
    are (no byte lane exceeds block_n / 8 <= 255), then the lanes are summed."""
    _, Tq, nW = words.shape
    nQ = counts.shape[1]
    nK = counts.shape[2]
    h = t // nQ
    a = t - h * nQ
    bw = block_n // 8
    eight = np.uint64(8)
    for b in range(nK):
        counts[h, a, b] = 0
    for i in range(a * block_m, min((a + 1) * block_m, Tq)):
        row = words[h, i]  # (Tk // 8,) uint64
        for b in range(nK):
            w0 = b * bw
            w1 = min(w0 + bw, nW)
            acc = np.uint64(0)
            for j in range(w0, w1):
                acc += row[j]
            pairs = (acc & _LO8) + ((acc >> eight) & _LO8)  # four 16-bit lanes
            counts[h, a, b] += np.int64((pairs * _ONES16) >> np.uint64(48))


@njit(nogil=True, cache=True)
def _tile_counts_words_serial(words, block_m, block_n, counts):
    for t in range(counts.shape[0] * counts.shape[1]):
        _tile_row_counts_words(words, block_m, block_n, counts, t)


@njit(parallel=True, nogil=True, cache=True)
def _tile_counts_words_parallel(words, block_m, block_n, counts):
    for t in prange(counts.shape[0] * counts.shape[1]):
        _tile_row_counts_words(words, block_m, block_n, counts, t)


@njit(nogil=True, cache=True)
def _tile_counts_serial(dense, block_m, block_n, counts):
    """counts[h, a, b] = allowed cells of tile (a, b) of head h; dense (nh, Tq, Tk) uint8 (a bool view)."""
    for t in range(counts.shape[0] * counts.shape[1]):
        _tile_row_counts(dense, block_m, block_n, counts, t)


@njit(parallel=True, nogil=True, cache=True)
def _tile_counts_parallel(dense, block_m, block_n, counts):
    """:func:`_tile_counts_serial` with the tile rows spread over the worker threads."""
    for t in prange(counts.shape[0] * counts.shape[1]):
        _tile_row_counts(dense, block_m, block_n, counts, t)


#: masks of at most this many cells are counted on the calling thread (a parallel launch costs more)
SERIAL_CELLS = 1 << 22
#: masks of at most this many cells are counted with numpy (no kernel to compile on a first start)
NUMPY_CELLS = 1 << 16


def _tile_counts_numpy(dense: np.ndarray, block_m: int, block_n: int, counts: np.ndarray) -> None:
    """:func:`_tile_counts_serial` in numpy: pad to whole tiles and sum each."""
    nh, Tq, Tk = dense.shape
    _, nQ, nK = counts.shape
    pad = np.zeros((nh, nQ * block_m, nK * block_n), dtype=np.int64)  # (nh, nQ*bm, nK*bn)
    pad[:, :Tq, :Tk] = dense
    counts[:] = pad.reshape(nh, nQ, block_m, nK, block_n).sum(axis=(2, 4))


def tile_counts(dense: np.ndarray, block_m: int, block_n: int, serial: bool | None = None) -> np.ndarray:
    """Number of allowed cells per tile: (nh, Tq, Tk) bool -> (nh, nQ, nK) int64. ``serial``: count on
    the calling thread (True), in parallel (False) or by size (None: at most SERIAL_CELLS cells)."""
    nh, Tq, Tk = dense.shape
    counts = np.zeros((nh, -(-Tq // block_m), -(-Tk // block_n)), dtype=np.int64)  # (nh, nQ, nK)
    if counts.size and Tq and Tk:
        d = np.ascontiguousarray(dense, dtype=np.bool_)
        if serial is None and d.size <= NUMPY_CELLS:
            _tile_counts_numpy(d, block_m, block_n, counts)
            return counts
        d = (d if d.flags.writeable else d.copy()).view(np.uint8)  # one compiled type: writable uint8
        on_serial = serial or (serial is None and d.size <= SERIAL_CELLS)
        if Tk % 8 == 0 and block_n % 8 == 0 and block_n <= 2040:  # 8 cells per word
            w = d.view(np.uint64)  # (nh, Tq, Tk // 8)
            if on_serial:
                _tile_counts_words_serial(w, block_m, block_n, counts)
            else:
                with parallel_section():
                    _tile_counts_words_parallel(w, block_m, block_n, counts)
        elif on_serial:
            _tile_counts_serial(d, block_m, block_n, counts)
        else:
            with parallel_section():
                _tile_counts_parallel(d, block_m, block_n, counts)
    return counts


def coarsen_counts(counts: np.ndarray, fm: int, fn: int) -> np.ndarray:
    """Allowed-cell counts of tiles fm x fn times larger: (nh, nQ, nK) -> (nh, ceil(nQ/fm), ceil(nK/fn))."""
    h, a, b = counts.shape
    pad = np.zeros((h, -(-a // fm) * fm, -(-b // fn) * fn), dtype=counts.dtype)  # (h, nQ', nK')
    pad[:, :a, :b] = counts
    return pad.reshape(h, pad.shape[1] // fm, fm, pad.shape[2] // fn, fn).sum(axis=(2, 4))


def states_from_counts(counts: np.ndarray, Tq: int, Tk: int, block_m: int, block_n: int) -> np.ndarray:
    """Tile states EMPTY / PARTIAL / FULL from allowed-cell counts (nh, nQ, nK): (nh, nQ, nK) int8."""
    state = np.full(counts.shape, PARTIAL, dtype=np.int8)  # (nh, nQ, nK)
    state[counts == 0] = EMPTY
    state[counts == tile_sizes(Tq, Tk, block_m, block_n)[None]] = FULL
    return state


def tile_sizes(Tq: int, Tk: int, block_m: int, block_n: int) -> np.ndarray:
    """Number of cells of each tile over the real extent: (nQ, nK) int64."""
    rows = np.minimum(block_m, Tq - np.arange(0, Tq, block_m))  # (nQ,)
    cols = np.minimum(block_n, Tk - np.arange(0, Tk, block_n))  # (nK,)
    return rows[:, None] * cols[None, :]  # (nQ, nK)


def classify(dense: np.ndarray, block_m: int, block_n: int) -> np.ndarray:
    """Tile states EMPTY / PARTIAL / FULL of a (nh, Tq, Tk) bool mask: (nh, nQ, nK) int8."""
    _, Tq, Tk = dense.shape
    return states_from_counts(tile_counts(dense, block_m, block_n), Tq, Tk, block_m, block_n)


def _read_only(a: np.ndarray) -> np.ndarray:
    view = a.view()
    view.setflags(write=False)
    return view


MAX_BLOCK = 4096  # largest tile side: a worker's score tile is at most MAX_BLOCK^2 cells (128 MiB in float64)


def check_block(name: str, value) -> int:
    """A tile size as an int; ValueError naming ``name`` unless it is an integer in [1, MAX_BLOCK]."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    if value > MAX_BLOCK:
        raise ValueError(f"{name} must be at most {MAX_BLOCK} (a tile side), got {value}")
    return int(value)


@dataclass(frozen=True, eq=False)
class BlockMask:
    """A bool attention mask and its tile map for one tile size.

    dense:      (Tq, Tk) or (nh, Tq, Tk) bool, True = query i may attend to key j (read-only copy).
    block_m:    queries per tile (rows).
    block_n:    keys per tile (columns).
    tile_state: (nh or 1, nQ, nK) int8 of EMPTY / PARTIAL / FULL, nQ = ceil(Tq / block_m).
    """

    dense: np.ndarray
    block_m: int
    block_n: int
    tile_state: np.ndarray

    @classmethod
    def from_dense(cls, mask, block_m: int, block_n: int) -> "BlockMask":
        """Classify every tile of a bool mask (Tq, Tk) or (nh, Tq, Tk) for tiles of block_m x block_n."""
        block_m = check_block("block_m", block_m)
        block_n = check_block("block_n", block_n)
        arr = np.asarray(mask)
        if arr.dtype != np.bool_:
            raise ValueError(f"mask must be a bool array of shape (Tq, Tk) or (nh, Tq, Tk), got dtype {arr.dtype}")
        if arr.ndim not in (2, 3):
            raise ValueError(f"mask must have shape (Tq, Tk) or (nh, Tq, Tk), got shape {arr.shape}")
        own = np.array(arr, dtype=np.bool_, order="C", copy=True)  # (Tq, Tk) or (nh, Tq, Tk)
        own_state = classify(own if own.ndim == 3 else own[None], block_m, block_n)  # (nh|1, nQ, nK)
        bmask = cls(_read_only(own), block_m, block_n, _read_only(own_state))
        # the kernels get the writable originals: numba compiles read-only arrays as another type
        object.__setattr__(bmask, "_kernel_arrays", (own if own.ndim == 3 else own[None], own_state))
        return bmask

    @classmethod
    def share(cls, dense: np.ndarray, block_m: int, block_n: int, tile_state: np.ndarray) -> "BlockMask":
        """A BlockMask over the caller's own arrays, without copying or classifying them.

        dense (Tq, Tk) or (nh, Tq, Tk) C-contiguous writable bool and its tile_state (nh|1, nQ, nK)
        writable int8 (as :func:`classify` gives) go to the kernels as they are; the BlockMask exposes
        read-only views. The caller must not modify them afterwards.
        """
        block_m = check_block("block_m", block_m)
        block_n = check_block("block_n", block_n)
        for name, a, dt in (("dense", dense, np.bool_), ("tile_state", tile_state, np.int8)):
            if not isinstance(a, np.ndarray) or a.dtype != dt or not a.flags.c_contiguous or not a.flags.writeable:
                raise ValueError(f"{name} must be a writable C-contiguous {np.dtype(dt)} array")
        if dense.ndim not in (2, 3):
            raise ValueError(f"dense must have shape (Tq, Tk) or (nh, Tq, Tk), got {dense.shape}")
        d3 = dense if dense.ndim == 3 else dense[None]  # (nh|1, Tq, Tk)
        nq, nk = -(-d3.shape[1] // block_m), -(-d3.shape[2] // block_n)
        if tile_state.shape != (d3.shape[0], nq, nk):
            raise ValueError(f"tile_state must have shape {(d3.shape[0], nq, nk)} for mask {dense.shape} "
                             f"and tiles {block_m} x {block_n}, got {tile_state.shape}")
        bmask = cls(_read_only(dense), block_m, block_n, _read_only(tile_state))
        object.__setattr__(bmask, "_kernel_arrays", (d3, tile_state))
        return bmask

    def heads(self, h0: int, h1: int) -> "BlockMask":
        """The BlockMask of heads [h0, h1) of a per-head mask (itself for a mask shared by all heads),
        sharing this one's arrays."""
        if self.dense.ndim == 2:
            return self
        dense, state = self.kernel_arrays()
        return BlockMask.share(dense[h0:h1], self.block_m, self.block_n, state[h0:h1])

    def kernel_arrays(self) -> tuple[np.ndarray, np.ndarray]:
        """(dense (nh|1, Tq, Tk), tile_state) as writable arrays for the kernels; do not modify them."""
        arrays = getattr(self, "_kernel_arrays", None)
        if arrays is None:  # built directly rather than by from_dense
            dense = np.array(self.dense if self.dense.ndim == 3 else self.dense[None], dtype=np.bool_)
            arrays = (dense, np.array(self.tile_state, dtype=np.int8))
            object.__setattr__(self, "_kernel_arrays", arrays)
        return arrays

    @property
    def shape(self) -> tuple[int, ...]:
        """Shape of the dense mask."""
        return self.dense.shape

    def counts(self) -> dict[str, int]:
        """Number of empty, partial and full tiles, summed over heads."""
        return {
            "empty": int(np.count_nonzero(self.tile_state == EMPTY)),
            "partial": int(np.count_nonzero(self.tile_state == PARTIAL)),
            "full": int(np.count_nonzero(self.tile_state == FULL)),
        }

    def sparsity(self) -> float:
        """Percent of tiles the flash kernel skips (empty tiles), in [0, 100]; 0 for an empty grid."""
        total = self.tile_state.size
        if total == 0:
            return 0.0
        return 100.0 * float(np.count_nonzero(self.tile_state == EMPTY)) / total

    def __repr__(self) -> str:
        c = self.counts()
        return (f"BlockMask(shape={self.dense.shape}, block=({self.block_m}, {self.block_n}), "
                f"empty={c['empty']}, partial={c['partial']}, full={c['full']})")
