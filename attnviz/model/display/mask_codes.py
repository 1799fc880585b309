"""The mask designer's cells as picture codes, Qt-free: the state of every cell (a rule's mask and the cells
painted over it) as one uint8 code, the colour tables that turn codes into pixels, the painted-region
outline, and the flash tiles as rectangles. Codes are ordered so that max pooling keeps a single painted
cell, then allowed cells, visible. :mod:`attnviz.ui.widgets.mask_canvas` draws them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np

from attnviz.model.display.overlays import code_lut, hex_rgba, upsample

EMPTY, PARTIAL, FULL = 0, 1, 2
# override codes of the painted layer
DENY, NONE, ALLOW = -1, 0, 1


@dataclass(frozen=True)
class MaskColours:
    """Colours of the four cell states and the override outline for one theme."""

    rule_deny: str  # a cell its rule masks: quiet, close to the background
    rule_allow: str  # a cell its rule allows
    override_deny: str  # painted deny: darker and warmer than a rule deny
    override_allow: str  # painted allow: brighter than a rule allow
    outline: str  # border of painted regions


#: the four cell states' and the outline's colours per theme name
THEME_COLOURS = {
    "dark": MaskColours("#303030", "#3f6f9f", "#7a2333", "#62d0ff", "#ffb000"),
    "light": MaskColours("#e6e6e6", "#5b8fc7", "#c0475a", "#8fe0ff", "#e08000"),
}


# picture codes of the mask image: the four cell states, ordered so that max pooling keeps painted
# cells, then allowed cells, visible (odd codes are the allowed cells), and the painted-region outline
RULE_DENY, RULE_ALLOW, PAINT_DENY, PAINT_ALLOW, OUTLINE = 0, 1, 2, 3, 4


def state_codes(rule: np.ndarray, overrides: np.ndarray, out: Optional[np.ndarray] = None) -> np.ndarray:
    """uint8 (Tq, Tk) state code per cell: the rule (RULE_DENY/RULE_ALLOW) where nothing is painted,
    PAINT_DENY/PAINT_ALLOW where it is. ``code & 1`` is the effective mask. ``out``: a C-contiguous
    uint8 array of that shape to write into (a canvas reuses one between strokes).

    Bit arithmetic on the bytes, eight cells per 64-bit word and in place: an override byte is 0,
    1 (allow) or 255 (deny), so its bit 0 says "painted" and its bit 7 says "deny"; code bit 1 =
    painted, code bit 0 = painted ? not deny : rule."""
    o = np.ascontiguousarray(overrides, dtype=np.int8)
    r = np.ascontiguousarray(rule, dtype=bool)
    if r.shape != o.shape:
        raise ValueError(f"rule {r.shape} and overrides {o.shape} differ in shape")
    if out is None or out.shape != o.shape or out.dtype != np.uint8 or not out.flags.c_contiguous:
        out = np.empty(o.shape, dtype=np.uint8)  # (Tq, Tk)
    o8, r8, d8 = o.view(np.uint8).reshape(-1), r.view(np.uint8).reshape(-1), out.reshape(-1)  # (Tq*Tk,)
    n8 = o8.size - o8.size % 8
    parts = [(o8[n8:], r8[n8:], d8[n8:], np.uint8)]
    if n8:
        parts.append((o8[:n8].view(np.uint64), r8[:n8].view(np.uint64), d8[:n8].view(np.uint64), np.uint64))
    for ov, rv, dst, word in parts:
        one = word(0x0101010101010101 if word is np.uint64 else 1)  # bit 0 of every byte
        painted = ov & one
        np.right_shift(ov, word(7), out=dst)  # bit 0 = deny (higher bits are cleared below)
        np.invert(dst, out=dst)
        np.bitwise_and(dst, painted, out=dst)  # bit 0 = painted allow
        np.bitwise_xor(dst, rv, out=dst)
        np.bitwise_and(dst, painted, out=dst)
        np.bitwise_xor(dst, rv, out=dst)  # bit 0 = painted ? allow : rule
        np.left_shift(painted, word(1), out=painted)
        np.bitwise_or(dst, painted, out=dst)  # bit 1 = painted
    return out


def mask_lut(colours: MaskColours) -> np.ndarray:
    """(256, 4) colour table of the mask picture codes."""
    return code_lut([hex_rgba(colours.rule_deny), hex_rgba(colours.rule_allow), hex_rgba(colours.override_deny),
                     hex_rgba(colours.override_allow), hex_rgba(colours.outline)])


def mask_codes(rule: np.ndarray, overrides: np.ndarray, factor: int, states: Optional[np.ndarray] = None) -> np.ndarray:
    """uint8 (H*f, W*f) picture codes of a mask: every cell's state code repeated f x f, and (when
    factor >= 3) OUTLINE along the border of every painted region. ``states`` may pass the cells'
    state codes when they are already known."""
    o = np.asarray(overrides)
    state = state_codes(rule, o) if states is None else states  # (H, W)
    f = int(factor)
    up = upsample(state, f)  # (H*f, W*f)
    if f >= 3:
        H, W = o.shape
        painted = o != NONE
        pad = np.pad(o, 1, constant_values=NONE)  # (H+2, W+2)
        edge = np.zeros((H, f, W, f), dtype=bool)  # (H, f, W, f) sub-pixels of each cell
        # a side of a painted cell is outlined when the neighbour across it is not the same override
        edge[:, 0, :, :] |= ((pad[:-2, 1:-1] != o) & painted)[:, :, None]
        edge[:, f - 1, :, :] |= ((pad[2:, 1:-1] != o) & painted)[:, :, None]
        edge[:, :, :, 0] |= ((pad[1:-1, :-2] != o) & painted)[:, None, :]
        edge[:, :, :, f - 1] |= ((pad[1:-1, 2:] != o) & painted)[:, None, :]
        up.reshape(H, f, W, f)[edge] = OUTLINE
    return up


def mask_rgba(rule: np.ndarray, overrides: np.ndarray, colours: MaskColours, factor: int) -> np.ndarray:
    """RGBA (H*f, W*f, 4) picture of a mask: rule cells in their colours, overrides in theirs, and
    (when factor >= 3) an outline along the border of every painted region."""
    return np.ascontiguousarray(mask_lut(colours)[mask_codes(rule, overrides, factor)])  # (H*f, W*f, 4)


def tile_lut(wash: str) -> np.ndarray:
    """(256, 4) colour table of tile states: empty tiles washed out, partial and full clear."""
    return code_lut([hex_rgba(wash, 150), (0, 0, 0, 0), (0, 0, 0, 0)])




def tile_rects(states: np.ndarray, code: int, block_m: int, block_n: int, inset: float,
               shape: Optional[tuple[int, int]] = None) -> list[tuple[float, float, float, float]]:
    """(x, y, w, h) in cells of the tiles in state ``code``, inset by ``inset`` cells; with the
    mask ``shape`` (Tq, Tk), tiles reaching past the mask are cut at its edge (the kernel's last
    tile of a ragged size covers only the cells that exist)."""
    rows, cols = np.nonzero(np.asarray(states) == code)
    x0, y0 = cols * block_n, rows * block_m  # (n,)
    x1, y1 = x0 + block_n, y0 + block_m
    if shape is not None:
        x1 = np.minimum(x1, shape[1])
        y1 = np.minimum(y1, shape[0])
    return [(float(a + inset), float(b + inset), float(c - a - 2 * inset), float(d - b - 2 * inset))
            for a, b, c, d in zip(x0.tolist(), y0.tolist(), x1.tolist(), y1.tolist())]


TILE_COLOURS = {PARTIAL: "#f0a020", FULL: "#30b060"}  # outline colours: amber partial, green full


def rows_without(codes: np.ndarray, bit: int) -> np.ndarray:
    """(rows,) bool: rows of a uint8 code matrix in which no code has ``bit`` set (OR-reduced
    eight codes at a time when the row length allows)."""
    rows, cols = codes.shape
    c = np.ascontiguousarray(codes)
    if cols % 8 == 0:
        c = c.view(np.uint64)  # (rows, cols/8)
        word = np.uint64(int.from_bytes(bytes([bit]) * 8, "little"))
        return (np.bitwise_or.reduce(c, axis=1) & word) == 0
    return (np.bitwise_or.reduce(c, axis=1) & bit) == 0
