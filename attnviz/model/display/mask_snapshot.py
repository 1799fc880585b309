"""What the mask designer shows, computed without Qt: the sequence's axes, the design a person is
editing (the shared one or one head's own), its compiled layers, the block table, fully masked rows
and the flash-tile classification; plus how an edit is aimed at the shared design or at one head.

Everything here is a pure function of the session state (and, for the axes, of the newest compute
response), so the panel's widgets only draw it and the tests check it directly.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from attnviz.model.commands import EditMask
from attnviz.model.mask.analysis import TileSummary, tile_summary
from attnviz.model.mask.commands import OnHead
from attnviz.model.mask.design import Block, MaskDesign, MaskLayers
from attnviz.model.mask.rules import Rule
from attnviz.model.segments import Segment


@dataclass(frozen=True)
class Axes:
    """The query and key axes the mask is compiled for."""

    q_segments: tuple[Segment, ...]  # query segments, tiling 0..Tq
    k_segments: tuple[Segment, ...]  # key segments, tiling 0..Tk (the query ones for self-attention)
    Tq: int  # number of queries (rows)
    Tk: int  # number of keys (columns)
    q_labels: tuple[str, ...]  # (Tq,) token labels of the rows
    k_labels: tuple[str, ...]  # (Tk,) token labels of the columns
    cross: bool  # True: queries and keys come from different sources

    @property
    def k_segments_arg(self):
        """What mask presets take for the key side: None for self-attention."""
        return list(self.k_segments) if self.cross else None


def axes_from_response(resp) -> Axes | None:
    """The axes of a successful compute response, or None."""
    if resp is None or not getattr(resp, "ok", False) or resp.Tq == 0 or resp.Tk == 0:
        return None
    return Axes(tuple(resp.query_segments), tuple(resp.key_segments), resp.Tq, resp.Tk,
                tuple(resp.query_labels), tuple(resp.key_labels), bool(resp.cross))


def axes_from_state(state) -> Axes:
    """The axes assembled from the session state itself (ValueError when its tokens cannot be built)."""
    from attnviz.model.sequence import assemble
    from attnviz.sources.errors import SourceError

    try:
        qseq, kseq = assemble(state)
    except SourceError as exc:
        raise ValueError(str(exc)) from None
    if qseq.T == 0 or kseq.T == 0:
        raise ValueError("the sequence is empty: add a source to design its mask")
    return Axes(tuple(qseq.segments), tuple(kseq.segments), qseq.T, kseq.T, tuple(qseq.labels),
                tuple(kseq.labels), kseq is not qseq)


@dataclass(frozen=True)
class Target:
    """Which design the person edits: the shared one (head None) or head ``head``'s.

    Editing a head that follows the shared design gives it its own design (a copy of the shared one
    with the edit applied): :class:`~attnviz.model.mask.commands.OnHead` does that.
    """

    head: int | None = None  # None: the shared design

    def lift(self, inner) -> EditMask:
        """A mask command aimed at this target, as a session command."""
        return EditMask(inner if self.head is None else OnHead(self.head, inner))

    def design(self, mask: MaskDesign) -> MaskDesign:
        """The design this target edits (without per-head designs)."""
        return replace(mask, heads=()) if self.head is None else mask.head_design(self.head)

    def owns(self, mask: MaskDesign) -> bool:
        """True when this target is a head with a design of its own (not following the shared one)."""
        return self.head is not None and self.head in dict(mask.heads)


@dataclass(frozen=True)
class BlockCell:
    """One (query block, key block) cell of the block grid."""

    rule: Rule  # the rule the pair follows
    explicit: bool  # True: set for this pair (or inherited from its segment); False: the default rule


@dataclass(frozen=True)
class Snapshot:
    """Everything the designer draws for one session state."""

    axes: Axes
    target: Target  # whose design is shown
    design: MaskDesign  # the shown design (no per-head part)
    layers: MaskLayers  # its compiled rule layer, painted layer and final mask, each (Tq, Tk)
    q_blocks: tuple[Block, ...]  # non-empty query blocks (segments or sub-blocks)
    k_blocks: tuple[Block, ...]  # non-empty key blocks
    cells: tuple[tuple[BlockCell, ...], ...]  # (len(q_blocks), len(k_blocks)) rules of the block grid
    fully_masked: np.ndarray  # (Tq,) bool: rows of the shown mask with no allowed key
    all_heads_fully_masked: np.ndarray  # (Tq,) bool: rows fully masked in at least one head
    tiles: TileSummary  # flash tiles of the shown mask for the session's BLOCK_M x BLOCK_N
    heads_differ: bool  # True when some head has its own design

    @property
    def mask(self) -> np.ndarray:
        return self.layers.mask


def build_snapshot(mask: MaskDesign, axes: Axes, target: Target, block_m: int, block_n: int,
                   nh: int) -> Snapshot:
    """Compile the design the target edits for these axes and classify its tiles."""
    design = target.design(mask)
    qs, ks = list(axes.q_segments), list(axes.k_segments)
    layers = design.compile_layers(qs, ks, axes.Tq, axes.Tk)
    q_blocks = tuple(b for b in design.blocks(qs) if len(b)) or (Block("all", "all", 0, axes.Tq, "#808080"),)
    k_blocks = tuple(b for b in design.blocks(ks) if len(b)) or (Block("all", "all", 0, axes.Tk, "#808080"),)
    cells = tuple(tuple(BlockCell(*design.effective_rule(bq, bk)) for bk in k_blocks) for bq in q_blocks)
    fully = ~layers.mask.any(axis=1)  # (Tq,)
    heads_differ = bool(mask.heads)
    if heads_differ:
        full = mask.compile(qs, ks, axes.Tq, axes.Tk, nh=max(1, int(nh)))  # (Tq, Tk) or (nh, Tq, Tk)
        any_dead = ~full.any(axis=-1)  # (Tq,) or (nh, Tq)
        any_dead = any_dead if any_dead.ndim == 1 else any_dead.any(axis=0)  # (Tq,)
    else:
        any_dead = fully
    return Snapshot(axes, target, design, layers, q_blocks, k_blocks, cells, fully, any_dead,
                    tile_summary(layers.mask, int(block_m), int(block_n)), heads_differ)


def describe_fully_masked(rows: np.ndarray, labels=()) -> str:
    """A sentence naming the fully masked query rows (at most eight listed)."""
    idx = np.flatnonzero(rows)
    if not idx.size:
        return "no query row is fully masked"
    names = [f"{i} ({labels[i]!s})" if i < len(labels) else str(i) for i in idx[:8]]
    more = f" and {idx.size - 8} more" if idx.size > 8 else ""
    word = "row is" if idx.size == 1 else "rows are"
    return (f"{idx.size} query {word} fully masked: {', '.join(names)}{more}; "
            f"they attend to no key and their weights and outputs are zero")


def tile_text(tiles: TileSummary) -> str:
    """``8x8 tiles: 3 empty · 10 partial · 2 full — 20.0 % skipped``."""
    return (f"{tiles.block_m}x{tiles.block_n} tiles: {tiles.empty} empty · {tiles.partial} partial · "
            f"{tiles.full} full — {tiles.sparsity:.1f} % skipped")
