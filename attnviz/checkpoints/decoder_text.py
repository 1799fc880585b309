"""Text -> token ids of a decoder LLM, with the BOS/EOS its tokenizer puts around every text.

The rule is transformers 5's: what ``tokenizer.json``'s own post-processor adds, whatever
``add_bos_token`` / ``add_eos_token`` in ``tokenizer_config.json`` say (measured with 5.24: a Llama file
whose post-processor adds ``<s>`` gets it with ``add_bos_token: false``, and ``add_eos_token: true`` adds
nothing the post-processor does not). :func:`read_special` finds the markers by encoding a probe with and
without special tokens; :func:`encode` tokenises without the post-processor and adds them itself, so every
piece keeps its span. A chat template writes its own markers.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from attnviz.checkpoints.decoder_chat import ChatTemplate, find_template, render_chat
from attnviz.checkpoints.errors import CheckpointError
from attnviz.checkpoints.json_file import read_json
from attnviz.sources.errors import SourceError
from attnviz.sources.text import BpeTokenizer, TextTokens

# model_type -> transformers' default add_bos_token (Gemma's tokenizer_config.json, as 5.x saves it, leaves the
# flag out and tokenizer.json's post-processor adds <bos>)
ADD_BOS_DEFAULT = {"llama": True, "mistral": True, "gemma": True, "gemma2": True, "gemma3_text": True}


@dataclass(frozen=True)
class SpecialTokens:
    """BOS/EOS handling of a decoder tokenizer."""

    bos_id: int | None  # id of the BOS token, None when the tokenizer has none
    eos_id: int | None
    add_bos: bool  # put BOS in front of every text (as transformers does for Llama / Mistral)
    add_eos: bool  # put EOS after every text
    has_chat_template: bool  # tokenizer_config.json (or chat_template.jinja) carries a chat template
    chat: ChatTemplate | None = None  # the template and its special-token variables (None without one)

    def describe(self) -> str:
        parts = []
        if self.add_bos:
            parts.append("BOS added")
        if self.add_eos:
            parts.append("EOS added")
        return ", ".join(parts) or "no BOS"


def _token_text(value) -> str | None:
    if isinstance(value, dict):
        value = value.get("content")
    return value if isinstance(value, str) else None


def read_special(folder: Path, tok: BpeTokenizer, model_type: str) -> SpecialTokens:
    """BOS/EOS of a decoder folder: the tokens named in ``tokenizer_config.json`` (absent: the family's
    defaults), added where ``tokenizer.json``'s post-processor adds them (see the module doc)."""
    path = folder / "tokenizer_config.json"
    cfg: dict = {}
    if path.is_file():
        cfg = read_json(path, "the tokenizer config")
    ids = {}
    for role in ("bos", "eos"):
        text = _token_text(cfg.get(f"{role}_token"))
        if text is None and role == "bos" and "bos_token" not in cfg and model_type in ADD_BOS_DEFAULT:
            text = "<bos>" if model_type.startswith("gemma") else "<s>"
        ids[role] = None if text is None else tok.token_to_id(text)
        if text is not None and ids[role] is None:
            raise CheckpointError(f"{path.name}: {role}_token {text!r} is not in tokenizer.json")
    before, after = post_processor_markers(tok)
    if len(before) > 1 or len(after) > 1:
        raise CheckpointError(f"tokenizer.json's post-processor puts {len(before)} tokens before and {len(after)} "
                              "after every text; only a single BOS and EOS are supported")
    if before:
        ids["bos"] = before[0]
    if after:
        ids["eos"] = after[0]
    add_bos, add_eos = bool(before), bool(after)
    chat = find_template(folder, cfg, model_type)
    return SpecialTokens(bos_id=ids["bos"], eos_id=ids["eos"], add_bos=add_bos, add_eos=add_eos,
                         has_chat_template=chat is not None, chat=chat)


def post_processor_markers(tok: BpeTokenizer) -> tuple[list[int], list[int]]:
    """(ids before, ids after) the text that ``tokenizer.json``'s post-processor adds to a single text."""
    for probe in ("a", "0", "the", "x"):
        plain = tok.tokenizer.encode(probe, add_special_tokens=False).ids
        if plain:
            break
    else:
        return [], []
    full = tok.tokenizer.encode(probe, add_special_tokens=True).ids
    at = next((i for i in range(len(full) - len(plain) + 1) if full[i:i + len(plain)] == plain), None)
    return (list(full), []) if at is None else (list(full[:at]), list(full[at + len(plain):]))


def encode(tok: BpeTokenizer, special: SpecialTokens, text: str, max_tokens: int, *, chat: bool = False,
           model: str = "the model") -> TextTokens:
    """Tokenise ``text`` and add BOS / EOS as the checkpoint's tokenizer config says; with ``chat`` the
    chat template rendered around ``text`` instead, tokenised as it is (its special tokens included)."""
    if chat:
        if special.chat is None:
            raise CheckpointError(f"{model} has no chat template (no chat_template.jinja, and no chat_template "
                                  "in tokenizer_config.json); run it on the plain text")
        text = render_chat(special.chat, text, model)
        special = SpecialTokens(bos_id=special.bos_id, eos_id=special.eos_id, add_bos=False, add_eos=False,
                                has_chat_template=True, chat=special.chat)
        if not text:
            raise SourceError("the chat template rendered nothing")
    n_extra = int(special.add_bos) + int(special.add_eos)
    body = tok.encode(text, add_special_tokens=False)
    if len(body) + n_extra > max_tokens:
        what = " with " + special.describe() if n_extra else (" in the chat template" if chat else "")
        raise SourceError(f"text gives {len(body) + n_extra:,} tokens{what}, more than the limit of {max_tokens:,}; "
                          "shorten the text")
    ids, pieces, spans, flags = list(body.ids), list(body.pieces), list(body.spans), list(body.special)
    for t, (a, b) in enumerate(spans):  # the word marker a SentencePiece pre-tokeniser prepends is not in the text
        if not tok.byte_level and pieces[t].startswith(" ") and not text[a:b].startswith(" ") and not flags[t]:
            pieces[t] = pieces[t][1:] or " "
    if special.add_bos:
        ids.insert(0, special.bos_id)
        pieces.insert(0, tok.id_to_piece(special.bos_id))
        spans.insert(0, (0, 0))
        flags.insert(0, True)
    if special.add_eos:
        ids.append(special.eos_id)
        pieces.append(tok.id_to_piece(special.eos_id))
        spans.append((len(text), len(text)))
        flags.append(True)
    return TextTokens(text=text, ids=np.asarray(ids, dtype=np.int64), pieces=pieces, spans=spans, special=flags)
