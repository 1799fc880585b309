"""Train attnviz's bundled byte-level BPE vocabulary from the project's own corpus.

    .venv/bin/python tools/train_tokenizer.py            # rewrites resources/tokenizer/tokenizer.json
    .venv/bin/python tools/train_tokenizer.py --check    # exits 1 if the shipped file differs

The corpus (``resources/tokenizer/corpus.txt``) is original prose written for the project.  The
tokenizer is GPT-2 style: bytes mapped to printable characters, the GPT-2 split pattern, no
normaliser (lossless: every text round-trips) and a space kept at the start of the next word.
Training is deterministic, so the script reproduces the shipped file exactly.

Training runs in two passes of the ``tokenizers`` BPE trainer:

1. the corpus paragraph by paragraph, each word with the space before it (" river"), which is how
   words inside a line are met;
2. the corpus's words alone, with no space before them, and each lower-case word also capitalised:
   how a word at the start of a line is met ("\nThis" is split into "\n" and "This", and without this
   pass "This" there came out as T, h, is). This pass continues BPE from the first pass's pieces of
   those words (most frequent pair first, as the trainer does) and its merges go after the first
   pass's, so every token of the first pass keeps its id and every text without a word at a line
   start is tokenized exactly as by the first pass alone.
3. common English words (``resources/tokenizer/common_words.txt``: greetings, pronouns, everyday verbs,
   nouns, days, numbers) the corpus lacks or has too rarely for the first two passes ("Hello" came out
   as H, ell, o: the corpus never says it), each inside a line and at a line start, lower-case and
   capitalised. BPE continues from the two passes' pieces of those forms, but never merges a pair
   that occurs in a corpus paragraph's or a demo's text as tokenized so far, so the corpus and the
   demos (the long-context demo's 2,900 tokens, the VLA prompt's ids) are tokenized exactly as before;
   its merges go after the second pass's.
"""

from __future__ import annotations

import argparse
import collections
import json
import re
import sys
from pathlib import Path

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "resources" / "tokenizer" / "corpus.txt"
COMMON_WORDS = ROOT / "resources" / "tokenizer" / "common_words.txt"
OUTPUT = ROOT / "resources" / "tokenizer" / "tokenizer.json"

VOCAB_SIZE = 4096  # small enough to ship, large enough that common corpus words are one token
MIN_FREQUENCY = 1  # the corpus is small: keep merges that occur once so its words become whole
LINE_START_MERGES = 1000  # merges of the second pass: the common words whole at a line start, the file < 300 KB
LINE_START_MIN_FREQUENCY = 2  # a pair the second pass merges is met at least this often
COMMON_WORD_MERGES = 2500  # merges of the third pass at most (about 1,800 make every listed form whole)
SPECIAL_TOKENS = [  # ids 0.. in this order; markers a sequence builder may need
    "<|endoftext|>",
    "[CLS]",
    "[SEP]",
    "[PAD]",
    "[MASK]",
    "<|image|>",
    "<|state|>",
    "<|action|>",
]


def train(corpus: Path = CORPUS, common_words: Path | None = COMMON_WORDS,
          protected: list[str] | None = None) -> Tokenizer:
    """Return a freshly trained byte-level BPE tokenizer for ``corpus`` (all three passes; the third
    only with a ``common_words`` list). ``protected``: texts besides the corpus's paragraphs whose
    tokens the third pass must not change (by default the demos' texts)."""
    text = corpus.read_text(encoding="utf-8")
    first = train_in_line(text)
    spec = json.loads(first.to_str())
    words = line_start_words(text)
    tok = _extend(spec, line_start_merges(first, words), words, "line-start")
    if common_words is None:
        return tok
    forms = common_word_forms(common_words.read_text(encoding="utf-8"))
    keep = [p for p in text.split("\n") if p.strip()] + (demo_texts() if protected is None else protected)
    return _extend(spec, common_word_merges(tok, forms, keep), forms, "common-word")


def _extend(spec: dict, new_merges: list[tuple[str, str]], words: dict[str, list], what: str) -> Tokenizer:
    """Append ``new_merges`` (and their tokens) to ``spec`` in place; check that the tokenizer splits
    ``words`` as the pass that made them did."""
    vocab, merges = spec["model"]["vocab"], spec["model"]["merges"]
    for a, b in new_merges:
        vocab.setdefault(a + b, len(vocab))  # a token an earlier pass made by other merges keeps its id
        merges.append([a, b])
    tok = Tokenizer.from_str(json.dumps(spec))
    for w in words:  # the simulation of the pass is what the tokenizer does
        if tok.model.tokenize(w) and [t.value for t in tok.model.tokenize(w)] != words[w][1]:
            raise RuntimeError(f"the {what} pass and the tokenizer split {w!r} differently")
    return tok


def demo_texts() -> list[str]:
    """The text of every demo's text sources (the long-context demo's is the corpus's beginning)."""
    from attnviz.model.demos import build_demo, list_demos
    from attnviz.model.state import TextSource

    return [s.text for name, _ in list_demos() for s in build_demo(name).sources if isinstance(s, TextSource)]


