"""Top-k of one row in the order ``torch.topk`` (CPU, largest, sorted) returns it, ties included.

PyTorch's CPU top-k copies the row into (value, index) pairs and, when k * 64 <= n, runs the C++
standard library's ``partial_sort`` on them; otherwise ``nth_element`` at k - 1 and then ``sort`` of the
first k - 1 pairs, both ordering by value only (NaN above everything). Among equal values the result
is whatever those algorithms leave, which is not the lower index first: on four equal values top-2 is
experts 2 and 3. :func:`topk_indices` replays the GNU implementations (introselect with a
median-of-three pivot, introsort with a final insertion sort, heap select and heap sort) step by step,
so a router whose probabilities tie picks the experts transformers picks. Rows without ties take the
plain descending order, which every one of them gives.
"""

from __future__ import annotations

import math

import numpy as np


def _greater(x: float, y: float) -> bool:
    """The comparison torch passes: NaN before numbers, then larger before smaller."""
    return (math.isnan(x) and not math.isnan(y)) or x > y


class _Pairs:
    """(value, index) pairs with the library's iterator moves, compared by value only."""

    def __init__(self, values):
        self.v = [float(x) for x in values]
        self.i = list(range(len(self.v)))

    def less(self, a: int, b: int) -> bool:
        return _greater(self.v[a], self.v[b])

    def swap(self, a: int, b: int) -> None:
        self.v[a], self.v[b] = self.v[b], self.v[a]
        self.i[a], self.i[b] = self.i[b], self.i[a]

    def get(self, a: int) -> tuple[float, int]:
        return self.v[a], self.i[a]

    def put(self, a: int, pair: tuple[float, int]) -> None:
        self.v[a], self.i[a] = pair

    # -- pivoting (shared by nth_element and sort)
    def median_to_first(self, result: int, a: int, b: int, c: int) -> None:
        if self.less(a, b):
            if self.less(b, c):
                self.swap(result, b)
            elif self.less(a, c):
                self.swap(result, c)
            else:
                self.swap(result, a)
        elif self.less(a, c):
            self.swap(result, a)
        elif self.less(b, c):
            self.swap(result, c)
        else:
            self.swap(result, b)

    def partition_pivot(self, first: int, last: int) -> int:
        self.median_to_first(first, first + 1, first + (last - first) // 2, last - 1)
        lo, hi, pivot = first + 1, last, first
        while True:
            while self.less(lo, pivot):
                lo += 1
            hi -= 1
            while self.less(pivot, hi):
                hi -= 1
            if not lo < hi:
                return lo
            self.swap(lo, hi)
            lo += 1

    # -- insertion sorts
    def linear_insert(self, last: int) -> None:
        val = self.get(last)
        nxt = last - 1
        while _greater(val[0], self.v[nxt]):
            self.put(last, self.get(nxt))
            last, nxt = nxt, nxt - 1
        self.put(last, val)

    def insertion_sort(self, first: int, last: int) -> None:
        if first == last:
            return
        for i in range(first + 1, last):
            if self.less(i, first):
                val = self.get(i)
                for j in range(i, first, -1):
                    self.put(j, self.get(j - 1))
                self.put(first, val)
            else:
                self.linear_insert(i)

    # -- heaps (partial_sort, and the fallbacks when the recursion budget runs out)
    def push_heap(self, first: int, hole: int, top: int, val: tuple[float, int]) -> None:
        parent = (hole - 1) // 2
        while hole > top and _greater(self.v[first + parent], val[0]):
            self.put(first + hole, self.get(first + parent))
            hole = parent
            parent = (hole - 1) // 2
        self.put(first + hole, val)

    def adjust_heap(self, first: int, hole: int, length: int, val: tuple[float, int]) -> None:
        top = child = hole
        while child < (length - 1) // 2:
            child = 2 * (child + 1)
            if self.less(first + child, first + child - 1):
                child -= 1
            self.put(first + hole, self.get(first + child))
            hole = child
        if length % 2 == 0 and child == (length - 2) // 2:
            child = 2 * (child + 1)
            self.put(first + hole, self.get(first + child - 1))
            hole = child - 1
        self.push_heap(first, hole, top, val)

    def make_heap(self, first: int, last: int) -> None:
        length = last - first
        if length < 2:
            return
        for parent in range((length - 2) // 2, -1, -1):
            self.adjust_heap(first, parent, length, self.get(first + parent))

    def pop_heap(self, first: int, last: int, result: int) -> None:
        val = self.get(result)
        self.put(result, self.get(first))
        self.adjust_heap(first, 0, last - first, val)

    def heap_select(self, first: int, middle: int, last: int) -> None:
        self.make_heap(first, middle)
        for i in range(middle, last):
            if self.less(i, first):
                self.pop_heap(first, middle, i)

    def sort_heap(self, first: int, last: int) -> None:
        while last - first > 1:
            last -= 1
            self.pop_heap(first, last, last)

    def partial_sort(self, first: int, middle: int, last: int) -> None:
        self.heap_select(first, middle, last)
        self.sort_heap(first, middle)

    # -- the two algorithms torch calls
    def nth_element(self, first: int, nth: int, last: int) -> None:
        if first == last or nth == last:
            return
        depth = 2 * ((last - first).bit_length() - 1)
        while last - first > 3:
            if depth == 0:
                self.heap_select(first, nth + 1, last)
                self.swap(first, nth)
                return
            depth -= 1
            cut = self.partition_pivot(first, last)
            if cut <= nth:
                first = cut
            else:
                last = cut
        self.insertion_sort(first, last)

    def _introsort(self, first: int, last: int, depth: int) -> None:
        while last - first > 16:
            if depth == 0:
                self.partial_sort(first, last, last)
                return
            depth -= 1
            cut = self.partition_pivot(first, last)
            self._introsort(cut, last, depth)
            last = cut

    def sort(self, first: int, last: int) -> None:
        if first == last:
            return
        self._introsort(first, last, 2 * ((last - first).bit_length() - 1))
        if last - first > 16:
            self.insertion_sort(first, first + 16)
            for i in range(first + 16, last):
                self.linear_insert(i)
        else:
            self.insertion_sort(first, last)


def topk_indices(row: np.ndarray, k: int) -> np.ndarray:
    """The k indices ``torch.topk(row, k)`` returns on CPU (largest first), ties ordered as it orders them."""
    row = np.asarray(row)
    n = row.shape[0]
    if not 0 < k <= n:
        raise ValueError(f"k must be in 1..{n} (got {k})")
    if np.isfinite(row).all() and np.unique(row).size == n:  # no ties: the plain descending order
        return np.argsort(-row, kind="stable")[:k]
    p = _Pairs(row)
    if k * 64 <= n:
        p.partial_sort(0, k, n)
    else:
        p.nth_element(0, k - 1, n)
        p.sort(0, k - 1)
    return np.array(p.i[:k], dtype=np.int64)


def topk_rows(values: np.ndarray, k: int) -> np.ndarray:
    """(n, k) int64: :func:`topk_indices` of each row of values (n, E), tie-free rows all at once."""
    values = np.asarray(values)
    out = np.argsort(-values, axis=-1, kind="stable")[:, :k].astype(np.int64)  # (n, k)
    srt = np.sort(values, axis=-1)  # (n, E)
    tied = (srt[:, 1:] == srt[:, :-1]).any(axis=-1) | ~np.isfinite(values).all(axis=-1)  # (n,)
    for r in np.flatnonzero(tied):
        out[r] = topk_indices(values[r], k)
    return out
