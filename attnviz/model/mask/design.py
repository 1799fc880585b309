"""The mask design: block rules over segments, preset terms, painted cells and per-head designs, as one
immutable value the session holds and :mod:`attnviz.model.mask.commands` edits. It compiles to a dense
bool mask (True = query may attend to key) in three layers: rules, then preset terms (AND / OR, in
order), then painted cells, which have the final word. Everything is stored by name and offset so a
design outlives edits of the sequence: rules, splits and paint that no longer fit are kept and ignored.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from typing import Callable

import numpy as np

from attnviz.model.mask.paint import ALLOW, DENY, CellOverrides
from attnviz.model.mask.rules import Rule
from attnviz.model.segments import Segment, check_contiguous

MASK_DESIGN_VERSION = 2  # 2: the VLA roles of segments ("roles"); a design without roles is still written as 1
VLA_ROLES = ("I", "P", "A", "E")  # image, prompt / state, FAST action tokens, action-expert tokens
MAX_NESTING = 8  # designs nested in preset terms / heads, deeper payloads are refused
COMBINE_OPS = ("and", "or")


@dataclass(frozen=True)
class TermEvaluator:
    """How the preset terms of one name are checked and evaluated. The presets register theirs, so
    that a design evaluates its terms without depending on the presets."""

    check: Callable[[dict], None]  # ValueError unless the parameters are valid for this preset
    mask: Callable[..., np.ndarray]  # (q_segments, k_segments, Tq, Tk, **params) -> bool (Tq, Tk)
    rows: Callable[..., np.ndarray]  # (q_segments, k_segments, Tq, Tk, r0, r1, **params) -> bool (r1-r0, Tk)


TERM_EVALUATORS: dict[str, TermEvaluator] = {}  # preset name -> its evaluator, in registration order


def register_term(name: str, evaluator: TermEvaluator) -> None:
    """Let preset terms named ``name`` be evaluated by ``evaluator``."""
    TERM_EVALUATORS[name] = evaluator


def term_evaluator(name: str) -> TermEvaluator:
    """The evaluator registered for preset ``name``; ValueError for an unknown name."""
    if name not in TERM_EVALUATORS:
        raise ValueError(f"unknown mask preset {name!r}; expected one of {', '.join(TERM_EVALUATORS)}")
    return TERM_EVALUATORS[name]


@dataclass(frozen=True)
class BlockSplit:
    """A segment cut into named sub-blocks at offsets relative to its start."""

    segment: str  # name of the segment that is split
    # strictly increasing cut points, each >= 1, relative to the segment start so that they follow the
    # segment when tokens are added before it; a shrunk segment clamps them (later sub-blocks become
    # empty, keeping their names and rules until it grows again)
    offsets: tuple[int, ...]
    names: tuple[str, ...]  # one name per sub-block: len(offsets) + 1, unique

    def __post_init__(self):
        offsets = tuple(int(o) for o in self.offsets)
        names = tuple(str(n) for n in self.names)
        object.__setattr__(self, "offsets", offsets)
        object.__setattr__(self, "names", names)
        if not offsets:
            raise ValueError(f"split of {self.segment!r} needs at least one offset")
        if offsets[0] < 1 or any(b <= a for a, b in zip(offsets, offsets[1:])):
            raise ValueError(f"split offsets of {self.segment!r} must be increasing and >= 1, got {list(offsets)}")
        if len(names) != len(offsets) + 1:
            raise ValueError(f"split of {self.segment!r} at {len(offsets)} offsets needs {len(offsets) + 1} names")
        if len(set(names)) != len(names) or any(not n for n in names):
            raise ValueError(f"sub-block names of {self.segment!r} must be non-empty and unique: {list(names)}")

    def ranges(self, seg: Segment) -> list[tuple[str, int, int]]:
        """(name, start, stop) of every sub-block of ``seg``; offsets past its length are clamped."""
        n = len(seg)
        cuts = [0] + [min(o, n) for o in self.offsets] + [n]
        return [(name, seg.start + a, seg.start + b) for name, a, b in zip(self.names, cuts, cuts[1:])]

    def to_dict(self) -> dict:
        return {"segment": self.segment, "offsets": list(self.offsets), "names": list(self.names)}


@dataclass(frozen=True)
class Block:
    """A block of one axis for the current sequence: a segment or one of its sub-blocks."""

    name: str  # the block's name (the segment's name when unsplit)
    segment: str  # the segment it belongs to
    start: int  # first token (global index)
    stop: int  # one past the last token
    color: str  # the segment's colour

    def __len__(self) -> int:
        return self.stop - self.start


@dataclass(frozen=True)
class PresetTerm:
    """A preset (by name and JSON parameters) or a nested design, combined by AND / OR."""

    op: str  # "and" or "or": how the term combines with the mask built so far
    name: str  # a registered preset name (TERM_EVALUATORS), or "design" for a nested design
    params_json: str = "{}"  # the preset's keyword parameters as canonical JSON (hashable, persistable)
    design: "MaskDesign | None" = None  # the nested design when name == "design"

    def __post_init__(self):
        if self.op not in COMBINE_OPS:
            raise ValueError(f"preset combination must be 'and' or 'or', got {self.op!r}")
        if (self.name == "design") != (self.design is not None):
            raise ValueError("a 'design' term needs a nested design, and only it may have one")
        try:
            params = json.loads(self.params_json)
        except (TypeError, json.JSONDecodeError) as exc:
            raise ValueError(f"preset parameters are not valid JSON: {exc}") from None
        if not isinstance(params, dict):
            raise ValueError("preset parameters must be a JSON object")
        object.__setattr__(self, "params_json", json.dumps(params, sort_keys=True))
        if self.design is not None and self.design.heads:
            raise ValueError("a nested design may not have per-head designs")
        if self.name != "design":
            term_evaluator(self.name).check(params)

    @property
    def params(self) -> dict:
        return json.loads(self.params_json)

    def label(self) -> str:
        if self.design is not None:
            return f"{self.op.upper()} design"
        args = ", ".join(f"{k}={v}" for k, v in self.params.items())
        return f"{self.op.upper()} {self.name}" + (f"({args})" if args else "")


@dataclass(frozen=True)
class MaskLayers:
    """A compiled design, layer by layer, for drawing rule cells and painted cells distinctly."""

    rules: np.ndarray  # bool (Tq, Tk) or (nh, Tq, Tk): rule layer combined with preset terms
    overrides: np.ndarray  # int8, same shape: 1 painted allow, -1 painted deny, 0 follows the rules
    mask: np.ndarray  # bool, same shape: the final mask


def resolve_axis(segments, T: int | None) -> tuple[list[Segment], int]:
    """Check the segments of one axis; return them and the axis length (an empty list = one block)."""
    segments = list(segments or [])
    for s in segments:
        if not isinstance(s, Segment):
            raise ValueError(f"expected Segment objects, got {type(s).__name__}")
    if T is None:
        T = segments[-1].stop if segments else 0
    T = int(T)
    if T < 0:
        raise ValueError(f"sequence length must be >= 0, got {T}")
    if segments:
        check_contiguous(segments, T)
    return segments, T


@dataclass(frozen=True)
class MaskDesign:
    """Block rules + preset terms + painted cells (+ optional per-head designs), compiled in that order."""

    default_rule: Rule = field(default_factory=Rule.allow)  # rule of pairs without an explicit rule
    rules: tuple[tuple[str, str, Rule], ...] = ()  # explicit (query block, key block, rule), sorted
    splits: tuple[BlockSplit, ...] = ()  # sub-block splits, one per segment name, sorted
    presets: tuple[PresetTerm, ...] = ()  # AND / OR terms applied after the rule layer, in order
    overrides: CellOverrides = field(default_factory=CellOverrides)  # painted cells, the final word
    heads: tuple[tuple[int, "MaskDesign"], ...] = ()  # per-head designs replacing this one, sorted
    roles: tuple[tuple[str, str], ...] = ()  # (segment name, VLA role I/P/A/E) the person chose or confirmed, sorted

    def __post_init__(self):
        if not isinstance(self.default_rule, Rule):
            raise ValueError("the default rule must be a Rule")
        rules: dict[tuple[str, str], Rule] = {}
        for item in self.rules:
            q, k, rule = item
            if not isinstance(rule, Rule):
                raise ValueError(f"rule for ({q!r}, {k!r}) must be a Rule")
            rules[(str(q), str(k))] = rule
        object.__setattr__(self, "rules", tuple((q, k, r) for (q, k), r in sorted(rules.items())))
        seen = set()
        for s in self.splits:
            if not isinstance(s, BlockSplit):
                raise ValueError("splits must be BlockSplit objects")
            if s.segment in seen:
                raise ValueError(f"segment {s.segment!r} is split twice")
            seen.add(s.segment)
        object.__setattr__(self, "splits", tuple(sorted(self.splits, key=lambda s: s.segment)))
        for t in self.presets:
            if not isinstance(t, PresetTerm):
                raise ValueError("preset terms must be PresetTerm objects")
        object.__setattr__(self, "presets", tuple(self.presets))
        if not isinstance(self.overrides, CellOverrides):
            raise ValueError("painted cells must be CellOverrides")
        heads: dict[int, MaskDesign] = {}
        for h, d in self.heads:
            if isinstance(h, bool) or not isinstance(h, (int, np.integer)) or h < 0:
                raise ValueError(f"head index must be an integer >= 0, got {h!r}")
            if not isinstance(d, MaskDesign):
                raise ValueError(f"design of head {h} must be a MaskDesign")
            if d.heads:
                raise ValueError(f"the design of head {h} may not have per-head designs of its own")
            heads[int(h)] = d
        object.__setattr__(self, "heads", tuple(sorted(heads.items())))
        roles: dict[str, str] = {}
        for item in self.roles:
            if not (isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], str)):
                raise ValueError(f"a VLA role must be a (segment name, role) pair, got {item!r}")
            if item[1] not in VLA_ROLES:
                raise ValueError(f"role of segment {item[0]!r} must be one of I, P, A, E, got {item[1]!r}")
            roles[item[0]] = item[1]
        object.__setattr__(self, "roles", tuple(sorted(roles.items())))

    # -- construction ------------------------------------------------------------------------
    @classmethod
    def default(cls) -> "MaskDesign":
        """Everything allowed, no rules, no paint."""
        return cls()

    # -- queries -----------------------------------------------------------------------------
    def rule_for(self, q_block: str, k_block: str) -> Rule | None:
        """The explicit rule stored for exactly this pair of names, or None."""
        for q, k, r in self.rules:
            if q == q_block and k == k_block:
                return r
        return None

    def role_map(self) -> dict[str, str]:
        """Segment name -> VLA role remembered in this design."""
        return dict(self.roles)

    def with_roles(self, roles: dict) -> "MaskDesign":
        """This design remembering ``roles`` (segment name -> I/P/A/E) over the ones it had."""
        return replace(self, roles=tuple({**dict(self.roles), **dict(roles)}.items()))

    def split_of(self, segment: str) -> BlockSplit | None:
        for s in self.splits:
            if s.segment == segment:
                return s
        return None

    def head_design(self, h: int) -> "MaskDesign":
        """The design head ``h`` uses: its own, else this one without per-head designs."""
        for hh, d in self.heads:
            if hh == h:
                return d
        return replace(self, heads=())

    def blocks(self, segments) -> list[Block]:
        """The blocks of one axis: each segment, or its sub-blocks when split."""
        splits = {s.segment: s for s in self.splits}
        out = []
        for seg in segments:
            sp = splits.get(seg.name)
            if sp is None:
                out.append(Block(seg.name, seg.name, seg.start, seg.stop, seg.color))
            else:
                out.extend(Block(n, seg.name, a, b, seg.color) for n, a, b in sp.ranges(seg))
        return out

    def effective_rule(self, q_block: Block, k_block: Block) -> tuple[Rule, bool]:
        """The rule a pair of blocks follows and whether it is explicit (False: the default)."""
        table = {(q, k): r for q, k, r in self.rules}
        r = _lookup(table, q_block, k_block)
        return (self.default_rule, False) if r is None else (r, True)

    # -- edits (pure) ------------------------------------------------------------------------
    def with_rule(self, q_block: str, k_block: str, rule: Rule | None) -> "MaskDesign":
        rules = [(q, k, r) for q, k, r in self.rules if (q, k) != (q_block, k_block)]
        if rule is not None:
            rules.append((q_block, k_block, rule))
        return replace(self, rules=tuple(rules))

    def with_head(self, h: int, design: "MaskDesign | None") -> "MaskDesign":
        heads = [(hh, d) for hh, d in self.heads if hh != h]
        if design is not None:
            heads.append((h, design))
        return replace(self, heads=tuple(heads))

    # -- compile -----------------------------------------------------------------------------
    def compile(self, q_segments, k_segments=None, Tq: int | None = None, Tk: int | None = None,
                nh: int | None = None) -> np.ndarray:
        """The dense bool mask: (Tq, Tk), or (nh, Tq, Tk) when ``nh`` is given and heads differ.

        ``k_segments`` None means self-attention over ``q_segments``; ``Tq``/``Tk`` default to the
        segments' extent. With ``nh=None`` per-head designs are ignored (the shared mask).
        """
        return self.compile_layers(q_segments, k_segments, Tq, Tk, nh).mask

    def compile_layers(self, q_segments, k_segments=None, Tq: int | None = None, Tk: int | None = None,
                       nh: int | None = None) -> MaskLayers:
        """Rule layer, painted layer and final mask, with the shape rule of :meth:`compile`."""
        if k_segments is None:
            k_segments, Tk = q_segments, Tq if Tk is None else Tk
        q_segments, Tq = resolve_axis(q_segments, Tq)
        k_segments, Tk = resolve_axis(k_segments, Tk)
        if nh is None or not self.heads:
            if nh is not None and int(nh) < 1:
                raise ValueError(f"number of heads must be >= 1, got {nh}")
            return replace(self, heads=())._layers(q_segments, k_segments, Tq, Tk)
        nh = int(nh)
        if nh < 1:
            raise ValueError(f"number of heads must be >= 1, got {nh}")
        own = dict(self.heads)
        shared = None
        per_head = []
        for h in range(nh):
            if h in own:
                per_head.append(own[h]._layers(q_segments, k_segments, Tq, Tk))
            else:
                if shared is None:
                    shared = replace(self, heads=())._layers(q_segments, k_segments, Tq, Tk)
                per_head.append(shared)
        first = per_head[0]
        if all(np.array_equal(p.mask, first.mask) and np.array_equal(p.overrides, first.overrides)
               and np.array_equal(p.rules, first.rules) for p in per_head[1:]):
            return first
        return MaskLayers(np.stack([p.rules for p in per_head]),  # (nh, Tq, Tk)
                          np.stack([p.overrides for p in per_head]),  # (nh, Tq, Tk)
                          np.stack([p.mask for p in per_head]))  # (nh, Tq, Tk)

    def compile_rows(self, q_segments, k_segments=None, Tq: int | None = None, Tk: int | None = None,
                     nh: int | None = None, *, rows: tuple[int, int]) -> np.ndarray:
        """Query rows (r0, r1) of :meth:`compile`, without making the others: bool (r1-r0, Tk), or
        (nh, r1-r0, Tk) when ``nh`` is given and the design has per-head designs (always then, so
        every band of one mask has one shape). For masks too large to hold densely."""
        if k_segments is None:
            k_segments, Tk = q_segments, Tq if Tk is None else Tk
        q_segments, Tq = resolve_axis(q_segments, Tq)
        k_segments, Tk = resolve_axis(k_segments, Tk)
        r0, r1 = (int(x) for x in rows)
        if not 0 <= r0 <= r1 <= Tq:
            raise ValueError(f"rows must satisfy 0 <= r0 <= r1 <= {Tq}, got {rows!r}")
        if nh is None or not self.heads:
            if nh is not None and int(nh) < 1:
                raise ValueError(f"number of heads must be >= 1, got {nh}")
            return replace(self, heads=())._rows(q_segments, k_segments, Tq, Tk, r0, r1)
        nh = int(nh)
        if nh < 1:
            raise ValueError(f"number of heads must be >= 1, got {nh}")
        own = dict(self.heads)
        shared = None
        out = np.empty((nh, r1 - r0, Tk), dtype=bool)  # (nh, r1-r0, Tk)
        for h in range(nh):
            if h in own:
                out[h] = own[h]._rows(q_segments, k_segments, Tq, Tk, r0, r1)
            else:
                if shared is None:
                    shared = replace(self, heads=())._rows(q_segments, k_segments, Tq, Tk, r0, r1)
                out[h] = shared
        return out

    def _rows(self, q_segments, k_segments, Tq: int, Tk: int, r0: int, r1: int) -> np.ndarray:
        """Rows r0:r1 of ``_layers(...).mask``: bool (r1-r0, Tk)."""
        m = (self.default_rule.evaluate(0, Tq, 0, Tk, Tq, Tk, rows=(r0, r1)) if self.default_rule.align == "global"
             else np.zeros((r1 - r0, Tk), dtype=bool))  # (r1-r0, Tk)
        for bq, bk, r in self.block_pairs(q_segments, k_segments, Tq, Tk):
            a, b = max(bq.start, r0), min(bq.stop, r1)
            if a < b:
                m[a - r0:b - r0, bk.start:bk.stop] = r.evaluate(bq.start, bq.stop, bk.start, bk.stop, Tq, Tk,
                                                                rows=(a, b))
        for term in self.presets:
            t = (term.design._rows(q_segments, k_segments, Tq, Tk, r0, r1) if term.design is not None
                 else term_evaluator(term.name).rows(q_segments, k_segments, Tq, Tk, r0, r1,
                                                     **term.params))  # (r1-r0, Tk)
            m = (m & t) if term.op == "and" else (m | t)
        ov = self.overrides.dense_rows(Tq, Tk, r0, r1)  # (r1-r0, Tk)
        return (m & (ov != DENY)) | (ov == ALLOW)

    def _layers(self, q_segments, k_segments, Tq: int, Tk: int) -> MaskLayers:
        rules = self.rule_layer(q_segments, k_segments, Tq, Tk)  # (Tq, Tk)
        for term in self.presets:
            m = (term.design._layers(q_segments, k_segments, Tq, Tk).mask if term.design is not None
                 else term_evaluator(term.name).mask(q_segments, k_segments, Tq, Tk, **term.params))  # (Tq, Tk)
            rules = (rules & m) if term.op == "and" else (rules | m)
        ov = self.overrides.dense(Tq, Tk)  # (Tq, Tk)
        mask = (rules & (ov != DENY)) | (ov == ALLOW)  # (Tq, Tk)
        return MaskLayers(rules, ov, mask)

    def block_pairs(self, q_segments, k_segments, Tq: int, Tk: int):
        """The (query block, key block, rule) pairs the rule layer writes, in order, over what
        :attr:`default_rule` already gives the whole matrix when it is global-aligned (else over
        nothing): every non-empty pair whose rule differs from a global default."""
        qb = self.blocks(q_segments) or [Block("", "", 0, Tq, "#808080")]
        kb = self.blocks(k_segments) or [Block("", "", 0, Tk, "#808080")]
        table = {(q, k): r for q, k, r in self.rules}
        default_global = self.default_rule.align == "global"
        for bq in qb:
            if not len(bq):
                continue
            for bk in kb:
                if not len(bk):
                    continue
                r = _lookup(table, bq, bk)
                if r is None or (default_global and r == self.default_rule):
                    if default_global:
                        continue
                    r = self.default_rule
                yield bq, bk, r

    def rule_layer(self, q_segments, k_segments, Tq: int, Tk: int) -> np.ndarray:
        """The block rules alone (no presets, no paint) -> bool (Tq, Tk)."""
        m = (self.default_rule.evaluate(0, Tq, 0, Tk, Tq, Tk) if self.default_rule.align == "global"
             else np.zeros((Tq, Tk), dtype=bool))  # (Tq, Tk)
        for bq, bk, r in self.block_pairs(q_segments, k_segments, Tq, Tk):
            m[bq.start:bq.stop, bk.start:bk.stop] = r.evaluate(bq.start, bq.stop, bk.start, bk.stop, Tq, Tk)
        return m

    # -- persistence -------------------------------------------------------------------------
    def to_payload(self) -> tuple[dict, dict[str, np.ndarray]]:
        """A JSON-able dict and the arrays it refers to by name (painted cells as (n, 3) int64)."""
        arrays: dict[str, np.ndarray] = {}
        d = self._payload("mask", arrays)
        d["version"] = MASK_DESIGN_VERSION if _has_roles(d) else 1  # readable by older versions when it can be
        return d, arrays

    def _payload(self, prefix: str, arrays: dict) -> dict:
        ov_key = None
        if self.overrides:
            ov_key = f"{prefix}.overrides"
            arrays[ov_key] = self.overrides.to_array()  # (n, 3)
        terms = []
        for i, t in enumerate(self.presets):
            td = {"op": t.op, "name": t.name, "params": t.params}
            if t.design is not None:
                td["design"] = t.design._payload(f"{prefix}.presets.{i}", arrays)
            terms.append(td)
        return {
            "default": self.default_rule.to_dict(),
            "rules": [{"q": q, "k": k, "rule": r.to_dict()} for q, k, r in self.rules],
            "splits": [s.to_dict() for s in self.splits],
            "presets": terms,
            "overrides": ov_key,
            "heads": [{"head": h, "design": d._payload(f"{prefix}.heads.{h}", arrays)} for h, d in self.heads],
            **({"roles": [{"segment": n, "role": r} for n, r in self.roles]} if self.roles else {}),
        }

    @classmethod
    def from_payload(cls, d, arrays=None) -> "MaskDesign":
        """Rebuild a design from :meth:`to_payload` output; ValueError on any invalid content."""
        if not isinstance(d, dict):
            raise ValueError("mask design payload must be an object")
        version = d.get("version", MASK_DESIGN_VERSION)
        if not isinstance(version, int) or version < 1:
            raise ValueError(f"mask design version must be a positive integer, got {version!r}")
        if version > MASK_DESIGN_VERSION:
            raise ValueError(f"mask design version {version} is newer than this attnviz reads "
                             f"({MASK_DESIGN_VERSION}); update attnviz")
        try:
            return cls._from_payload(d, arrays or {}, nested_ok=True, depth=0)
        except (KeyError, TypeError, AttributeError, OverflowError) as exc:
            raise ValueError(f"invalid mask design: {type(exc).__name__}: {exc}") from None

    @classmethod
    def _from_payload(cls, d, arrays, nested_ok: bool, depth: int) -> "MaskDesign":
        if not isinstance(d, dict):
            raise ValueError("mask design payload must be an object")
        if depth > MAX_NESTING:
            raise ValueError(f"mask design nests designs more than {MAX_NESTING} deep")
        known = {"version", "default", "rules", "splits", "presets", "overrides", "heads", "roles"}
        unknown = set(d) - known
        if unknown:
            raise ValueError(f"mask design has unknown fields {sorted(unknown)}")
        default = Rule.from_dict(d.get("default", {"kind": "allow"}))
        rules = []
        for item in _list(d, "rules"):
            if not isinstance(item, dict) or not isinstance(item.get("q"), str) or not isinstance(item.get("k"), str):
                raise ValueError(f"a block rule needs string 'q' and 'k' block names, got {item!r}")
            rules.append((item["q"], item["k"], Rule.from_dict(item.get("rule"))))
        splits = []
        for item in _list(d, "splits"):
            if not isinstance(item, dict) or not isinstance(item.get("segment"), str):
                raise ValueError(f"a split needs a string 'segment', got {item!r}")
            offs, names = item.get("offsets"), item.get("names")
            if not isinstance(offs, list) or any(isinstance(o, bool) or not isinstance(o, int) for o in offs):
                raise ValueError(f"split offsets of {item['segment']!r} must be a list of integers")
            if not isinstance(names, list) or any(not isinstance(n, str) for n in names):
                raise ValueError(f"sub-block names of {item['segment']!r} must be a list of strings")
            splits.append(BlockSplit(item["segment"], tuple(offs), tuple(names)))
        terms = []
        for item in _list(d, "presets"):
            if not isinstance(item, dict):
                raise ValueError(f"a preset term must be an object, got {item!r}")
            params = item.get("params", {})
            if not isinstance(params, dict):
                raise ValueError("preset parameters must be an object")
            nested = item.get("design")
            nd = cls._from_payload(nested, arrays, False, depth + 1) if nested is not None else None
            terms.append(PresetTerm(item.get("op"), str(item.get("name")), json.dumps(params, sort_keys=True), nd))
        ov_key = d.get("overrides")
        overrides = CellOverrides()
        if ov_key is not None:
            if not isinstance(ov_key, str) or ov_key not in arrays:
                raise ValueError(f"painted cells refer to a missing array {ov_key!r}")
            overrides = CellOverrides.from_array(np.asarray(arrays[ov_key]))
        heads = []
        for item in _list(d, "heads"):
            if not nested_ok:
                raise ValueError("a nested design may not have per-head designs")
            if not isinstance(item, dict) or "design" not in item:
                raise ValueError(f"a per-head design needs 'head' and 'design', got {item!r}")
            heads.append((item.get("head"), cls._from_payload(item["design"], arrays, False, depth + 1)))
        roles = []
        for item in _list(d, "roles"):
            if not isinstance(item, dict) or not isinstance(item.get("segment"), str):
                raise ValueError(f"a VLA role needs a string 'segment' and a 'role', got {item!r}")
            roles.append((item["segment"], item.get("role")))
        return cls(default_rule=default, rules=tuple(rules), splits=tuple(splits), presets=tuple(terms),
                   overrides=overrides, heads=tuple(heads), roles=tuple(roles))


def _has_roles(payload: dict) -> bool:
    """True when a design payload, or one nested in it, holds VLA roles (format version 2)."""
    if payload.get("roles"):
        return True
    nested = [t["design"] for t in payload.get("presets", ()) if t.get("design") is not None]
    nested += [h["design"] for h in payload.get("heads", ())]
    return any(_has_roles(n) for n in nested)


def _list(d: dict, key: str) -> list:
    v = d.get(key, [])
    if not isinstance(v, list):
        raise ValueError(f"mask design field {key!r} must be a list")
    return v


def _lookup(table: dict, bq: Block, bk: Block) -> Rule | None:
    # most specific first, so that a split inherits its segment's rules; a sub-block named like a
    # segment (or another segment's sub-block) addresses the same rules as that name
    for key in ((bq.name, bk.name), (bq.name, bk.segment), (bq.segment, bk.name), (bq.segment, bk.segment)):
        r = table.get(key)
        if r is not None:
            return r
    return None

