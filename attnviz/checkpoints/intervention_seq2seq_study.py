"""What the window's Intervene tab computes for an encoder-decoder (MarianMT, BART, mBART, T5, Whisper), without Qt: the
session's interventions (the fields of ``attnviz.model.state.Interventions``) on one attention of the model --
``stack`` "encoder" (the encoder's self-attention), "decoder" (the decoder's self-attention) or "cross" (its
cross-attention over the source) -- turned into the :class:`~attnviz.checkpoints.interventions.Edit` per
attention that :func:`~attnviz.checkpoints.intervention_seq2seq.seq2seq_run` takes, the pass before and after,
and what changed (:class:`Seq2SeqEffects`): the next token after the last decoder row (top-k, KL, the logit
difference of two target tokens), the chosen stack's maps before | after | difference and the residual stream's
change entering each encoder and decoder layer. The sweep ablates every head of the chosen stack in turn.

A knockout removes the session's mask's forbidden edges from the encoder's self-attention (the mask must be
(S, S) for the S source tokens); a head patch copies the chosen stack's head output from a clean source of the
same token count (the same decoder ids). Whisper's source is its log-mel features (n_mels, frames) instead of
ids: S is its audio positions (frames / 2), a clean source another clip's features. Every problem a person can cause
is one :class:`CheckpointError` line.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attnviz.checkpoints.errors import CheckpointError
from attnviz.checkpoints.intervention_seq2seq import STACKS, seq2seq_run, stack_shape, whisper_run
from attnviz.checkpoints.intervention_study import MAPS_BUDGET, METRICS, TOP_K, Sweep, logit_difference, top_k
from attnviz.checkpoints.interventions import Edit, check_head, kl_divergence

STACK_NAMES = {"encoder": "the encoder's self-attention", "decoder": "the decoder's self-attention",
               "cross": "the cross-attention"}
SEQ2SEQ_METRICS = tuple(m for m in METRICS if m != "cosine")  # the next token's KL or logit difference


@dataclass(frozen=True, eq=False)
class Seq2SeqEffects:
    """One intervention on an encoder-decoder: its passes and what changed (the next token after the last
    decoder row; the maps of ``stack``)."""

    stack: str
    src_ids: np.ndarray  # (S,) the (corrupted) source; Whisper: its (n_mels, frames) features
    dec_ids: np.ndarray  # (T,) the decoder's input ids (start token first)
    before: object  # Seq2SeqPass
    after: object
    clean: object | None  # the clean source's pass (a patch), else None
    kl: float  # KL(before || after) of the next token after the last decoder row, nats
    residual_change: np.ndarray  # (L_enc + L_dec,) ||after - before|| / ||before|| entering each layer
    residual_labels: tuple[str, ...]  # "E0", ..., "D0", ...: which stack and layer each value is
    applied: tuple[str, ...]

    def top(self, which: str = "before", k: int = TOP_K) -> list[tuple[int, float]]:
        return top_k(getattr(self, which).logits[-1], k)

    def logit_difference(self, a: int, b: int) -> tuple[float, float]:
        return logit_difference(self.before.logits[-1], a, b), logit_difference(self.after.logits[-1], a, b)

    def maps(self, which: str) -> np.ndarray:
        """(L, nh, rows, cols) of the chosen stack in the pass ``which``."""
        return getattr(getattr(self, which), self.stack)

    def attention(self, layer: int, head: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        b = self.maps("before")[layer, head].astype(np.float64)
        a = self.maps("after")[layer, head].astype(np.float64)
        return b, a, a - b

    def attention_change(self) -> np.ndarray:
        """(L, nh): the largest absolute change of a weight in each head's map of the chosen stack."""
        return np.abs(self.maps("after").astype(np.float64) - self.maps("before")).max(axis=(2, 3))


def check_stack(stack: str) -> str:
    if stack not in STACKS:
        raise CheckpointError(f"{stack!r} is not an attention of the model: choose {', '.join(STACKS)}")
    return stack


def is_whisper(ckpt) -> bool:
    return getattr(ckpt, "kind", None) == "whisper"


def _runner(ckpt):
    """The pass of this model: (src, dec_ids, edits) -> Seq2SeqPass."""
    if is_whisper(ckpt):
        return lambda src, dec, edits=None: whisper_run(ckpt, src, dec, edits)
    return lambda src, dec, edits=None: seq2seq_run(ckpt, src, dec, edits)


