"""Text -> tokens through the ``tokenizers`` library (the bundled BPE or any ``tokenizer.json``).

Each token keeps its vocabulary id, its decoded piece and its span: code-point offsets into the
Python string (emoji, CJK and right-to-left text line up), the leading space included, so a
byte-level vocabulary's spans tile the text; tokens splitting one character share its span, and
special tokens a post-processor inserts get ``(0, 0)``.
"""

from __future__ import annotations

import codecs
import functools
import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from tokenizers import Tokenizer

from attnviz.resources_path import resource_path
from attnviz.sources.errors import SourceError, positive_int

DEFAULT_NAME = "attnviz byte-level BPE"

# Whitespace made visible in labels (axis ticks cannot show a leading space or a newline).
_VISIBLE_WHITESPACE = str.maketrans({" ": "␣", "\n": "↵", "\t": "⇥", "\r": "␍"})


def _byte_marker_errors(err: UnicodeDecodeError):
    """Codec error handler: show bytes that are not a complete UTF-8 character as ``<0xF0>``."""
    bad = err.object[err.start : err.end]
    return "".join(f"<0x{b:02X}>" for b in bad), err.end


codecs.register_error("attnviz-byte-markers", _byte_marker_errors)


@functools.lru_cache(maxsize=1)
def _unicode_to_byte() -> dict[str, int]:
    """Inverse of the byte-level alphabet: printable Latin-1 bytes stand for themselves, the other
    byte values were shifted to code points 256, 257, ... in increasing byte order."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAC + 1)) + list(range(0xAE, 0xFF + 1))
    table = {chr(b): b for b in printable}
    shift = 0
    for b in range(256):
        if b not in printable:
            table[chr(256 + shift)] = b
            shift += 1
    return table


@dataclass(frozen=True, eq=False)
class TextTokens:
    """The tokens of one text: ``ids[t]`` is token t's vocabulary id, ``pieces[t]`` its decoded text
    and ``text[spans[t][0]:spans[t][1]]`` where it came from."""

    text: str  # the original text, so spans can be resolved and shown
    ids: np.ndarray  # (T,) int64 vocabulary ids, the rows of the embedding table
    pieces: list[str]  # (T,) decoded token text (see BpeTokenizer._decode_piece)
    spans: list[tuple[int, int]]  # (T,) character offsets into ``text``
    special: list[bool] = field(default_factory=list)  # (T,) True for added/special tokens

    def __len__(self) -> int:
        return int(self.ids.shape[0])

    def labels(self) -> list[str]:
        """Pieces with whitespace made visible (space ``␣``, newline ``↵``, tab ``⇥``) for plot axes."""
        return [p.translate(_VISIBLE_WHITESPACE) for p in self.pieces]

    def source_text(self, t: int) -> str:
        """The slice of the original text token ``t`` came from."""
        a, b = self.spans[t]
        return self.text[a:b]


def _unknown_ids(tokenizer: Tokenizer, spec: dict) -> set[int]:
    """The id of the vocabulary's unknown token (WordPiece/BPE ``unk_token``, Unigram ``unk_id``), if any."""
    model = spec.get("model") if isinstance(spec.get("model"), dict) else {}
    ids = set()
    if isinstance(model.get("unk_token"), str):
        i = tokenizer.token_to_id(model["unk_token"])
        if i is not None:
            ids.add(int(i))
    if isinstance(model.get("unk_id"), int) and not isinstance(model.get("unk_id"), bool):
        ids.add(int(model["unk_id"]))
    return ids


