"""Text -> tokens: the bundled byte-level BPE, ids / pieces / spans for every script, bad text,
long text, and loading other tokenizer.json files (BERT-like WordPiece, GPT-2-like byte-level,
SentencePiece-like Metaspace) built here with the tokenizers library."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

from attnviz.resources_path import resource_path
from attnviz.sources.errors import SourceError
from attnviz.sources.text import BpeTokenizer, TextTokens

SCRIPTS = {
    "ascii": "We sat by the river bank, then walked to the savings bank.",
    "emoji": "a robot 🤖 waves 👋🏽 at the family 👨‍👩‍👧 under 🇫🇷 flags 😀!",
    "hebrew": "שלום עולם, הנהר זורם",
    "arabic": "مرحبا بالعالم والنهر",
    "mixed_rtl": "the word נהר means river",
    "cjk": "银行在河边。日本語のテキストと한국어",
    "combining": "cafe\u0301 nai\u0308ve",
    "whitespace": "  two  spaces\tand a tab\nnew line ",
}

_MARKER = re.compile(r"<0x([0-9A-F]{2})>")


def piece_bytes(piece: str) -> bytes:
    """Undo the piece rendering: ``<0xF0>`` markers back to bytes, other text to UTF-8."""
    out, pos = bytearray(), 0
    for m in _MARKER.finditer(piece):
        out += piece[pos : m.start()].encode("utf-8")
        out.append(int(m.group(1), 16))
        pos = m.end()
    out += piece[pos:].encode("utf-8")
    return bytes(out)


def reconstructed(tokens: TextTokens) -> bytes:
    """The text's UTF-8 bytes with the pre-tokeniser's invented prefix spaces put back: the bytes
    the pieces must add up to (nothing lost, nothing else added)."""
    out, cursor = bytearray(), 0
    for t, (a, b) in enumerate(tokens.spans):
        if a == b and tokens.pieces[t] == " ":
            out += b" "
        elif b > cursor:  # spans of tokens that split characters overlap: add only what is new
            out += tokens.text[max(a, cursor) : b].encode("utf-8")
            cursor = b
    return bytes(out)


@pytest.fixture(scope="module")
def default():
    return BpeTokenizer.default()


# ---- the bundled vocabulary -----------------------------------------------------------------------


def test_default_loads_the_bundled_file(default):
    spec = json.loads(resource_path("tokenizer", "tokenizer.json").read_text(encoding="utf-8"))
    assert default.vocab_size == len(spec["model"]["vocab"])  # the special tokens are in the vocab too
    assert 3500 <= default.vocab_size <= 7200  # words inside a line, words that start one, common English words
    assert default.byte_level
    assert default.name == "attnviz byte-level BPE"
    assert default.token_to_id("<|endoftext|>") == 0
    assert default.token_to_id("[CLS]") == 1


@pytest.mark.parametrize(
    "text, pieces",
    [
        ("by the river bank", ["by", " the", " river", " bank"]),
        ("at the savings bank", ["at", " the", " savings", " bank"]),
        ("I love you", ["I", " love", " you"]),
        ("je t' aime", ["je", " t", "'", " aime"]),
    ],
)
def test_demo_phrases_are_whole_words(default, text, pieces):
    tokens = default.encode(text)
    assert tokens.pieces == pieces
    assert tokens.ids.dtype == np.int64 and tokens.ids.shape == (len(pieces),)
    assert [tokens.source_text(t) for t in range(len(tokens))] == pieces
    assert tokens.spans[0][0] == 0 and tokens.spans[-1][1] == len(text)


def test_same_word_gets_the_same_id_in_both_sentences(default):
    river = default.encode("by the river bank")
    savings = default.encode("at the savings bank")
    assert river.ids[-1] == savings.ids[-1]
    assert river.ids[2] != savings.ids[2]


@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_spans_and_pieces_reconstruct_the_text(default, name):
    text = SCRIPTS[name]
    tokens = default.encode(text)
    T = len(tokens)
    assert len(tokens.pieces) == len(tokens.spans) == len(tokens.special) == T
    assert b"".join(piece_bytes(p) for p in tokens.pieces) == reconstructed(tokens)
    # spans are in order and tile the whole text (tokens that split a character share its span)
    covered = []
    for (a, b), (a_prev, b_prev) in zip(tokens.spans[1:], tokens.spans[:-1]):
        assert a >= a_prev and b >= b_prev
    for (a, b), piece in zip(tokens.spans, tokens.pieces):
        assert 0 <= a <= b <= len(text)
        assert a < b or piece == " "  # only an invented prefix space comes from no character
        covered.extend(range(a, b))
    assert sorted(set(covered)) == list(range(len(text)))
    for (a, b), piece in zip(tokens.spans, tokens.pieces):
        if "<0x" not in piece and a < b:
            assert text[a:b] == piece  # a whole-character piece is exactly its slice
        elif a < b:
            # a partial piece's bytes belong to the characters of its span
            assert piece_bytes(piece) in text[a:b].encode("utf-8")


def test_emoji_split_into_bytes_points_at_the_emoji(default):
    text = "x 🦒"
    tokens = default.encode(text)
    giraffe = [t for t in range(len(tokens)) if "🦒" in tokens.source_text(t)]
    assert len(giraffe) >= 2  # the corpus has no giraffe emoji: it is spelled in bytes
    assert b"".join(piece_bytes(tokens.pieces[t]) for t in giraffe).strip() == "🦒".encode("utf-8")


def test_rtl_span_points_at_the_hebrew_word(default):
    text = SCRIPTS["mixed_rtl"]
    tokens = default.encode(text)
    start = text.index("נהר")
    hebrew = [t for t, (a, b) in enumerate(tokens.spans) if a < start + 3 and b > start]
    assert hebrew
    assert "".join(text[a:b] for a, b in dict.fromkeys(tokens.spans[t] for t in hebrew)).strip() == "נהר"


def test_labels_make_whitespace_visible(default):
    tokens = default.encode("a b\nc\td")
    labels = tokens.labels()
    assert "␣b" in labels and "↵" in "".join(labels) and "⇥" in "".join(labels)
    assert all(" " not in lab and "\n" not in lab for lab in labels)


# ---- bad and large text ----------------------------------------------------------------------


@pytest.mark.parametrize("text, word", [("", "empty"), ("   \n\t ", "whitespace")])
def test_empty_text_is_refused(default, text, word):
    with pytest.raises(SourceError, match=word):
        default.encode(text)


def test_non_string_and_broken_unicode_are_refused(default):
    with pytest.raises(SourceError, match="string"):
        default.encode(b"bytes")  # type: ignore[arg-type]
    with pytest.raises(SourceError, match="surrogate at character 3"):
        default.encode("abc\ud800def")


def test_hundred_thousand_characters(default):
    unit = "The heron waited by the river bank 🤖 while שלום and 银行 drifted past. "
    text = (unit * (100_000 // len(unit) + 1))[:100_000]
    tokens = default.encode(text)
    assert len(text) == 100_000
    assert 10_000 < len(tokens) < 100_000
    assert tokens.spans[-1][1] == 100_000
    assert b"".join(piece_bytes(p) for p in tokens.pieces) == reconstructed(tokens)
    assert reconstructed(tokens).replace(b" ", b"") == text.encode("utf-8").replace(b" ", b"")


def test_max_tokens_guard(default):
    text = "the river " * 50
    n = len(default.encode(text))
    assert len(default.encode(text, max_tokens=n)) == n
    with pytest.raises(SourceError, match=f"{n:,} tokens, more than the limit of {n - 1:,}"):
        default.encode(text, max_tokens=n - 1)
    with pytest.raises(SourceError, match="max_tokens"):
        default.encode(text, max_tokens=0)


def test_special_tokens_in_text_are_kept_whole_and_flagged(default):
    tokens = default.encode("<|endoftext|>hello [CLS] x")
    assert tokens.pieces[0] == "<|endoftext|>" and tokens.special[0]
    assert "[CLS]" in tokens.pieces and tokens.special[tokens.pieces.index("[CLS]")]
    assert not any(tokens.special[t] for t in range(len(tokens)) if tokens.pieces[t] not in ("<|endoftext|>", "[CLS]"))
    assert tokens.pieces[1] == "hello"  # no invented space after the special token (" hello" is a token too)
    assert tokens.source_text(1) == "hello"


def test_id_to_piece(default):
    assert default.id_to_piece(default.token_to_id("Ġbank")) == " bank"
    with pytest.raises(SourceError, match="outside the vocabulary"):
        default.id_to_piece(default.vocab_size)


# ---- serialisation and other tokenizer files ------------------------------------------------------


def test_json_round_trip_keeps_the_encoding(default):
    again = BpeTokenizer.from_json_str(default.to_json_str(), name="copy")
    text = SCRIPTS["emoji"] + SCRIPTS["cjk"]
    a, b = default.encode(text), again.encode(text)
    assert np.array_equal(a.ids, b.ids) and a.pieces == b.pieces and a.spans == b.spans
    assert again.name == "copy" and again.vocab_size == default.vocab_size


@pytest.mark.parametrize("content, word", [("", "empty"), ("{not json", "not a tokenizer.json"), ('{"a": 1}', "not a tokenizer.json")])
def test_bad_tokenizer_json(tmp_path, content, word):
    path = tmp_path / "tokenizer.json"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(SourceError, match=word):
        BpeTokenizer.from_file(path)


def test_missing_tokenizer_file(tmp_path):
    with pytest.raises(SourceError, match="not found"):
        BpeTokenizer.from_file(tmp_path / "nope.json")


CORPUS = [
    "The river bank was muddy after the rain.",
    "She deposited her savings at the bank on Monday.",
    "Attention lets every token look at every other token.",
    "Tokens, queries, keys and values are the heart of a transformer.",
] * 20


def _bert_like(tmp_path):
    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece()
    trainer = trainers.WordPieceTrainer(
        vocab_size=200, special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"], show_progress=False
    )
    tok.train_from_iterator(CORPUS, trainer)
    cls_id, sep_id = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", special_tokens=[("[CLS]", cls_id), ("[SEP]", sep_id)]
    )
    tok.enable_truncation(max_length=8)  # a visualiser must switch this off
    folder = tmp_path / "bert-like"
    folder.mkdir()
    tok.save(str(folder / "tokenizer.json"))
    return folder / "tokenizer.json"


def _gpt2_like(tmp_path):
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(
        vocab_size=400,
        special_tokens=["<|endoftext|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(CORPUS, trainer)
    path = tmp_path / "gpt2-like.json"
    tok.save(str(path))
    return path


def test_bert_like_wordpiece(tmp_path):
    bert = BpeTokenizer.from_file(_bert_like(tmp_path))
    assert bert.name == "bert-like" and not bert.byte_level
    text = "The River Bank and the savings BANK, attention to every token"
    tokens = bert.encode(text)
    assert len(tokens) > 8  # the file's truncation was switched off
    for piece, (a, b) in zip(tokens.pieces, tokens.spans):
        assert text[a:b].lower() == piece.removeprefix("##")  # lower-cased pieces, original-case spans
    assert tokens.pieces[:3] == ["the", "river", "bank"]
    assert tokens.spans[:3] == [(0, 3), (4, 9), (10, 14)]
    with_specials = bert.encode(text, add_special_tokens=True)
    assert with_specials.pieces[0] == "[CLS]" and with_specials.pieces[-1] == "[SEP]"
    assert with_specials.special[0] and with_specials.special[-1] and not any(with_specials.special[1:-1])
    assert with_specials.spans[0] == (0, 0)


def test_bert_like_unknown_characters(tmp_path):
    bert = BpeTokenizer.from_file(_bert_like(tmp_path))
    tokens = bert.encode("river 🤖 bank")
    assert "[UNK]" in tokens.pieces
    assert tokens.source_text(tokens.pieces.index("[UNK]")) == "🤖"


def test_bert_like_text_the_normaliser_removes(tmp_path):
    bert = BpeTokenizer.from_file(_bert_like(tmp_path))
    with pytest.raises(SourceError, match="no tokens"):
        bert.encode("\u200b\x00")  # zero-width space and a control character: nothing left


def test_gpt2_like_byte_level(tmp_path):
    gpt2 = BpeTokenizer.from_file(_gpt2_like(tmp_path))
    assert gpt2.name == "gpt2-like" and gpt2.byte_level
    text = "The river bank 😀 ok"
    tokens = gpt2.encode(text)
    assert b"".join(piece_bytes(p) for p in tokens.pieces) == text.encode("utf-8")
    assert tokens.pieces[0].startswith("The") or tokens.pieces[0] == "T"
    assert any("<0x" in p for p in tokens.pieces)  # the emoji is spelled in bytes


def test_sentencepiece_like_metaspace_shows_spaces(tmp_path):
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    tok.decoder = decoders.Metaspace()
    tok.train_from_iterator(CORPUS, trainers.BpeTrainer(vocab_size=300, special_tokens=["<unk>"], show_progress=False))
    sp = BpeTokenizer.from_json_str(tok.to_str(), name="sp")
    tokens = sp.encode("the river bank")
    assert "▁" not in "".join(tokens.pieces)
    assert "".join(tokens.pieces).strip() == "the river bank"


def test_text_tokens_length():
    tokens = TextTokens(text="ab", ids=np.array([1, 2]), pieces=["a", "b"], spans=[(0, 1), (1, 2)])
    assert len(tokens) == 2 and tokens.source_text(1) == "b"
