"""Edits of a :class:`~attnviz.model.mask.design.MaskDesign` as pure commands returning their inverse.
Painting commands of one drag stroke carry the same ``stroke`` id, so their ``merge_key`` matches and
they merge into one undo step. The session model lifts these into session commands; :class:`OnHead`
aims any of them at one head's design.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Any, Hashable

import numpy as np

from attnviz.model.mask.design import BlockSplit, MaskDesign, PresetTerm
from attnviz.model.mask.paint import CellOverrides, CellStates, paint_value
from attnviz.model.mask.presets import clean_params, preset
from attnviz.model.mask.rules import Rule
from attnviz.model.segments import Segment

_VALUE_WORD = {1: "allow", -1: "deny", 0: "erase"}


def _cells(cells) -> tuple[tuple[int, int], ...]:
    arr = np.asarray(cells if len(cells) else np.zeros((0, 2)), dtype=np.int64)
    if arr.ndim != 2 or arr.shape[1] != 2:
        raise ValueError(f"cells must be (row, col) pairs, got shape {arr.shape}")
    if arr.size and arr.min() < 0:
        raise ValueError("cell indices must be >= 0")
    return tuple((int(r), int(c)) for r, c in arr)


def _word(value) -> str:
    return _VALUE_WORD[paint_value(value)]


def _paint(design: MaskDesign, rows: np.ndarray, cols: np.ndarray, value) -> tuple[MaskDesign, "RestoreCells"]:
    old = design.overrides.get(rows, cols)  # (n,)
    new = replace(design, overrides=design.overrides.set(rows, cols, value))
    # restore in reverse order so that the first recorded (original) state of a repeated cell wins
    return new, RestoreCells(CellStates(rows, cols, old).reversed())


def _whole_lines(lines, length: int) -> tuple[np.ndarray, np.ndarray]:
    """Every cell of whole rows (or columns): each line index ``length`` times, and 0..length-1 per line."""
    along = np.repeat(np.asarray(lines, dtype=np.int64), length)  # (n * length,)
    across = np.tile(np.arange(length, dtype=np.int64), len(lines))  # (n * length,)
    return along, across


# -- rules -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class SetBlockRule:
    """Set (or with ``rule=None`` remove) the explicit rule of one (query block, key block) pair."""

    q_block: str  # query block (segment or sub-block) name
    k_block: str  # key block name
    rule: Rule | None  # the new rule; None returns the pair to inherited / default rules

    @property
    def label(self) -> str:
        what = "default" if self.rule is None else self.rule.label()
        return f"Rule {self.q_block} -> {self.k_block}: {what}"

    def apply(self, design: MaskDesign):
        old = design.rule_for(self.q_block, self.k_block)
        return design.with_rule(self.q_block, self.k_block, self.rule), SetBlockRule(self.q_block, self.k_block, old)


@dataclass(frozen=True)
class SetDefaultRule:
    """Set the rule of all pairs without an explicit rule."""

    rule: Rule  # the new default rule

    @property
    def label(self) -> str:
        return f"Default rule: {self.rule.label()}"

    def apply(self, design: MaskDesign):
        return replace(design, default_rule=self.rule), SetDefaultRule(design.default_rule)


@dataclass(frozen=True)
class SetRuleLayer:
    """Replace the default rule, the explicit rules and the preset terms at once (presets' inverse)."""

    default_rule: Rule  # new default rule
    rules: tuple  # new explicit rules, as MaskDesign.rules
    presets: tuple  # new preset terms
    label: str = "Restore rules"  # shown in the Edit menu
    roles: tuple | None = None  # new VLA roles, as MaskDesign.roles; None: left as they are

    def apply(self, design: MaskDesign):
        new = replace(design, default_rule=self.default_rule, rules=self.rules, presets=self.presets)
        if self.roles is not None:
            new = replace(new, roles=self.roles)
        return new, SetRuleLayer(design.default_rule, design.rules, design.presets, self.label,
                                 None if self.roles is None else design.roles)


# -- presets -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class ApplyPreset:
    """Replace the rule layer (default rule, rules, preset terms) with a preset's; painted cells,
    splits and per-head designs stay."""

    name: str  # preset name (attnviz.model.mask.presets.PRESETS)
    q_segments: tuple[Segment, ...]  # query segments the preset's block rules are written for
    k_segments: tuple[Segment, ...] | None = None  # key segments; None = self-attention
    params_json: str = "{}"  # the preset's parameters as JSON

    @classmethod
    def make(cls, name: str, q_segments, k_segments=None, **params) -> "ApplyPreset":
        return cls(name, tuple(q_segments), None if k_segments is None else tuple(k_segments),
                   json.dumps(clean_params(params), sort_keys=True))

    @property
    def label(self) -> str:
        return f"Preset {self.name}"

    def apply(self, design: MaskDesign):
        params = json.loads(self.params_json)
        p = preset(self.name, list(self.q_segments), None if self.k_segments is None else list(self.k_segments),
                   **params)
        new = replace(design, default_rule=p.default_rule, rules=p.rules, presets=p.presets)
        if self.name == "vla" and params.get("roles"):  # remembered for the next time the preset is applied
            new = new.with_roles(params["roles"])
            return new, SetRuleLayer(design.default_rule, design.rules, design.presets, f"Undo preset {self.name}",
                                     design.roles)
        return new, SetRuleLayer(design.default_rule, design.rules, design.presets, f"Undo preset {self.name}")


@dataclass(frozen=True)
class CombinePreset:
    """AND / OR a preset onto the design (re-evaluated for the current segments at every compile)."""

    name: str  # preset name
    op: str = "and"  # "and" or "or"
    params_json: str = "{}"  # the preset's parameters as JSON

    @classmethod
    def make(cls, name: str, op: str = "and", **params) -> "CombinePreset":
        return cls(name, op, json.dumps(clean_params(params), sort_keys=True))

    @property
    def label(self) -> str:
        return f"{self.op.upper()} preset {self.name}"

    def apply(self, design: MaskDesign):
        term = PresetTerm(self.op, self.name, self.params_json)
        new = replace(design, presets=design.presets + (term,))
        return new, SetRuleLayer(design.default_rule, design.rules, design.presets, f"Undo {self.label}")


@dataclass(frozen=True)
class RemovePresetTerm:
    """Remove the preset term at ``index``."""

    index: int  # position in MaskDesign.presets

    @property
    def label(self) -> str:
        return "Remove preset term"

    def apply(self, design: MaskDesign):
        if not 0 <= self.index < len(design.presets):
            raise ValueError(f"no preset term {self.index} (the design has {len(design.presets)})")
        terms = design.presets[:self.index] + design.presets[self.index + 1:]
        return replace(design, presets=terms), SetRuleLayer(design.default_rule, design.rules, design.presets)


# -- painting ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class PaintCells:
    """Paint cells allow / deny, or erase them back to their rule; one drag stroke shares ``stroke``."""

    cells: tuple[tuple[int, int], ...]  # (row, col) pairs, in painting order
    value: str = "allow"  # "allow", "deny" or "erase"
    stroke: int | None = None  # id of the drag stroke; equal ids merge into one undo step

    def __post_init__(self):
        object.__setattr__(self, "cells", _cells(self.cells))
        object.__setattr__(self, "value", _word(self.value))

    @property
    def label(self) -> str:
        return "Erase cells" if self.value == "erase" else f"Paint {self.value}"

    @property
    def merge_key(self) -> Hashable | None:
        return None if self.stroke is None else ("paint-cells", self.stroke, self.value)

    def apply(self, design: MaskDesign):
        arr = np.asarray(self.cells, dtype=np.int64).reshape(-1, 2)  # (n, 2)
        return _paint(design, arr[:, 0], arr[:, 1], self.value)


@dataclass(frozen=True)
class RestoreCells:
    """Set cells to recorded states (1 allow, -1 deny, 0 follow the rule): painting's inverse."""

    changes: CellStates  # (row, col, state) in order; a later duplicate wins
    stroke: int | None = None  # merge id, as for PaintCells
    label: str = "Restore cells"  # shown in the Edit menu

    @classmethod
    def make(cls, cells, states, stroke: int | None = None) -> "RestoreCells":
        arr = np.asarray(_cells(cells), dtype=np.int64).reshape(-1, 2)  # (n, 2)
        return cls(CellStates(arr[:, 0], arr[:, 1], [paint_value(v) for v in states]), stroke)

    @property
    def merge_key(self) -> Hashable | None:
        return None if self.stroke is None else ("restore-cells", self.stroke)

    def apply(self, design: MaskDesign):
        c = self.changes
        old = design.overrides.get(c.rows, c.cols)  # (n,)
        new = replace(design, overrides=design.overrides.set(c.rows, c.cols, c.states))
        return new, RestoreCells(CellStates(c.rows, c.cols, old).reversed(), self.stroke, self.label)


@dataclass(frozen=True)
class PaintRect:
    """Paint the rectangle rows ``row0:row1`` x columns ``col0:col1`` (half-open)."""

    row0: int  # first row
    row1: int  # one past the last row
    col0: int  # first column
    col1: int  # one past the last column
    value: str = "allow"  # "allow", "deny" or "erase"

    def __post_init__(self):
        if min(self.row0, self.col0) < 0 or self.row1 < self.row0 or self.col1 < self.col0:
            raise ValueError(f"bad rectangle rows {self.row0}:{self.row1}, columns {self.col0}:{self.col1}")
        object.__setattr__(self, "value", _word(self.value))

    @property
    def label(self) -> str:
        return "Erase rectangle" if self.value == "erase" else f"Paint rectangle {self.value}"

    def apply(self, design: MaskDesign):
        r, c = np.meshgrid(np.arange(self.row0, self.row1), np.arange(self.col0, self.col1), indexing="ij")
        return _paint(design, r.ravel(), c.ravel(), self.value)


# what a whole line is called, per axis: (plural noun in labels and errors, merge key tag, its length's name)
_LINE_WORDS = {"row": ("rows", "paint-rows", "n_keys"), "column": ("columns", "paint-cols", "n_queries")}


@dataclass(frozen=True)
class PaintLines:
    """Paint whole query rows (``axis="row"``, columns ``0:length``) or key columns (``axis="column"``,
    rows ``0:length``); a drag over lines shares ``stroke``."""

    axis: str  # "row" or "column"
    lines: tuple[int, ...]  # row or column indices, in painting order
    length: int  # cells in a whole line: the current Tk for rows, Tq for columns
    value: str = "allow"  # "allow", "deny" or "erase"
    stroke: int | None = None  # drag stroke id

    def __post_init__(self):
        if self.axis not in _LINE_WORDS:
            raise ValueError(f"axis must be 'row' or 'column', got {self.axis!r}")
        object.__setattr__(self, "lines", tuple(int(i) for i in np.atleast_1d(self.lines)))
        object.__setattr__(self, "value", _word(self.value))
        if any(i < 0 for i in self.lines) or self.length < 0:
            plural, _, length = _LINE_WORDS[self.axis]
            raise ValueError(f"{plural} and {length} must be >= 0")

    @property
    def label(self) -> str:
        plural = _LINE_WORDS[self.axis][0]
        return f"Erase {plural}" if self.value == "erase" else f"Paint {plural} {self.value}"

    @property
    def merge_key(self) -> Hashable | None:
        return None if self.stroke is None else (_LINE_WORDS[self.axis][1], self.stroke, self.value, self.length)

    def apply(self, design: MaskDesign):
        along, across = _whole_lines(self.lines, self.length)  # (n * length,) each
        rows, cols = (along, across) if self.axis == "row" else (across, along)
        return _paint(design, rows, cols, self.value)


@dataclass(frozen=True)
class SetOverrides:
    """Replace all painted cells (the inverse of clearing them)."""

    overrides: CellOverrides  # the painted cells to hold afterwards
    label: str = "Restore painted cells"  # shown in the Edit menu

    def apply(self, design: MaskDesign):
        return replace(design, overrides=self.overrides), SetOverrides(design.overrides, self.label)


@dataclass(frozen=True)
class ClearPaint:
    """Remove painted cells: all of them, or those in the given rows and/or columns."""

    rows: tuple[int, ...] | None = None  # only cells in these rows (None: no row filter)
    cols: tuple[int, ...] | None = None  # only cells in these columns (None: no column filter)

    @property
    def label(self) -> str:
        return "Clear painted cells"

    def apply(self, design: MaskDesign):
        new = replace(design, overrides=design.overrides.cleared(self.rows, self.cols))
        return new, SetOverrides(design.overrides, "Undo clear painted cells")


# -- blocks ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class SetBlocks:
    """Replace the splits and the explicit rules at once (the inverse of splitting and merging)."""

    splits: tuple[BlockSplit, ...]  # splits afterwards
    rules: tuple  # explicit rules afterwards
    label: str = "Restore blocks"  # shown in the Edit menu

    def apply(self, design: MaskDesign):
        return (replace(design, splits=self.splits, rules=self.rules),
                SetBlocks(design.splits, design.rules, self.label))


def _free_name(segment: str, taken: set[str]) -> str:
    k = 1
    while f"{segment}.{k}" in taken:
        k += 1
    return f"{segment}.{k}"


@dataclass(frozen=True)
class SplitBlock:
    """Cut a segment (or one of its sub-blocks) at ``offset`` tokens after the segment start.

    The part before the cut keeps its sub-block name; the part after it is named ``new_name`` (default
    ``<segment>.<k>``, the first free k). Splitting an unsplit segment names the first part
    ``first_name`` (default ``<segment>.1``). New sub-blocks inherit the segment's rules.
    """

    segment: str  # the segment to split
    offset: int  # cut point, relative to the segment start, >= 1
    new_name: str | None = None  # name of the part after the cut
    first_name: str | None = None  # name of the part before the cut when the segment was unsplit

    @property
    def label(self) -> str:
        return f"Split {self.segment} at {self.offset}"

    def apply(self, design: MaskDesign):
        if isinstance(self.offset, bool) or not isinstance(self.offset, (int, np.integer)) or self.offset < 1:
            raise ValueError(f"split offset must be an integer >= 1, got {self.offset!r}")
        old = design.split_of(self.segment)
        if old is None:
            first = self.first_name or _free_name(self.segment, set())
            second = self.new_name or _free_name(self.segment, {first})
            new = BlockSplit(self.segment, (int(self.offset),), (first, second))
        else:
            if self.offset in old.offsets:
                raise ValueError(f"{self.segment!r} is already split at {self.offset}")
            idx = int(np.searchsorted(old.offsets, self.offset))  # the sub-block being cut
            name = self.new_name or _free_name(self.segment, set(old.names))
            if name in old.names:
                raise ValueError(f"{self.segment!r} already has a sub-block named {name!r}")
            offsets = old.offsets[:idx] + (int(self.offset),) + old.offsets[idx:]
            names = old.names[:idx + 1] + (name,) + old.names[idx + 1:]
            new = BlockSplit(self.segment, offsets, names)
        splits = tuple(s for s in design.splits if s.segment != self.segment) + (new,)
        return replace(design, splits=splits), SetBlocks(design.splits, design.rules, f"Undo {self.label}")


@dataclass(frozen=True)
class MergeBlocks:
    """Remove the cut at ``offset`` (merging the sub-blocks on both sides; the first keeps its name),
    or every cut of the segment when ``offset`` is None. Rules naming a sub-block that disappears
    are removed with it."""

    segment: str  # the split segment
    offset: int | None = None  # the cut to remove; None removes all cuts

    @property
    def label(self) -> str:
        return f"Merge blocks of {self.segment}"

    def apply(self, design: MaskDesign):
        old = design.split_of(self.segment)
        if old is None:
            raise ValueError(f"segment {self.segment!r} is not split")
        if self.offset is None:
            gone, new = set(old.names) - {self.segment}, None
        else:
            if self.offset not in old.offsets:
                raise ValueError(f"{self.segment!r} has no cut at {self.offset}; cuts: {list(old.offsets)}")
            idx = old.offsets.index(self.offset)
            offsets = old.offsets[:idx] + old.offsets[idx + 1:]
            names = old.names[:idx + 1] + old.names[idx + 2:]
            gone = {old.names[idx + 1]}
            new = BlockSplit(self.segment, offsets, names) if offsets else None
            if new is None:
                gone |= set(names) - {self.segment}
        splits = tuple(s for s in design.splits if s.segment != self.segment) + ((new,) if new else ())
        rules = tuple((q, k, r) for q, k, r in design.rules if q not in gone and k not in gone)
        return (replace(design, splits=splits, rules=rules),
                SetBlocks(design.splits, design.rules, f"Undo {self.label}"))


# -- heads -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class SetPerHead:
    """Give head ``head`` its own design, or (None) make it follow the shared design again."""

    head: int  # head index
    design: MaskDesign | None  # the head's design; None removes it

    @property
    def label(self) -> str:
        return f"Head {self.head}: " + ("own mask" if self.design is not None else "shared mask")

    def apply(self, design: MaskDesign):
        if isinstance(self.head, bool) or not isinstance(self.head, (int, np.integer)) or self.head < 0:
            raise ValueError(f"head index must be an integer >= 0, got {self.head!r}")
        old = dict(design.heads).get(self.head)
        own = None if self.design is None else replace(self.design, heads=())
        return design.with_head(self.head, own), SetPerHead(self.head, old)


@dataclass(frozen=True)
class OnHead:
    """Apply ``command`` to head ``head``'s design (starting from a copy of the shared design)."""

    head: int  # head index
    command: Any  # any mask command

    @property
    def label(self) -> str:
        return f"{self.command.label} (head {self.head})"

    @property
    def merge_key(self) -> Hashable | None:
        key = getattr(self.command, "merge_key", None)
        return None if key is None else ("head", self.head, key)

    def apply(self, design: MaskDesign):
        had = self.head in dict(design.heads)
        new_head, inv = self.command.apply(design.head_design(self.head))
        new = design.with_head(self.head, new_head)
        return new, (OnHead(self.head, inv) if had else SetPerHead(self.head, None))
