"""Sequence assembly: the session's sources -> token rows X, labels, segments and per-token info.

Each source becomes one named, coloured segment, and each token a :class:`TokenInfo` a panel can
light up (a text token's span, an image token's patch). Tokenising, image patching, embedding tables
and whole sequences are cached on their inputs, so edits of the mask, view or model reuse the same
:class:`Sequence` object; an empty text source gives no tokens and a warning.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np

from attnviz.model.positional import positional_inputs
from attnviz.model.segments import Segment
from attnviz.model.state import (CustomSource, ImageSource, SessionState, TextSource, TokenizerSpec,
                                 ToySource)
from attnviz.sources.errors import SourceError

#: the most tokens one sequence may have; beyond 8,192 x 8,192 cells the mask is kept per flash tile
#: (attnviz.model.compute.DENSE_MASK_CELLS), the heatmap shows overviews, and only the flash kernel runs
MAX_TOKENS = 65536


@dataclass(frozen=True)
class TokenInfo:
    """Where one token came from."""

    source: str  # name of its source (= its segment)
    kind: str  # "text", "image", "custom" or "toy"
    index: int  # position of the token within its source
    label: str  # axis label
    token_id: int | None = None  # vocabulary id (text tokens)
    span: tuple[int, int] | None = None  # (start, stop) characters in the source's text (text tokens)
    patch: int | None = None  # row-major patch index (image tokens); None for the class token
    grid: tuple[int, int] | None = None  # (rows, cols) of the patch grid (image tokens)
    patch_size: int | None = None  # P in pixels (image tokens)

    def to_dict(self) -> dict:
        d = {"source": self.source, "kind": self.kind, "index": self.index, "label": self.label}
        for k in ("token_id", "patch", "patch_size"):
            if getattr(self, k) is not None:
                d[k] = getattr(self, k)
        for k in ("span", "grid"):
            if getattr(self, k) is not None:
                d[k] = list(getattr(self, k))
        return d


@dataclass(frozen=True, eq=False)
class Sequence:
    """One assembled sequence."""

    embeddings: np.ndarray  # (T, d_model) float64 token rows, before positions
    labels: tuple[str, ...]  # (T,) axis labels
    segments: tuple[Segment, ...]  # one per source, tiling range(T) in order
    tokens: tuple[TokenInfo, ...]  # (T,) per-token source info

    @property
    def T(self) -> int:
        return int(self.embeddings.shape[0])


# ------------------------------------------------------------------------------------------------
# caches


class LRUCache:
    """A small thread-safe least-recently-used cache, bounded by entries and optionally by bytes.

    ``nbytes(value)`` (when given with ``max_bytes``) sizes an entry; the oldest entries go first
    until both bounds hold, but the newest entry is always kept.
    """

    def __init__(self, size: int, max_bytes: int | None = None, nbytes=None):
        self._size, self._d, self._lock = size, OrderedDict(), threading.Lock()
        self._max_bytes, self._nbytes, self._sizes = max_bytes, nbytes, {}

    def peek(self, key, default=None):
        """The cached value of ``key`` (marked as recently used), or ``default``."""
        with self._lock:
            if key in self._d:
                self._d.move_to_end(key)
                return self._d[key]
        return default

    def put(self, key, value) -> None:
        with self._lock:
            self._d[key] = value
            self._d.move_to_end(key)
            if self._max_bytes is not None:
                self._sizes[key] = int(self._nbytes(value))
            while len(self._d) > 1 and (len(self._d) > self._size or self._over()):
                old, _ = self._d.popitem(last=False)
                self._sizes.pop(old, None)

    def _over(self) -> bool:
        return self._max_bytes is not None and sum(self._sizes.values()) > self._max_bytes

    def get(self, key, make):
        with self._lock:
            if key in self._d:
                self._d.move_to_end(key)
                return self._d[key]
        value = make()
        self.put(key, value)
        return value

    def clear(self):
        with self._lock:
            self._d.clear()
            self._sizes.clear()

    def __len__(self):
        return len(self._d)


_LRU = LRUCache
_tokenizers = _LRU(4)
_encodings = _LRU(64)
_tables = _LRU(4)
_images = _LRU(8)
_embedders = _LRU(8)
_blocks = _LRU(32)
_sequences = _LRU(8)  # (sources, tokenizer, d_model, embed_seed, max_tokens) -> (Sequence, warnings)

#: counts of expensive preparations actually run (not served from cache); tests read these
PREPARE_COUNTS = {"tokenize": 0, "image": 0}


def clear_caches() -> None:
    """Forget every cached tokenizer, encoding, table and image."""
    for c in (_tokenizers, _encodings, _tables, _images, _embedders, _blocks, _sequences, _positioned):
        c.clear()


def tokenizer_for(spec: TokenizerSpec):
    """The BpeTokenizer a TokenizerSpec names (cached)."""
    from attnviz.sources.text import BpeTokenizer

    def make():
        if spec.json is None:
            return BpeTokenizer.default()
        return BpeTokenizer.from_json_str(spec.json, name=spec.name or "tokenizer")

    return _tokenizers.get(spec, make)


def encode_text(spec: TokenizerSpec, text: str, max_tokens: int = MAX_TOKENS):
    """TextTokens of ``text`` under ``spec`` (cached on both)."""

    def make():
        PREPARE_COUNTS["tokenize"] += 1
        return tokenizer_for(spec).encode(text, max_tokens=max_tokens)

    return _encodings.get((spec, text, max_tokens), make)


def _table(vocab: int, d_model: int, seed: int):
    from attnviz.sources.embedding import EmbeddingTable

    return _tables.get((vocab, d_model, seed), lambda: EmbeddingTable.seeded(vocab, d_model, seed))


def image_patches(source: ImageSource):
    """(prepared RGB (H, W, 3) uint8, Patches) of an image source (cached on bytes and settings)."""
    from attnviz.sources.image import load_image, patchify, prepare_image

    def make():
        PREPARE_COUNTS["image"] += 1
        rgb = load_image(source.data)
        prepared = prepare_image(rgb, source.patch, policy=source.policy, target=source.target)
        return prepared, patchify(prepared, source.patch)

    return _images.get((source.data, source.patch, source.policy, source.target), make)


def _embedder(patch: int, d_model: int, seed: int, class_token: bool):
    from attnviz.sources.image import PatchEmbedder

    return _embedders.get((patch, d_model, seed, class_token),
                          lambda: PatchEmbedder(patch, d_model, seed, with_class_token=class_token))


# ------------------------------------------------------------------------------------------------
# one source -> rows


def _prefix(source, exc: Exception) -> Exception:
    msg = f"{source.kind} source {source.name!r}: {exc}"
    return SourceError(msg) if isinstance(exc, SourceError) else ValueError(msg)


def source_tokens(state: SessionState, source, warnings: list[str] | None = None,
                  max_tokens: int = MAX_TOKENS):
    """(embeddings (n, d_model), labels, infos) of one source under ``state``'s model settings."""
    d_model, seed = state.model.d_model, state.model.embed_seed
    try:
        if isinstance(source, TextSource):
            if not source.text or source.text.isspace():
                if warnings is not None:
                    warnings.append(f"text source {source.name!r} is empty: it gives no tokens")
                return np.zeros((0, d_model)), [], []
            enc = encode_text(state.tokenizer, source.text, max_tokens)
            table = _table(tokenizer_for(state.tokenizer).vocab_size, d_model, seed)
            X = table.lookup(enc.ids)  # (n, d_model)
            labels = list(enc.labels())
            infos = [TokenInfo(source.name, "text", t, labels[t], token_id=int(enc.ids[t]),
                               span=(int(enc.spans[t][0]), int(enc.spans[t][1]))) for t in range(len(labels))]
            return X, labels, infos
        if isinstance(source, ImageSource):
            if not source.data:
                raise SourceError("no image loaded")
            _, patches = image_patches(source)
            X = _embedder(source.patch, d_model, seed, source.class_token).embed(patches)  # (N [+1], d_model)
            grid = tuple(int(g) for g in patches.grid)
            infos, labels = [], []
            if source.class_token:
                labels.append("[CLS]")
                infos.append(TokenInfo(source.name, "image", 0, "[CLS]", grid=grid, patch_size=source.patch))
            off = len(infos)
            for p in range(grid[0] * grid[1]):
                lab = f"p{p}"
                labels.append(lab)
                infos.append(TokenInfo(source.name, "image", off + p, lab, patch=p, grid=grid,
                                       patch_size=source.patch))
            return np.asarray(X, dtype=np.float64), labels, infos
        if isinstance(source, CustomSource):
            from attnviz.sources.custom import CustomBlock

            values = None if source.values is None else np.array(source.values.array)
            key = (source.count, source.generator, source.seed, source.scale, source.values, d_model)
            X = _blocks.get(key, lambda: np.asarray(CustomBlock(source.name, source.count, source.generator,
                                                                source.seed, source.scale, values).embed(d_model),
                                                    dtype=np.float64))
            labels = [f"{source.name}{t}" for t in range(source.count)]
            infos = [TokenInfo(source.name, "custom", t, labels[t]) for t in range(source.count)]
            return X, labels, infos
        if isinstance(source, ToySource):
            X = np.array(source.embeddings.array)  # (n, d_model)
            labels = list(source.labels)
            infos = [TokenInfo(source.name, "toy", t, labels[t]) for t in range(len(labels))]
            return X, labels, infos
    except (SourceError, ValueError) as exc:
        raise _prefix(source, exc) from None
    raise ValueError(f"unknown source type {type(source).__name__}")


