"""GenerationStudy: what a window shows of a decoder LLM writing, as the steps arrive.

A generation (:func:`attnviz.checkpoints.generate.generate`) hands over each chunk it computes (the prompt,
then every new token once its own query row is in) as a :class:`~attnviz.checkpoints.generate.Progress`;
the study keeps them in order and answers the view's questions: the attention row of layer l, head h at a
step (over every token before it and itself), the next-token top-k the step was drawn from (the chosen
token marked), and the logit lens at any position from the residual stream the steps computed (each
layer's hidden state through the final norm and the unembedding). Nothing here runs a model on its own:
:meth:`GenerationStudy.job` builds the function a worker thread runs, the study only ever reads what
arrived, so the thread that shows it never waits for a forward pass.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from attnviz.checkpoints.decoder import _W, final_norm
from attnviz.checkpoints.errors import CheckpointError
from attnviz.checkpoints.generate import (TOP, Generation, LogitLens, Progress, Sampling, _softmax, generate,
                                          head_matrix, logits)

MAX_NEW_TOKENS = 4096  # new tokens one study may ask for (every step's rows are kept)


def eos_ids(ckpt) -> list[int]:
    """End-of-sequence ids: generation_config.json's (a number or a list), else config.json's, else the
    tokenizer's EOS."""
    from attnviz.checkpoints.config import read_json

    for name in ("generation_config.json", "config.json"):
        try:  # read_json: a bounded regular file holding a JSON object (never a FIFO or /dev/zero)
            cfg = read_json(Path(ckpt.folder) / name, name)
        except CheckpointError:
            continue
        val = cfg.get("eos_token_id")
        vals = val if isinstance(val, list) else [val]
        ids = [int(v) for v in vals if isinstance(v, int) and not isinstance(v, bool) and v >= 0]
        if ids:
            return ids
    eos = getattr(ckpt.special_tokens, "eos_id", None)
    return [] if eos is None else [int(eos)]


def can_generate(ckpt) -> str | None:
    """None when ``ckpt`` is a decoder LLM that can write text here, else why not (one sentence)."""
    if ckpt is None:
        return "Load a decoder LLM (Llama, Mistral, Qwen2, Qwen3, Gemma) to watch it write."
    kind = getattr(ckpt, "kind", None)
    if kind != "decoder":
        what = {"vlm": "a vision-language model (it generates from the command line: attnviz-cli model generate "
                       "--image)", "seq2seq": "an encoder-decoder (it translates from the command line)"}
        return f"{ckpt.name} is {what.get(kind, 'not a decoder LLM')}; the Generate tab runs decoder LLMs."
    try:
        head_matrix(ckpt.config, ckpt.weights)
    except CheckpointError as exc:
        return str(exc)
    return None


def parse_sampling(sample: bool, temperature: float, top_k: int, top_p: float, seed: int) -> Sampling:
    """The window's sampling fields as a checked :class:`Sampling` (greedy ignores the others)."""
    if not sample:
        return Sampling()
    return Sampling(sample=True, temperature=float(temperature), top_k=int(top_k), top_p=float(top_p), seed=int(seed))


@dataclass(frozen=True)
class StepView:
    """One generated token as the view shows it."""

    step: int  # 0 = the first new token
    position: int  # its place in the sequence
    token: int
    piece: str
    top_ids: np.ndarray  # (k,) the most probable next tokens when it was chosen
    top_pieces: list  # (k,)
    top_probs: np.ndarray  # (k,)
    chosen_prob: float  # the chosen token's probability (also when it is outside the top)

    @property
    def chosen_rank(self) -> int | None:
        """Where the chosen token stands among the top ids (None: outside them)."""
        hit = np.flatnonzero(self.top_ids == self.token)
        return int(hit[0]) if hit.size else None


