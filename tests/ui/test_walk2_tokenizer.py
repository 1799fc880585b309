"""The bundled vocabulary keeps a word whole at the start of a line ("\\nThis" once came out as T, h,
is), while every text without a word at a line start — the demos' — is tokenized as before, with the
same ids (so the same embedding rows)."""

from __future__ import annotations

import pytest

from attnviz.model.demos import VLA_PROMPT
from attnviz.resources_path import resource_path
from attnviz.sources.text import BpeTokenizer

#: the VLA demo's prompt as the in-line vocabulary alone has always given it
VLA_IDS = [2874, 628, 267, 2727, 864, 286, 1023, 308, 313, 267, 264, 1646]
FIRST_PASS_VOCAB = 4028  # tokens of the first training pass (words inside a line), ids 0 .. 4027


@pytest.fixture(scope="module")
def tok():
    return BpeTokenizer.default()


@pytest.mark.parametrize("word", ["This", "The", "We", "Then", "When", "Because", "river", "Chapter", "After", "bank"])
def test_a_word_at_the_start_of_a_line_is_one_token(tok, word):
    pieces = tok.encode(f"A first line.\n{word} is on the second.").pieces
    assert word in pieces, pieces  # not its letters


def test_words_inside_a_line_and_the_demos_keep_their_tokens(tok):
    assert list(tok.encode(VLA_PROMPT).ids) == VLA_IDS
    assert tok.encode("The river bank was steep after the rain.").pieces == [
        "The", " river", " bank", " was", " steep", " after", " the", " rain", "."]


def test_every_corpus_paragraph_is_made_of_first_pass_tokens(tok):
    """The second training pass only adds tokens after the first pass's: each paragraph of the corpus,
    whose first word has the space the pre-tokenizer adds, is made of first-pass tokens only, so the
    long-context demo differs only where a word starts a line."""
    text = resource_path("tokenizer", "corpus.txt").read_text(encoding="utf-8")
    paragraphs = [p for p in text.split("\n") if p.strip()]
    assert len(paragraphs) > 100
    for p in paragraphs:
        assert max(tok.encode(p).ids) < FIRST_PASS_VOCAB, p[:60]
    assert tok.vocab_size > FIRST_PASS_VOCAB + 500  # and the second pass added words for line starts
