"""An encoder-decoder (MarianMT, BART, mBART, T5, mT5) as the Pretrained panel and the Diagnostics alignment
view look at it, without Qt: one run — teacher-forced on a given target, or the model's own greedy
translation when the target is empty — and its three stacks of maps.

* ``encoder``: the source's self-attention (L_enc, nh, T_enc, T_enc), every token sees every token;
* ``decoder``: the decoder's causal self-attention (L_dec, nh, T_dec, T_dec);
* ``cross``: decoder-to-encoder attention (L_dec, nh, T_dec, T_enc), queries from the decoder, keys and
  values the encoder's source tokens.

Row t of the decoder's maps is the step that reads decoder token t (the start token first) and writes
target token t, so the alignment (:func:`alignment`) labels its rows by the token each step *writes*: the
target token aligned with the source tokens it attends to, as seed 001's je / t' / aime over I / love / you.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attnviz.cancel import Cancelled  # noqa: F401 - a stopped translation raises it; re-exported
from attnviz.checkpoints.analysis import HeadSummaries, head_summaries
from attnviz.checkpoints.decoder import causal_mask
from attnviz.checkpoints.errors import CheckpointError
from attnviz.checkpoints.seq2seq_generate import MAX_NEW_TOKENS, generate_seq2seq
from attnviz.checkpoints.seq2seq_run import Seq2SeqAttention, run_seq2seq
from attnviz.checkpoints.seq2seq_t5 import relative_buckets
from attnviz.checkpoints.seq2seq_text import encode_side
from attnviz.engine.softmax import row_entropy

STACKS = ("encoder", "decoder", "cross")
STACK_LABELS = {"encoder": "encoder self-attention", "decoder": "decoder self-attention",
                "cross": "cross-attention (decoder → source)"}
STACK_SHORT = {"encoder": "encoder self", "decoder": "decoder self", "cross": "cross"}  # titles
TERMS = ("weights", "bias")  # what the detail map shows: softmax weights, or T5's relative-position score term
TERM_LABELS = {"weights": "weights", "bias": "position-bias term of the scores"}
DEFAULT_MAX_NEW = 64  # tokens the model's own translation writes at most, unless told
SHOWN_CHARS = 100  # characters of a target or translation quoted in a run's one-line description


@dataclass(eq=False)
class Seq2SeqOutcome:
    """One encoder-decoder run as the windows show it."""

    result: Seq2SeqAttention
    generated: bool  # True: the model's own greedy translation; False: teacher-forced on result.target
    text: str  # the target text given, or the translation the model wrote
    finished: bool  # a greedy translation reached end of sequence (teacher forcing: True)
    written: list[str]  # (T_dec,) the target token each decoder step writes (what the alignment's rows are)
    summaries: dict[str, HeadSummaries]  # per stack
    # T5: the relative-position bucket of each (query, key) of the two self-attention stacks, whose learned bias
    # per head is what position_bias holds: {"encoder": (T_enc, T_enc), "decoder": (T_dec, T_dec)} int64
    buckets: dict | None = None

    kind = "seq2seq"

    @property
    def model(self) -> str:
        return self.result.model

    @property
    def t5_bias(self) -> bool:
        """True when the run has T5's relative-position bias (added to both self-attention stacks' scores)."""
        return self.result.position_bias is not None

    def describe(self) -> str:
        """One line: how the decoder side was obtained (a long text cut to :data:`SHOWN_CHARS`)."""
        r = self.result
        text = self.text if len(self.text) <= SHOWN_CHARS else self.text[:SHOWN_CHARS - 1] + "…"
        n_src, n_dec = len(r.encoder_ids), len(r.decoder_ids)
        if self.generated:
            end = "reached end of sequence" if self.finished else "stopped at the token limit"
            return (f"the model's own greedy translation ({len(r.target_ids)} tokens, {end}): {text!r} · "
                    f"source {n_src} tokens")
        return f"teacher-forced on the target {text!r} · source {n_src} tokens, decoder {n_dec} tokens"


def _check_stack(stack: str) -> None:
    if stack not in STACKS:
        raise ValueError(f"unknown stack {stack!r}; choose one of {', '.join(STACKS)}")


def stack_maps(result: Seq2SeqAttention, stack: str) -> np.ndarray:
    """(L, nh, Tq, Tk) weights of one stack."""
    _check_stack(stack)
    return {"encoder": result.encoder_attentions, "decoder": result.decoder_attentions,
            "cross": result.cross_attentions}[stack]


def stack_labels(result: Seq2SeqAttention, stack: str) -> tuple[list[str], list[str]]:
    """(row labels, column labels) of one stack's maps: queries and keys."""
    _check_stack(stack)
    enc, dec = list(result.encoder_tokens), list(result.decoder_tokens)
    return {"encoder": (enc, enc), "decoder": (dec, dec), "cross": (dec, enc)}[stack]


