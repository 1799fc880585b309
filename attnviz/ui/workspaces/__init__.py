"""Workspaces: the window's central area shows one task at a time, each laid out at full size.
:data:`WORKSPACES` is their table (``attnviz --workspace NAME`` takes these names): the main panel,
the panels beside it and the main view's default share of the width. A panel named by two workspaces
moves to the one shown; a listed panel that no workspace names gets a workspace of its own. The
sidebar is not a workspace: it stays beside all of them.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Workspace:
    """One entry of the mode bar."""

    name: str  # the --workspace name, the settings key
    title: str  # the mode bar's label
    main: str  # id of the panel shown large
    side: tuple[str, ...] = ()  # ids of the panels beside it, top to bottom
    main_share: float = 1.0  # default share of the width the main view gets (the rest: the side column)
    tip: str = ""

    @property
    def panel_ids(self) -> tuple[str, ...]:
        return (self.main, *self.side)


WORKSPACES: tuple[Workspace, ...] = (  # in mode bar order: Ctrl+1 .. Ctrl+6
    Workspace("attention", "Attention", "heatmap", tip="the selected head's heatmap and every head as a small map"),
    Workspace("qkv", "Q · K · V", "inspector", tip="Q, K, V and W of the selected head, one (query, key) pair "
                                                  "down to single numbers, the PCA of queries and keys"),
    Workspace("image", "Image", "image", tip="attention over the image"),
    Workspace("diagnostics", "Diagnostics", "diagnostics", tip="the diagnostic studies at full size"),
    Workspace("mask", "Mask", "mask_designer", ("heatmap",), 0.74,
              "paint the mask cell by cell, block rules, presets and flash tiles; the heatmap it gives"),
    Workspace("pretrained", "Pretrained", "pretrained", tip="a real checkpoint's layers x heads and one map large"),
)


def workspace_names() -> tuple[str, ...]:
    return tuple(w.name for w in WORKSPACES)


def workspaces_for(specs) -> list[Workspace]:
    """The workspaces these panel specs fill: the table's entries whose main panel exists (side panels
    that do not exist are left out), then one workspace for each other panel outside the sidebar."""
    ids = {s.id for s in specs}
    out, named = [], set()
    for w in WORKSPACES:
        if w.main in ids:
            side = tuple(p for p in w.side if p in ids)
            out.append(Workspace(w.name, w.title, w.main, side, w.main_share if side else 1.0, w.tip))
        named.update(w.panel_ids)
    for s in specs:
        if s.area != "left" and s.id not in named:
            out.append(Workspace(s.id, s.title, s.id, tip=s.title))
    return out
