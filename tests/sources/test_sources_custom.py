"""Custom token blocks: zeros, seeded noise and values from .npy / .csv files, with bad files
(NaN, wrong width, ragged rows, pickled objects, text) refused with a clear message."""

from __future__ import annotations

import numpy as np
import pytest

from attnviz.sources.custom import CustomBlock, load_block_values
from attnviz.sources.errors import SourceError


def test_zeros_block():
    block = CustomBlock("state", 3)
    X = block.embed(8)
    assert X.shape == (3, 8) and X.dtype == np.float64 and not X.any()
    assert block.labels() == ["state0", "state1", "state2"]


def test_noise_block_is_seeded_and_scaled():
    a = CustomBlock("noise", 50, generator="noise", seed=4, scale=0.5).embed(16)
    b = CustomBlock("noise", 50, generator="noise", seed=4, scale=0.5).embed(16)
    c = CustomBlock("noise", 50, generator="noise", seed=5, scale=0.5).embed(16)
    assert np.array_equal(a, b) and not np.allclose(a, c)
    assert abs(a.std() - 0.5) < 0.05
    np.testing.assert_allclose(a, 0.5 * np.random.default_rng(4).standard_normal((50, 16)))


def test_file_block_from_npy(tmp_path):
    values = np.arange(12, dtype=np.float32).reshape(3, 4)
    np.save(tmp_path / "state.npy", values)
    block = CustomBlock.from_file("joint", tmp_path / "state.npy", d_model=4)
    assert block.count == 3 and block.generator == "file" and block.source == "state.npy"
    X = block.embed(4)
    assert np.array_equal(X, values.astype(np.float64))
    X[0, 0] = 100  # the caller's copy
    assert block.embed(4)[0, 0] == 0
    with pytest.raises(SourceError, match="4 columns but d_model is 6"):
        block.embed(6)
    assert block.labels() == ["joint0", "joint1", "joint2"]


def test_one_dimensional_npy_is_one_token(tmp_path):
    np.save(tmp_path / "v.npy", np.array([1.0, 2.0, 3.0]))
    assert load_block_values(tmp_path / "v.npy").shape == (1, 3)


def test_csv_with_header_and_delimiters(tmp_path):
    (tmp_path / "a.csv").write_text("j0,j1,j2\n0.1,0.2,0.3\n-1,2e-3,4\n", encoding="utf-8")
    np.testing.assert_allclose(load_block_values(tmp_path / "a.csv", 3), [[0.1, 0.2, 0.3], [-1, 0.002, 4]])
    (tmp_path / "b.csv").write_text("# recorded state\n1;2\n3;4\n\n", encoding="utf-8")
    np.testing.assert_allclose(load_block_values(tmp_path / "b.csv"), [[1, 2], [3, 4]])
    (tmp_path / "c.tsv").write_text("1\t2\n3\t4\n", encoding="utf-8")
    np.testing.assert_allclose(load_block_values(tmp_path / "c.tsv"), [[1, 2], [3, 4]])
    (tmp_path / "d.txt").write_text("1 2 3\n4 5 6\n", encoding="utf-8")
    np.testing.assert_allclose(load_block_values(tmp_path / "d.txt"), [[1, 2, 3], [4, 5, 6]])


def test_equality_compares_values(tmp_path):
    v = np.ones((2, 3))
    a = CustomBlock("s", 2, "file", values=v)
    assert a == CustomBlock("s", 2, "file", values=v.copy())
    assert a != CustomBlock("s", 2, "file", values=2 * v)
    assert CustomBlock("s", 2) == CustomBlock("s", 2)
    assert CustomBlock("s", 2) != CustomBlock("s", 2, "noise")