class BpeTokenizer:
    """A ``tokenizers.Tokenizer`` with a name, returning :class:`TextTokens`.

    Named for the bundled byte-level BPE vocabulary, but any model a ``tokenizer.json`` describes
    (BPE, WordPiece, Unigram) works.  Truncation and padding settings in the file are switched off:
    a visualiser must see every token (use ``max_tokens`` for a limit that fails loudly instead).
    """

    def __init__(self, tokenizer: Tokenizer, name: str = "tokenizer"):
        self._tok = tokenizer
        self._tok.no_truncation()
        self._tok.no_padding()
        self.name = str(name)
        spec = json.loads(tokenizer.to_str())
        self._byte_level = _mentions_byte_level(spec.get("pre_tokenizer")) or _mentions_byte_level(
            spec.get("decoder")
        )
        added = tokenizer.get_added_tokens_decoder()
        self._added = {int(i): t.content for i, t in added.items()}  # shown verbatim as pieces
        # Special: what the post-processor adds (the encoding's special-tokens mask: [CLS], [SEP], BOS,
        # EOS, padding) and special added tokens typed in the text, except the unknown token: [UNK]
        # stands for text the vocabulary lacks, it is content, not a marker.
        self._special_ids = {int(i) for i, t in added.items() if t.special} - _unknown_ids(tokenizer, spec)
        self._pieces: dict[int, str] = {}  # id -> decoded piece, filled as ids are met

    # ---- construction -------------------------------------------------------------------------

    @classmethod
    def default(cls) -> "BpeTokenizer":
        """The bundled byte-level BPE vocabulary (``resources/tokenizer/tokenizer.json``)."""
        return cls.from_json_str(_default_json(), name=DEFAULT_NAME)

    @classmethod
    def from_file(cls, path, name: str | None = None) -> "BpeTokenizer":
        """Load any ``tokenizer.json`` (GPT-2's, BERT's, ...).  The name defaults to the folder name
        when the file is called ``tokenizer.json`` (``gpt2/tokenizer.json`` -> ``"gpt2"``)."""
        path = Path(path)
        if not path.is_file():
            raise SourceError(f"tokenizer file not found: {path}")
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise SourceError(f"cannot read tokenizer file {path}: {exc}") from None
        if name is None:
            name = path.parent.name if path.name == "tokenizer.json" and path.parent.name else path.stem
        return cls.from_json_str(text, name=name, origin=str(path))

    @classmethod
    def from_json_str(cls, s: str, name: str = "tokenizer", origin: str = "the given text") -> "BpeTokenizer":
        """Rebuild a tokenizer from the JSON text :meth:`to_json_str` returned (sessions embed it)."""
        if not isinstance(s, str) or not s.strip():
            raise SourceError(f"tokenizer JSON from {origin} is empty")
        try:
            tok = Tokenizer.from_str(s)
        except Exception as exc:  # the library raises a bare Exception for every parse problem
            raise SourceError(
                f"{origin} is not a tokenizer.json the tokenizers library can read ({exc})"
            ) from None
        return cls(tok, name=name)

    def to_json_str(self) -> str:
        """The complete tokenizer as JSON (vocabulary, merges, normaliser, pre-tokeniser ...)."""
        return self._tok.to_str()

    # ---- properties -----------------------------------------------------------------------------

    @property
    def vocab_size(self) -> int:
        """Number of ids, special tokens included: the embedding table needs this many rows."""
        return int(self._tok.get_vocab_size(with_added_tokens=True))

    @property
    def byte_level(self) -> bool:
        """True when tokens are byte sequences (GPT-2 style), decoded to text for the pieces."""
        return self._byte_level

    @property
    def tokenizer(self) -> Tokenizer:
        """The wrapped ``tokenizers.Tokenizer``."""
        return self._tok

    def token_to_id(self, token: str) -> int | None:
        """The id of a token string as the vocabulary writes it (``"Ġbank"``), or None."""
        return self._tok.token_to_id(token)

    def id_to_piece(self, token_id: int) -> str:
        """The decoded piece of one id (see :meth:`_decode_piece`)."""
        token_id = int(token_id)
        if not 0 <= token_id < self.vocab_size:
            raise SourceError(f"token id {token_id} is outside the vocabulary (0..{self.vocab_size - 1})")
        token = self._tok.id_to_token(token_id)
        if token is None:
            raise SourceError(f"token id {token_id} has no entry in tokenizer {self.name!r}")
        return self._piece(token_id, token)

    def __repr__(self) -> str:
        return f"BpeTokenizer(name={self.name!r}, vocab_size={self.vocab_size})"

    # ---- encoding -------------------------------------------------------------------------------

    def encode(self, text: str, *, add_special_tokens: bool = False, max_tokens: int | None = None) -> TextTokens:
        """Tokenise ``text``.

        ``add_special_tokens`` lets the file's post-processor add its markers (BERT's ``[CLS]`` ...
        ``[SEP]``); off by default so tokens map one-to-one onto the text.  ``max_tokens`` raises
        SourceError when the text gives more tokens than that (None: no limit).
        """
        if not isinstance(text, str):
            raise SourceError(f"text must be a string (got {type(text).__name__})")
        if not text:
            raise SourceError("text is empty: type or load some text first")
        if text.isspace():
            raise SourceError("text contains only whitespace: there is nothing to tokenise")
        if max_tokens is not None:
            max_tokens = positive_int("max_tokens", max_tokens)
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise SourceError(
                f"text is not valid Unicode: unpaired surrogate at character {exc.start}"
            ) from None
        enc = self._tok.encode(text, add_special_tokens=add_special_tokens)
        T = len(enc.ids)
        if T == 0:
            raise SourceError(f"text gives no tokens with tokenizer {self.name!r} (its normaliser removed everything)")
        if max_tokens is not None and T > max_tokens:
            raise SourceError(
                f"text gives {T:,} tokens, more than the limit of {max_tokens:,}; shorten the text or raise the limit"
            )
        ids = np.asarray(enc.ids, dtype=np.int64)  # (T,)
        mask = list(enc.special_tokens_mask) or [0] * T
        special = [bool(m) or i in self._special_ids for m, i in zip(mask, enc.ids)]
        pieces = [self._piece(i, tok) for i, tok in zip(enc.ids, enc.tokens)]
        spans = [(int(a), int(b)) for a, b in enc.offsets]
        if self._byte_level:
            # A pre-tokeniser with add_prefix_space puts a space before the first word (and after
            # each special token) that the text does not have; the piece shows the text, so that
            # space is dropped again.  Real spaces are inside the span and stay.
            # A token that is nothing but that invented space keeps " " and gets the empty span (a, a).
            for t, (a, b) in enumerate(spans):
                if pieces[t].startswith(" ") and not text[a:b].startswith(" ") and not special[t]:
                    if pieces[t] == " ":
                        spans[t] = (a, a)
                    else:
                        pieces[t] = pieces[t][1:]
        return TextTokens(text=text, ids=ids, pieces=pieces, spans=spans, special=special)

    def _piece(self, token_id: int, token: str) -> str:
        piece = self._pieces.get(token_id)
        if piece is None:
            piece = self._pieces[token_id] = self._decode_piece(token_id, token)
        return piece

    def _decode_piece(self, token_id: int, token: str) -> str:
        """The text a token stands for: byte-level tokens decoded as UTF-8 ("Ġbank" -> " bank"; a partial
        multi-byte character shows ``<0xF0>``-style markers), SentencePiece's "▁" as a space, WordPiece's
        ``##`` kept (what readers of BERT expect)."""
        if token_id in self._added:
            return token
        if self._byte_level:
            table = _unicode_to_byte()
            if all(ch in table for ch in token):
                return bytes(table[ch] for ch in token).decode("utf-8", errors="attnviz-byte-markers")
            return token
        return token.replace("▁", " ")


def _mentions_byte_level(component) -> bool:
    """True if a pre-tokeniser/decoder spec (possibly a Sequence of them) contains ByteLevel."""
    if isinstance(component, dict):
        if component.get("type") == "ByteLevel":
            return True
        return any(_mentions_byte_level(c) for c in component.get("pretokenizers", component.get("decoders", [])) or [])
    return False


@functools.lru_cache(maxsize=1)
def _default_json() -> str:
    path = resource_path("tokenizer", "tokenizer.json")
    try:
        return path.read_text(encoding="utf-8")
    except OSError as exc:
        raise SourceError(f"the bundled tokenizer vocabulary is missing ({path}): {exc}") from None
