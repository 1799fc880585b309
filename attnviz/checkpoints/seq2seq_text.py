"""Source and target text -> token ids of an encoder-decoder, as transformers' tokenizer of the family gives them.

* MarianMT ships SentencePiece models (``source.spm``, ``target.spm``) whose pieces are looked up in
  ``vocab.json`` (``target_vocab.json`` with ``separate_vocabs``), not by the model's own ids; transformers'
  MarianTokenizer is slow-only (no tokenizer.json), so the ``sentencepiece`` package tokenises, as it does
  there: a leading ``>>xx<<`` language code kept whole, the special tokens typed in the text kept whole,
  pieces missing from the vocabulary read as ``<unk>``, ``</s>`` appended.
* BART, mBART, T5 and mT5 ship ``tokenizer.json``: BART adds ``<s> ... </s>`` and T5 ``... </s>`` by its
  post-processor; mBART appends ``</s>`` and the language code (mBART-50's tokenizer, ``MBart50Tokenizer``
  in ``tokenizer_config.json``, puts the code first and ``</s>`` last), ``src_lang`` for the source and
  ``tgt_lang`` for the target as ``tokenizer_config.json`` names them (transformers resets the file's
  post-processor from them).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from attnviz.checkpoints.errors import CheckpointError
from attnviz.checkpoints.json_file import MAX_JSON_BYTES, MAX_JSON_DEPTH
from attnviz.checkpoints.spm_text import load_spm
from attnviz.jsontext import JsonRefused, loads_guarded, read_capped
from attnviz.sources.errors import SourceError
from attnviz.sources.text import BpeTokenizer, TextTokens

WORD = "▁"  # SentencePiece's word marker
LANG_CODE = re.compile(r">>.*?<<", re.DOTALL)  # Marian's target-language prefix (">>fr<<")


def read_json_file(path: Path, what: str):
    try:
        return loads_guarded(read_capped(path, MAX_JSON_BYTES), max_depth=MAX_JSON_DEPTH)
    except JsonRefused as exc:
        raise CheckpointError(f"{path} {exc}; not a tokenizer file") from None
    except FileNotFoundError:
        raise CheckpointError(f"{what} is missing: {path} not found") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise CheckpointError(f"{path} is not readable JSON ({type(exc).__name__})") from None


def _tokenizer_config(folder: Path) -> dict:
    path = folder / "tokenizer_config.json"
    cfg = read_json_file(path, "the tokenizer config") if path.is_file() else {}
    if not isinstance(cfg, dict):
        raise CheckpointError(f"{path} must hold a JSON object")
    return cfg


def _text(value, default: str) -> str:
    if isinstance(value, dict):
        value = value.get("content")
    return value if isinstance(value, str) else default


def _spans_of(text: str, pieces: list[str], start: int) -> list[tuple[int, int]]:
    """Where each SentencePiece piece came from in ``text``, searched from ``start`` (a piece the
    normaliser changed gets the empty span at the cursor)."""
    spans, at = [], start
    for p in pieces:
        body = p.replace(WORD, "")
        j = text.find(body, at) if body else -1
        if j < 0 or text[at:j].strip():
            spans.append((at, at))
            continue
        a = j - 1 if p.startswith(WORD) and j > at and text[j - 1].isspace() else j
        spans.append((a, j + len(body)))
        at = j + len(body)
    return spans


@dataclass
class SeqTokenizer:
    """One family's tokenizer of source and target text."""

    family: str
    vocab_size: int  # ids the source side may give
    eos_id: int

    def encode(self, text: str, side: str) -> TextTokens:  # side: "source" | "target"
        raise NotImplementedError

    def piece(self, token_id: int, side: str) -> str:
        raise NotImplementedError


