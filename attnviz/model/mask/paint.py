"""Painted cell overrides of a mask design: a sparse, immutable set of (row, col) -> allow / deny.

Cells are stored as sorted unique int64 keys ``row << 32 | col`` with an int8 value each
(``ALLOW = 1``, ``DENY = -1``); a cell that is not stored follows its rule (``NONE = 0``). The set
knows nothing about the current sequence length: cells beyond ``Tq`` / ``Tk`` are kept and simply
ignored when the overrides are made dense, so shrinking and growing a sequence loses no paint.
"""

from __future__ import annotations

import numpy as np

ALLOW = 1
DENY = -1
NONE = 0
PAINT_VALUES = {"allow": ALLOW, "deny": DENY, "erase": NONE}
_MAX_INDEX = 2**31 - 1


def paint_value(value) -> int:
    """``"allow"|"deny"|"erase"`` or 1/-1/0 -> the stored int value."""
    if isinstance(value, str):
        if value not in PAINT_VALUES:
            raise ValueError(f"paint value must be 'allow', 'deny' or 'erase', got {value!r}")
        return PAINT_VALUES[value]
    v = int(value)
    if v not in (ALLOW, DENY, NONE):
        raise ValueError(f"paint value must be 1 (allow), -1 (deny) or 0 (erase), got {value!r}")
    return v


def _as_index(a, what: str) -> np.ndarray:
    arr = np.asarray(a)
    if arr.size and not np.issubdtype(arr.dtype, np.integer):
        if np.issubdtype(arr.dtype, np.floating) and np.all(np.isfinite(arr)) and np.all(arr == np.round(arr)):
            arr = arr.astype(np.int64)
        else:
            raise ValueError(f"painted {what} indices must be integers")
    arr = arr.astype(np.int64).ravel()  # (n,)
    if arr.size and (arr.min() < 0 or arr.max() > _MAX_INDEX):
        raise ValueError(f"painted {what} index out of range 0..{_MAX_INDEX}: {int(arr.min())}..{int(arr.max())}")
    return arr


