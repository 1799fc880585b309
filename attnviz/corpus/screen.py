"""Documents with more tokens than a run allows, found on the driver from a bounded prefix of their text,
so that a long document (up to the 1 MiB a document may have) is not sent whole to a worker only to be
tokenised there and refused: with ``--max-tokens 16`` a 1 MiB line costs one tokenisation of its first
few kilobytes here, and nothing on the cluster.

The prefix is cut just before a whitespace character that follows a non-whitespace one. A tokenizer whose
pre-tokeniser splits words at whitespace and encodes them apart (GPT-2's byte-level regex, BERT's, a
Metaspace that splits, ``Whitespace``), after a normaliser that maps characters one by one, gives such a
prefix the first tokens of the whole text: a prefix with more tokens than the limit means the document
has more too (:func:`prefix_stable` says whether a tokenizer is of that kind; the others, e.g. a
SentencePiece BPE run over the whole text as Llama's is, or a custom split regex, are not screened:
their merges may cross a space, so a prefix's count proves nothing). A prefix within
the limit proves nothing; a longer one is tried (four times as long) until the limit is passed or the
whole text would be needed, and then the document is sent as it is. A text without such a cut (one
word of a megabyte) is sent as it is too.
"""

from __future__ import annotations

import json
import re

from attnviz.corpus.texts import Document

CHARS_PER_TOKEN = 16  # the first prefix has this many characters per allowed token (text has about 4)
MIN_PREFIX_CHARS = 4096  # ... and at least this many: shorter documents are never screened
GROWTH = 4  # each further prefix is this many times longer
_WORD_END = re.compile(r"\s\S")  # in the reversed text: a whitespace character after a non-whitespace one


def cut_before_whitespace(text: str, at_most: int) -> int:
    """The largest ``i <= at_most`` such that ``text[i]`` is whitespace and ``text[i - 1]`` is not, or 0."""
    at_most = min(at_most, len(text) - 1)
    if at_most < 1:
        return 0
    m = _WORD_END.search(text[at_most::-1])  # reversed: its first match is the last cut
    return at_most - m.start() if m is not None else 0


_SPLITTING = {"BertPreTokenizer", "Whitespace", "WhitespaceSplit"}  # pieces never hold whitespace
_WITHIN_PIECES = {"ByteLevel", "Metaspace", "Digits", "Punctuation", "UnicodeScripts"}  # only split further
_CHARWISE = {"BertNormalizer", "NFC", "NFD", "NFKC", "NFKD", "Lowercase", "StripAccents", "Strip", "Prepend"}


def _splits_at_whitespace(pre: dict) -> bool:
    kind = pre.get("type")
    if kind in _SPLITTING:
        return True
    if kind == "ByteLevel":
        return bool(pre.get("use_regex", True))  # GPT-2's regex: no piece runs from a word into a space
    if kind == "Metaspace":
        return bool(pre.get("split", True))
    return False


def _pre_ok(pre) -> bool:
    if not isinstance(pre, dict):
        return False
    if pre.get("type") == "Sequence":
        parts = pre.get("pretokenizers") or []
        return (any(isinstance(p, dict) and _splits_at_whitespace(p) for p in parts)
                and all(isinstance(p, dict) and (_splits_at_whitespace(p) or p.get("type") in _WITHIN_PIECES)
                        for p in parts))
    return _splits_at_whitespace(pre)


def _normalizer_ok(norm) -> bool:
    if norm is None:
        return True
    if not isinstance(norm, dict):
        return False
    kind = norm.get("type")
    if kind == "Sequence":
        return all(_normalizer_ok(n) for n in norm.get("normalizers") or [])
    if kind == "Replace":  # a fixed string without whitespace, replaced by one without: never across a cut
        pattern, content = (norm.get("pattern") or {}).get("String"), norm.get("content")
        return (isinstance(pattern, str) and isinstance(content, str) and bool(pattern)
                and not any(c.isspace() for c in pattern + content))
    return kind in _CHARWISE


def prefix_stable(tokenizer) -> bool:
    """True when ``tokenizer`` (a ``tokenizers.Tokenizer``) encodes a text cut just before a whitespace
    character that follows another character into the first tokens of the whole text's (see above)."""
    try:
        spec = json.loads(tokenizer.to_str())
    except (AttributeError, TypeError, ValueError):
        return False
    added = [t.get("content", "") for t in spec.get("added_tokens") or [] if isinstance(t, dict)]
    if any(not isinstance(a, str) or any(c.isspace() for c in a) for a in added):
        return False  # an added token holding a space could be cut in two
    return _pre_ok(spec.get("pre_tokenizer")) and _normalizer_ok(spec.get("normalizer"))


class PrefixScreen:
    """``screen(document)``: the document, or the same document failing with its reason when a prefix of
    its text already gives more than ``limit`` tokens (``tokenizer``: a ``tokenizers.Tokenizer``)."""

    def __init__(self, tokenizer, limit: int, option: str = "--max-tokens"):
        self.tokenizer = tokenizer
        self.limit = int(limit)
        self.option = option
        self.screened = 0  # documents whose prefix was tokenised here
        self.refused = 0  # ... and found too long

    def too_many(self, text: str) -> ValueError | None:
        """The failure of a text whose prefix gives more than ``limit`` tokens, else None."""
        size = max(MIN_PREFIX_CHARS, CHARS_PER_TOKEN * self.limit)
        counted = False
        while size < len(text):
            cut = cut_before_whitespace(text, size)
            if cut == 0:
                break
            if not counted:
                self.screened += 1
                counted = True
            n = len(self.tokenizer.encode(text[:cut], add_special_tokens=False).ids)
            if n > self.limit:
                self.refused += 1
                raise_it = f" or raise {self.option}" if self.option else ""
                return ValueError(f"text gives more tokens than the limit of {self.limit:,} (its first {cut:,} "
                                  f"characters give {n:,} already); it was not run: shorten it{raise_it}")
            size *= GROWTH
        return None

    def __call__(self, doc: Document) -> Document:
        if not isinstance(doc.text, str) or len(doc.text) <= MIN_PREFIX_CHARS:
            return doc
        why = self.too_many(doc.text)
        return doc if why is None else Document(doc.index, doc.name, why)