def _source(ckpt, src) -> tuple[np.ndarray, int]:
    """(the source as the pass reads it, S its positions): ids (S,), or Whisper's (n_mels, frames) features."""
    if is_whisper(ckpt):
        x = np.asarray(src, dtype=np.float32)
        return x, int(ckpt.spec.n_frames // 2)
    x = np.asarray(src, dtype=np.int64).reshape(-1)
    return x, int(x.size)


def _vocab(ckpt) -> int:
    """Rows of the decoder's token table (Whisper has one vocabulary)."""
    s = ckpt.spec
    return int(getattr(s, "dec_vocab_size", None) or s.vocab_size)


def _target_ids(ckpt, text: str) -> list[int]:
    if is_whisper(ckpt):
        return [int(i) for i in ckpt.text.encode(text, add_special_tokens=False).ids]
    toks = ckpt.tokenizer.encode(text, "target")
    return [int(i) for i, sp in zip(toks.ids, toks.special) if not sp]


def token_id(ckpt, text: str) -> int:
    """A target-vocabulary id: ``#123``, or a text the target tokenizer makes into one token (its end of text
    and other special tokens aside)."""
    text = str(text)
    vocab = _vocab(ckpt)
    s = text.strip()
    if s.startswith("#") and s[1:].isdigit():
        i = int(s[1:])
        if not 0 <= i < vocab:
            raise CheckpointError(f"token id {i} is out of range: the target vocabulary has {vocab:,} tokens "
                                  f"(0 to {vocab - 1:,})")
        return i
    if not text:
        raise CheckpointError("name a token: a word that is one target token, or #ID")
    ids = _target_ids(ckpt, text)
    if len(ids) != 1:
        raise CheckpointError(f"{text!r} is {len(ids)} target tokens for this tokenizer, not one: write a shorter "
                              "word or #ID")
    return ids[0]


def _check_size(ckpt, S: int, T: int, passes: int) -> None:
    s = ckpt.spec
    one = 4 * (s.enc_layers * s.enc_heads * S * S + s.dec_layers * s.dec_heads * (T * T + T * S))
    if one * passes > MAPS_BUDGET:
        raise CheckpointError(f"{S:,} source and {T:,} target tokens need {one * passes / 2**20:,.0f} MiB of maps "
                              f"for these passes (at most {MAPS_BUDGET >> 20} MiB): shorten the texts")


def _streams() -> dict:
    return {"encoder": Edit(stream=[]), "decoder": Edit(stream=[])}


def _residual(before: dict, after: dict) -> tuple[np.ndarray, tuple[str, ...]]:
    values, labels = [], []
    for stack, tag in (("encoder", "E"), ("decoder", "D")):
        for i, (b, a) in enumerate(zip(before[stack].stream, after[stack].stream)):
            b = np.asarray(b, dtype=np.float64)
            d = np.asarray(a, dtype=np.float64) - b
            values.append(np.sqrt((d * d).sum()) / max(np.sqrt((b * b).sum()), np.finfo(np.float64).tiny))
            labels.append(f"{tag}{i}")
    return np.asarray(values), tuple(labels)


def build_edits(ckpt, spec, stack: str, S: int, T: int, *, allowed=None, clean=None) -> tuple[dict, tuple[str, ...]]:
    """({stack: Edit}, what was applied) of ``spec`` on heads of ``stack``, the knockout on the encoder's
    self-attention; ``clean``: the clean source's pass with the stack's head outputs recorded (a patch)."""
    check_stack(stack)
    shape = stack_shape(ckpt, stack)
    edits = _streams()
    edits["cross"] = Edit()
    e = edits[stack]
    said = []
    heads = [check_head(shape, layer, h) for layer, h in spec.heads]
    names = ", ".join(f"{a}.{b}" for a, b in heads)
    where = STACK_NAMES[stack]
    if heads and spec.mode in ("zero", "mean"):
        e.ablate.update({lh: spec.mode for lh in heads})
        said.append(f"heads {names} of {where} " + ("zeroed" if spec.mode == "zero" else
                                                    "set to their mean over the positions"))
    elif heads and spec.mode == "scale":
        if not np.isfinite(spec.factor):
            raise CheckpointError(f"the scale factor must be a finite number (got {spec.factor!r})")
        e.scale.update({lh: float(spec.factor) for lh in heads})
        said.append(f"heads {names} of {where} scaled by {spec.factor:g}")
    elif heads:
        raise CheckpointError(f"intervention mode {spec.mode!r}: choose zero, mean or scale")
    if spec.knockout_layers:
        enc = stack_shape(ckpt, "encoder")
        if allowed is None:
            raise CheckpointError("a knockout needs the session's mask (the Mask workspace's design)")
        m = np.asarray(allowed)
        if m.dtype != bool or m.shape != (S, S):
            raise CheckpointError(f"the session's mask is {m.shape[0] if m.ndim else 0} tokens wide; the source has "
                                  f"{S} tokens: design a {S} × {S} mask to knock out the encoder's edges")
        layers = [check_head(enc, int(layer), 0)[0] for layer in spec.knockout_layers]
        hs = [check_head(enc, 0, int(h))[1] for h in spec.knockout_heads]
        ko = ~m
        if hs:
            per = np.zeros((enc.n_head, S, S), dtype=bool)
            per[hs] = ko
            ko = per
        edits["encoder"].knockout.update({layer: ko for layer in layers})
        n = int((~m).sum())
        said.append(f"{n} edge{'s' if n != 1 else ''} of the mask knocked out of the encoder's self-attention in "
                    f"layer{'s' if len(layers) != 1 else ''} {', '.join(map(str, layers))}"
                    + (f", heads {', '.join(map(str, hs))}" if hs else ""))
    if spec.patch == "head":
        if clean is None:
            raise CheckpointError("a patch needs the clean source: type it in the clean prompt field")
        layer, head = check_head(shape, spec.patch_layer, spec.patch_head)
        e.patch_heads[(layer, head)] = clean.heads[stack][layer][head]
        said.append(f"head {layer}.{head} of {where} patched from the clean source")
    elif spec.patch == "residual":
        raise CheckpointError("patching the residual stream runs on decoder LLMs; on an encoder-decoder patch a "
                              "head's output")
    elif spec.patch != "none":
        raise CheckpointError(f"patch {spec.patch!r}: choose none or head")
    return edits, tuple(said)


def seq2seq_study(ckpt, src_ids, dec_ids, spec, stack: str, *, allowed=None, clean_ids=None) -> Seq2SeqEffects:
    """The plain pass of the source ``src_ids`` (S,) teacher-forced on ``dec_ids`` (T,), the pass with ``spec``
    applied on ``stack``, and what changed."""
    check_stack(stack)
    src, S = _source(ckpt, src_ids)
    dec = np.asarray(dec_ids, dtype=np.int64).reshape(-1)
    T = int(dec.size)
    patching = spec.patch == "head"
    _check_size(ckpt, S, T, 3 if patching else 2)
    run = _runner(ckpt)
    clean = None
    if patching:
        if clean_ids is None or np.size(clean_ids) == 0:
            raise CheckpointError("a patch needs the clean source: " + (
                "give another audio file's path in the clean prompt field" if is_whisper(ckpt) else
                "type it in the clean prompt field"))
        clean_src, S_clean = _source(ckpt, clean_ids)
        if S_clean != S:
            raise CheckpointError(f"the clean source has {S_clean} tokens and the corrupted one {S}: "
                                  "patching needs the same length")
        clean = run(clean_src, dec, {stack: Edit(record={})})
    edits, applied = build_edits(ckpt, spec, stack, S, T, allowed=allowed, clean=clean)
    plain = _streams()
    before = run(src, dec, plain)
    after = run(src, dec, edits)
    change, labels = _residual(plain, edits)
    return Seq2SeqEffects(stack=stack, src_ids=src, dec_ids=dec, before=before, after=after, clean=clean,
                          kl=kl_divergence(before.logits[-1], after.logits[-1]), residual_change=change,
                          residual_labels=labels, applied=applied)


def seq2seq_sweep(ckpt, src_ids, dec_ids, stack: str, *, mode: str = "zero", factor: float = 0.0,
                  metric: str = "kl", tokens=None, cancelled=None, progress=None) -> Sweep:
    """Every head of ``stack`` ablated alone (``mode`` zero or mean, or scaled by ``factor``), measured on the
    next token after the last decoder row: "kl" (KL(before || after), nats) or "logit_diff" (how much
    logit(a) - logit(b), ``tokens`` (a, b), drops). ``cancelled()`` stops between heads (the rest stay NaN);
    ``progress(done, total)`` after each head."""
    check_stack(stack)
    if metric not in SEQ2SEQ_METRICS:
        raise CheckpointError(f"metric {metric!r}: an encoder-decoder is measured by {' or '.join(SEQ2SEQ_METRICS)}")
    if mode not in ("zero", "mean", "scale"):
        raise CheckpointError(f"ablation mode {mode!r}: choose zero, mean or scale")
    if mode == "scale" and not np.isfinite(factor):
        raise CheckpointError(f"the scale factor must be a finite number (got {factor!r})")
    if metric == "logit_diff":
        if tokens is None or len(tokens) != 2:
            raise CheckpointError("the logit difference needs two tokens")
        a, b = (int(t) for t in tokens)
        for t in (a, b):
            if not 0 <= t < _vocab(ckpt):
                raise CheckpointError(f"token id {t} is out of range: the target vocabulary has "
                                      f"{_vocab(ckpt):,} tokens")
    src, S = _source(ckpt, src_ids)
    dec = np.asarray(dec_ids, dtype=np.int64).reshape(-1)
    _check_size(ckpt, S, int(dec.size), 2)
    shape = stack_shape(ckpt, stack)
    run = _runner(ckpt)
    before = run(src, dec).logits[-1]
    grid = np.full((shape.n_layer, shape.n_head), np.nan)
    total = grid.size
    for layer in range(shape.n_layer):
        for head in range(shape.n_head):
            if cancelled is not None and cancelled():
                return Sweep(grid, metric, mode)
            e = Edit(scale={(layer, head): float(factor)}) if mode == "scale" else Edit(ablate={(layer, head): mode})
            after = run(src, dec, {stack: e}).logits[-1]
            if metric == "kl":
                grid[layer, head] = kl_divergence(before, after)
            else:
                grid[layer, head] = logit_difference(before, a, b) - logit_difference(after, a, b)
            if progress is not None:
                progress(layer * shape.n_head + head + 1, total)
    return Sweep(grid, metric, mode)
