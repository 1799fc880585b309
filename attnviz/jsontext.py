"""JSON text checked before it is parsed: how deep its brackets nest (a hostile file cannot drive the
decoder into deep recursion). Used by the session reader and the checkpoint config reader."""

from __future__ import annotations

import re

_TOKEN_RE = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]')  # a string (skipped whole) or a bracket


def depth_ok(text: str, limit: int) -> bool:
    """True when the brackets outside strings nest at most ``limit`` deep (no recursion, no parsing)."""
    depth = 0
    for m in _TOKEN_RE.finditer(text):
        c = m.group()
        if c in "[{":
            depth += 1
            if depth > limit:
                return False
        elif c in "]}":
            depth -= 1
    return True
