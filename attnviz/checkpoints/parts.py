"""Checkpoints made of several models in one file (a vision tower, a projector, a language model, an
action expert): each part's tensors found under the prefixes transformers (old and new layouts) and
lerobot save them with, checked like a single model's, and read through a view with the part's own
canonical names.

:func:`load_parts` returns a :class:`StoredTensors` whose canonical names are ``"<part>/<name>"``;
:class:`PartView` gives a part's forward pass the plain names it expects (``layers.0.self_attn.q_proj.weight``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from attnviz.checkpoints.errors import CheckpointError
from attnviz.checkpoints.safetensors_file import StoredTensors, weight_files
from attnviz.checkpoints.weights import FLOAT_DTYPES

LIST_SLACK = 10_000  # tensors beyond the file's count still listed, so a message can name the missing ones


@dataclass(frozen=True)
class Part:
    """One model inside a checkpoint file."""

    name: str  # "vision", "projector", "text", "expert" ...: the canonical prefix "<name>/"
    tensors: dict[str, tuple[int, ...]]  # canonical name -> shape, as the part's forward pass reads them
    prefixes: tuple[str, ...]  # where the file may keep them ("model.language_model.", "language_model.model." ...)
    optional: frozenset[str] = frozenset()  # names that may be absent (a tied LM head ...)


def _find_prefix(part: Part, keys: set[str]) -> str | None:
    """The first prefix under which the part's first required tensor is stored."""
    probe = next((n for n in part.tensors if n not in part.optional), None)
    if probe is None:
        return part.prefixes[0] if part.prefixes else ""
    return next((p for p in part.prefixes if p + probe in keys), None)


def load_parts(folder: Path, parts: list[Part], what: str) -> StoredTensors:
    """Map the folder's safetensors file(s) and check every part's tensors: present, floating point, of the
    shape the config implies and finite. ``what`` names the model in messages ("llava")."""
    path = Path(folder) / "model.safetensors"
    files = [path] if path.is_file() else weight_files(Path(folder))
    where = files[0].name if len(files) == 1 else f"{len(files)} shards"
    store = StoredTensors(files)
    keys = store.stored_names()
    n_t = sum(len(p.tensors) for p in parts)
    if n_t > len(keys) + LIST_SLACK:
        n_e = sum(math.prod(s) for p in parts for s in p.tensors.values())
        raise CheckpointError(f"config.json implies {n_t:,} tensors of {n_e:,} weights, but {where} holds "
                              f"{len(keys):,}: config and weights do not match")
    alias: dict[str, str] = {}
    for part in parts:
        prefix = _find_prefix(part, keys)
        if prefix is None:
            probe = next(n for n in part.tensors if n not in part.optional)
            sample = ", ".join(sorted(keys)[:4]) or "no tensors at all"
            raise CheckpointError(
                f"{where} does not hold the {what} {part.name} weights in a known layout: {probe!r} is under none "
                f"of {', '.join(repr(p) for p in part.prefixes)} (the file has {sample} ...)")
        missing = [n for n in part.tensors if prefix + n not in keys and n not in part.optional]
        if missing:
            more = f" and {len(missing) - 3} more" if len(missing) > 3 else ""
            raise CheckpointError(f"{where} lacks {what} {part.name} tensors the config implies: "
                                  f"{', '.join(prefix + m for m in missing[:3])}{more}")
        for name, shape in part.tensors.items():
            stored = prefix + name
            if stored not in keys:
                continue
            dtype, got = store.stored_dtype(stored), store.stored_shape(stored)
            if dtype not in FLOAT_DTYPES:
                raise CheckpointError(f"tensor {stored!r} has dtype {dtype}; supported weight dtypes are "
                                      f"{', '.join(FLOAT_DTYPES)}")
            if got != shape:
                raise CheckpointError(f"tensor {stored!r} has shape {got}, but config.json implies {shape}: "
                                      "config and weights do not match")
            if not store.check_finite(stored):
                raise CheckpointError(f"tensor {stored!r} contains NaN or infinite values")
            alias[f"{part.name}/{name}"] = stored
    store.select(alias)
    return store


class PartView(Mapping):
    """One part's tensors of a :func:`load_parts` store under the part's own names (``embed_tokens.weight``)."""

    def __init__(self, store, part: str, extra: dict[str, str] | None = None):
        self._s, self._p = store, part + "/"
        self._extra = dict(extra or {})  # own name -> another canonical name (a tied head read from the embedding)

    def _full(self, name: str) -> str:
        return self._extra.get(name, self._p + name)

    def __getitem__(self, name: str):
        full = self._full(name)
        if full not in self._s:
            raise KeyError(name)
        return self._s[full]

    def __contains__(self, name) -> bool:
        return isinstance(name, str) and self._full(name) in self._s

    def __iter__(self):
        n = len(self._p)
        return (k[n:] for k in self._s if k.startswith(self._p))

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def rows(self, name: str, index):
        return self._s.rows(self._full(name), index)

    def matrix(self, name: str):
        """The store's :meth:`StoredTensors.matrix` of a part's weight (plain ``self[name]`` for other stores)."""
        if name not in self:
            raise KeyError(name)
        full = self._full(name)
        return self._s.matrix(full) if hasattr(self._s, "matrix") else self._s[full]
