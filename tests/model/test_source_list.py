"""The inputs panel's source list without Qt: cross-attention roles of the sources, and where a
dragged source lands."""

from __future__ import annotations

import pytest

from attnviz.model.demos import build_demo
from attnviz.model.source_list import cross_from_roles, default_cross, drop_target, source_roles
from attnviz.model.state import CrossConfig, CustomSource, SessionState, TextSource


def _state(cross=None):
    srcs = (TextSource("a", "#000000", "x"), TextSource("b", "#000000", "y"), CustomSource("c", "#000000"))
    return SessionState(sources=srcs, cross=cross)


def test_roles_of_self_and_cross_attention():
    assert source_roles(_state()) == {"a": "both", "b": "both", "c": "both"}
    st = _state(CrossConfig(("a", "c"), ("c",)))
    assert source_roles(st) == {"a": "queries", "b": "unused", "c": "both"}
    tr = build_demo("translation")
    assert source_roles(tr) == {"French (decoder)": "queries", "English (encoder)": "keys/values"}


def test_cross_from_roles_keeps_existing_order_and_refuses_an_empty_side():
    st = _state(CrossConfig(("c", "a"), ("b",)))  # queries in an order other than the sequence's
    cross = cross_from_roles(st, {"a": "queries", "b": "both", "c": "queries"})
    assert cross == CrossConfig(("c", "a", "b"), ("b",))
    with pytest.raises(ValueError, match="at least one source giving queries"):
        cross_from_roles(st, {"a": "keys/values", "b": "keys/values", "c": "unused"})
    assert default_cross(_state()) == CrossConfig(("a",), ("b", "c"))
    one = SessionState(sources=(TextSource("t", "#000000", "x"),))
    assert default_cross(one) == CrossConfig(("t",), ("t",))


@pytest.mark.parametrize("src, over, below, expect", [
    (0, 2, False, 1),  # above row 2: lands between rows 1 and 2 -> index 1 after removal
    (0, 2, True, 2),  # below row 2
    (3, 0, False, 0),  # to the top
    (0, None, True, 3),  # dropped under the last row
    (1, 1, False, None),  # onto itself
    (1, 0, True, None),  # just below the row above: the same place
    (2, 1, True, None),
])
def test_drop_target(src, over, below, expect):
    assert drop_target(src, over, below, 4) == expect