def stack_mask(result: Seq2SeqAttention, stack: str) -> np.ndarray | None:
    """(Tq, Tk) bool of the keys each query may see (decoder: causal), None when it sees every key."""
    _check_stack(stack)
    return causal_mask(len(result.decoder_ids)) if stack == "decoder" else None


def cross_summaries(cross: np.ndarray, special: np.ndarray | None) -> HeadSummaries:
    """Entropy and attention to the source's special tokens (end of sequence, language codes) per head of the
    (L, nh, T_dec, T_enc) cross-attention, averaged over the decoder rows; attention to self and to the previous
    token have no meaning between two sequences and are left out (None)."""
    a = np.asarray(cross, dtype=np.float64)  # (L, nh, Td, Te)
    if a.ndim != 4 or 0 in a.shape or not np.isfinite(a).all():
        raise CheckpointError(f"cross-attentions must be finite (layers, heads, T_dec, T_enc) (got {a.shape})")
    Te = a.shape[-1]
    sp = np.zeros(Te, dtype=bool) if special is None else np.asarray(special, dtype=bool)
    if sp.shape != (Te,):
        raise CheckpointError(f"special-token mask has shape {sp.shape}, the source has {Te} tokens")
    entropy = row_entropy(a).mean(axis=-1)  # (L, nh)
    to_special = a[..., sp].sum(axis=-1).mean(axis=-1)  # (L, nh)
    return HeadSummaries(entropy=entropy, to_special=to_special, to_self=None, to_previous=None)


def summaries_of(result: Seq2SeqAttention) -> dict[str, HeadSummaries]:
    """The head summaries of each stack."""
    return {"encoder": head_summaries(result.encoder_attentions, special=result.encoder_special),
            "decoder": head_summaries(result.decoder_attentions, special=result.decoder_special),
            "cross": cross_summaries(result.cross_attentions, result.encoder_special)}


def written_tokens(ckpt, result: Seq2SeqAttention) -> list[str]:
    """(T_dec,) the target token piece each decoder row writes."""
    return [ckpt.tokenizer.piece(int(i), "target") for i in result.target_ids]


def position_buckets(spec, T_enc: int, T_dec: int) -> dict[str, np.ndarray]:
    """T5's relative-position buckets of both self-attention stacks (encoder both ways, decoder backwards)."""
    return {"encoder": relative_buckets(T_enc, T_enc, True, spec.buckets, spec.max_distance),
            "decoder": relative_buckets(T_dec, T_dec, False, spec.buckets, spec.max_distance)}


def outcome_of(ckpt, result: Seq2SeqAttention, *, generated: bool, text: str, finished: bool) -> Seq2SeqOutcome:
    buckets = (position_buckets(ckpt.spec, len(result.encoder_ids), len(result.decoder_ids))
               if result.position_bias is not None else None)
    return Seq2SeqOutcome(result=result, generated=generated, text=text, finished=finished,
                          written=written_tokens(ckpt, result), summaries=summaries_of(result), buckets=buckets)


def check_source(ckpt, source) -> None:
    """CheckpointError, in one line, for a source the model cannot read: empty, or longer than its positions."""
    if not isinstance(source, str) or not source.strip():
        raise CheckpointError("the source text is empty; write the sentence to translate")
    n = len(encode_side(ckpt.tokenizer, source, "source").ids)
    limit = ckpt.spec.max_positions
    if n > limit:
        raise CheckpointError(f"the source gives {n:,} tokens and {ckpt.name} reads at most {limit:,}; shorten it")


def run_outcome(ckpt, source: str, target: str = "", *, max_new_tokens: int = DEFAULT_MAX_NEW,
                cancel=None) -> Seq2SeqOutcome:
    """``source`` through ``ckpt``: teacher-forced on ``target``, or, with an empty target, the model's own
    greedy translation of at most ``max_new_tokens`` tokens (``cancel`` () -> bool asked before each step: True
    raises :class:`Cancelled`)."""
    check_source(ckpt, source)
    target = "" if target is None else target
    if target.strip():
        res = run_seq2seq(ckpt, source, target)
        return outcome_of(ckpt, res, generated=False, text=target, finished=True)
    if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int) or \
            not 1 <= max_new_tokens <= MAX_NEW_TOKENS:
        raise CheckpointError(f"the longest translation must be 1 to {MAX_NEW_TOKENS} tokens (got {max_new_tokens!r})")
    gen = generate_seq2seq(ckpt, source, max_new_tokens=max_new_tokens, cancel=cancel)
    if cancel is not None and cancel() and not gen.finished:
        raise Cancelled("the translation was stopped")
    return outcome_of(ckpt, gen.attention, generated=True, text=gen.text, finished=gen.finished)


def offered_source(ckpt, text: str) -> str | None:
    """Why ``ckpt`` cannot read ``text`` as its source (too long), None when it can."""
    try:
        check_source(ckpt, text)
    except CheckpointError as exc:
        return None if not text.strip() else str(exc)
    return None