class GenerationStudy:
    """The steps of one generation of a decoder checkpoint, in the order they arrived."""

    def __init__(self, ckpt, prompt_ids, prompt_pieces=None):
        ids = np.asarray(prompt_ids, dtype=np.int64)
        if ids.ndim != 1 or ids.size == 0:
            raise CheckpointError("the prompt gives no tokens; write some text")
        self.ckpt = ckpt
        self.c = ckpt.config
        self.prompt_ids = ids
        tok = ckpt.tokenizer
        self._piece = tok.id_to_piece
        self.prompt_pieces = list(prompt_pieces) if prompt_pieces is not None else [self._piece(int(t)) for t in ids]
        self.chunks: list[Progress] = []
        self.stopped: str | None = None  # "eos", "length", "cancelled" once finished

    @classmethod
    def for_text(cls, ckpt, text: str, *, chat: bool = False) -> "GenerationStudy":
        """The prompt ``text`` tokenised as the checkpoint's tokenizer config says (``chat``: in its template)."""
        from attnviz.checkpoints.decoder_text import encode
        from attnviz.sources.errors import SourceError

        reason = can_generate(ckpt)
        if reason is not None:
            raise CheckpointError(reason)
        if not isinstance(text, str) or not text.strip():
            raise CheckpointError("the prompt is empty; write the text the model continues")
        try:
            toks = encode(ckpt.tokenizer, ckpt.special_tokens, text, ckpt.config.max_positions or 1 << 20, chat=chat,
                          model=ckpt.name)
        except SourceError as exc:
            raise CheckpointError(f"{ckpt.name}: {exc}") from None
        if len(toks) == 0:
            raise CheckpointError("the prompt gives no tokens; write some text")
        return cls(ckpt, toks.ids, list(toks.pieces))

    # ------------------------------------------------------------------ running (on a worker thread)
    def job(self, max_new_tokens: int, how: Sampling = Sampling(), eos=(), *, cancelled=None, on_progress=None):
        """The function a worker runs: the generation, each chunk handed to ``on_progress`` (which the
        window sends to its own thread; :meth:`add` then takes it). It reads nothing the study changes."""
        if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, (int, np.integer)):
            raise CheckpointError(f"max new tokens must be a whole number (got {max_new_tokens!r})")
        if not 1 <= max_new_tokens <= MAX_NEW_TOKENS:
            raise CheckpointError(f"max new tokens must be between 1 and {MAX_NEW_TOKENS:,} (got {max_new_tokens:,})")
        c, weights, ids, eos = self.c, self.ckpt.weights, self.prompt_ids, tuple(int(e) for e in eos)

        def run() -> Generation:
            return generate(c, weights, ids, max_new_tokens=int(max_new_tokens), how=how, eos_ids=eos,
                            cancelled=cancelled, on_progress=on_progress)

        return run

    # ------------------------------------------------------------------ what arrived
    def add(self, progress: Progress) -> None:
        """Take the next chunk (the prompt first, then one per new token, in order)."""
        if progress.start != self.T:
            raise CheckpointError(f"a chunk at position {progress.start} arrived after {self.T} tokens")
        if not self.chunks and not np.array_equal(progress.ids, self.prompt_ids):
            raise CheckpointError("the first chunk is not this study's prompt")
        self.chunks.append(progress)

    def finish(self, generation: Generation) -> None:
        """The generation's own result: how it stopped (its ids and rows are the chunks'; its maps are not
        kept, the chunks' rows already show them)."""
        if not np.array_equal(generation.ids, self.ids):
            raise CheckpointError("the generation's tokens are not the steps that arrived")
        self.stopped = generation.stopped

    @property
    def T(self) -> int:
        """Tokens so far: prompt and new."""
        return self.chunks[-1].stop if self.chunks else 0

    @property
    def n_prompt(self) -> int:
        return int(self.prompt_ids.size)

    @property
    def n_steps(self) -> int:
        """New tokens whose rows have arrived."""
        return max(0, len(self.chunks) - 1)

    @property
    def shape(self) -> tuple[int, int]:
        """(layers, heads)."""
        return self.c.n_layer, self.c.n_head

    @property
    def ids(self) -> np.ndarray:
        """(T,) prompt and new ids so far."""
        if not self.chunks:
            return self.prompt_ids.copy()
        return np.concatenate([p.ids for p in self.chunks])

    @property
    def generated(self) -> np.ndarray:
        return self.ids[self.n_prompt:]

    def pieces(self) -> list[str]:
        """(T,) the text of every token so far."""
        return self.prompt_pieces + [self._piece(int(p.ids[0])) for p in self.chunks[1:]]

    def text(self) -> str:
        """The new tokens decoded (special tokens dropped)."""
        return self.ckpt.tokenizer.tokenizer.decode([int(t) for t in self.generated], skip_special_tokens=True)

    def position(self, step: int) -> int:
        """Sequence position of generated token ``step``."""
        self._check_step(step)
        return self.n_prompt + int(step)

    def step_of(self, position: int) -> int | None:
        """The step that wrote ``position``, None for a prompt token."""
        self._check_position(position)
        return None if position < self.n_prompt else position - self.n_prompt

    def _check_step(self, step) -> None:
        if isinstance(step, bool) or not isinstance(step, (int, np.integer)) or not 0 <= step < self.n_steps:
            raise CheckpointError(f"step {step!r} is not one of the {self.n_steps} generated tokens")

    def _check_position(self, position) -> None:
        if (isinstance(position, bool) or not isinstance(position, (int, np.integer))
                or not 0 <= position < self.T):
            raise CheckpointError(f"position {position!r} is outside the {self.T} tokens")

    def _check_head(self, layer, head) -> None:
        L, nh = self.shape
        if not (0 <= int(layer) < L and 0 <= int(head) < nh):
            raise CheckpointError(f"layer {layer}, head {head} is outside the model's {L} layers x {nh} heads")

    def _chunk_at(self, position: int) -> tuple[Progress, int]:
        self._check_position(position)
        if position < self.n_prompt:
            return self.chunks[0], position
        return self.chunks[1 + position - self.n_prompt], 0

    # ------------------------------------------------------------------ the view's questions
    def rows_at(self, position: int) -> np.ndarray:
        """(L, nh, position + 1) every head's attention row of the token at ``position``."""
        chunk, i = self._chunk_at(position)
        return chunk.rows[:, :, i, :position + 1]

    def row_at(self, position: int, layer: int, head: int) -> np.ndarray:
        """(position + 1,) one head's attention of the token at ``position`` over itself and every token before."""
        self._check_head(layer, head)
        return self.rows_at(position)[int(layer), int(head)]

    def row(self, step: int, layer: int, head: int) -> np.ndarray:
        """(position + 1,) layer ``layer``, head ``head``: generated token ``step``'s attention row."""
        return self.row_at(self.position(step), layer, head)

    def strip(self, step: int) -> np.ndarray:
        """(L * nh, position + 1) every (layer, head)'s row of generated token ``step``, layer-major."""
        rows = self.rows_at(self.position(step))
        L, nh, n = rows.shape
        return rows.reshape(L * nh, n)

    def top(self, step: int) -> StepView:
        """Generated token ``step`` and the next-token top-k it was chosen from."""
        self._check_step(step)
        chunk = self.chunks[1 + int(step)]
        token = int(chunk.ids[0])
        return StepView(step=int(step), position=chunk.start, token=token, piece=self._piece(token),
                        top_ids=chunk.top_ids, top_pieces=[self._piece(int(t)) for t in chunk.top_ids],
                        top_probs=chunk.top_probs, chosen_prob=float(chunk.chosen_prob))

    def lens(self, position: int, k: int = 5) -> LogitLens:
        """The logit lens at ``position``: the residual stream the steps computed there, entering each layer
        and leaving the last, through the final norm and the unembedding; softmax, the top ``k``."""
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not 1 <= k <= TOP * 10:
            raise CheckpointError(f"k must be a whole number between 1 and {TOP * 10} (got {k!r})")
        chunk, i = self._chunk_at(position)
        rows = np.ascontiguousarray(chunk.stream[:, i])  # (L + 1, C)
        c = self.c
        W = _W(self.ckpt.weights, np.float32)
        probs = np.array([_softmax(z) for z in logits(c, self.ckpt.weights, final_norm(c, W, rows))])
        kk = min(int(k), probs.shape[1])
        top = np.argsort(-probs, axis=1, kind="stable")[:, :kk]  # (L + 1, kk)
        return LogitLens(position=int(position), top_ids=top, top_probs=np.take_along_axis(probs, top, axis=1),
                         probs=probs)

    def lens_labels(self) -> list[str]:
        """Row names of :meth:`lens`: the embedding, then each layer's output (the last: the model's own)."""
        L = self.c.n_layer
        return ["embedding"] + [f"after L{i}" for i in range(L - 1)] + [f"after L{L - 1} (output)"]

    def attentions(self) -> np.ndarray:
        """(L, nh, T, T) the whole sequence so far, each row as its step computed it (0 above the diagonal)."""
        L, nh = self.shape
        T = self.T
        out = np.zeros((L, nh, T, T), dtype=np.float32)
        for p in self.chunks:
            out[:, :, p.start:p.stop, :p.stop] = p.rows
        return out

    def describe(self) -> str:
        """One status line: how many tokens, how it stopped."""
        n = self.n_steps
        how = {"eos": "end of sequence", "length": "max new tokens", "cancelled": "stopped"}.get(self.stopped or "",
                                                                                             "generating…")
        return f"{self.n_prompt} prompt tokens + {n} new ({how})"