class MarianText(SeqTokenizer):
    """MarianTokenizer's ids from the two SentencePiece models and vocab.json."""

    def __init__(self, folder: Path, vocab_size: int, dec_vocab_size: int):
        cfg = _tokenizer_config(folder)
        sep = cfg.get("separate_vocabs", False)
        if not isinstance(sep, bool):
            raise CheckpointError(f"tokenizer_config.json: separate_vocabs must be true or false (got {sep!r})")
        self.spm = {}
        for side, name in (("source", "source.spm"), ("target", "target.spm")):
            self.spm[side] = load_spm(folder / name, "the Marian tokenizer")
        self.vocab = {"source": self._vocab(folder / "vocab.json")}
        self.vocab["target"] = self._vocab(folder / "target_vocab.json") if sep else self.vocab["source"]
        self.inverse = {side: {i: t for t, i in v.items()} for side, v in self.vocab.items()}
        self.unk = _text(cfg.get("unk_token"), "<unk>")
        eos = _text(cfg.get("eos_token"), "</s>")
        pad = _text(cfg.get("pad_token"), "<pad>")
        for tok in (self.unk, eos):
            if tok not in self.vocab["source"] or tok not in self.vocab["target"]:
                raise CheckpointError(f"vocab.json has no {tok!r} token, which the Marian tokenizer needs")
        self.specials = [t for t in (eos, self.unk, pad) if t]
        self._split = re.compile("(" + "|".join(re.escape(t) for t in sorted(self.specials, key=len, reverse=True)) + ")")
        for side, limit in (("source", vocab_size), ("target", dec_vocab_size)):
            top = max(self.vocab[side].values())
            if top >= limit:
                raise CheckpointError(f"the {side} vocabulary has id {top} but the model's token table only {limit} "
                                      "rows: tokenizer and weights do not belong together")
        super().__init__(family="marian", vocab_size=vocab_size, eos_id=self.vocab["source"][eos])
        self.eos = eos

    @staticmethod
    def _vocab(path: Path) -> dict[str, int]:
        v = read_json_file(path, "the Marian vocabulary")
        if not isinstance(v, dict) or not v or not all(isinstance(i, int) and not isinstance(i, bool) and i >= 0
                                                       for i in v.values()):
            raise CheckpointError(f"{path.name} must map each token to a non-negative whole-number id")
        return v

    def encode(self, text: str, side: str) -> TextTokens:
        vocab, sp = self.vocab[side], self.spm[side]
        ids, pieces, spans, special = [], [], [], []
        at = 0
        for chunk in self._split.split(text):  # the special tokens typed in the text are kept whole
            if not chunk:
                continue
            if chunk in self.specials:
                toks, sp_spans, flags = [chunk], [(at, at + len(chunk))], [True]
            else:
                code = LANG_CODE.match(chunk)
                head, body = (code.group(0), chunk[code.end():]) if code else ("", chunk)
                parts = sp.encode(body, out_type=str)
                toks = ([head] if head else []) + parts
                sp_spans = ([(at, at + len(head))] if head else []) + _spans_of(text, parts, at + len(head))
                flags = [bool(head)] + [False] * len(parts) if head else [False] * len(parts)
            for tok, span, flag in zip(toks, sp_spans, flags):
                i = vocab.get(tok, vocab[self.unk])
                ids.append(i)
                pieces.append(tok if flag else tok.replace(WORD, " "))
                spans.append(span)
                special.append(flag)
            at += len(chunk)
        if pieces and pieces[0].startswith(" ") and not text.startswith(" ") and not special[0]:
            pieces[0] = pieces[0][1:] or " "
        ids.append(vocab[self.eos])
        pieces.append(self.eos)
        spans.append((len(text), len(text)))
        special.append(True)
        return TextTokens(text=text, ids=np.asarray(ids, dtype=np.int64), pieces=pieces, spans=spans, special=special)

    def piece(self, token_id: int, side: str) -> str:
        return self.inverse[side].get(int(token_id), self.unk).replace(WORD, " ")