def build_sequence(state: SessionState, sources, warnings: list[str] | None = None,
                   max_tokens: int = MAX_TOKENS) -> Sequence:
    """Concatenate ``sources`` (specs of ``state``) into one Sequence (cached; the same warnings are
    appended on every call)."""
    key = (tuple(sources), state.tokenizer, state.model.d_model, state.model.embed_seed, int(max_tokens))
    hit = _sequences.peek(key)
    if hit is None:
        own: list[str] = []
        hit = (_build_sequence(state, key[0], own, max_tokens), tuple(own))
        _sequences.put(key, hit)
    if warnings is not None:
        warnings.extend(hit[1])
    return hit[0]


def _build_sequence(state: SessionState, sources, warnings: list[str], max_tokens: int) -> Sequence:
    rows, labels, infos, segments = [], [], [], []
    T = 0
    for src in sources:
        if isinstance(src, CustomSource) and T + src.count > max_tokens:  # known before embedding it
            raise SourceError(f"the sequence has more than {max_tokens:,} tokens (source {src.name!r} "
                              f"brings it to {T + src.count:,}); shorten the text, use a larger patch size or "
                              "fewer tokens")
        X, lab, inf = source_tokens(state, src, warnings, max_tokens)
        n = len(lab)
        if X.shape != (n, state.model.d_model):
            raise ValueError(f"{src.kind} source {src.name!r} gave rows of shape {X.shape}, "
                             f"expected ({n}, {state.model.d_model})")
        if T + n > max_tokens:
            raise SourceError(f"the sequence has more than {max_tokens:,} tokens (source {src.name!r} "
                              f"brings it to {T + n:,}); shorten the text, use a larger patch size or fewer tokens")
        rows.append(X)
        labels += lab
        infos += inf
        segments.append(Segment(src.name, T, T + n, src.color))
        T += n
    if T == 0:
        raise SourceError("the sequence has no tokens: add a source with some content")
    X = np.concatenate(rows, axis=0) if rows else np.zeros((0, state.model.d_model))  # (T, d_model)
    if not np.all(np.isfinite(X)):
        raise ValueError("token embeddings contain NaN or infinite values")
    X.setflags(write=False)
    return Sequence(X, tuple(labels), tuple(segments), tuple(infos))


