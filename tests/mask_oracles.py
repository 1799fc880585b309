"""What the mask tests build designs with and compare the product against: segments from lengths,
a snapshot's axes, preset terms, AND / OR combinations of designs, and brute-force references for tiles, fully masked
rows and ar_masks."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np

from attnviz.model.display.mask_snapshot import Axes
from attnviz.model.mask.analysis import EMPTY, FULL, PARTIAL, ar_mask_from_mask
from attnviz.model.mask.design import MaskDesign, PresetTerm
from attnviz.model.mask.presets import clean_params
from attnviz.model.segments import Segment


def segments_from_lengths(lengths, names=None) -> list[Segment]:
    """Contiguous segments of the given lengths (names default to ``seg0``, ``seg1`` ...)."""
    out, pos = [], 0
    for i, n in enumerate(lengths):
        out.append(Segment(names[i] if names else f"seg{i}", pos, pos + int(n)))
        pos += int(n)
    return out


def snapshot_axes(lengths, names) -> Axes:
    """Self-attention axes of a mask snapshot over segments of these lengths, tokens t0, t1, ..."""
    segs = tuple(segments_from_lengths(lengths, names))
    T = sum(lengths)
    labels = tuple(f"t{i}" for i in range(T))
    return Axes(segs, segs, T, T, labels, labels, False)


def combine(a: MaskDesign, b: MaskDesign, op: str = "and") -> MaskDesign:
    """``a`` with ``b`` nested as an AND / OR preset term: compiles to ``a op b`` when ``a`` has no paint."""
    if b.heads:
        raise ValueError("cannot combine with a design that has per-head designs")
    return replace(a, presets=a.presets + (PresetTerm(op, "design", "{}", b),))


def preset_term(op: str, name: str, **params) -> PresetTerm:
    """The preset term AND-ing / OR-ing the named preset with these parameters."""
    return PresetTerm(op, name, json.dumps(clean_params(params), sort_keys=True))


def combine_preset(design: MaskDesign, name: str, op: str = "and", **params) -> MaskDesign:
    """``design`` with the named preset AND-ed / OR-ed on, re-evaluated for the current segments."""
    return replace(design, presets=design.presets + (preset_term(op, name, **params),))


def ar_mask_from_design(design: MaskDesign, segments, T: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(ar_mask int8 (T,), valid bool (T,)) reproducing the design's self-attention mask."""
    return ar_mask_from_mask(design.compile(segments, None, T, T))


def fully_masked_rows(mask) -> np.ndarray:
    """bool (Tq,) or (nh, Tq): query rows that may attend to no key."""
    return ~np.asarray(mask, dtype=bool).any(axis=-1)  # (..., Tq)


def fully_masked_row_indices(mask) -> list[np.ndarray]:
    """Per head (one entry for a 2-D mask) the indices of the fully masked query rows."""
    rows = fully_masked_rows(mask)
    rows = rows[None] if rows.ndim == 1 else rows  # (nh, Tq)
    return [np.flatnonzero(r) for r in rows]


def tile_states_bruteforce(mask, block_m: int, block_n: int) -> np.ndarray:
    """int8 (nh_or_1, nQt, nKt) by counting allowed cells per tile (the edge tiles are smaller:
    a tile is FULL when every cell it really covers is allowed)."""
    m = np.asarray(mask, dtype=bool)
    m = m[None] if m.ndim == 2 else m  # (nh, Tq, Tk)
    nh, Tq, Tk = m.shape
    nqt, nkt = -(-Tq // block_m), -(-Tk // block_n)
    out = np.zeros((nh, nqt, nkt), dtype=np.int8)  # (nh, nQt, nKt)
    for qi in range(nqt):
        rs = slice(qi * block_m, min(Tq, (qi + 1) * block_m))
        for ki in range(nkt):
            cs = slice(ki * block_n, min(Tk, (ki + 1) * block_n))
            tile = m[:, rs, cs]  # (nh, bm, bn)
            cnt = tile.reshape(nh, -1).sum(axis=1)  # (nh,)
            out[:, qi, ki] = np.where(cnt == 0, EMPTY, np.where(cnt == tile[0].size, FULL, PARTIAL))
    return out
