"""Greedy translation by an encoder-decoder: the source encoded once, then the decoder run on the tokens
written so far and the most likely next token appended, until end of sequence or ``max_new_tokens``;
then every map of the final sequence (:func:`~attnviz.checkpoints.seq2seq_run.run_seq2seq`'s result over
the written tokens, so row t is the step that chose token t + 1).

As transformers' ``generate(do_sample=False, num_beams=1)`` with the rules of the folder's
``generation_config.json`` that apply to greedy search: ``forced_bos_token_id`` (the first written token),
``forced_eos_token_id`` (the last one at the length limit), ``bad_words_ids`` of one token (Marian's
``<pad>``), ``min_length`` / ``min_new_tokens`` (end of sequence held back), ``no_repeat_ngram_size`` and
``repetition_penalty``. Each step recomputes the decoder over the written tokens (no self-attention key/value
cache; the cross-attention's keys and values of the source are computed once): the maps of the last pass
are those of every earlier step, the decoder being causal.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from attnviz.checkpoints import seq2seq, seq2seq_t5
from attnviz.checkpoints.config import read_json
from attnviz.checkpoints.errors import CheckpointError
from attnviz.checkpoints.parts import PartView
from attnviz.checkpoints.seq2seq_head import next_token_logits
from attnviz.checkpoints.seq2seq_run import Seq2SeqAttention, attention_result, encode_source

MAX_NEW_TOKENS = 512  # the longest translation one call writes


@dataclass(frozen=True)
class GreedyRules:
    """What generation_config.json asks of greedy search."""

    eos_ids: tuple[int, ...] = ()
    forced_bos: int | None = None
    forced_eos: int | None = None
    bad_ids: tuple[int, ...] = ()  # single-token bad_words_ids
    min_length: int = 0  # of the decoder sequence, start token included
    min_new_tokens: int = 0
    no_repeat_ngram: int = 0
    repetition_penalty: float = 1.0


def _ids(value, what: str) -> tuple[int, ...]:
    vals = value if isinstance(value, list) else [value]
    if not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in vals):
        raise CheckpointError(f"generation_config.json: {what} must be token ids (got {value!r})")
    return tuple(vals)


def read_rules(folder: Path, eos_default: int) -> GreedyRules:
    """The greedy-search settings of ``generation_config.json`` (absent: end of sequence only)."""
    path = Path(folder) / "generation_config.json"
    cfg = read_json(path, "generation_config.json") if path.is_file() else {}  # bounded, a JSON object
    eos = _ids(cfg["eos_token_id"], "eos_token_id") if cfg.get("eos_token_id") is not None else (eos_default,)
    bad = []
    for seq in cfg.get("bad_words_ids") or []:
        if isinstance(seq, list) and len(seq) == 1:
            bad += _ids(seq[0], "bad_words_ids")
        else:
            raise CheckpointError("generation_config.json: bad_words_ids longer than one token are not supported")
    fb, fe = cfg.get("forced_bos_token_id"), cfg.get("forced_eos_token_id")
    penalty = cfg.get("repetition_penalty", 1.0)
    if isinstance(penalty, bool) or not isinstance(penalty, (int, float)) or not penalty > 0:
        raise CheckpointError(f"generation_config.json: repetition_penalty must be > 0 (got {penalty!r})")
    ints = {}
    for key in ("min_length", "min_new_tokens", "no_repeat_ngram_size"):
        v = cfg.get(key) or 0
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            raise CheckpointError(f"generation_config.json: {key} must be a whole number >= 0 (got {v!r})")
        ints[key] = v
    return GreedyRules(eos_ids=eos, forced_bos=None if fb is None else _ids(fb, "forced_bos_token_id")[0],
                       forced_eos=None if fe is None else _ids(fe, "forced_eos_token_id")[0], bad_ids=tuple(bad),
                       min_length=ints["min_length"], min_new_tokens=ints["min_new_tokens"],
                       no_repeat_ngram=ints["no_repeat_ngram_size"], repetition_penalty=float(penalty))


def _banned_ngrams(seq: list[int], n: int) -> list[int]:
    """Tokens that would repeat an n-gram already in ``seq``."""
    if n <= 0 or len(seq) + 1 < n:
        return []
    head = tuple(seq[len(seq) - n + 1:]) if n > 1 else ()
    return [seq[i + n - 1] for i in range(len(seq) - n + 1) if tuple(seq[i:i + n - 1]) == head]


def choose(rules: GreedyRules, seq: list[int], logits: np.ndarray, max_length: int, start_len: int) -> int:
    """The next token after ``seq`` (the decoder's ids so far) from its logits (V,), transformers' processors
    in their order (repetition penalty, no-repeat n-grams, bad words, minimum length, forced BOS / EOS)."""
    s = logits.astype(np.float64, copy=True)  # (V,)
    if rules.repetition_penalty != 1.0:
        seen = np.unique(seq)
        v = s[seen]
        s[seen] = np.where(v < 0, v * rules.repetition_penalty, v / rules.repetition_penalty)
    s[_banned_ngrams(seq, rules.no_repeat_ngram)] = -np.inf
    if rules.bad_ids:
        s[list(rules.bad_ids)] = -np.inf
    if len(seq) < rules.min_length or len(seq) - start_len < rules.min_new_tokens:
        s[list(rules.eos_ids)] = -np.inf
    if rules.forced_bos is not None and len(seq) == 1:
        return rules.forced_bos
    if rules.forced_eos is not None and len(seq) == max_length - 1:
        return rules.forced_eos
    return int(np.argmax(s))


@dataclass(eq=False)
class Seq2SeqGeneration:
    """A greedy translation: the tokens written and every map of the final sequence."""

    generated: np.ndarray  # (N,) int64 the new tokens only (no start token), end of sequence last when reached
    attention: Seq2SeqAttention  # decoder ids: the start token, then generated (its last token not fed back)
    finished: bool  # end of sequence reached (False: max_new_tokens ran out)
    text: str  # the generated tokens' pieces joined, special tokens left out


def generate_seq2seq(ckpt, source: str, *, max_new_tokens: int = 64, dtype=np.float32, kernel: str = "auto",
                     cancel=None) -> Seq2SeqGeneration:
    """Translate ``source`` greedily; ``cancel`` () -> bool is asked before each step (True stops there)."""
    if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int) or not 1 <= max_new_tokens <= MAX_NEW_TOKENS:
        raise CheckpointError(f"max_new_tokens must be a whole number from 1 to {MAX_NEW_TOKENS} (got {max_new_tokens!r})")
    spec = ckpt.spec
    rules = read_rules(ckpt.folder, spec.eos_token_id)
    src, dtype = encode_source(ckpt, source, dtype)
    fwd = seq2seq_t5 if spec.t5_like else seq2seq
    W = PartView(ckpt.weights, "s2s")
    enc_atts, memory = fwd.encode(spec, W, src.ids, dtype=dtype, kernel=kernel)
    seq = [spec.decoder_start_token_id]
    limit = min(1 + max_new_tokens, spec.max_positions)
    finished = False
    cross: dict = {}  # the cross-attention's keys and values, computed at the first step
    while len(seq) < limit and not (cancel is not None and cancel()):
        _, _, hidden = fwd.decode(spec, W, np.asarray(seq, dtype=np.int64), memory, dtype=dtype, kernel=kernel,
                                  cross_cache=cross)
        nxt = choose(rules, seq, next_token_logits(ckpt, hidden[-1:])[0], limit, 1)
        seq.append(nxt)
        if nxt in rules.eos_ids:
            finished = True
            break
    gen = np.asarray(seq[1:], dtype=np.int64)
    dec_ids = np.asarray(seq[:-1] if len(seq) > 1 else seq, dtype=np.int64)
    atts = attention_result(ckpt, src, enc_atts, memory, dec_ids, gen if gen.size else dec_ids[:0], dtype, kernel,
                            source=source)
    tok = ckpt.tokenizer
    text = "".join(tok.piece(i, "target") for i in gen if i not in rules.eos_ids).strip()
    return Seq2SeqGeneration(generated=gen, attention=atts, finished=finished, text=text)
