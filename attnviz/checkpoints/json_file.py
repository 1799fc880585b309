"""The one reader of the JSON files a checkpoint folder holds (config, tokenizer and processor configs, the
weight index): a missing, unreadable, oversized, too deeply nested or non-object file is one
:class:`CheckpointError` line, and nothing is parsed before its size and nesting are checked."""

from __future__ import annotations

import json
from pathlib import Path

from attnviz.checkpoints.errors import CheckpointError
from attnviz.jsontext import JsonRefused, loads_guarded

MAX_JSON_BYTES = 16 * 2**20  # config files are a few kB; larger ones are not read
MAX_JSON_DEPTH = 64  # real configs nest 3 levels (id2label, task_specific_params); checked before parsing
def read_json(path: Path, what: str) -> dict:
    """Read a JSON object from ``path``; a missing, unreadable, oversized, too deeply nested or
    non-object file is a CheckpointError."""
    if not path.is_file():
        raise CheckpointError(f"{what} is missing: {path} not found")
    try:
        size = path.stat().st_size
        if size > MAX_JSON_BYTES:
            raise CheckpointError(f"{what} {path} is {size:,} bytes; a config file is at most {MAX_JSON_BYTES:,}")
        text = path.read_text(encoding="utf-8")
        data = loads_guarded(text, max_depth=MAX_JSON_DEPTH)
    except JsonRefused as exc:
        raise CheckpointError(f"{what} {path} {exc}; not a config file") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise CheckpointError(f"{what} {path} is not readable JSON ({exc})") from None
    if not isinstance(data, dict):
        raise CheckpointError(f"{what} {path} must hold a JSON object, not {type(data).__name__}")
    return data
