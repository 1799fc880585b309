"""What a dense mask implies: flash-tile classification and sparsity, and recognising structure that
other code bases express compactly (openpi ``ar_mask`` + ``valid``, xformers block-diagonal sequence
lengths).

Masks are bool (Tq, Tk) or (nh, Tq, Tk), ``True`` = query may attend to key.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from attnviz.model.mask.rules import make_attn_mask

if TYPE_CHECKING:
    from attnviz.engine.blockmask import BlockMask

# The engine's tile states (attnviz.engine.blockmask), repeated so that importing this module (and the
# mask exports built on it) does not load the numba kernels; tests check that the values agree.
EMPTY, PARTIAL, FULL = 0, 1, 2


def _as_mask(mask) -> np.ndarray:
    m = np.asarray(mask)
    if m.ndim not in (2, 3):
        raise ValueError(f"a mask must be 2-D (Tq, Tk) or 3-D (nh, Tq, Tk), got shape {m.shape}")
    if m.dtype != bool:
        if not np.all((m == 0) | (m == 1)):
            raise ValueError("a mask must hold booleans (or 0/1)")
        m = m.astype(bool)
    return m


# -- flash tiles -------------------------------------------------------------------------------
@dataclass(frozen=True)
class TileSummary:
    """Flash tiles of a mask for one BLOCK_M x BLOCK_N."""

    tile_state: np.ndarray  # int8 (nh_or_1, nQt, nKt): EMPTY=0 (skipped), PARTIAL=1, FULL=2
    empty: int  # tiles the flash kernel skips
    partial: int  # tiles that need the per-element mask test
    full: int  # tiles computed without a mask test
    block_m: int  # query rows per tile
    block_n: int  # keys per tile
    block_mask: BlockMask | None = None  # the engine's block mask the counts come from (for the kernel)

    @property
    def total(self) -> int:
        return self.empty + self.partial + self.full

    @property
    def sparsity(self) -> float:
        """Percentage of tiles skipped, in [0, 100] for any T (0 when there is no tile)."""
        return 100.0 * self.empty / self.total if self.total else 0.0


def tile_summary(mask, block_m: int, block_n: int) -> TileSummary:
    """Classify the flash tiles of ``mask`` with the engine's BlockMask; counts and sparsity.

    Edge tiles cover only the real extent (a mask smaller than one tile is one tile), so the
    sparsity, the share of skipped tiles, is in [0, 100] for any T.
    """
    from attnviz.engine.blockmask import BlockMask

    for v, what in ((block_m, "BLOCK_M"), (block_n, "BLOCK_N")):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
            raise ValueError(f"{what} must be an integer >= 1, got {v!r}")
    bm = BlockMask.from_dense(_as_mask(mask), int(block_m), int(block_n))
    state = bm.tile_state  # (nh_or_1, nQt, nKt)
    c = bm.counts()
    return TileSummary(state, c["empty"], c["partial"], c["full"], int(block_m), int(block_n), bm)


# -- openpi ar_mask ----------------------------------------------------------------------------
def _single(mask, what: str) -> np.ndarray:
    m = _as_mask(mask)
    if m.ndim == 3:
        if m.shape[0] and not all(np.array_equal(m[0], x) for x in m[1:]):
            raise ValueError(f"{what} describes one mask for all heads, but the heads' masks differ")
        m = m[0] if m.shape[0] else np.zeros(m.shape[1:], dtype=bool)
    return m


def ar_mask_from_mask(mask) -> tuple[np.ndarray, np.ndarray]:
    """(ar_mask int8 (T,), valid bool (T,)) with ``make_attn_mask(ar, valid) == mask`` exactly.

    Decision procedure: ``valid`` is the diagonal (a valid token always sees itself; an invalid one
    sees and is seen by nothing). Among valid tokens every row must see a prefix of the valid keys,
    the prefixes may not shrink from one row to the next, and tokens that see each other must see
    the same prefix; then each group of tokens with the same prefix is one ``ar`` block. The first
    valid token gets ``ar = 0``, every later group start ``ar = 1``, invalid tokens ``ar = 0``.
    ValueError names the first row that breaks a condition.
    """
    m = _single(mask, "an ar_mask")
    Tq, Tk = m.shape
    if Tq != Tk:
        raise ValueError(f"an ar_mask describes square self-attention masks; this one is {Tq} x {Tk}")
    T = Tq
    valid = np.diagonal(m).copy()  # (T,)
    for i in np.flatnonzero(~valid):
        if m[i].any():
            raise ValueError(f"token {i} does not see itself, so it must be invalid, "
                             f"but row {i} sees key {int(np.flatnonzero(m[i])[0])}")
        if m[:, i].any():
            raise ValueError(f"token {i} does not see itself, so it must be invalid, "
                             f"but row {int(np.flatnonzero(m[:, i])[0])} sees key {i}")
    V = np.flatnonzero(valid)  # (n,) valid token indices
    S = m[np.ix_(V, V)]  # (n, n)
    n = V.size
    e = S.sum(axis=1)  # (n,) prefix length each valid row would see
    prefix = np.arange(n)[None, :] < e[:, None]  # (n, n)
    bad = np.flatnonzero((S != prefix).any(axis=1))
    if bad.size:
        r = int(bad[0])
        a = int(np.flatnonzero(~S[r])[0])  # first unseen valid key
        b = int(np.flatnonzero(S[r, a:])[0]) + a  # a later key that is seen
        raise ValueError(f"row {V[r]} sees key {V[b]} but not key {V[a]}: not a block-causal pattern "
                         f"(every row must see a prefix of the valid keys)")
    ar = np.zeros(T, dtype=np.int8)  # (T,)
    for r in range(1, n):
        if e[r] < e[r - 1]:
            raise ValueError(f"row {V[r]} sees {e[r]} keys but the earlier row {V[r - 1]} sees {e[r - 1]}: "
                             f"not a block-causal pattern (later rows must see at least as much)")
        if e[r] != e[r - 1]:
            if e[r - 1] != r:  # row r-1 sees token r, yet they see different prefixes
                raise ValueError(f"row {V[r - 1]} sees key {V[r]} but row {V[r]} also sees key {V[e[r - 1]]}, "
                                 f"which row {V[r - 1]} does not: tokens that see each other must see "
                                 f"the same keys in an ar_mask")
            ar[V[r]] = 1
    if not np.array_equal(make_attn_mask(ar, valid), m):  # the conditions above are sufficient
        raise ValueError("the mask is not representable as an ar_mask + valid vector")
    return ar, valid


# -- xformers block-diagonal -------------------------------------------------------------------
def seqlens_from_mask(mask) -> dict:
    """xformers-style block-diagonal sequence lengths reproducing ``mask`` exactly.

    Returns ``{"q_seqlen": [...], "kv_seqlen": [...], "causal": bool}``: ``causal`` False means
    ``BlockDiagonalMask.from_seqlens(q_seqlen, kv_seqlen)``, True its ``.make_causal()`` (each
    block lower-triangular from its top-left corner). ValueError names the first cell that breaks
    the pattern.
    """
    m = _single(mask, "block-diagonal sequence lengths")
    Tq, Tk = m.shape
    empty_rows = np.flatnonzero(~m.any(axis=1))
    if empty_rows.size:
        raise ValueError(f"query row {int(empty_rows[0])} sees no key: a block-diagonal mask has no "
                         f"fully masked rows")
    q_lens, k_lens, kinds = [], [], set()
    r0 = c0 = 0
    while r0 < Tq:
        if c0 >= Tk or not m[r0, c0]:
            seen = int(np.flatnonzero(m[r0])[0])
            raise ValueError(f"row {r0} starts a block but sees key {seen} before key {c0}, the block's first key:"
                             f" not block-diagonal" if seen < c0 else
                             f"row {r0} starts a block but does not see key {c0}, the block's first key: "
                             f"not block-diagonal")
        col = m[r0:, c0]
        r1 = r0 + (int(np.argmin(col)) if not col.all() else col.size)
        row = m[r1 - 1, c0:]
        c1 = c0 + (int(np.argmin(row)) if not row.all() else row.size)
        nq, nk = r1 - r0, c1 - c0
        block = m[r0:r1, c0:c1]  # (nq, nk)
        tril = np.arange(nk)[None, :] <= np.arange(nq)[:, None]  # (nq, nk)
        if block.all() and not (nq == 1 and nk == 1):
            kinds.add("full" if not np.array_equal(tril, np.ones_like(tril)) else "either")
        elif np.array_equal(block, tril):
            kinds.add("causal" if nq * nk > 1 else "either")
        else:
            i, j = np.argwhere(block != (block.all() | tril))[0]
            raise ValueError(f"row {r0 + i} {'sees' if block[i, j] else 'does not see'} key {c0 + j} inside "
                             f"its block (rows {r0}..{r1 - 1}, keys {c0}..{c1 - 1}): not block-diagonal")
        outside = m[r0:r1].copy()
        outside[:, c0:c1] = False
        if outside.any():
            i, j = np.argwhere(outside)[0]
            raise ValueError(f"row {r0 + i} sees key {j} outside its block (rows {r0}..{r1 - 1}, keys {c0}..{c1 - 1}): "
                             f"not block-diagonal")
        q_lens.append(nq)
        k_lens.append(nk)
        r0, c0 = r1, c1
    if c0 != Tk:
        raise ValueError(f"keys {c0}..{Tk - 1} are seen by no query: a block-diagonal mask covers every key")
    kinds.discard("either")
    if len(kinds) > 1:
        raise ValueError("the blocks mix full and causal attention: xformers block-diagonal biases are "
                         "either all full or all causal")
    return {"q_seqlen": q_lens, "kv_seqlen": k_lens, "causal": kinds == {"causal"}}
