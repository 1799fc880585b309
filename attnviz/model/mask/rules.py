"""Block rules of the mask designer: what one (query block, key block) pair of a mask allows (True =
query may attend to key). A rule is a small frozen value, evaluated on one block of a (Tq, Tk) mask
by comparing query and key *positions* (``align`` says how rows and columns become positions), and
able to write itself as a FlexAttention expression (:mod:`attnviz.model.mask.export`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

RULE_KINDS = ("allow", "deny", "causal", "anti_causal", "sliding_window", "ar_mask")
ALIGNS = ("global", "block")


@dataclass(frozen=True)
class Rule:
    """What one (query block, key block) pair allows; build with the class-method factories."""

    kind: str = "allow"  # one of RULE_KINDS
    window: int = 0  # sliding_window: the window w >= 1 (unused by other kinds)
    causal_window: bool = False  # sliding_window: only keys at or before the query (0 <= pq-pk < w)
    ar: tuple[int, ...] = ()  # ar_mask: openpi's ar_mask entries (0 or 1), one per position
    valid: tuple[bool, ...] = ()  # ar_mask: openpi's input_mask, same length as ar
    align: str = "global"  # how rows/columns become positions: "global" or "block" (see positions)
    _cum: tuple[int, ...] = field(default=(), init=False, repr=False, compare=False, hash=False)

    def __post_init__(self):
        if self.kind not in RULE_KINDS:
            raise ValueError(f"unknown mask rule {self.kind!r}; expected one of {', '.join(RULE_KINDS)}")
        if self.align not in ALIGNS:
            raise ValueError(f"unknown rule alignment {self.align!r}; expected 'global' or 'block'")
        if self.kind == "sliding_window":
            if isinstance(self.window, bool) or not isinstance(self.window, (int, np.integer)) or self.window < 1:
                raise ValueError(f"sliding window needs an integer w >= 1, got {self.window!r}")
            object.__setattr__(self, "window", int(self.window))
        elif self.window != 0 or self.causal_window:
            raise ValueError(f"rule {self.kind!r} takes no window")
        if self.kind == "ar_mask":
            ar = tuple(int(a) for a in self.ar)
            if not ar:
                raise ValueError("ar_mask rule needs a non-empty ar_mask vector")
            if any(a not in (0, 1) for a in ar):
                raise ValueError("ar_mask entries must be 0 or 1")
            valid = tuple(bool(v) for v in self.valid) if len(self.valid) else (True,) * len(ar)
            if len(valid) != len(ar):
                raise ValueError(f"ar_mask has {len(ar)} entries but valid has {len(valid)}")
            object.__setattr__(self, "ar", ar)
            object.__setattr__(self, "valid", valid)
            object.__setattr__(self, "_cum", tuple(int(c) for c in np.cumsum(ar)))
        elif self.ar or self.valid:
            raise ValueError(f"rule {self.kind!r} takes no ar_mask vector")

    # -- factories ---------------------------------------------------------------------------
    @classmethod
    def allow(cls) -> "Rule":
        return cls("allow")

    @classmethod
    def deny(cls) -> "Rule":
        return cls("deny")

    @classmethod
    def causal(cls, align: str = "global") -> "Rule":
        return cls("causal", align=align)

    @classmethod
    def anti_causal(cls, align: str = "global") -> "Rule":
        return cls("anti_causal", align=align)

    @classmethod
    def sliding_window(cls, w: int, causal_window: bool = False, align: str = "global") -> "Rule":
        return cls("sliding_window", window=w, causal_window=causal_window, align=align)

    @classmethod
    def ar_mask(cls, ar, valid=None, align: str = "block") -> "Rule":
        # "block": on a diagonal block the vector's entry t belongs to the block's t-th token
        return cls("ar_mask", ar=tuple(np.asarray(ar).ravel().tolist()),
                   valid=() if valid is None else tuple(np.asarray(valid).ravel().tolist()), align=align)

    # -- description -------------------------------------------------------------------------
    def label(self) -> str:
        """A short human label for a block cell: ``causal``, ``window 4 (causal)``, ``ar_mask[6]``."""
        if self.kind == "sliding_window":
            text = f"window {self.window}" + (" (causal)" if self.causal_window else "")
        elif self.kind == "ar_mask":
            text = f"ar_mask[{len(self.ar)}]"
        else:
            text = self.kind.replace("_", "-")
        if self.align == "block" and self.kind not in ("allow", "deny", "ar_mask"):
            text += " (block)"
        return text

    def to_dict(self) -> dict:
        d: dict = {"kind": self.kind}
        if self.kind == "sliding_window":
            d["window"] = self.window
            d["causal_window"] = self.causal_window
        if self.kind == "ar_mask":
            d["ar"] = list(self.ar)
            d["valid"] = list(self.valid)
        if self.align != "global":
            d["align"] = self.align
        return d

    @classmethod
    def from_dict(cls, d) -> "Rule":
        if not isinstance(d, dict) or not isinstance(d.get("kind"), str):
            raise ValueError(f"a mask rule must be an object with a 'kind', got {d!r}")
        unknown = set(d) - {"kind", "window", "causal_window", "ar", "valid", "align"}
        if unknown:
            raise ValueError(f"mask rule {d['kind']!r} has unknown fields {sorted(unknown)}")
        ar, valid = d.get("ar", ()), d.get("valid", ())
        if not isinstance(ar, (list, tuple)) or not isinstance(valid, (list, tuple)):
            raise ValueError("ar_mask rule: 'ar' and 'valid' must be lists")
        if any(not isinstance(a, (int, bool)) for a in ar) or any(not isinstance(v, (int, bool)) for v in valid):
            raise ValueError("ar_mask rule: 'ar' and 'valid' entries must be integers or booleans")
        return cls(kind=d["kind"], window=d.get("window", 0), causal_window=bool(d.get("causal_window", False)),
                   ar=tuple(ar), valid=tuple(valid), align=d.get("align", "global"))

    # -- evaluation --------------------------------------------------------------------------
    def positions(self, r0: int, r1: int, c0: int, c1: int, Tq: int, Tk: int,
                  rows: tuple[int, int] | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Query and key positions of rows r0:r1 and columns c0:c1 under this rule's alignment;
        ``rows`` (a, b) within r0:r1: only those rows' query positions."""
        a, b = (r0, r1) if rows is None else rows
        if self.align == "global":
            # Self-attention: global token positions, so causal on every pair composes to the ordinary
            # causal mask. Cross-attention (Tq != Tk): the diagonal is bottom-right aligned over the whole
            # matrix (xformers' LowerTriangularFromBottomRightMask): queries continue a cached key sequence.
            pq = np.arange(a, b, dtype=np.int64) + (Tk - Tq)  # (b-a,)
            pk = np.arange(c0, c1, dtype=np.int64)  # (nk,)
        else:  # local to the pair, bottom-right aligned in it: a square diagonal block's local index
            nq, nk = r1 - r0, c1 - c0
            pq = np.arange(a - r0, b - r0, dtype=np.int64) + (nk - nq)  # (b-a,)
            pk = np.arange(nk, dtype=np.int64)  # (nk,)
        return pq, pk

    def evaluate(self, r0: int, r1: int, c0: int, c1: int, Tq: int, Tk: int,
                 rows: tuple[int, int] | None = None) -> np.ndarray:
        """The rule on rows r0:r1, columns c0:c1 of a (Tq, Tk) mask -> bool (r1-r0, c1-c0); with
        ``rows`` (a, b), r0 <= a <= b <= r1, only rows a:b of that block -> bool (b-a, c1-c0)."""
        a, b = (r0, r1) if rows is None else rows
        shape = (max(b - a, 0), max(c1 - c0, 0))
        if self.kind == "allow":
            return np.ones(shape, dtype=bool)
        if self.kind == "deny":
            return np.zeros(shape, dtype=bool)
        pq, pk = self.positions(r0, r1, c0, c1, Tq, Tk, rows)
        pq, pk = pq[:, None], pk[None, :]  # (nq, 1), (1, nk)
        if self.kind == "causal":
            return np.broadcast_to(pk <= pq, shape).copy()
        if self.kind == "anti_causal":
            return np.broadcast_to(pk >= pq, shape).copy()
        if self.kind == "sliding_window":
            d = pq - pk  # (nq, nk)
            m = (d < self.window) & (d >= 0) if self.causal_window else (np.abs(d) < self.window)
            return np.broadcast_to(m, shape).copy()
        c_ext, v_ext = self.ar_tables()
        n = len(self.ar)
        iq = np.clip(pq + 1, 0, n + 1)  # (nq, 1)
        ik = np.clip(pk + 1, 0, n + 1)  # (1, nk)
        m = (c_ext[ik] <= c_ext[iq]) & v_ext[iq] & v_ext[ik]  # (nq, nk)
        return np.broadcast_to(m, shape).copy()

    def ar_tables(self) -> tuple[np.ndarray, np.ndarray]:
        """cumsum(ar) and valid extended for positions -1 and len: index with clip(p + 1, 0, len + 1)."""
        c = np.asarray(self._cum, dtype=np.int64)
        c_ext = np.concatenate([[0], c, [c[-1]]]).astype(np.int64)  # (n + 2,)
        # past the end: ar = 0, valid (extra tokens join the last group); negative positions (more
        # queries than keys) are invalid
        v_ext = np.concatenate([[False], np.asarray(self.valid, dtype=bool), [True]])  # (n + 2,)
        return c_ext, v_ext

    def flex_expr(self, pq: str, pk: str, add_table: Callable[[list, str], str]) -> str | None:
        """This rule as a tensor expression over position expressions ``pq`` and ``pk``.

        ``allow`` and ``deny`` have no expression (None): the caller selects or drops the pair.
        Only comparisons, ``&``, ``|``, ``~``, ``torch.clamp`` and table lookups are used, each
        comparison parenthesised (``&`` binds tighter than comparisons in Python). ``add_table``
        registers a module-level lookup table (values, dtype name) and returns its variable name.
        """
        if self.kind in ("allow", "deny"):
            return None
        if self.kind == "causal":
            return f"({pk} <= {pq})"
        if self.kind == "anti_causal":
            return f"({pk} >= {pq})"
        if self.kind == "sliding_window":
            if self.causal_window:
                return f"(({pq} - {pk}) >= 0) & (({pq} - {pk}) < {self.window})"
            return f"(({pq} - {pk}) < {self.window}) & (({pk} - {pq}) < {self.window})"
        c_ext, v_ext = self.ar_tables()
        c_name = add_table(c_ext.tolist(), "int64")
        v_name = add_table(v_ext.tolist(), "bool")
        n1 = len(self.ar) + 1
        iq = f"torch.clamp({pq} + 1, 0, {n1})"
        ik = f"torch.clamp({pk} + 1, 0, {n1})"
        return f"({c_name}[{ik}] <= {c_name}[{iq}]) & {v_name}[{iq}] & {v_name}[{ik}]"


def make_attn_mask(ar, valid=None) -> np.ndarray:
    """openpi's ``make_attn_mask`` for one sequence: bool (T, T) with ``M[i, j] = c[j] <= c[i]`` and
    both tokens valid, ``c = cumsum(ar)``."""
    ar = np.asarray(ar).astype(np.int64).ravel()  # (T,)
    valid = np.ones(ar.shape, dtype=bool) if valid is None else np.asarray(valid, dtype=bool).ravel()  # (T,)
    if ar.shape != valid.shape:
        raise ValueError(f"ar_mask has {ar.size} entries but valid has {valid.size}")
    if np.any((ar != 0) & (ar != 1)):
        raise ValueError("ar_mask entries must be 0 or 1")
    c = np.cumsum(ar)  # (T,)
    return (c[None, :] <= c[:, None]) & valid[:, None] & valid[None, :]  # (T, T)