def common_word_forms(listing: str) -> dict[str, list]:
    """Each word of the list (words of letters; ``#`` starts a comment) inside a line (" hello",
    " Hello") and at a line start ("hello", "Hello"), in the byte-level alphabet -> [1, []]."""
    listed = sorted({w.lower() for line in listing.splitlines()
                     for w in re.findall(r"[^\W\d_]+", line.split("#", 1)[0])})
    bytes_of = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    forms = [f for w in listed for f in (" " + w, " " + w.capitalize(), w, w.capitalize())]
    return {bytes_of.pre_tokenize_str(f)[0][0]: [1, []] for f in forms}


def line_start_words(text: str) -> dict[str, list]:
    """Each word of the corpus as met at a line start (no space before it; a lower-case word also
    capitalised), in the byte-level alphabet -> [how often, its pieces]."""
    counts: collections.Counter = collections.Counter()
    for w, c in collections.Counter(re.findall(r"[^\W\d_]+", text)).items():  # words of letters
        counts[w] += c
        if w.islower():
            counts[w.capitalize()] += c
    bytes_of = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    return {bytes_of.pre_tokenize_str(w)[0][0]: [c, []] for w, c in sorted(counts.items())}


def line_start_merges(first: Tokenizer, words: dict[str, list]) -> list[tuple[str, str]]:
    """The second pass: BPE continued from the first pass's pieces of the line-start ``words``
    (their pieces are updated in place). Each step merges the pair met most often (ties: the first
    in sorted order), while it is met at least LINE_START_MIN_FREQUENCY times."""
    for w, entry in words.items():
        entry[1] = [t.value for t in first.model.tokenize(w)]
    return continue_bpe(words, LINE_START_MERGES, LINE_START_MIN_FREQUENCY)


def common_word_merges(tok: Tokenizer, forms: dict[str, list], keep: list[str]) -> list[tuple[str, str]]:
    """The third pass: BPE continued from ``tok``'s pieces of the common words' ``forms`` (updated in
    place), never merging two neighbouring tokens of a text in ``keep`` as ``tok`` splits it: a merge
    of lower rank than all of ``tok``'s only ever joins such neighbours, so those texts keep their
    tokens."""
    for w, entry in forms.items():
        entry[1] = [t.value for t in tok.model.tokenize(w)]
    forbidden = set()
    for text in keep:
        for word, _span in tok.pre_tokenizer.pre_tokenize_str(text):
            pieces = [t.value for t in tok.model.tokenize(word)]
            forbidden.update(zip(pieces, pieces[1:]))
    return continue_bpe(forms, COMMON_WORD_MERGES, 1, frozenset(forbidden))


def continue_bpe(words: dict[str, list], limit: int, min_frequency: int,
                 forbidden: frozenset = frozenset()) -> list[tuple[str, str]]:
    """At most ``limit`` BPE merges over ``words`` ({word: [how often, its pieces]}, pieces updated in
    place): each step merges the pair met most often (ties: the first in sorted order) that is not
    ``forbidden``, while it is met at least ``min_frequency`` times."""
    merges = []
    while len(merges) < limit:
        pairs: collections.Counter = collections.Counter()
        for count, pieces in words.values():
            for pair in zip(pieces, pieces[1:]):
                if pair not in forbidden:
                    pairs[pair] += count
        if not pairs:
            break
        pair, n = min(pairs.items(), key=lambda kv: (-kv[1], kv[0]))
        if n < min_frequency:
            break
        merges.append(pair)
        for entry in words.values():
            pieces, out, i = entry[1], [], 0
            while i < len(pieces):
                if i + 1 < len(pieces) and (pieces[i], pieces[i + 1]) == pair:
                    out.append(pieces[i] + pieces[i + 1])
                    i += 2
                else:
                    out.append(pieces[i])
                    i += 1
            entry[1] = out
    return merges


def train_in_line(text: str) -> Tokenizer:
    """The first pass: words as met inside a line, each with the space before it."""
    tok = Tokenizer(models.BPE())  # byte-level: every byte is in the alphabet, so no unknown token
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=True, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        min_frequency=MIN_FREQUENCY,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    paragraphs = [p for p in text.split("\n") if p.strip()]
    tok.train_from_iterator(paragraphs, trainer=trainer)
    return tok


def to_json(tok: Tokenizer) -> str:
    """The canonical text written to disk (pretty-printed so diffs of the vocabulary are readable)."""
    return json.dumps(json.loads(tok.to_str()), ensure_ascii=False, indent=1) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=CORPUS)
    parser.add_argument("--common-words", type=Path, default=COMMON_WORDS)
    parser.add_argument("--output", type=Path, default=OUTPUT)
    parser.add_argument("--check", action="store_true", help="compare with the existing file instead of writing")
    args = parser.parse_args(argv)
    text = to_json(train(args.corpus, args.common_words))
    if args.check:
        same = args.output.is_file() and args.output.read_text(encoding="utf-8") == text
        print(f"{args.output}: {'up to date' if same else 'DIFFERS from a fresh training run'}")
        return 0 if same else 1
    args.output.write_text(text, encoding="utf-8")
    vocab = json.loads(text)["model"]["vocab"]
    print(f"wrote {args.output} ({len(vocab)} entries incl. {len(SPECIAL_TOKENS)} special tokens)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
