"""SentencePiece model files (``*.spm``, ``spm.model``) read for the families that ship them instead of a
``tokenizer.json``: MarianMT (:mod:`attnviz.checkpoints.seq2seq_text`) and DeBERTa v2 / v3.

:func:`load_spm` opens one with the ``sentencepiece`` package (a missing package or a damaged file is one
line). :func:`spm_pieces` lists its pieces with their scores and types, read from the model's protobuf (the
``sentencepiece`` package does not say which pieces are user-defined).

:func:`deberta_spm_tokenizer` builds the tokenizer transformers' ``DebertaV2Tokenizer`` builds from a repository
that has only ``spm.model`` (deberta-v3-base and its fine-tunes): a Unigram over the model's pieces and scores
(``[UNK]``'s id where its score is 0, else the model's unk id); whitespace runs, tabs and newlines made one
space, NFC, trailing whitespace stripped (lower-cased first with ``do_lower_case``; the model's own
normaliser is not used, as transformers does not use it); punctuation split off with ``split_by_punct``;
``▁`` before every word; the control pieces and ``tokenizer_config.json``'s special tokens kept whole where
typed, the user-defined pieces too; tokens the model lacks (``[MASK]``) appended after its pieces;
``[CLS] ... [SEP]`` around the text.
"""

from __future__ import annotations

import struct
from pathlib import Path

from attnviz.checkpoints.errors import CheckpointError
from attnviz.checkpoints.json_file import read_json
from attnviz.sources.text import BpeTokenizer

NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE = 1, 2, 3, 4, 5, 6  # SentencePiece piece types
MAX_SPM_BYTES = 64 << 20  # the largest published models are a few MB
SPECIAL_KEYS = ("pad_token", "unk_token", "cls_token", "sep_token", "mask_token", "bos_token", "eos_token")
DEBERTA_DEFAULTS = {"pad_token": "[PAD]", "unk_token": "[UNK]", "cls_token": "[CLS]", "sep_token": "[SEP]",
                    "mask_token": "[MASK]", "bos_token": "[CLS]", "eos_token": "[SEP]"}


def load_spm(path: Path, what: str):
    """A ``sentencepiece.SentencePieceProcessor`` of the model file ``path``; ``what`` names the tokenizer
    in messages ("the Marian tokenizer")."""
    try:
        import sentencepiece  # noqa: PLC0415  (only the families that ship SentencePiece models need it)
    except ImportError:
        raise CheckpointError(f"{what} needs the sentencepiece package (pip install sentencepiece)") from None
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"{what} is missing: {path} not found")
    try:
        return sentencepiece.SentencePieceProcessor(model_file=str(path))
    except (OSError, RuntimeError) as exc:
        raise CheckpointError(f"{path} is not a SentencePiece model ({str(exc).splitlines()[0][:120]})") from None


# ---- the model's pieces, from its protobuf ---------------------------------------------------------------


def _varint(buf: bytes, at: int) -> tuple[int, int]:
    value, shift = 0, 0
    while True:
        if at >= len(buf) or shift > 63:
            raise ValueError("truncated varint")
        b = buf[at]
        at += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, at
        shift += 7


def _fields(buf: bytes):
    """(field number, wire type, value) of a protobuf message; value is an int, or bytes for length-delimited."""
    at = 0
    while at < len(buf):
        key, at = _varint(buf, at)
        num, wire = key >> 3, key & 7
        if wire == 0:
            value, at = _varint(buf, at)
        elif wire == 1:
            value, at = buf[at:at + 8], at + 8
        elif wire == 2:
            n, at = _varint(buf, at)
            value, at = buf[at:at + n], at + n
        elif wire == 5:
            value, at = buf[at:at + 4], at + 4
        else:
            raise ValueError(f"wire type {wire}")
        if at > len(buf):
            raise ValueError("truncated field")
        yield num, wire, value


def spm_pieces(path: Path) -> list[tuple[str, float, int]]:
    """(piece, score, type) of every piece of a SentencePiece model file, in id order."""
    path = Path(path)
    try:
        if path.stat().st_size > MAX_SPM_BYTES:
            raise CheckpointError(f"{path} is larger than {MAX_SPM_BYTES >> 20} MB; not a SentencePiece model")
        buf = path.read_bytes()
        out = []
        for num, wire, value in _fields(buf):
            if num != 1 or wire != 2:  # ModelProto.pieces
                continue
            piece, score, kind = "", 0.0, NORMAL
            for n, w, v in _fields(value):
                if n == 1 and w == 2:
                    piece = v.decode("utf-8")
                elif n == 2 and w == 5:
                    score = struct.unpack("<f", v)[0]
                elif n == 3 and w == 0:
                    kind = v
            out.append((piece, score, kind))
    except (OSError, ValueError, UnicodeDecodeError) as exc:
        raise CheckpointError(f"{path} is not a SentencePiece model ({exc})") from None
    if not out:
        raise CheckpointError(f"{path} is not a SentencePiece model (it lists no pieces)")
    return out


# ---- DeBERTa v2 / v3 -------------------------------------------------------------------------------------