# ------------------------------------------------------------------------------------------------
# one head, and the alignment of chosen heads

def head_view(outcome: Seq2SeqOutcome, stack: str, layer: int, head: int, term: str = "weights"):
    """(values (Tq, Tk), mask or None, row labels, column labels, title, value label) of one head of one
    stack; ``term`` "bias" is T5's relative-position term added to that head's self-attention scores (the same
    in every layer: the stack's first layer holds the table)."""
    r = outcome.result
    maps = stack_maps(r, stack)
    L, nh = maps.shape[:2]
    if not (0 <= layer < L and 0 <= head < nh):
        raise ValueError(f"no head ({layer}, {head}) in the {STACK_LABELS[stack]} ({L} layers x {nh} heads)")
    if term not in TERMS:
        raise ValueError(f"unknown term {term!r}; choose one of {', '.join(TERMS)}")
    rows, cols = stack_labels(r, stack)
    mask = stack_mask(r, stack)
    title = f"{STACK_SHORT[stack]} · L{layer} · h{head}"
    if term == "bias":
        if not outcome.t5_bias or stack == "cross":
            raise ValueError("only T5's self-attention adds a relative-position term to its scores "
                             "(its cross-attention has none; other families add positions to the embeddings)")
        bias = np.asarray(r.position_bias[stack][head], dtype=np.float64)  # (T, T)
        return bias, mask, rows, cols, f"{STACK_SHORT[stack]} · h{head} · position bias", "bias"
    return np.asarray(maps[layer, head]), mask, rows, cols, title, "weight"


def cell_note(outcome: Seq2SeqOutcome, stack: str, layer: int, head: int, row: int, col: int,
              term: str = "weights") -> str:
    """What the hover readout adds for one cell of a T5 self-attention map: the position-bias term of its
    score (or, when the bias is drawn, the weight), with its relative position and bucket; "" elsewhere."""
    if outcome.buckets is None or stack == "cross":
        return ""
    r = outcome.result
    b = outcome.buckets[stack][row, col]
    rel = f"j − i = {col - row:+d}, bucket {int(b)}"
    if term == "bias":
        return f"weight {float(stack_maps(r, stack)[layer, head, row, col]):.4g} (layer {layer}) · {rel}"
    return f"position bias {float(r.position_bias[stack][head, row, col]):.4g} added to the score · {rel}"


def all_heads(result: Seq2SeqAttention) -> list[tuple[int, int]]:
    L, nh = result.cross_attentions.shape[:2]
    return [(layer, head) for layer in range(L) for head in range(nh)]


def heads_text(heads, L: int, nh: int) -> str:
    """'every head', 'layer 2's heads', 'layer 1 · head 0', or 'the mean of 5 heads'."""
    hs = sorted(set(heads))
    if len(hs) == L * nh:
        return f"the mean of every head ({L} layers x {nh})"
    if len(hs) == 1:
        return f"layer {hs[0][0]} · head {hs[0][1]}"
    layers = {h[0] for h in hs}
    if len(layers) == 1 and len(hs) == nh:
        return f"the mean of layer {hs[0][0]}'s {nh} heads"
    return f"the mean of {len(hs)} heads"


@dataclass(frozen=True)
class Alignment:
    """The cross-attention of chosen heads laid out as seed 001's alignment matrix."""

    weights: np.ndarray  # (T_dec, T_enc) float64: the mean over the chosen heads, each row sums to 1
    target_labels: tuple[str, ...]  # (T_dec,) rows: the target token each decoder step writes
    source_labels: tuple[str, ...]  # (T_enc,) columns: the source tokens
    path: np.ndarray  # (T_dec,) int64: the source token each target token attends to most (argmax of its row)
    heads: tuple[tuple[int, int], ...]  # the (layer, head) pairs averaged
    what: str  # "the mean of every head ..." / "layer 1 · head 0"


def alignment(outcome: Seq2SeqOutcome, heads) -> Alignment:
    """The mean cross-attention (in float64) of ``heads`` ((layer, head) pairs), its labels and argmax path."""
    r = outcome.result
    cross = r.cross_attentions  # (L, nh, Td, Te)
    L, nh = cross.shape[:2]
    hs = tuple(sorted({(int(a), int(b)) for a, b in heads}))
    if not hs:
        raise ValueError("choose at least one head to align with")
    bad = [h for h in hs if not (0 <= h[0] < L and 0 <= h[1] < nh)]
    if bad:
        raise ValueError(f"no head {bad[0]} in a decoder of {L} layers x {nh} heads")
    w = np.zeros(cross.shape[2:], dtype=np.float64)  # (Td, Te)
    for layer, head in hs:
        w += cross[layer, head]
    w /= len(hs)
    return Alignment(weights=w, target_labels=tuple(outcome.written), source_labels=tuple(r.encoder_tokens),
                     path=np.argmax(w, axis=1).astype(np.int64), heads=hs, what=heads_text(hs, L, nh))