class JsonText(SeqTokenizer):
    """BART's, mBART's and T5's tokenizer.json, with mBART's language codes from tokenizer_config.json."""

    def __init__(self, folder: Path, family: str, vocab_size: int, eos_id: int, name: str):
        path = folder / "tokenizer.json"
        if not path.is_file():
            raise CheckpointError(f"the tokenizer is missing: {path} not found ({family} checkpoints ship tokenizer.json)")
        try:
            self.tok = BpeTokenizer.from_file(path, name=name)
        except SourceError as exc:
            raise CheckpointError(str(exc)) from None
        if self.tok.vocab_size > vocab_size:
            raise CheckpointError(f"tokenizer.json has {self.tok.vocab_size} tokens but the model's token table only "
                                  f"{vocab_size} rows: tokenizer and weights do not belong together")
        self.prefix: dict[str, list[int]] = {}
        self.suffix: dict[str, list[int]] = {}
        if family == "mbart":
            cfg = _tokenizer_config(folder)
            src = _text(cfg.get("src_lang"), "en_XX")
            tgt = _text(cfg.get("tgt_lang"), src)
            eos = self.tok.token_to_id(_text(cfg.get("eos_token"), "</s>"))
            fifty = str(cfg.get("tokenizer_class", "")).startswith("MBart50")  # mBART-50: the code first
            for side, lang in (("source", src), ("target", tgt)):
                code = self.tok.token_to_id(lang)
                if code is None or eos is None:
                    raise CheckpointError(f"tokenizer.json has no {lang!r} language code (tokenizer_config.json's "
                                          f"{'src' if side == 'source' else 'tgt'}_lang) or no </s>")
                self.prefix[side], self.suffix[side] = ([code], [eos]) if fifty else ([], [eos, code])
        super().__init__(family=family, vocab_size=vocab_size, eos_id=eos_id)

    def encode(self, text: str, side: str) -> TextTokens:
        head, tail = self.prefix.get(side, []), self.suffix.get(side, [])
        if not text:
            return self._specials_only(text, head + tail)
        body = self.tok.encode(text, add_special_tokens=self.family != "mbart")
        ids = head + list(body.ids) + tail
        pieces = [self.tok.id_to_piece(i) for i in head] + list(body.pieces) + [self.tok.id_to_piece(i) for i in tail]
        spans = [(0, 0)] * len(head) + list(body.spans) + [(len(text), len(text))] * len(tail)
        special = [True] * len(head) + list(body.special) + [True] * len(tail)
        if not self.tok.byte_level:  # the word marker a Metaspace pre-tokeniser prepends is not in the text
            for t, (a, b) in enumerate(spans):
                if pieces[t].startswith(" ") and not text[a:b].startswith(" ") and not special[t]:
                    pieces[t] = pieces[t][1:] or " "
        return TextTokens(text=text, ids=np.asarray(ids, dtype=np.int64), pieces=pieces, spans=spans, special=special)

    def _specials_only(self, text: str, suffix: list[int] | None) -> TextTokens:
        """An empty text: what the post-processor adds around nothing (BART ``<s> </s>``, T5 ``</s>``), or
        mBART's suffix."""
        ids = list(suffix) if suffix else list(self.tok.tokenizer.encode("", add_special_tokens=True).ids)
        return TextTokens(text=text, ids=np.asarray(ids, dtype=np.int64), pieces=[self.tok.id_to_piece(i) for i in ids],
                          spans=[(0, 0)] * len(ids), special=[True] * len(ids))

    def piece(self, token_id: int, side: str) -> str:
        return self.tok.id_to_piece(token_id)


def read_seq_tokenizer(folder: Path, spec, name: str) -> SeqTokenizer:
    if spec.family == "marian":
        return MarianText(folder, spec.vocab_size, spec.dec_vocab_size)
    return JsonText(folder, spec.family, spec.vocab_size, spec.eos_token_id, name)


def encode_side(tok: SeqTokenizer, text, side: str) -> TextTokens:
    """Tokenise one side, every problem a CheckpointError naming the side."""
    if not isinstance(text, str):
        raise CheckpointError(f"the {side} text must be a string (got {type(text).__name__})")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise CheckpointError(f"the {side} text is not valid Unicode: unpaired surrogate at character {exc.start}") \
            from None
    try:
        return tok.encode(text, side)
    except SourceError as exc:
        raise CheckpointError(f"the {side} text: {exc}") from None
