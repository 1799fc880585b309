"""Where groups of image tokens sit on a picture: each group (an image, or one tile of it) a row-major
(gh, gw) grid of patches over a box (top, left, bottom, right) of the original image's pixels. Which
groups are drawn together (tiles side by side, the global image of the same picture on its own page),
the rectangle of one patch and the patch under a point: the arithmetic the picture widget of
vision-language models draws with, without Qt.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

Box = tuple[float, float, float, float]  # (top, left, bottom, right) in image pixels


@dataclass(frozen=True)
class Placed:
    """One group of patches as drawn: its grid over its box of one image."""

    image: int  # which input image
    name: str  # "image", "tile 1,2", "global image"
    grid: tuple[int, int]  # (gh, gw)
    box: Box  # (top, left, bottom, right)

    def __post_init__(self):
        gh, gw = (int(g) for g in self.grid)
        top, left, bottom, right = (float(b) for b in self.box)
        if gh < 1 or gw < 1:
            raise ValueError(f"group {self.name!r}: grid must be at least 1 x 1, got {self.grid}")
        if not all(math.isfinite(b) for b in (top, left, bottom, right)) or bottom <= top or right <= left:
            raise ValueError(f"group {self.name!r}: box must be finite with top < bottom, left < right, got {self.box}")
        object.__setattr__(self, "grid", (gh, gw))
        object.__setattr__(self, "box", (top, left, bottom, right))


@dataclass(frozen=True)
class Page:
    """Groups drawn together over one image: none of them overlaps another."""

    title: str  # "image", "tiles", "global image", "image 2: tiles" ...
    image: int  # the image they cover
    groups: tuple[int, ...]  # indices into the placed groups, in order


def _overlap(a: Box, b: Box) -> bool:
    h = min(a[2], b[2]) - max(a[0], b[0])
    w = min(a[3], b[3]) - max(a[1], b[1])
    return h > 1e-9 and w > 1e-9


def pages(placed) -> list[Page]:
    """The pages of ``placed`` groups: per image, in order, each group on the first page of that image
    it does not overlap (so tiles share a page and the global image that covers them gets its own)."""
    placed = list(placed)
    out: list[tuple[int, list[int]]] = []
    for i, g in enumerate(placed):
        for image, members in out:
            if image == g.image and not any(_overlap(g.box, placed[j].box) for j in members):
                members.append(i)
                break
        else:
            out.append((g.image, [i]))
    n_images = len({g.image for g in placed})
    result = []
    for image, members in out:
        if len(members) == 1:
            title = placed[members[0]].name
        else:
            title = "tiles"
        if n_images > 1:
            title = f"image {image + 1}: {title}"
        result.append(Page(title, image, tuple(members)))
    return result


def patch_rect(g: Placed, index: int) -> tuple[float, float, float, float]:
    """(x, y, width, height) in image pixels of patch ``index`` (row-major) of group ``g``."""
    gh, gw = g.grid
    if not 0 <= int(index) < gh * gw:
        raise ValueError(f"patch {index} is outside the {gh} x {gw} grid of {g.name!r}")
    r, c = divmod(int(index), gw)
    top, left, bottom, right = g.box
    h, w = (bottom - top) / gh, (right - left) / gw
    return left + c * w, top + r * h, w, h


def patch_at(x: float, y: float, placed, members) -> tuple[int, int] | None:
    """(group index, patch index) under image pixel (x, y) among the groups ``members`` of ``placed``
    (the last one drawn wins where they overlap), None off every grid."""
    if math.isnan(x) or math.isnan(y):
        return None
    for i in reversed(list(members)):
        g = placed[i]
        top, left, bottom, right = g.box
        if left <= x < right and top <= y < bottom:
            gh, gw = g.grid
            r = min(int((y - top) * gh / (bottom - top)), gh - 1)
            c = min(int((x - left) * gw / (right - left)), gw - 1)
            return i, r * gw + c
    return None