def _sorted_contains(sorted_keys: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """bool (len(keys),): which keys occur in the sorted unique array ``sorted_keys``."""
    if not sorted_keys.size or not keys.size:
        return np.zeros(keys.shape, dtype=bool)
    pos = np.minimum(np.searchsorted(sorted_keys, keys), sorted_keys.size - 1)
    return sorted_keys[pos] == keys


class CellOverrides:
    """Immutable sparse map (row, col) -> ALLOW / DENY. Equal when the same cells hold the same values."""

    __slots__ = ("_keys", "_vals")

    def __init__(self, keys: np.ndarray | None = None, vals: np.ndarray | None = None):
        keys = np.zeros(0, np.int64) if keys is None else np.asarray(keys, dtype=np.int64)  # (n,)
        vals = np.zeros(0, np.int8) if vals is None else np.asarray(vals, dtype=np.int8)  # (n,)
        if keys.shape != vals.shape or keys.ndim != 1:
            raise ValueError("cell overrides need keys and values of the same 1-D length")
        if keys.size > 1 and np.any(np.diff(keys) <= 0):
            raise ValueError("cell override keys must be sorted and unique")
        if np.any((vals != ALLOW) & (vals != DENY)):
            raise ValueError("cell override values must be 1 (allow) or -1 (deny)")
        keys.flags.writeable = False
        vals.flags.writeable = False
        self._keys, self._vals = keys, vals

    # -- construction ------------------------------------------------------------------------
    @classmethod
    def from_cells(cls, rows, cols, values) -> "CellOverrides":
        """Cells with their values (scalar or per cell); a later duplicate wins; 0 entries are dropped."""
        return cls().set(rows, cols, values)

    @classmethod
    def from_array(cls, arr) -> "CellOverrides":
        """From the (n, 3) integer array ``[row, col, value]`` written by :meth:`to_array`."""
        arr = np.asarray(arr)
        if arr.size == 0:
            return cls()
        if arr.ndim != 2 or arr.shape[1] != 3:
            raise ValueError(f"painted cells must be an (n, 3) array of [row, col, value], got shape {arr.shape}")
        vals = _as_index(np.abs(arr[:, 2]), "value") * np.sign(arr[:, 2]).astype(np.int64)  # (n,)
        if np.any((vals != ALLOW) & (vals != DENY)):
            raise ValueError("painted cell values must be 1 (allow) or -1 (deny)")
        return cls().set(arr[:, 0], arr[:, 1], vals)

    # -- queries -----------------------------------------------------------------------------
    @property
    def rows(self) -> np.ndarray:
        return (self._keys >> 32).astype(np.int64)  # (n,)

    @property
    def cols(self) -> np.ndarray:
        return (self._keys & 0xFFFFFFFF).astype(np.int64)  # (n,)

    @property
    def values(self) -> np.ndarray:
        return self._vals

    def __len__(self) -> int:
        return int(self._keys.size)

    def __bool__(self) -> bool:
        return self._keys.size > 0

    def __eq__(self, other) -> bool:
        if not isinstance(other, CellOverrides):
            return NotImplemented
        return np.array_equal(self._keys, other._keys) and np.array_equal(self._vals, other._vals)

    def __hash__(self) -> int:
        return hash((self._keys.tobytes(), self._vals.tobytes()))

    def __repr__(self) -> str:
        n_allow = int(np.count_nonzero(self._vals == ALLOW))
        return f"CellOverrides({n_allow} allow, {len(self) - n_allow} deny)"

    def get(self, rows, cols) -> np.ndarray:
        """Current values (ALLOW / DENY / NONE) of the given cells -> int8 (n,)."""
        rows, cols = np.broadcast_arrays(_as_index(rows, "row"), _as_index(cols, "column"))
        keys = (rows << 32) | cols  # (n,)
        out = np.zeros(keys.shape, dtype=np.int8)  # (n,)
        if self._keys.size and keys.size:
            pos = np.searchsorted(self._keys, keys)
            pos_c = np.minimum(pos, self._keys.size - 1)
            hit = self._keys[pos_c] == keys
            out[hit] = self._vals[pos_c[hit]]
        return out

    def dense(self, Tq: int, Tk: int) -> np.ndarray:
        """int8 (Tq, Tk): ALLOW / DENY where painted, NONE elsewhere; cells beyond Tq/Tk are ignored."""
        out = np.zeros((Tq, Tk), dtype=np.int8)  # (Tq, Tk)
        r, c = self.rows, self.cols
        inside = (r < Tq) & (c < Tk)
        out[r[inside], c[inside]] = self._vals[inside]
        return out

    def dense_rows(self, Tq: int, Tk: int, r0: int, r1: int) -> np.ndarray:
        """Rows r0:r1 of :meth:`dense`: int8 (r1-r0, Tk)."""
        out = np.zeros((r1 - r0, Tk), dtype=np.int8)  # (r1-r0, Tk)
        r, c = self.rows, self.cols
        inside = (r >= r0) & (r < min(r1, Tq)) & (c < Tk)
        out[r[inside] - r0, c[inside]] = self._vals[inside]
        return out

    def to_array(self) -> np.ndarray:
        """(n, 3) int64 ``[row, col, value]``, sorted by row then column."""
        return np.stack([self.rows, self.cols, self._vals.astype(np.int64)], axis=1).reshape(-1, 3)  # (n, 3)

    def runs(self) -> list[tuple[int, int, int, int]]:
        """Maximal horizontal runs ``(row, col_start, col_stop, value)`` of equal painted cells."""
        if not self._keys.size:
            return []
        r, c, v = self.rows, self.cols, self._vals.astype(np.int64)
        brk = np.ones(r.size, dtype=bool)  # (n,) True where a new run starts
        brk[1:] = (r[1:] != r[:-1]) | (c[1:] != c[:-1] + 1) | (v[1:] != v[:-1])
        starts = np.flatnonzero(brk)
        stops = np.append(starts[1:], r.size)
        return [(int(r[a]), int(c[a]), int(c[b - 1]) + 1, int(v[a])) for a, b in zip(starts, stops)]

    # -- edits -------------------------------------------------------------------------------
    def set(self, rows, cols, values) -> "CellOverrides":
        """A copy with the cells set to ``values`` (scalar or per cell; 0 / "erase" removes)."""
        rows, cols = _as_index(rows, "row"), _as_index(cols, "column")
        if rows.shape != cols.shape:
            raise ValueError(f"{rows.size} painted rows but {cols.size} columns")
        if isinstance(values, str) or np.ndim(values) == 0:
            vals = np.full(rows.shape, paint_value(values), dtype=np.int8)  # (n,)
        else:
            arr = np.asarray(values).ravel()  # (n,)
            if arr.dtype.kind in "iu" and np.all((arr >= -1) & (arr <= 1)):
                vals = arr.astype(np.int8)  # (n,)
            else:
                vals = np.asarray([paint_value(v) for v in arr], dtype=np.int8)  # (n,)
            if vals.shape != rows.shape:
                raise ValueError(f"{rows.size} painted cells but {vals.size} values")
        if not rows.size:
            return self
        keys = (rows << 32) | cols  # (n,)
        rk, ridx = np.unique(keys[::-1], return_index=True)  # the last occurrence of a cell wins
        rv = vals[::-1][ridx]
        keep = ~_sorted_contains(rk, self._keys)
        new_keys = np.concatenate([self._keys[keep], rk[rv != NONE]])
        new_vals = np.concatenate([self._vals[keep], rv[rv != NONE]])
        order = np.argsort(new_keys, kind="stable")
        return CellOverrides(new_keys[order], new_vals[order])

    def cleared(self, rows=None, cols=None) -> "CellOverrides":
        """Without any cell (no argument), or without the cells in the given rows and/or columns."""
        if rows is None and cols is None:
            return CellOverrides()
        drop = np.zeros(self._keys.size, dtype=bool)
        if rows is not None:
            drop |= _sorted_contains(np.unique(_as_index(rows, "row")), self.rows)
        if cols is not None:
            drop |= _sorted_contains(np.unique(_as_index(cols, "column")), self.cols)
        return CellOverrides(self._keys[~drop], self._vals[~drop])


class CellStates:
    """Immutable list of (row, col, state) with state ALLOW / DENY / NONE, in order (a later
    duplicate wins when applied); the compact record painting commands keep for their inverse."""

    __slots__ = ("rows", "cols", "states")

    def __init__(self, rows, cols, states):
        rows, cols = _as_index(rows, "row"), _as_index(cols, "column")  # (n,), (n,)
        states = np.asarray(states, dtype=np.int8).ravel()  # (n,)
        if not (rows.shape == cols.shape == states.shape):
            raise ValueError(f"{rows.size} rows, {cols.size} columns and {states.size} states differ in length")
        if np.any((states != ALLOW) & (states != DENY) & (states != NONE)):
            raise ValueError("cell states must be 1 (allow), -1 (deny) or 0 (follow the rule)")
        for a in (rows, cols, states):
            a.flags.writeable = False
        self.rows, self.cols, self.states = rows, cols, states

    def __len__(self) -> int:
        return int(self.rows.size)

    def __eq__(self, other) -> bool:
        if not isinstance(other, CellStates):
            return NotImplemented
        return all(np.array_equal(a, b) for a, b in
                   ((self.rows, other.rows), (self.cols, other.cols), (self.states, other.states)))

    def __hash__(self) -> int:
        return hash((self.rows.tobytes(), self.cols.tobytes(), self.states.tobytes()))

    def __repr__(self) -> str:
        return f"CellStates({len(self)} cells)"

    def reversed(self) -> "CellStates":
        return CellStates(self.rows[::-1], self.cols[::-1], self.states[::-1])

    def __add__(self, other: "CellStates") -> "CellStates":
        return CellStates(np.concatenate([self.rows, other.rows]), np.concatenate([self.cols, other.cols]),
                          np.concatenate([self.states, other.states]))
