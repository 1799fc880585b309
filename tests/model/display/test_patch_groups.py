"""Groups of image tokens on a picture: pages of groups that do not overlap, a patch's rectangle and the patch
under a point."""

import math

import pytest

from attnviz.model.display.patch_groups import Page, Placed, patch_at, patch_rect, pages

TILES = [Placed(0, f"tile {r},{c}", (2, 2), (24.0 * r, 32.0 * c, 24.0 * (r + 1), 32.0 * (c + 1)))
         for r in range(2) for c in range(2)]
GLOBAL = Placed(0, "global image", (2, 2), (0.0, 0.0, 48.0, 64.0))


def test_tiles_share_a_page_and_the_global_image_has_its_own():
    assert pages(TILES + [GLOBAL]) == [Page("tiles", 0, (0, 1, 2, 3)), Page("global image", 0, (4,))]
    assert pages([GLOBAL]) == [Page("global image", 0, (0,))]
    two = [Placed(0, "image", (3, 3), (0, 0, 30, 30)), Placed(1, "image", (3, 3), (0, 0, 30, 30))]
    assert [p.title for p in pages(two)] == ["image 1: image", "image 2: image"]
    touching = [Placed(0, "a", (1, 1), (0, 0, 10, 10)), Placed(0, "b", (1, 1), (0, 10, 10, 20))]
    assert pages(touching) == [Page("tiles", 0, (0, 1))]  # sharing an edge is not overlapping


def test_patch_rectangles_and_hits_agree():
    g = Placed(0, "image", (4, 3), (10.0, 20.0, 50.0, 50.0))  # patches 10 x 10
    assert patch_rect(g, 0) == (20.0, 10.0, 10.0, 10.0)
    assert patch_rect(g, 5) == (40.0, 20.0, 10.0, 10.0)  # row 1, column 2
    for i in range(12):
        x, y, w, h = patch_rect(g, i)
        assert patch_at(x + w / 2, y + h / 2, [g], [0]) == (0, i)
        assert patch_at(x, y, [g], [0]) == (0, i)  # a patch's top-left edge belongs to it
    assert patch_at(19.9, 30, [g], [0]) is None and patch_at(50, 30, [g], [0]) is None
    assert patch_at(math.nan, 30, [g], [0]) is None
    placed = TILES + [GLOBAL]
    assert patch_at(40, 30, placed, [0, 1, 2, 3]) == (3, 0)  # the bottom-right tile's first patch
    assert patch_at(40, 30, placed, [4]) == (4, 3)
    with pytest.raises(ValueError, match="outside"):
        patch_rect(g, 12)


def test_bad_groups_are_refused():
    with pytest.raises(ValueError, match="grid"):
        Placed(0, "x", (0, 2), (0, 0, 1, 1))
    with pytest.raises(ValueError, match="box"):
        Placed(0, "x", (1, 1), (5, 0, 5, 1))
