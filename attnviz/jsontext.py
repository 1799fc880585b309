"""The one guarded reader of the JSON a user hands in (session manifests, checkpoint configs, tokenizer and
vocabulary files, safetensors headers, mask designs, ar_mask files, JSON lines of a corpus): the text's
length and the nesting of its brackets are checked before it is parsed, so a hostile file can neither
drive the decoder into deep recursion nor be read whole into memory. Each reader keeps its own error
type and words: :class:`JsonRefused` is a clause ("nests deeper than 64 levels") it puts after its name."""

from __future__ import annotations

import json
import os
import re

DEFAULT_MAX_DEPTH = 64  # real files nest a few levels (configs 3, mask designs about 20); deeper is refused

# a string (skipped whole; one left open runs to the end of the text) or a bracket. The closing quote is
# optional so that an unclosed string is one linear match: with it required, every later quote started
# a new scan to the end, and 64 kB of '"\"\"\"...' took 20 s. The decoder stops at an unclosed string
# before any bracket after it, so skipping them cannot let a deeper text through.
_TOKEN_RE = re.compile(r'"(?:[^"\\]|\\[\s\S])*"?|[\[\]{}]')


class JsonRefused(ValueError):
    """A JSON text not parsed: longer or nested deeper than its reader takes."""


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


def loads_guarded(text: str, *, max_depth: int = DEFAULT_MAX_DEPTH, max_chars: int | None = None, **json_kw):
    """``json.loads(text, **json_kw)`` once ``text`` is at most ``max_chars`` long and nests at most
    ``max_depth`` deep: :class:`JsonRefused` when it is not, ``json.JSONDecodeError`` when it is not JSON."""
    if max_chars is not None and len(text) > max_chars:
        raise JsonRefused(f"is {len(text):,} characters long, more than the {max_chars:,} read")
    if not depth_ok(text, max_depth):
        raise JsonRefused(f"nests deeper than {max_depth} levels")
    return json.loads(text, **json_kw)


def read_capped(path, max_bytes: int) -> str:
    """The UTF-8 text of the file at ``path``, read only when it is at most ``max_bytes`` long (a larger
    one, or one that grows past it while read, is :class:`JsonRefused`); OSError and UnicodeDecodeError
    as ``open`` and ``decode`` raise them."""
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size > max_bytes:
            raise JsonRefused(f"is {size:,} bytes, more than the {max_bytes:,} read")
        raw = f.read(max_bytes + 1)
    if len(raw) > max_bytes:
        raise JsonRefused(f"is more than the {max_bytes:,} bytes read")
    return raw.decode("utf-8")
