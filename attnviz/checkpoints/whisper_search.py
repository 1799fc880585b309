"""How Whisper writes a transcript, as transformers 5.24's ``WhisperForConditionalGeneration.generate`` does it
(short-form audio, one clip, no sampling), without the model: the model is a ``step`` function.

* the logits processors, in transformers' order: ``begin_suppress_tokens`` at the first written position,
  ``suppress_tokens``, then (timestamps asked) the timestamp rules: ``<|notimestamps|>`` never; timestamps
  come in pairs (a lone one is followed by another or by the end of text; after a pair, text); they never go
  back (nor repeat <|0.00|>); the first written token is a timestamp no later than
  ``max_initial_timestamp_index``; when the timestamps together are more likely than the best text token,
  a timestamp comes;
* greedy search (the best processed logit), or beam search as ``GenerationMixin._beam_search``: log-softmax,
  then the processors on each beam's row, the running beams' scores added, the best ``2 * num_beams``
  continuations kept, a continuation that ends (end of text, or the length limit) scored by its
  log-probability over its length ** ``length_penalty`` and kept among the ``num_beams`` finished ones, the
  search stopping when no running beam can beat the worst finished one (``early_stopping`` False: at the
  current length), when ``num_beams`` are finished (True), or when every continuation ends;
* the windows loop: the written tokens (padding and the end of text taken off) are cut into segments at each
  pair of timestamps; unless the last segment ends in a single timestamp, the next window starts at the last
  timestamp and the model writes again from the prompt over the features from there (zeros past the end).

``step(seqs) -> (n, V) float32`` gives the logits of the last position of each decoder sequence.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

TIME_PRECISION = 0.02  # seconds per timestamp step (transformers' time_precision)
FEATURE_SECONDS = 0.01  # seconds per feature frame (the feature extractor's hop over its rate)
INPUT_STRIDE = 2  # feature frames per encoder frame (the second convolution's stride)
MAX_WINDOWS = 64  # windows one transcript may take before it is cut short (each moves at least one step)


@dataclass(frozen=True)
class Segment:
    """One stretch of the transcript between timestamps."""

    start: float  # seconds
    end: float
    ids: tuple[int, ...]  # the segment's tokens, its timestamps included
    text: str = ""


@dataclass(frozen=True)
class Window:
    """One call of the search: the prompt, then what it wrote over the features from ``seek``."""

    seek: int  # the first feature frame of the window
    sequence: tuple[int, ...]  # prompt + written tokens as the search returned them (end of text included)
    finished: bool  # the end of text was written
    segments: tuple[Segment, ...]


def _log_softmax(x: np.ndarray) -> np.ndarray:
    x = x.astype(np.float64)
    m = np.max(x, axis=-1, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    z = x - m
    return z - np.log(np.sum(np.exp(z), axis=-1, keepdims=True))


def process(rules, seq: list[int], scores: np.ndarray, begin: int) -> np.ndarray:
    """The logits processors on one row of scores (V,) after the decoder sequence ``seq``; a new array."""
    s = np.array(scores, dtype=np.float32, copy=True)
    if rules.begin_suppress and len(seq) == begin:
        s[list(rules.begin_suppress)] = -np.inf
    if rules.suppress:
        s[list(rules.suppress)] = -np.inf
    if rules.timestamps:
        tb, eos = rules.timestamp_begin, rules.eos
        s[rules.no_timestamps] = -np.inf
        written = seq[begin:]
        last = len(written) >= 1 and written[-1] >= tb
        penultimate = len(written) < 2 or written[-2] >= tb
        if last:
            if penultimate:
                s[tb:] = -np.inf  # after a pair: text
            else:
                s[:eos] = -np.inf  # a lone timestamp: another, or the end of text
        stamps = [t for t in written if t >= tb]
        lowest = tb
        if stamps:
            lowest = stamps[-1] if last and not penultimate else stamps[-1] + 1
        s[tb:lowest] = -np.inf
        if len(seq) == begin:
            s[:tb] = -np.inf
            if rules.max_initial_timestamp_index is not None:
                s[tb + rules.max_initial_timestamp_index + 1:] = -np.inf
        lp = _log_softmax(s)
        stamp_lp = np.logaddexp.reduce(lp[tb:])
        if stamp_lp > np.max(lp[:tb]):
            s[:tb] = -np.inf
    return s


def greedy(step, rules, prompt: list[int], max_length: int, *, cancel=None, on_token=None) -> tuple[list[int], bool]:
    """The best processed token at each step up to ``max_length`` ids or the end of text -> (sequence, finished)."""
    seq, begin = list(prompt), len(prompt)
    while len(seq) < max_length and not (cancel is not None and cancel()):
        s = process(rules, seq, step([seq])[0], begin)
        nxt = int(np.argmax(s.astype(np.float64)))  # ties: the lowest id, as torch's argmax
        seq.append(nxt)
        if on_token is not None:
            on_token(nxt)
        if nxt in rules.eos_ids:
            return seq, True
    return seq, False


def _top(x: np.ndarray, k: int) -> np.ndarray:
    """Indices of the k largest (descending; ties: the lower index first)."""
    return np.argsort(-x, kind="stable")[:k]


def beam(step, rules, prompt: list[int], max_length: int, num_beams: int, *, cancel=None) -> tuple[list[int], bool]:
    """Beam search as transformers' ``_beam_search`` on one input -> (the best finished sequence, finished)."""
    nb, P = num_beams, len(prompt)
    f32 = np.float32
    eos = set(rules.eos_ids)
    keep = max(2, 1 + len(eos)) * nb
    top_mask = np.arange(keep) < nb
    fill = rules.pad if rules.pad is not None else (rules.eos if eos else -1)
    running = np.full((nb, max_length), fill, dtype=np.int64)  # (nb, max_length)
    running[:, :P] = prompt
    sequences = running.copy()
    run_scores = np.zeros(nb, dtype=f32)
    run_scores[1:] = -1e9
    scores = np.full(nb, -1e9, dtype=f32)
    done = np.zeros(nb, dtype=bool)
    unsat = True
    run_idx = np.full((nb, max_length - P), -1, dtype=np.int64)
    idx = run_idx.copy()
    lp_pen, early = f32(rules.length_penalty), rules.early_stopping
    cur = P
    while True:
        if cancel is not None and cancel():
            return [int(t) for t in running[0, :cur]], False
        rows = [list(map(int, r[:cur])) for r in running]
        if cur == P:
            logits = np.repeat(step([rows[0]]), nb, axis=0)  # every beam holds the prompt
        else:
            logits = step(rows)  # (nb, V)
        V = logits.shape[1]
        lp = _log_softmax(logits.astype(f32)).astype(f32)  # (nb, V)
        lp = np.stack([process(rules, rows[b], lp[b], P) for b in range(nb)])
        acc = (lp + run_scores[:, None]).reshape(-1)  # (nb * V,)
        pick = _top(acc, keep)
        top_lp = acc[pick].astype(f32)  # (keep,)
        src, ids = pick // V, pick % V
        top_seq = running[src].copy()  # (keep, max_length)
        top_seq[:, cur] = ids
        top_idx = run_idx[src].copy()
        top_idx[:, cur - P] = src
        hits = np.array([int(t) in eos for t in ids]) | (cur + 1 >= max_length)  # (keep,)
        live = (top_lp + hits.astype(f32) * f32(-1e9)).astype(f32)
        nxt = _top(live, nb)
        running, run_scores, run_idx = top_seq[nxt], live[nxt], top_idx[nxt]
        just = hits & top_mask
        fin = (top_lp / f32(float(cur + 1 - P) ** float(lp_pen))).astype(f32)
        fin += f32(-1e9) * f32(bool(done.all()) and early is True)
        fin += f32(-1e9) * f32(not unsat)
        fin += (~just).astype(f32) * f32(-1e9)
        m_seq = np.concatenate([sequences, top_seq])
        m_scores = np.concatenate([scores, fin]).astype(f32)
        m_idx = np.concatenate([idx, top_idx])
        m_done = np.concatenate([done, just])
        best = _top(m_scores, nb)
        sequences, scores, idx, done = m_seq[best], m_scores[best], m_idx[best], m_done[best]
        cur += 1
        length = max_length - P if early == "never" and lp_pen > 0 else cur - P
        best_running = f32(run_scores[0] / f32(float(length) ** float(lp_pen)))
        worst = np.where(done, scores.min(), f32(-1e9))
        unsat = unsat and bool(np.any(best_running > worst))
        if not (unsat and not (done.all() and early is True) and not hits.all()):
            break
    n = int((idx[0] != -1).sum())
    out = [int(t) for t in sequences[0, :P + n]]
    return out, bool(out[-1] in eos)


