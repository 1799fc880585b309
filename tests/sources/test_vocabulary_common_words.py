"""The bundled vocabulary keeps common English words whole, at a sentence's start too ("Hello" came out
as H, ell, o: the project's corpus never says it, so neither training pass on the corpus made it), while
the corpus's paragraphs and every demo's text keep exactly their tokens (the long-context demo's
2,900, the VLA prompt's ids); and tools/train_tokenizer.py's third pass never merges two neighbouring
tokens of a protected text."""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from pathlib import Path

import pytest
from tokenizers import Tokenizer, pre_tokenizers

from attnviz.model.demos import long_context_text
from attnviz.resources_path import resource_path
from attnviz.sources.text import BpeTokenizer

ROOT = Path(__file__).resolve().parents[2]
WORDS = ["Hello", "Good", "Please", "Thanks", "Here", "My", "Dear", "Yes", "Sorry", "Monday", "What",
         "Tomorrow", "Welcome"]
TWO_PASS_VOCAB = 5028  # tokens of the corpus's two passes (inside a line, at a line start)


@pytest.fixture(scope="module")
def tok():
    return BpeTokenizer.default()


@pytest.fixture(scope="module")
def tool():
    spec = importlib.util.spec_from_file_location("train_tokenizer", ROOT / "tools" / "train_tokenizer.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["train_tokenizer"] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("word", WORDS)
def test_a_common_word_is_one_token_wherever_it_stands(tok, word):
    assert list(tok.encode(word).pieces) == [word]  # the text's first word
    assert word in tok.encode(f"It rained.\n{word} the sun came out.").pieces  # a line's first word
    assert " " + word in tok.encode(f"she said {word} twice").pieces  # inside a line
    assert " " + word.lower() in tok.encode(f"she said {word.lower()} twice").pieces


def test_hello_world(tok):
    assert list(tok.encode("Hello, world!").pieces) == ["Hello", ",", " world", "!"]
    assert list(tok.encode("Good morning. Please sit down.").pieces) == [
        "Good", " morning", ".", " Please", " sit", " down", "."]


def test_every_listed_word_is_whole_in_its_four_forms(tok):
    listing = resource_path("tokenizer", "common_words.txt").read_text(encoding="utf-8")
    words = {w.lower() for line in listing.splitlines() for w in re.findall(r"[^\W\d_]+", line.split("#")[0])}
    assert len(words) > 600 and {"hello", "please", "thanks"} <= words
    split = []
    for w in sorted(words):
        for form in (w, w.capitalize()):
            if list(tok.encode(form).pieces) != [form] or tok.encode("the " + form).pieces[-1] != " " + form:
                split.append(form)
    assert split == [], split


def test_the_demos_keep_their_tokens(tok):
    ids = tok.encode(long_context_text()).ids
    assert len(ids) == 2900 and max(ids) < TWO_PASS_VOCAB  # the tokens the first two passes made


def test_the_third_pass_never_joins_the_tokens_of_a_protected_text(tool):
    bl = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    forms = tool.common_word_forms("hello # a comment: not listed\nthere Hello")
    assert set(forms) == {bl.pre_tokenize_str(f)[0][0] for f in
                          ("hello", "Hello", " hello", " Hello", "there", "There", " there", " There")}
    base = Tokenizer.from_str(resource_path("tokenizer", "tokenizer.json").read_text(encoding="utf-8"))
    keep = "Zyx qwvut"  # made-up words, split into several tokens each
    before = base.encode(keep).ids
    forms = tool.common_word_forms("zyx qwvut")
    merges = tool.common_word_merges(base, forms, [keep])
    neighbours = set()
    for word, _span in base.pre_tokenizer.pre_tokenize_str(keep):
        pieces = [t.value for t in base.model.tokenize(word)]
        neighbours.update(zip(pieces, pieces[1:]))
    assert neighbours and merges and not neighbours & set(merges)
    extended = tool._extend(json.loads(base.to_str()), merges, forms, "test")
    assert extended.encode(keep).ids == before  # the protected text keeps its tokens ...
    shorter = [f for f in forms if len(extended.model.tokenize(f)) < len(base.model.tokenize(f))]
    assert len(shorter) >= 4, shorter  # ... while the other forms of its words are joined
