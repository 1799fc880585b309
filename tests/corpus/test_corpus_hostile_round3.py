"""Hostile inputs of the corpus command, third round: a document just under the byte limit with a small
--max-tokens (refused on the driver from a prefix, its text never sent to a worker), long lines read in
bounded pieces, and a tcp:// server that speaks Dask's handshake but never answers the client."""

from __future__ import annotations

import os
import random
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path

import pytest
from corpus_helpers import DATA, TINY_GPT2, WORDS, write_lines

import attnviz.corpus.run as corpus_run
import attnviz.corpus.texts as corpus_texts
from attnviz.checkpoints import load_checkpoint
from attnviz.cli import main
from attnviz.corpus import read_stats
from attnviz.corpus.screen import MIN_PREFIX_CHARS, PrefixScreen, cut_before_whitespace, prefix_stable
from attnviz.corpus.texts import Document, iter_documents

ROOT = Path(__file__).resolve().parents[2]
GOOD = ["the river bank", "a steep bank after the rain", "rain"]
UNDER_LIMIT = corpus_texts.MAX_DOCUMENT_BYTES - 10  # bytes of the long document: just under 1 MiB


def _run(capsys, *args) -> tuple[int, str]:
    rc = main(["corpus", *map(str, args)])
    return rc, capsys.readouterr().err


def _recording_jobs(monkeypatch) -> list[int]:
    """Lengths of the texts the driver sends to the workers, in order."""
    shipped: list[int] = []
    job = corpus_run.PartitionJob

    def recording(**kw):
        shipped.extend(len(d.text) if isinstance(d.text, str) else 0 for d in kw["documents"])
        return job(**kw)

    monkeypatch.setattr(corpus_run, "PartitionJob", recording)
    return shipped