def written_tokens(rules, sequence: list[int], prompt_len: int) -> list[int]:
    """The window's written tokens as transformers keeps them: trailing padding off (the end of text kept when it
    is the padding token), then the end of text off."""
    seq = list(sequence[prompt_len:])
    if seq and rules.pad is not None and seq[-1] == rules.pad:
        n = sum(1 for t in seq if t == rules.pad)
        if rules.pad == rules.eos:
            n -= 1
        if n:
            seq = seq[:-n]
    if seq and seq[-1] == rules.eos:
        seq = seq[:-1]
    return seq


def split(tokens: list[int], tb: int, offset: float, n_frames: int) -> tuple[list[Segment], int]:
    """A window's tokens -> (its segments, the feature frames to move on), as ``_retrieve_segment``."""
    stamp = [t >= tb for t in tokens]
    single = stamp[-2:] == [False, True]
    cuts = [i + 1 for i in range(len(stamp) - 1) if stamp[i] and stamp[i + 1]]
    segs = []
    if cuts:
        if single:
            cuts.append(len(tokens))
        else:
            cuts[-1] += 1
        last = 0
        for i, c in enumerate(cuts):
            piece = tokens[last:c]
            end_at = -1 if i < len(cuts) - 1 or single else -2
            start = offset + (piece[0] - tb) * TIME_PRECISION
            segs.append(Segment(start, offset + (piece[end_at] - tb) * TIME_PRECISION, tuple(piece)))
            last = c
        move = n_frames if single else (tokens[last - 2] - tb) * INPUT_STRIDE
    else:
        at = [i for i, s in enumerate(stamp) if s]
        last_pos = int(n_frames * FEATURE_SECONDS / TIME_PRECISION)
        if at and tokens[at[-1]] != tb:
            last_pos = tokens[at[-1]] - tb
        segs = [Segment(offset, offset + last_pos * TIME_PRECISION, tuple(tokens))]
        move = n_frames
    return segs, int(move)


