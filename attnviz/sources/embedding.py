"""Token ids -> vectors: the embedding table (vocab x d_model), seeded or loaded.

Row ``i`` of the table is the vector of token id ``i``; ``lookup(ids)`` stacks the rows of a
sequence into X (T, d_model), the matrix the attention model projects to Q, K and V.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from attnviz.sources.errors import SourceError, finite_nonnegative, nonnegative_int, positive_int, read_npy

# A seeded table larger than this (float64 elements, 1 GiB) is refused with a message instead of
# exhausting memory: e.g. a 50k-token vocabulary with d_model 4096.
MAX_TABLE_ELEMENTS = 1 << 27


class EmbeddingTable:
    """A read-only (vocab, d_model) float64 table of token vectors."""

    def __init__(self, weights):
        w = np.asarray(weights)
        if w.dtype == object or not (np.issubdtype(w.dtype, np.number) or w.dtype == bool):
            raise SourceError(f"embedding weights must be numbers (got dtype {w.dtype})")
        if np.iscomplexobj(w):
            raise SourceError("embedding weights must be real numbers (got complex values)")
        if w.ndim != 2:
            raise SourceError(f"embedding weights must be a 2-D (vocab, d_model) array (got shape {w.shape})")
        if w.shape[0] == 0 or w.shape[1] == 0:
            raise SourceError(f"embedding weights need at least one row and one column (got shape {w.shape})")
        w = np.array(w, dtype=np.float64, order="C")  # (vocab, d_model), our own copy
        if not np.isfinite(w).all():
            r, c = np.argwhere(~np.isfinite(w))[0]
            raise SourceError(f"embedding weights contain a non-finite value at row {r}, column {c}")
        w.flags.writeable = False
        self._w = w

    @classmethod
    def seeded(cls, vocab: int, d_model: int, seed: int = 0, scale: float = 1.0) -> "EmbeddingTable":
        """Gaussian rows N(0, scale^2), reproducible from ``seed`` (scale 1 is torch's nn.Embedding
        initialisation, so dot products between rows are of order sqrt(d_model))."""
        vocab = positive_int("vocab", vocab)
        d_model = positive_int("d_model", d_model)
        scale = finite_nonnegative("scale", scale)
        if vocab * d_model > MAX_TABLE_ELEMENTS:
            gib = vocab * d_model * 8 / 2**30
            raise SourceError(
                f"an embedding table of {vocab:,} x {d_model:,} would need {gib:.1f} GiB; lower d_model"
            )
        rng = np.random.default_rng(nonnegative_int("seed", seed))
        return cls(rng.standard_normal((vocab, d_model)) * scale)  # (vocab, d_model)

    @classmethod
    def from_npy(cls, path) -> "EmbeddingTable":
        """Load a (vocab, d_model) table saved with ``np.save`` (pickled objects are refused)."""
        path = Path(path)
        if not path.is_file():
            raise SourceError(f"embedding file not found: {path}")
        return cls(read_npy(path))

    @property
    def weights(self) -> np.ndarray:
        """The (vocab, d_model) table itself (read-only)."""
        return self._w

    @property
    def vocab_size(self) -> int:
        return int(self._w.shape[0])

    @property
    def d_model(self) -> int:
        return int(self._w.shape[1])

    def lookup(self, ids) -> np.ndarray:
        """Rows for a 1-D sequence of ids -> (T, d_model) float64 (a fresh, writable array)."""
        ids = np.asarray(ids)
        if ids.ndim != 1:
            raise SourceError(f"token ids must be a 1-D sequence (got shape {ids.shape})")
        if ids.size and not np.issubdtype(ids.dtype, np.integer):
            raise SourceError(f"token ids must be integers (got dtype {ids.dtype})")
        ids = ids.astype(np.int64, copy=False)  # (T,)
        bad = (ids < 0) | (ids >= self.vocab_size)
        if bad.any():
            t = int(np.argmax(bad))
            raise SourceError(
                f"token id {int(ids[t])} at position {t} is outside the embedding table "
                f"(ids 0..{self.vocab_size - 1}); the table is smaller than the tokenizer's vocabulary"
            )
        return self._w[ids]  # (T, d_model), fancy indexing copies

    def __repr__(self) -> str:
        return f"EmbeddingTable(vocab={self.vocab_size}, d_model={self.d_model})"

