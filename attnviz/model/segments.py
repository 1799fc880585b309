"""Segments: the named, coloured, contiguous token ranges a sequence is made of.

A segment is the unit the mask designer's block rules address (image, prompt, state, actions ...).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Segment:
    """Tokens ``start <= t < stop`` of a sequence, named and coloured (``#rrggbb``)."""

    name: str
    start: int
    stop: int
    color: str = "#808080"

    def __post_init__(self):
        if not (0 <= self.start <= self.stop):
            raise ValueError(f"segment {self.name!r}: need 0 <= start <= stop, got {self.start}, {self.stop}")

    def __len__(self) -> int:
        return self.stop - self.start

    def to_dict(self) -> dict:
        return {"name": self.name, "start": self.start, "stop": self.stop, "color": self.color}

    @classmethod
    def from_dict(cls, d: dict) -> "Segment":
        return cls(str(d["name"]), int(d["start"]), int(d["stop"]), str(d.get("color", "#808080")))


def check_contiguous(segments: list[Segment], total: int) -> None:
    """Raise ValueError unless the segments tile ``range(total)`` in order without gaps."""
    pos = 0
    for s in segments:
        if s.start != pos:
            raise ValueError(f"segment {s.name!r} starts at {s.start}, expected {pos}")
        pos = s.stop
    if pos != total:
        raise ValueError(f"segments cover {pos} tokens, the sequence has {total}")
