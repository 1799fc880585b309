"""VlmGenerationStudy: what a window shows of a vision-language model writing about a picture.

The same questions as :class:`~attnviz.checkpoints.generation_study.GenerationStudy` (each new token's
attention row over everything before it, the top-k it was drawn from, the logit lens), for PaliGemma 1 and
2, LLaVA, Idefics3 and SmolVLM through :func:`~attnviz.checkpoints.generate.generate_vlm`. The prefix — the
family's processor on the pictures and the prompt, then its vision tower — is computed on the worker with
the rest, so the study learns the expanded prompt (image tokens included) from the first chunk that
arrives, a :class:`PrefixProgress`, which also says which of its tokens are image tokens.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import numpy as np

from attnviz.checkpoints.decoder import _W, final_norm
from attnviz.checkpoints.errors import CheckpointError
from attnviz.checkpoints.generate import (TOP, Generation, LogitLens, Progress, Sampling, _softmax, generate_vlm,
                                          logits, vlm_prefix, vlm_text_weights)
from attnviz.checkpoints.generation_study import MAX_NEW_TOKENS, GenerationStudy

GENERATING_FAMILIES = ("paligemma", "llava", "idefics3", "smolvlm")  # the families generate_vlm runs


def can_generate_vlm(ckpt) -> str | None:
    """None when ``ckpt`` is a vision-language model that writes here, else why not (one sentence)."""
    if ckpt is None:
        return "Load a vision-language model (PaliGemma, LLaVA, Idefics3, SmolVLM) to watch it write."
    if getattr(ckpt, "kind", None) != "vlm":
        return f"{ckpt.name} is not a vision-language model."
    if getattr(ckpt, "family", None) not in GENERATING_FAMILIES:
        return (f"{ckpt.name} is a {ckpt.family} policy: it predicts actions, it does not write text; generation "
                "with a picture runs PaliGemma, LLaVA, Idefics3 and SmolVLM.")
    return None


@dataclass(frozen=True, eq=False)
class PrefixProgress(Progress):
    """The first chunk of a vision-language generation: the expanded prompt, with its tokens' text and which
    of them are image tokens."""

    pieces: tuple = ()  # (T0,) token text as the processor writes it
    is_image: np.ndarray | None = None  # (T0,) bool


class VlmGenerationStudy(GenerationStudy):
    """The steps of one generation of a vision-language checkpoint about ``images`` ((H, W, 3) uint8 each)."""

    def __init__(self, ckpt, images, text: str):
        reason = can_generate_vlm(ckpt)
        if reason is not None:
            raise CheckpointError(reason)
        if not isinstance(text, str):
            raise CheckpointError(f"the prompt must be text (got {type(text).__name__})")
        self.ckpt = ckpt
        self.c = ckpt.spec.text
        self.images = list(images)
        self.text_prompt = text
        self.prompt_ids = np.zeros(0, dtype=np.int64)  # known once the prefix's chunk arrives
        self.prompt_pieces: list[str] = []
        self.is_image = np.zeros(0, dtype=bool)
        self._piece = ckpt.tokenizer.id_to_piece
        self.chunks: list[Progress] = []
        self.stopped: str | None = None
        self._weights = None
        self._weights_lock = threading.Lock()

    # ------------------------------------------------------------------ running (on a worker thread)
    def job(self, max_new_tokens: int, how: Sampling = Sampling(), eos=(), *, cancelled=None, on_progress=None):
        """The function a worker runs: the prefix (processor and vision tower), then the generation, each chunk
        handed to ``on_progress`` — the first as a :class:`PrefixProgress`."""
        if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, (int, np.integer)):
            raise CheckpointError(f"max new tokens must be a whole number (got {max_new_tokens!r})")
        if not 1 <= max_new_tokens <= MAX_NEW_TOKENS:
            raise CheckpointError(f"max new tokens must be between 1 and {MAX_NEW_TOKENS:,} (got {max_new_tokens:,})")
        ckpt, images, text, eos = self.ckpt, list(self.images), self.text_prompt, tuple(int(e) for e in eos)

        def run() -> Generation:
            prefix = vlm_prefix(ckpt, images, text)

            def hand_over(p: Progress) -> None:
                if on_progress is None:
                    return
                if p.start == 0:
                    p = PrefixProgress(start=p.start, ids=p.ids, rows=p.rows, stream=p.stream,
                                       pieces=tuple(prefix.pieces), is_image=np.asarray(prefix.is_image, dtype=bool))
                on_progress(p)

            return generate_vlm(ckpt, images, text, max_new_tokens=int(max_new_tokens), how=how, eos_ids=eos,
                                cancelled=cancelled, on_progress=hand_over, prefix=prefix)

        return run

    # ------------------------------------------------------------------ what arrived
    def add(self, progress: Progress) -> None:
        """Take the next chunk: the prefix first (it sets the prompt), then one per new token, in order."""
        if not self.chunks:
            if not isinstance(progress, PrefixProgress) or progress.start != 0:
                raise CheckpointError("the first chunk of a vision-language generation is not its prefix")
            self.prompt_ids = np.asarray(progress.ids, dtype=np.int64)
            self.prompt_pieces = list(progress.pieces)
            self.is_image = np.asarray(progress.is_image, dtype=bool)
        super().add(progress)

    def values_at(self, position: int, mode: str, layer: int = 0, head: int = 0) -> np.ndarray:
        """(position + 1,) what the token at ``position`` gives each token before it (and itself) under ``mode``:
        one head's weights ("head"), the mean over ``layer``'s heads ("mean"), or its row of the rollout
        through every layer ("rollout": mean over heads, residual added, as the VLM page's rollout)."""
        from attnviz.checkpoints.study import QUERY_MODES, row_rollout

        if mode not in QUERY_MODES:
            raise CheckpointError(f"unknown view {mode!r}; choose one of {', '.join(QUERY_MODES)}")
        if mode == "head":
            return np.asarray(self.row_at(position, layer, head), dtype=np.float64)
        rows = self.rows_at(position)  # (L, nh, position + 1)
        if mode == "mean":
            self._check_head(layer, 0)
            return rows[int(layer)].mean(axis=0, dtype=np.float64)
        return row_rollout(self.fused(position), int(position))

    def fused(self, position: int) -> np.ndarray:
        """(L, n, n) float32, n = position + 1: each layer's mean over heads of the first n tokens' rows."""
        self._check_position(position)
        n = int(position) + 1
        out = np.zeros((self.c.n_layer, n, n), dtype=np.float32)
        for p in self.chunks:
            if p.start >= n:
                break
            stop = min(p.stop, n)
            out[:, p.start:stop, :stop] = p.rows[:, :, :stop - p.start, :stop].mean(axis=1)  # (L, rows, stop)
        return out

    def on_run_tokens(self, values: np.ndarray, result) -> np.ndarray:
        """(T_run,) ``values`` over this generation's tokens placed on a forward pass ``result``'s image tokens
        (0 elsewhere), so its patch groups draw them; CheckpointError when that run's patch tokens are not image
        tokens of this prefix at the same places (another picture or prompt). A run may leave an image token out
        of its patch groups (LLaVA's "full" strategy: the vision tower's class token)."""
        where = np.sort(np.asarray(result.image_tokens(), dtype=np.int64))
        T0 = self.prompt_ids.size
        ids = np.asarray(result.ids, dtype=np.int64)
        inside = bool(where.size) and int(where[-1]) < min(T0, ids.size)
        if not inside or not self.is_image[where].all() or not np.array_equal(ids[where], self.prompt_ids[where]):
            raise CheckpointError("the picture shown is of another run (other image tokens); press Run on this "
                                  "picture and prompt to draw the generated tokens over it")
        out = np.zeros(result.T, dtype=np.float64)
        v = np.asarray(values, dtype=np.float64)
        keep = where[where < v.size]
        out[keep] = v[keep]
        return out

    def describe(self) -> str:
        if not self.chunks:
            return "reading the picture and the prompt…"
        n_img = int(self.is_image.sum())
        return super().describe().replace(" prompt tokens", f" prompt tokens ({n_img} image)", 1)

    # ------------------------------------------------------------------ the lens
    def text_weights(self):
        """The language model's weights with its head (read once, on the first lens)."""
        with self._weights_lock:
            if self._weights is None:
                self._weights = vlm_text_weights(self.ckpt)
            return self._weights

    def lens(self, position: int, k: int = 5) -> LogitLens:
        """The logit lens at ``position`` through the language model's final norm and head (see the base)."""
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not 1 <= k <= TOP * 10:
            raise CheckpointError(f"k must be a whole number between 1 and {TOP * 10} (got {k!r})")
        chunk, i = self._chunk_at(position)
        rows = np.ascontiguousarray(chunk.stream[:, i])  # (L + 1, C)
        weights = self.text_weights()
        W = _W(weights, np.float32)
        probs = np.array([_softmax(z) for z in logits(self.c, weights, final_norm(self.c, W, rows))])
        kk = min(int(k), probs.shape[1])
        top = np.argsort(-probs, axis=1, kind="stable")[:, :kk]  # (L + 1, kk)
        return LogitLens(position=int(position), top_ids=top, top_probs=np.take_along_axis(probs, top, axis=1),
                         probs=probs)