def assemble(state: SessionState, warnings: list[str] | None = None,
             max_tokens: int = MAX_TOKENS) -> tuple[Sequence, Sequence]:
    """(query sequence, key/value sequence). For self-attention both are the same object."""
    if state.cross is None:
        seq = build_sequence(state, state.sources, warnings, max_tokens)
        return seq, seq
    qs = [state.source(n) for n in state.cross.queries]
    ks = [state.source(n) for n in state.cross.keys]
    unused = [s.name for s in state.sources if s.name not in state.cross.queries + state.cross.keys]
    if unused and warnings is not None:
        warnings.append(f"sources not used by the cross-attention: {', '.join(unused)}")
    return build_sequence(state, qs, warnings, max_tokens), build_sequence(state, ks, warnings, max_tokens)


_positioned = LRUCache(4)  # (sequence object, positional config) -> X with positions


def with_positions(state: SessionState, seq: Sequence) -> np.ndarray:
    """X + the additive positional table for this sequence: (T, d_model) float64, read-only.

    Cached by sequence object and positional config: a sinusoidal table of T = 1024 rows costs about
    10 ms, and a model edit (new seed, more heads) keeps both."""
    key = (seq, state.positional, state.model.d_model)
    X = _positioned.peek(key)
    if X is None:
        pe = positional_inputs(state.positional, seq.T, state.model.d_model)  # (T, d_model)
        X = seq.embeddings + pe  # (T, d_model)
        X.setflags(write=False)
        _positioned.put(key, X)
    return X
