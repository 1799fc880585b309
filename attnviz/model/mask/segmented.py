"""A given dense mask over named segments (a real model's own mask: causal, prefix-LM, a robot policy's
blocks) as a mask design that reproduces it exactly: one block rule per (query segment, key segment) pair
wherever that block is allow, deny, causal or a causal sliding window, and painted cells for what no
rule gives. The design then reads in the block grid like any other, follows its segments by name, and
exports as code.
"""

from __future__ import annotations

import numpy as np

from attnviz.model.mask.design import MaskDesign
from attnviz.model.mask.paint import CellOverrides
from attnviz.model.mask.rules import Rule
from attnviz.model.segments import Segment, check_contiguous


def block_rule(block: np.ndarray, q0: int, k0: int, T: int) -> tuple[Rule, np.ndarray]:
    """(rule, cells it gets wrong as (n, 2) offsets in the block) for one block ``block`` (bool (nq, nk))
    whose top-left cell is (q0, k0) of a (T, T) self-attention mask: the first of deny, allow, causal,
    causal sliding window that gives every cell, else the one of them that misses the fewest."""
    nq, nk = block.shape
    candidates = [Rule.deny(), Rule.allow(), Rule.causal()]
    pq = np.arange(q0, q0 + nq)[:, None]  # (nq, 1) global query positions
    pk = np.arange(k0, k0 + nk)[None, :]  # (1, nk)
    seen = block & (pk <= pq)
    if seen.any() and not (block & (pk > pq)).any():  # a window: the farthest key a query sees, plus one
        w = int((pq - pk)[seen].max()) + 1
        candidates.append(Rule.sliding_window(w, causal_window=True))
    best = None
    for rule in candidates:
        got = rule.evaluate(q0, q0 + nq, k0, k0 + nk, T, T)  # (nq, nk)
        wrong = np.argwhere(got != block)  # (n, 2)
        if best is None or len(wrong) < len(best[1]):
            best = (rule, wrong)
        if not len(wrong):
            break
    return best


def design_for_segments(mask, segments) -> MaskDesign:
    """A design whose compiled mask over ``segments`` equals ``mask`` (bool (T, T)) cell for cell.

    ``segments`` (objects with ``name``, ``start``, ``stop``; unique names) must tile 0..T in order.
    Pairs that deny everything follow the design's default rule (deny); painted cells (absolute
    positions) correct the blocks no rule gives. ValueError for segments that do not fit the mask."""
    m = np.asarray(mask)
    if m.dtype != bool or m.ndim != 2 or m.shape[0] != m.shape[1]:
        raise ValueError(f"the mask must be a square bool (T, T) array, got {m.dtype} {m.shape}")
    T = m.shape[0]
    segs = [Segment(str(s.name), int(s.start), int(s.stop)) for s in segments]
    check_contiguous(segs, T)
    names = [s.name for s in segs]
    if len(set(names)) != len(names):
        raise ValueError(f"segment names must be unique to address block rules: {names}")
    rules = []
    rows, cols, vals = [], [], []
    for q in segs:
        for k in segs:
            if not len(q) or not len(k):
                continue
            block = m[q.start:q.stop, k.start:k.stop]  # (nq, nk)
            rule, wrong = block_rule(block, q.start, k.start, T)
            if rule.kind != "deny":
                rules.append((q.name, k.name, rule))
            if len(wrong):
                r, c = wrong[:, 0], wrong[:, 1]
                rows.append(r + q.start)
                cols.append(c + k.start)
                vals.append(np.where(block[r, c], 1, -1))
    paint = CellOverrides()
    if rows:
        paint = CellOverrides.from_cells(np.concatenate(rows), np.concatenate(cols), np.concatenate(vals))
    design = MaskDesign(default_rule=Rule.deny(), rules=tuple(rules), overrides=paint)
    if not np.array_equal(design.compile(segs, None, T), m):  # the construction above is exact by design
        raise RuntimeError("the design does not reproduce the mask (a bug in attnviz)")
    return design


def describe_design(design: MaskDesign) -> str:
    """'3 block rules (causal 2, allow 1), 0 painted cells': what the design holds, for a status line."""
    kinds: dict[str, int] = {}
    for _q, _k, r in design.rules:
        kinds[r.label()] = kinds.get(r.label(), 0) + 1
    parts = ", ".join(f"{k} {n}" for k, n in sorted(kinds.items()))
    n = len(design.rules)
    return (f"{n} block rule{'s' if n != 1 else ''}" + (f" ({parts})" if parts else "")
            + f", {len(design.overrides)} painted cell{'s' if len(design.overrides) != 1 else ''}")