def _flag(cfg: dict, key: str, default: bool) -> bool:
    v = cfg.get(key, default)
    if not isinstance(v, bool):
        raise CheckpointError(f"tokenizer_config.json: {key!r} must be true or false (got {v!r})")
    return v


def _token_text(value, key: str):
    if isinstance(value, dict):
        value = value.get("content")
    if not isinstance(value, str) or not value:
        raise CheckpointError(f"tokenizer_config.json: {key!r} must be a token (got {value!r})")
    return value


def deberta_spm_tokenizer(folder: Path, name: str) -> BpeTokenizer:
    """The tokenizer of a DeBERTa v2 / v3 folder that has ``spm.model`` and no ``tokenizer.json`` (module docstring)."""
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, normalizers, pre_tokenizers, processors  # noqa: PLC0415
    from tokenizers.models import Unigram  # noqa: PLC0415

    folder = Path(folder)
    path = folder / "spm.model"
    sp = load_spm(path, "the DeBERTa tokenizer")
    pieces = spm_pieces(path)
    if len(pieces) != sp.get_piece_size():
        raise CheckpointError(f"{path} lists {len(pieces)} pieces but sentencepiece reads {sp.get_piece_size()}")
    cfg_path = folder / "tokenizer_config.json"
    cfg = read_json(cfg_path, "the tokenizer config") if cfg_path.is_file() else {}
    specials = {k: _token_text(cfg.get(k, DEBERTA_DEFAULTS[k]), k) for k in SPECIAL_KEYS}
    lower, punct = _flag(cfg, "do_lower_case", False), _flag(cfg, "split_by_punct", False)
    prefix = _flag(cfg, "add_prefix_space", True)
    vocab = [(p, float(s)) for p, s, _ in pieces]
    unk = (specials["unk_token"], 0.0)
    unk_id = vocab.index(unk) if unk in vocab else sp.unk_id()
    tok = Tokenizer(Unigram(vocab, unk_id=unk_id, byte_fallback=False))
    norm = [normalizers.Lowercase()] if lower else []
    tok.normalizer = normalizers.Sequence(norm + [normalizers.Replace(Regex(r"\s{2,}|[\n\r\t]"), " "), normalizers.NFC(),
                                                  normalizers.Strip(left=False, right=True)])
    scheme = "always" if prefix else "first"
    pre = [pre_tokenizers.Punctuation(behavior="isolated")] if punct else []
    tok.pre_tokenizer = pre_tokenizers.Sequence(pre + [pre_tokenizers.Metaspace(replacement="▁", prepend_scheme=scheme)])
    tok.decoder = decoders.Metaspace(replacement="▁", prepend_scheme=scheme)
    # the model's control and user-defined pieces are matched whole in the raw text, as transformers adds them
    tok.add_special_tokens([AddedToken(p, normalized=False, special=True) for p, _, t in pieces if t == CONTROL])
    tok.add_tokens([AddedToken(p, normalized=False, special=False) for p, _, t in pieces if t == USER_DEFINED])
    _added_from_config(tok, cfg, len(pieces))
    tok.add_special_tokens([AddedToken(specials[k], special=True, normalized=False) for k in SPECIAL_KEYS])
    cls, sep = specials["cls_token"], specials["sep_token"]
    tok.post_processor = processors.TemplateProcessing(
        single=f"{cls}:0 $A:0 {sep}:0", pair=f"{cls}:0 $A:0 {sep}:0 $B:1 {sep}:1",
        special_tokens=[(cls, tok.token_to_id(cls)), (sep, tok.token_to_id(sep))])
    return BpeTokenizer(tok, name=name)


def _added_from_config(tok, cfg: dict, n_pieces: int) -> None:
    """``added_tokens_decoder`` of tokenizer_config.json: each token at the id it names (the next free one)."""
    from tokenizers import AddedToken  # noqa: PLC0415

    added = cfg.get("added_tokens_decoder") or {}
    if not isinstance(added, dict):
        raise CheckpointError("tokenizer_config.json: 'added_tokens_decoder' must map ids to tokens")
    for key in sorted(added, key=lambda k: int(k) if str(k).isdigit() else -1):
        if not str(key).isdigit() or not isinstance(added[key], dict):
            raise CheckpointError(f"tokenizer_config.json: added_tokens_decoder entry {key!r} is not an id and a token")
        t, i = added[key], int(key)
        content = _token_text(t, f"added_tokens_decoder[{key}]")
        have = tok.token_to_id(content)
        if have is not None and have == i:
            continue
        if i != tok.get_vocab_size(with_added_tokens=True) or have is not None:
            raise CheckpointError(f"tokenizer_config.json: added token {content!r} at id {i} does not follow the "
                                  f"{n_pieces} pieces of spm.model")
        add = tok.add_special_tokens if t.get("special", True) else tok.add_tokens
        add([AddedToken(content, normalized=bool(t.get("normalized", False)), special=bool(t.get("special", True)),
                        lstrip=bool(t.get("lstrip", False)), rstrip=bool(t.get("rstrip", False)),
                        single_word=bool(t.get("single_word", False)))])