def _long_line() -> str:
    words = ("bank", "river", "rain", "steep")
    line = " ".join(words[i % 4] for i in range(UNDER_LIMIT // 5 + 1))
    return line[:UNDER_LIMIT]


@pytest.mark.timeout(120)
def test_a_document_just_under_the_byte_limit_is_refused_without_being_sent(tmp_path, capsys, monkeypatch):
    corpus = tmp_path / "c.txt"
    long = _long_line()
    assert len(long.encode()) == UNDER_LIMIT < corpus_texts.MAX_DOCUMENT_BYTES  # read, not refused unread
    corpus.write_text("\n".join([GOOD[0], long, GOOD[1], GOOD[2]]) + "\n", encoding="utf-8")
    shipped = _recording_jobs(monkeypatch)
    out = tmp_path / "s.parquet"
    t = time.monotonic()
    rc, err = _run(capsys, TINY_GPT2, corpus, "--out", out, "--scheduler", "threads", "--max-tokens", 16)
    took = time.monotonic() - t
    assert rc == 1 and "Traceback" not in err
    assert "c.txt:2: text gives more tokens than the limit of 16 (its first 4,09" in err, err
    assert "it was not run: shorten it or raise --max-tokens" in err
    assert len(shipped) == 4 and max(shipped) < 100, shipped  # the long line's text stayed on the driver
    assert read_stats(out).documents == 3
    assert took < 60


@pytest.mark.timeout(120)
def test_without_max_tokens_the_models_limit_screens_the_long_document(tmp_path, capsys, monkeypatch):
    corpus = write_lines(tmp_path / "c.txt", [GOOD[0], _long_line()])
    shipped = _recording_jobs(monkeypatch)
    rc, err = _run(capsys, TINY_GPT2, corpus, "--out", tmp_path / "s.parquet", "--scheduler", "threads")
    limit = load_checkpoint(TINY_GPT2).config.max_positions
    assert rc == 1 and f"c.txt:2: text gives more tokens than the limit of {limit} (its first" in err, err
    assert "; it was not run: shorten it\n" in err
    assert max(shipped) < 100


def test_a_single_line_of_64_mib_is_read_in_bounded_pieces(tmp_path):
    p = tmp_path / "c.txt"
    with open(p, "wb") as fh:
        fh.write(b"first line\n")
        chunk = b"bank " * (1 << 18)  # 1.25 MiB
        for _ in range(52):  # 65 MiB on one line
            fh.write(chunk)
        fh.write(b"\nlast line\n")
    tracemalloc.start()
    try:
        docs = list(iter_documents(p))
        _now, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert [d.name for d in docs] == ["c.txt:1", "c.txt:2", "c.txt:3"]
    assert docs[0].text == "first line" and docs[2].text == "last line"
    assert isinstance(docs[1].text, ValueError) and "68,157,440 bytes, over the limit of 1,048,576" in str(docs[1].text)
    assert peak < 8 << 20, peak  # a few chunks of 1 MiB, never the line


# the prefix screen itself

STABLE = ["tiny_gpt2", "tiny_roberta", "tiny_albert", "tiny_distilbert", "tiny_electra", "tiny_mpnet", "tiny_xlmr",
          "tiny_opt", "tiny_bloom", "tiny_gpt_neox", "tiny_olmo"]
UNSTABLE = ["tiny_llama", "tiny_mistral", "tiny_phi3", "tiny_gemma", "tiny_qwen2", "tiny_deberta_v3"]


def _texts(seed: int, n: int = 30) -> list[str]:
    rng = random.Random(seed)
    gaps = (" ", "  ", "\n", "\t", " \u00a0", ", ", ". ", " - ")
    return ["".join(rng.choice(WORDS) + rng.choice(gaps) for _ in range(rng.randint(5, 60))) for _ in range(n)]


@pytest.mark.parametrize("name", STABLE)
def test_the_tokens_of_a_prefix_cut_before_whitespace_begin_the_whole_texts(name):
    """What the screen relies on: cut before a whitespace character that follows another character, a text's
    prefix tokenises to the first tokens of the whole (so more tokens in the prefix means more in the whole)."""
    tok = load_checkpoint(DATA / name).tokenizer.tokenizer
    assert prefix_stable(tok)
    rng = random.Random(1)
    checked = 0
    for text in _texts(7):
        whole = tok.encode(text, add_special_tokens=False).ids
        for _ in range(5):
            cut = cut_before_whitespace(text, rng.randint(1, len(text) - 1))
            if cut == 0:
                continue
            part = tok.encode(text[:cut], add_special_tokens=False).ids
            assert whole[:len(part)] == part, (name, text[:cut])
            checked += 1
    assert checked > 100


@pytest.mark.parametrize("name", UNSTABLE)
def test_tokenizers_whose_merges_may_cross_a_space_are_not_screened(name):
    assert not prefix_stable(load_checkpoint(DATA / name).tokenizer.tokenizer)


def test_llamas_tokenizer_shows_why_a_whole_text_bpe_is_not_screened():
    tok = load_checkpoint(DATA / "tiny_llama").tokenizer.tokenizer  # Metaspace without split: BPE over the text
    whole, part = (tok.encode(t, add_special_tokens=False).tokens for t in ("was  some while", "was  some"))
    assert whole[:len(part)] != part  # "e" of the prefix, "e▁" merged across the space in the whole


@pytest.mark.timeout(120)
def test_a_model_that_is_not_screened_still_fails_the_long_document_on_its_worker(tmp_path, capsys):
    corpus = write_lines(tmp_path / "c.txt", [GOOD[0], " ".join(["bank"] * 2000)])
    rc, err = _run(capsys, DATA / "tiny_llama", corpus, "--out", tmp_path / "s.parquet", "--scheduler", "threads",
                   "--max-tokens", 16)
    assert rc == 1 and "c.txt:2: tiny_llama: text gives 2,001 tokens" in err, err  # counted whole, on the worker
    assert read_stats(tmp_path / "s.parquet").documents == 1


def test_cut_before_whitespace_finds_the_last_word_end():
    assert cut_before_whitespace("ab cd ef", 7) == 5
    assert cut_before_whitespace("ab cd ef", 5) == 5
    assert cut_before_whitespace("ab cd ef", 4) == 2
    assert cut_before_whitespace("ab   cd", 4) == 2
    assert cut_before_whitespace("abcdef", 5) == 0
    assert cut_before_whitespace("   abc", 5) == 0


def test_a_long_text_within_the_limit_is_sent_as_it_is():
    ckpt = load_checkpoint(DATA / "tiny_distilbert")  # WordPiece drops whitespace: 10,000 spaces, 2 tokens
    screen = PrefixScreen(ckpt.tokenizer.tokenizer, 16)
    spaced = Document(0, "c.txt:1", "river" + " " * 10_000 + "bank")
    assert screen(spaced) is spaced and screen.screened == 1 and screen.refused == 0
    one_word = Document(1, "c.txt:2", "x" * 10_000)  # no place to cut: the worker decides
    assert screen(one_word) is one_word
    short = Document(2, "c.txt:3", "bank " * (MIN_PREFIX_CHARS // 5))  # short documents are not looked at
    assert screen(short) is short and screen.screened == 1
    long = Document(3, "c.txt:4", "river bank " * 1000)
    failed = screen(long)
    assert (failed.index, failed.name) == (3, "c.txt:4") and isinstance(failed.text, ValueError)
    assert "more tokens than the limit of 16" in str(failed.text) and screen.refused == 1


# a server that completes Dask's handshake and then says nothing

FAKE_SCHEDULER = """
import asyncio, sys
from distributed.comm import listen

async def handler(comm):
    await asyncio.sleep(3600)

async def serve():
    listener = listen("tcp://127.0.0.1:0", handler)
    await listener.start()
    print(listener.contact_address, flush=True)
    await asyncio.sleep(3600)

asyncio.run(serve())
"""


@pytest.mark.timeout(90)
def test_a_server_that_shakes_hands_and_never_answers_is_one_line_within_seconds(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(corpus_run, "CONNECT_TIMEOUT_S", 2.0)
    corpus = write_lines(tmp_path / "c.txt", GOOD)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    server = subprocess.Popen([sys.executable, "-c", FAKE_SCHEDULER], stdout=subprocess.PIPE, text=True, env=env)
    try:
        address = server.stdout.readline().strip()
        assert address.startswith("tcp://127.0.0.1:"), address
        t = time.monotonic()
        rc, err = _run(capsys, TINY_GPT2, corpus, "--out", tmp_path / "s.parquet", "--scheduler", address)
        took = time.monotonic() - t
    finally:
        server.kill()
        server.wait()
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in err, err
    assert rc == 1 and lines[0] == (f"error: no Dask scheduler answers at {address} (waited 2 s: it accepted the "
                                    "connection but did not answer)"), lines
    assert took < 20
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.txt"]