def transcribe(rules, prompt: list[int], features: np.ndarray, window_step, *, max_new_tokens: int | None,
               max_target_positions: int, cancel=None, on_token=None) -> list[Window]:
    """Every window of one clip. ``window_step(features_window, seek) -> step`` readies the model on a window's
    (n_mels, F) features; the first window's features are ``features`` itself."""
    F = features.shape[1]
    tb = rules.no_timestamps + 1 if rules.no_timestamps is not None else rules.vocab_size + 1
    max_length = rules.max_length
    seek, windows = 0, []
    while seek < F and len(windows) < MAX_WINDOWS:
        n_frames = min(F - seek, F)
        part = features[:, seek:seek + n_frames]
        if part.shape[1] < F:
            part = np.pad(part, ((0, 0), (0, F - part.shape[1])))
        step = window_step(part, seek)
        tell = on_token if not windows else None  # the first window's tokens are the ones its maps show
        if max_new_tokens is None:
            max_length = min(max_length + min(max_target_positions // 2 - 1, len(prompt)), max_target_positions)
            limit = max_length
        else:
            limit = len(prompt) + max_new_tokens
        if rules.num_beams > 1:
            seq, finished = beam(step, rules, prompt, limit, rules.num_beams, cancel=cancel)
            if tell is not None:
                for t in seq[len(prompt):]:
                    tell(t)
        else:
            seq, finished = greedy(step, rules, prompt, limit, cancel=cancel, on_token=tell)
        tokens = written_tokens(rules, seq, len(prompt))
        segs, move = split(tokens, tb, seek * TIME_PRECISION / INPUT_STRIDE, n_frames)
        windows.append(Window(seek=seek, sequence=tuple(seq), finished=finished, segments=tuple(segs)))
        if move <= 0 or (cancel is not None and cancel()):
            break
        seek += move
    return windows
