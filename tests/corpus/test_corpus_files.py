"""Reading corpora (lines, folder, JSONL, Parquet) as named documents, and STATS files written whole."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from attnviz.corpus.files import AtomicParquet, StatsFileError, read_stats, stats_columns, stats_schema
from attnviz.corpus.stats import STATISTICS, HeadSums
from attnviz.corpus.texts import CorpusError, count_documents, iter_documents, partitions


def _docs(path):
    return [(d.index, d.name, d.text) for d in iter_documents(path)]


def test_lines_every_line_is_a_document(tmp_path):
    p = tmp_path / "c.txt"
    p.write_bytes(b"first one\r\n\nthird\nlast without newline")
    assert count_documents(p) == 4
    assert _docs(p) == [(0, "c.txt:1", "first one"), (1, "c.txt:2", ""), (2, "c.txt:3", "third"),
                        (3, "c.txt:4", "last without newline")]


def test_folder_of_txt_files(tmp_path):
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "two.txt").write_text("second file\nstill second", encoding="utf-8")
    (tmp_path / "a.txt").write_text("first", encoding="utf-8")
    (tmp_path / "skip.md").write_text("not a document", encoding="utf-8")
    assert count_documents(tmp_path) == 2
    assert _docs(tmp_path) == [(0, "a.txt", "first"), (1, "b/two.txt", "second file\nstill second")]


def test_jsonl_bad_lines_become_failing_documents(tmp_path):
    p = tmp_path / "c.jsonl"
    p.write_text(json.dumps({"text": "hello", "id": 3}) + "\n{oops\n" + json.dumps({"title": "x"}) + "\n",
                 encoding="utf-8")
    docs = _docs(p)
    assert count_documents(p) == 3 and docs[0] == (0, "c.jsonl:1", "hello")
    assert isinstance(docs[1][2], ValueError) and "not a JSON object" in str(docs[1][2])
    assert "no 'text' field" in str(docs[2][2])


def test_parquet_streams_the_text_column(tmp_path):
    p = tmp_path / "c.parquet"
    pq.write_table(pa.table({"text": [f"row {i}" for i in range(300)] + [None], "n": list(range(301))}), p,
                   row_group_size=50)
    assert count_documents(p) == 301
    parts = list(partitions(p, 64))
    assert [len(x) for x in parts] == [64, 64, 64, 64, 45]
    assert parts[1][0].name == "c.parquet:row 64" and parts[1][0].text == "row 64"
    assert parts[-1][-1].text is None


def test_parquet_without_text_column(tmp_path):
    p = tmp_path / "c.parquet"
    pq.write_table(pa.table({"body": ["x"]}), p)
    with pytest.raises(CorpusError, match="no 'text' column .columns: body"):
        count_documents(p)


@pytest.mark.parametrize("name", ["missing.txt", "missing_folder/"])
def test_missing_corpus(tmp_path, name):
    with pytest.raises(CorpusError, match="corpus not found"):
        count_documents(tmp_path / name)


def test_not_utf8_is_a_failing_document_named_by_its_line(tmp_path):
    p = tmp_path / "c.txt"
    p.write_bytes(b"fine\n\xff\xfe broken\nafter\n")
    docs = _docs(p)
    assert [d[:2] for d in docs] == [(0, "c.txt:1"), (1, "c.txt:2"), (2, "c.txt:3")]
    assert docs[0][2] == "fine" and docs[2][2] == "after"
    assert isinstance(docs[1][2], ValueError)
    assert str(docs[1][2]) == "line 2 is not UTF-8 text (invalid start byte at byte 0 of the line)"


def _sums():
    s = HeadSums(np.arange(2 * 3 * 5, dtype=np.float64).reshape(2, 3, 5), rows=10, prev_rows=8, documents=3)
    return s


def test_stats_round_trip(tmp_path):
    out = tmp_path / "s.parquet"
    f = AtomicParquet(out, stats_schema({"model": "m", "layers": 2, "heads": 3}))
    f.write(stats_columns(_sums()))
    assert not out.exists()  # nothing at the target until committed
    f.commit()
    st = read_stats(out)
    assert st.shape == (2, 3) and st.rows == 10 and st.documents == 3 and st.model == "m"
    for k, name in enumerate(STATISTICS):
        want = _sums().sums[..., k] / (8 if name == "to_prev" else 10)
        np.testing.assert_array_equal(st.values[name], want)
    assert list(tmp_path.iterdir()) == [out]


def test_discard_leaves_nothing(tmp_path):
    f = AtomicParquet(tmp_path / "s.parquet", stats_schema({}))
    f.write(stats_columns(_sums()))
    f.discard()
    assert list(tmp_path.iterdir()) == []


def test_read_stats_errors(tmp_path):
    with pytest.raises(StatsFileError, match="not found"):
        read_stats(tmp_path / "none.parquet")
    bad = tmp_path / "bad.parquet"
    bad.write_text("not parquet")
    with pytest.raises(StatsFileError, match="not a readable Parquet file"):
        read_stats(bad)
    other = tmp_path / "other.parquet"
    pq.write_table(pa.table({"layer": [0], "head": [0]}), other)
    with pytest.raises(StatsFileError, match="not a corpus statistics file: no column entropy"):
        read_stats(other)
