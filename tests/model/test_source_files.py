"""Files a person hands the window become sources without Qt (attnviz.model.source_files): the kind from the
extension, and readers that refuse what is not a regular file or is too large in one line, before reading."""

from __future__ import annotations

import os

import pytest

from attnviz.model import source_files as sf
from attnviz.model.state import SessionState
from attnviz.sources.errors import SourceError


def test_kinds_from_extensions():
    assert [sf.classify(n) for n in ("a.attnviz", "b.JPG", "c.md", "d.npy", "e.bin")] == \
        ["session", "image", "text", "values", None]


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
@pytest.mark.parametrize("reader", [sf.text_source_from_file, sf.image_source_from_file])
def test_a_fifo_is_refused_without_reading(tmp_path, reader):
    fifo = tmp_path / "pipe.txt"
    os.mkfifo(fifo)  # reading it would block until a writer came
    with pytest.raises(SourceError, match="not a regular file"):
        reader(SessionState(), fifo)


def test_a_folder_and_a_missing_file_are_one_line(tmp_path):
    with pytest.raises(SourceError, match="is a folder"):
        sf.text_source_from_file(SessionState(), tmp_path)
    with pytest.raises(SourceError, match="file not found"):
        sf.text_source_from_file(SessionState(), tmp_path / "nope.txt")


def test_too_large_is_refused_before_reading(tmp_path, monkeypatch):
    monkeypatch.setattr(sf, "MAX_TEXT_BYTES", 10)
    big = tmp_path / "big.txt"
    big.write_text("x" * 11)
    with pytest.raises(SourceError, match="may be at most"):
        sf.text_source_from_file(SessionState(), big)


def test_a_text_file_becomes_a_named_coloured_source(tmp_path):
    f = tmp_path / "river.txt"
    f.write_text("\ufeffthe river bank", encoding="utf-8")
    src = sf.text_source_from_file(SessionState(), f)
    assert src.text == "the river bank" and src.name == "river" and src.color.startswith("#")
