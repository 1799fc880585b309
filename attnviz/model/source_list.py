"""The list of token sources as the inputs panel edits it: each source's role in cross-attention,
the CrossConfig that gives sources their chosen roles, and where a dragged row lands.
"""

from __future__ import annotations

from attnviz.model.state import CrossConfig

ROLES = ("queries", "keys/values", "both", "unused")  # a source's part in cross-attention


def source_roles(state) -> dict[str, str]:
    """Each source's role (one of ROLES) in the session's attention; self-attention: all "both"."""
    cross = state.cross
    if cross is None:
        return {s.name: "both" for s in state.sources}
    roles = {}
    for s in state.sources:
        q, k = s.name in cross.queries, s.name in cross.keys
        roles[s.name] = "both" if q and k else "queries" if q else "keys/values" if k else "unused"
    return roles


def cross_from_roles(state, roles: dict[str, str]) -> CrossConfig:
    """The CrossConfig giving each named source its role; sources keep their place on a side they
    were already on, newcomers follow in sequence order. ValueError when a side would be empty."""
    names = [s.name for s in state.sources]
    old_q = state.cross.queries if state.cross is not None else ()
    old_k = state.cross.keys if state.cross is not None else ()

    def side(old, wanted):
        chosen = [n for n in names if roles.get(n) in wanted]
        return tuple([n for n in old if n in chosen] + [n for n in chosen if n not in old])

    q, k = side(old_q, ("queries", "both")), side(old_k, ("keys/values", "both"))
    if not q or not k:
        raise ValueError("cross-attention needs at least one source giving queries and one giving keys/values")
    return CrossConfig(q, k)


def default_cross(state) -> CrossConfig:
    """A first cross-attention for a self-attention session: the first source gives the queries and
    the others the keys/values (a single source gives both)."""
    names = [s.name for s in state.sources]
    if not names:
        raise ValueError("add a source before switching to cross-attention")
    if len(names) == 1:
        return CrossConfig((names[0],), (names[0],))
    return CrossConfig((names[0],), tuple(names[1:]))


def drop_target(source_row: int, over_row: int | None, below: bool, n: int) -> int | None:
    """Where a source dragged from ``source_row`` lands, as a MoveSource index (its position after the
    move), when dropped on row ``over_row`` (None: below the last row) in its upper (``below`` False)
    or lower half; None when it stays where it is."""
    if not 0 <= source_row < n:
        return None
    insert = n if over_row is None else min(max(over_row, 0), n - 1) + int(bool(below))  # before removal
    if insert > source_row:
        insert -= 1
    insert = min(max(insert, 0), n - 1)
    return None if insert == source_row else insert
