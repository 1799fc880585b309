"""Image pixels -> ViT patches and back.

:func:`patchify` cuts an (H, W, C) image whose sides are multiples of P into N = (H/P)(W/P)
patches, row-major over the grid (patch ``n`` sits at grid row ``n // gw``, column ``n % gw``;
non-square grids are fine).  Each patch is flattened pixel row by pixel row with the channels
last, i.e. ``(p_row, p_col, channel)``: the ``(h p1)(w p2) c -> (h w)(p1 p2 c)`` layout of common
ViT code.  :func:`unpatchify` inverts it exactly.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attnviz.sources.errors import MAX_SOURCE_TOKENS, SourceError, positive_int


@dataclass(frozen=True, eq=False)
class Patches:
    """An image cut into a (gh, gw) grid of P x P patches, flattened row-major (module docstring)."""

    pixels: np.ndarray  # (N, P*P*C) float64 in [0, 1]; row n is grid cell (n // gw, n % gw)
    grid: tuple[int, int]  # (gh, gw) patches per column and per row; N = gh * gw
    patch: int  # P, the side of one square patch in pixels

    def __post_init__(self):
        put = object.__setattr__  # frozen: normalise fields once, here
        try:
            gh, gw = (int(g) for g in self.grid)
        except (TypeError, ValueError):
            raise SourceError(f"grid must be a (rows, columns) pair (got {self.grid!r})") from None
        P = positive_int("patch size", self.patch)
        put(self, "grid", (gh, gw))
        put(self, "patch", P)
        put(self, "pixels", np.asarray(self.pixels, dtype=np.float64))
        if self.pixels.ndim != 2 or self.pixels.shape[0] != gh * gw or self.pixels.shape[1] % (P * P):
            raise SourceError(
                f"patch pixels of shape {self.pixels.shape} do not fit a {gh}x{gw} grid of {P}x{P} patches"
            )

    @property
    def n_patches(self) -> int:
        return int(self.pixels.shape[0])

    @property
    def channels(self) -> int:
        return int(self.pixels.shape[1] // (self.patch * self.patch))

    def cell(self, n: int) -> tuple[int, int]:
        """(row, column) of patch ``n`` in the grid."""
        return divmod(int(n), self.grid[1])

    def labels(self) -> list[str]:
        """``"p0" .. "p{N-1}"`` in row-major order (see :meth:`cell` for the grid position)."""
        return [f"p{n}" for n in range(self.n_patches)]


def patchify(rgb, patch: int) -> Patches:
    """Cut an (H, W, C) image whose sides are multiples of ``patch`` into :class:`Patches`.

    uint8 pixels are divided by 255; float pixels must already lie in [0, 1].
    """
    x = np.asarray(rgb)
    P = positive_int("patch size", patch)
    if x.ndim != 3:
        raise SourceError(f"expected an image array of shape (H, W, C) (got shape {x.shape})")
    H, W, C = x.shape
    if H < P or W < P:
        raise SourceError(f"image is smaller than one {P}x{P} patch (got {H}x{W}, height x width)")
    if H % P or W % P:
        raise SourceError(
            f"patch size {P} does not divide the image size {H}x{W} (height x width); "
            "bring it to a multiple with prepare_image first"
        )
    if x.dtype == np.uint8:
        x = x.astype(np.float64) / 255.0  # (H, W, C)
    elif np.issubdtype(x.dtype, np.floating):
        x = x.astype(np.float64)
        if not np.isfinite(x).all() or x.min() < 0 or x.max() > 1:
            raise SourceError("float image pixels must be finite and lie in [0, 1]")
    else:
        raise SourceError(f"image pixels must be uint8 or float in [0, 1] (got dtype {x.dtype})")
    gh, gw = H // P, W // P
    if gh * gw > MAX_SOURCE_TOKENS:
        raise SourceError(f"a {H}x{W} image in {P}x{P} patches gives {gh * gw:,} patches, more than the "
                          f"{MAX_SOURCE_TOKENS:,} tokens a source may have; use a larger patch size or a smaller image")
    tiles = x.reshape(gh, P, gw, P, C).transpose(0, 2, 1, 3, 4)  # (gh, gw, P, P, C)
    pixels = np.ascontiguousarray(tiles.reshape(gh * gw, P * P * C))  # (N, P*P*C)
    return Patches(pixels=pixels, grid=(gh, gw), patch=P)


def unpatchify(patches: Patches) -> np.ndarray:
    """Reassemble :class:`Patches` into the float64 (H, W, C) image in [0, 1] they were cut from."""
    gh, gw = patches.grid
    P, C = patches.patch, patches.channels
    tiles = patches.pixels.reshape(gh, gw, P, P, C).transpose(0, 2, 1, 3, 4)  # (gh, P, gw, P, C)
    return np.ascontiguousarray(tiles.reshape(gh * P, gw * P, C))  # (H, W, C)