@pytest.mark.parametrize(
    "content, word",
    [
        ("1,2,3\n4,nan,6\n", "row 2, column 2 is nan"),
        ("1,2,3\n4,inf,6\n", "NaN or infinite"),
        ("1,2,3\n4,5\n", "line 2 of the data has 2 values, the first has 3"),
        ("1,2,3\n4,x,6\n", r"'x' \(data row 2, column 2\) is not a number"),
        ("a,b,c\n", "header but no rows"),
        ("# only a comment\n\n", "no rows of numbers"),
        ("1,2,3\n4,,6\n", "is not a number"),
    ],
)
def test_bad_csv(tmp_path, content, word):
    path = tmp_path / "bad.csv"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(SourceError, match=word):
        load_block_values(path)


def test_wrong_width(tmp_path):
    (tmp_path / "w.csv").write_text("1,2,3\n", encoding="utf-8")
    with pytest.raises(SourceError, match="3 columns but d_model is 4"):
        load_block_values(tmp_path / "w.csv", d_model=4)


@pytest.mark.parametrize(
    "array, word",
    [
        (np.array([[1.0, np.nan]]), "NaN or infinite"),
        (np.zeros((2, 3, 4)), r"table \(got shape \(2, 3, 4\)\)"),
        (np.zeros((0, 3)), "empty"),
        (np.array([["a", "b"]]), "real numbers"),
        (np.array([[1 + 2j]]), "real numbers"),
    ],
)
def test_bad_npy_arrays(tmp_path, array, word):
    np.save(tmp_path / "bad.npy", array)
    with pytest.raises(SourceError, match=word):
        load_block_values(tmp_path / "bad.npy")


def test_pickled_object_array_is_refused(tmp_path):
    np.save(tmp_path / "obj.npy", np.array([[1, "two"]], dtype=object), allow_pickle=True)
    with pytest.raises(SourceError, match="pickled object array"):
        load_block_values(tmp_path / "obj.npy")


def test_bad_files(tmp_path):
    with pytest.raises(SourceError, match="not found"):
        load_block_values(tmp_path / "missing.npy")
    (tmp_path / "empty.csv").write_bytes(b"")
    with pytest.raises(SourceError, match="empty"):
        load_block_values(tmp_path / "empty.csv")
    (tmp_path / "junk.npy").write_bytes(b"\x93NUMPY garbage")
    with pytest.raises(SourceError, match="not a valid .npy"):
        load_block_values(tmp_path / "junk.npy")
    (tmp_path / "v.json").write_text("[1, 2]", encoding="utf-8")
    with pytest.raises(SourceError, match=".npy or .csv"):
        load_block_values(tmp_path / "v.json")
    (tmp_path / "bin.csv").write_bytes(b"\xff\xfe\x00binary")
    with pytest.raises(SourceError, match="UTF-8"):
        load_block_values(tmp_path / "bin.csv")
    np.savez(tmp_path / "arch.npz", a=np.zeros(3))
    (tmp_path / "arch.npz").rename(tmp_path / "arch.npy")
    with pytest.raises(SourceError, match="single .npy array"):
        load_block_values(tmp_path / "arch.npy")


@pytest.mark.parametrize(
    "kwargs, word",
    [
        (dict(name="", count=2), "non-empty name"),
        (dict(name="s", count=0), "token count of block 's' must be > 0"),
        (dict(name="s", count=10**7), "10,000,000 tokens; a block holds at most 65,536"),
        (dict(name="s", count=2, generator="gauss"), "unknown generator 'gauss'"),
        (dict(name="s", count=2, generator="file"), "needs values"),
        (dict(name="s", count=3, generator="file", values=np.zeros((2, 4))), "count 3 but its values have 2 rows"),
        (dict(name="s", count=2, generator="noise", scale=-1), "scale"),
        (dict(name="s", count=2, generator="noise", seed=-5), "seed"),
    ],
)
def test_bad_blocks(kwargs, word):
    with pytest.raises(SourceError, match=word):
        CustomBlock(**kwargs)


def test_bad_d_model():
    with pytest.raises(SourceError, match="d_model must be > 0"):
        CustomBlock("s", 2).embed(0)
