"""The embedding table: seeded and loaded tables, lookups, and ids or weights that do not fit."""

from __future__ import annotations

import numpy as np
import pytest

from attnviz.sources.embedding import EmbeddingTable
from attnviz.sources.errors import SourceError
from attnviz.sources.text import BpeTokenizer


def test_lookup_returns_the_rows():
    w = np.arange(12, dtype=float).reshape(4, 3)
    table = EmbeddingTable(w)
    X = table.lookup(np.array([2, 0, 2]))
    assert X.shape == (3, 3) and X.dtype == np.float64
    assert np.array_equal(X, w[[2, 0, 2]])
    X[0, 0] = -1.0  # the result is the caller's own array
    assert table.weights[2, 0] == 6.0
    assert not table.weights.flags.writeable
    w[0, 0] = 99.0  # and the table does not share the caller's input
    assert table.weights[0, 0] == 0.0


def test_seeded_is_reproducible_and_scaled():
    a = EmbeddingTable.seeded(500, 64, seed=7)
    b = EmbeddingTable.seeded(500, 64, seed=7)
    c = EmbeddingTable.seeded(500, 64, seed=8)
    assert np.array_equal(a.weights, b.weights) and not np.allclose(a.weights, c.weights)
    assert abs(a.weights.std() - 1.0) < 0.02
    half = EmbeddingTable.seeded(500, 64, seed=7, scale=0.5)
    np.testing.assert_allclose(half.weights, 0.5 * a.weights)
    assert (a.vocab_size, a.d_model) == (500, 64)


def test_table_for_the_default_tokenizer():
    tok = BpeTokenizer.default()
    table = EmbeddingTable.seeded(tok.vocab_size, 16, seed=0)
    ids = tok.encode("by the river bank").ids
    X = table.lookup(ids)
    assert X.shape == (4, 16)
    assert np.array_equal(X[3], table.weights[tok.token_to_id("Ġbank")])


def test_ids_out_of_range():
    table = EmbeddingTable.seeded(10, 4, seed=0)
    with pytest.raises(SourceError, match=r"token id 10 at position 1 is outside the embedding table \(ids 0..9\)"):
        table.lookup([3, 10, 2])
    with pytest.raises(SourceError, match="token id -1"):
        table.lookup([-1])
    with pytest.raises(SourceError, match="integers"):
        table.lookup([1.5])
    with pytest.raises(SourceError, match="1-D"):
        table.lookup([[1, 2]])
    assert table.lookup(np.array([], dtype=np.int64)).shape == (0, 4)


@pytest.mark.parametrize(
    "weights, word",
    [
        (np.zeros(5), "2-D"),
        (np.zeros((0, 4)), "at least one row"),
        (np.array([[1.0, np.nan]]), "non-finite value at row 0, column 1"),
        (np.array([["a", "b"]]), "numbers"),
        (np.array([[1j, 2]]), "real"),
    ],
)
def test_bad_weights(weights, word):
    with pytest.raises(SourceError, match=word):
        EmbeddingTable(weights)


@pytest.mark.parametrize(
    "vocab, d_model, word",
    [(0, 4, "vocab must be > 0"), (10, 0, "d_model must be > 0"), (10, -3, "d_model must be > 0"), (10, 2.0, "d_model must be a whole number")],
)
def test_bad_sizes(vocab, d_model, word):
    with pytest.raises(SourceError, match=word):
        EmbeddingTable.seeded(vocab, d_model)


def test_huge_table_is_refused_with_its_size():
    with pytest.raises(SourceError, match=r"50,257 x 4,096 would need 1\.5 GiB"):
        EmbeddingTable.seeded(50_257, 4096)


def test_bad_seed_and_scale():
    with pytest.raises(SourceError, match="seed"):
        EmbeddingTable.seeded(4, 4, seed=-1)
    with pytest.raises(SourceError, match="scale"):
        EmbeddingTable.seeded(4, 4, scale=float("nan"))


def test_from_npy(tmp_path):
    w = np.random.default_rng(0).standard_normal((6, 3))
    np.save(tmp_path / "w.npy", w)
    assert np.array_equal(EmbeddingTable.from_npy(tmp_path / "w.npy").weights, w)
    np.save(tmp_path / "obj.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(SourceError, match="not a plain numeric"):
        EmbeddingTable.from_npy(tmp_path / "obj.npy")
    (tmp_path / "junk.npy").write_bytes(b"not numpy")
    with pytest.raises(SourceError, match="junk.npy"):
        EmbeddingTable.from_npy(tmp_path / "junk.npy")
    with pytest.raises(SourceError, match="not found"):
        EmbeddingTable.from_npy(tmp_path / "none.npy")
