"""CheckpointStudy: one pretrained checkpoint looked at in the Pretrained panel, without Qt. It holds
the loaded checkpoint, its offered images and the last run shown, and hands out loads and forward
passes as plain functions for the panel's worker thread; their results come back through
:meth:`CheckpointStudy.loaded` and :meth:`CheckpointStudy.show`, so the panel only draws what the
study holds.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from attnviz.checkpoints.analysis import head_summaries
from attnviz.checkpoints.decoder_run import DecoderAttention, run_decoder
from attnviz.checkpoints.hub_cache import FoundCheckpoint, cache_dir, cached_models, describe_folder
from attnviz.checkpoints.loader import Checkpoint, load_checkpoint, ready_models
from attnviz.checkpoints.run import ModelAttention, run_image, run_text
from attnviz.checkpoints.views import DEFAULT_SENTENCE, head_matrix, session_text
from attnviz.sources.errors import SourceError
from attnviz.sources.image import BUNDLED_IMAGES, bundled_image, load_image

THUMB = 48  # pixels per side of a head's thumbnail in the layers x heads grid


class RunOutcome:
    """What a forward-pass job hands back: the attention, its head summaries and the image it saw."""

    __slots__ = ("result", "summaries", "rgb", "image_name")

    def __init__(self, result: ModelAttention, rgb: np.ndarray | None = None, image_name: str = ""):
        self.result = result
        dec = getattr(result, "decoder", None)  # decoder LLMs add attention to the first token and distance
        self.summaries = dec.summaries() if dec is not None else head_summaries(result.attentions, special=result.special)
        self.rgb = rgb
        self.image_name = image_name


class LongOutcome:
    """A decoder run on an input whose maps are not held: summaries and thumbnails computed once."""

    def __init__(self, decoder: DecoderAttention):
        self.decoder = decoder
        self.result = decoder  # what attention_ready carries
        self.summaries, self.thumbs = decoder.summaries_and_thumbnails(THUMB)  # thumbs (L, nh, s, s)
        self.rgb = None
        self.image_name = ""


def decoder_outcome(ckpt, text: str, chat: bool = False) -> RunOutcome | LongOutcome:
    """Run a decoder on ``text`` (in its chat template with ``chat``): a RunOutcome when every
    (L, nh, T, T) map fits ``decoder_run.WEIGHTS_BUDGET``, else a LongOutcome of q, k and the
    log-sum-exp with its summaries and one small max-overview thumbnail per head."""
    if not text.strip():
        raise ValueError("type a text for the model to read")
    dec = run_decoder(ckpt, text, mode="auto", chat=chat)
    if dec.mode == "qk":
        return LongOutcome(dec)
    return RunOutcome(ModelAttention(model=dec.model, kind="decoder", tokens=dec.tokens, labels=dec.labels,
                                     special=dec.special, attentions=dec.attentions, hidden=dec.hidden,
                                     ids=dec.ids, spans=dec.spans, decoder=dec))


def run_text_outcome(ckpt: Checkpoint, text: str, chat: bool = False) -> RunOutcome | LongOutcome:
    """``ckpt`` run on ``text`` (decoders: in the chat template with ``chat``)."""
    if ckpt.kind == "decoder":
        return decoder_outcome(ckpt, text, chat=chat)
    if not text.strip():
        raise ValueError("type a sentence for the model to read")
    return RunOutcome(run_text(ckpt, text))


def run_image_outcome(ckpt: Checkpoint, read_image, name: str) -> RunOutcome:
    """``ckpt`` run on the image ``read_image()`` returns."""
    rgb = read_image()  # (H, W, 3) uint8
    return RunOutcome(run_image(ckpt, rgb), rgb=rgb, image_name=name)


def head_title(result, layer: int, head: int) -> str:
    """'layer 1 · head 3 · kv head 1' (the kv head only for grouped-query attention)."""
    dec = result if isinstance(result, DecoderAttention) else getattr(result, "decoder", None)
    title = f"layer {layer} · head {head}"
    if dec is not None and dec.group > 1:
        title += f" · kv head {dec.kv_head(head)} (shared by {dec.group} heads)"
    return title


def describe_run(dec: DecoderAttention) -> str:
    """One line about how a decoder input was run."""
    what = f"{dec.T:,} tokens" + (" in the chat template" if dec.chat else "")
    if dec.mode == "qk":
        return (f"{what}: maps recomputed from q, k and log-sum-exp (flash kernel, causal mask); "
                f"inputs up to {dec.limit_note}")
    return f"{what}, every map held; inputs up to {dec.limit_note}"


def size_text(n: int) -> str:
    return f"{n / 1e9:.2f} B" if n >= 1e9 else (f"{n / 1e6:.1f} M" if n >= 1e6 else f"{n:,}")


def entry_label(found: FoundCheckpoint) -> str:
    """'Qwen/Qwen2.5-0.5B · Qwen2 · 494.0 M · bf16' (and why, when attnviz cannot run it)."""
    label = f"{found.name} · {found.family} · {size_text(found.n_params)} · {found.dtype or '?'}"
    if not found.supported or found.note:
        label += f" ({found.note or 'not supported'})"
    return label


def cached_entries() -> list[tuple[str, str, str]]:
    """(label, folder, repo id) of every model in the hub cache."""
    out = []
    for rid, folder in cached_models():
        found = describe_folder(folder, rid, "cache")
        out.append((entry_label(found), str(folder), rid))
    return out


def cached_name(folder: str) -> str | None:
    """The repo id of a snapshot folder of the hub cache, None for other folders."""
    try:
        rel = Path(folder).resolve().relative_to(cache_dir().resolve())
    except (ValueError, OSError):
        return None
    parts = rel.parts[0].split("--") if rel.parts else []
    return "/".join(parts[1:]) if len(parts) >= 3 and parts[0] == "models" else None


class CheckpointStudy:
    """The loaded checkpoint, the images offered to it and the last run shown."""

    def __init__(self):
        self.ckpt: Checkpoint | None = None
        self.outcome: RunOutcome | LongOutcome | None = None
        self._images: dict[str, tuple[str, object]] = {}  # key -> (display name, () -> rgb)

    # -- the model
    @staticmethod
    def ready_models() -> list[tuple[str, Path]]:
        """(name, folder) of the installed ready models."""
        return ready_models()

    @staticmethod
    def ready_label(folder: str, name: str) -> str:
        """Family, size and dtype of the ready model ``name`` in ``folder``, as a model list shows them."""
        return entry_label(describe_folder(folder, name, "ready"))

    @staticmethod
    def cached_models() -> list[tuple[str, str, str]]:
        """(label, folder, repo id) of every model in the local Hugging Face cache."""
        return cached_entries()

    def model_name(self, folder: str, name: str | None = None) -> str | None:
        """``name``, else the ready model's or the hub cache's name of ``folder``, else None."""
        ready = {str(f): n for n, f in ready_models()}
        return name or ready.get(folder) or cached_name(folder)

    @staticmethod
    def load_job(folder: str, name: str | None):
        """The job that loads the checkpoint in ``folder`` (its result goes to :meth:`loaded`)."""
        return lambda: load_checkpoint(folder, name=name)

    def loaded(self, ckpt: Checkpoint) -> None:
        self.ckpt = ckpt

    @property
    def kind(self) -> str | None:
        """The loaded checkpoint's kind ("vit", "decoder", ...), None before a load."""
        return None if self.ckpt is None else self.ckpt.kind

    def offered_text(self, state) -> tuple[str, str | None]:
        """(text, note): the session's text for the input, unless the loaded model could not read it
        all; then the default sentence stands in and the note says why."""
        text = session_text(state)
        ckpt = self.ckpt
        if ckpt is not None and ckpt.tokenizer is not None and text != DEFAULT_SENTENCE:
            limit = ckpt.config.max_positions
            try:
                n = len(ckpt.tokenizer.encode(text, add_special_tokens=True).ids)
            except SourceError:
                n = 0  # the run says what is wrong with it, if it is ever run
            if limit and n > limit:
                return DEFAULT_SENTENCE, (f"The session's text is {n:,} tokens for {ckpt.name}, which reads at most "
                                          f"{limit:,}: it reads the sentence above instead. Type or paste a text to "
                                          "run it on your own.")
        return text, None

    # -- the images offered to an image model
    def refresh_images(self, state) -> list[tuple[str, str]]:
        """(key, label) of the images offered: the session's image sources, the bundled demo images,
        then those added since (a session image that is gone is no longer offered)."""
        kept = {k: v for k, v in self._images.items() if not k.startswith("session:")}
        entries = []
        for s in state.sources:
            if getattr(s, "kind", "") == "image" and s.data:
                data = s.data
                entries.append((f"session:{s.name}", f"session: {s.name}", lambda d=data: load_image(d, alpha="drop")))
        for fname in BUNDLED_IMAGES:
            entries.append((f"bundled:{fname}", f"demo: {fname}", lambda f=fname: load_image(bundled_image(f), alpha="drop")))
        seen = {key for key, _label, _read in entries}
        entries += [(key, label, read) for key, (label, read) in kept.items() if key not in seen]
        self._images = {key: (label, read) for key, label, read in entries}
        return [(key, label) for key, label, _read in entries]

    def add_image_file(self, path: str) -> tuple[str, str]:
        """Offer the image file ``path``; returns its (key, label)."""
        key, label = f"file:{path}", f"file: {Path(path).name}"
        self._images[key] = (label, lambda p=path: load_image(p, alpha="drop"))
        return key, label

    def add_image_array(self, rgb, name: str) -> tuple[str, str]:
        """Offer the (H, W, 3) uint8 image ``rgb`` as ``name``; returns its (key, label)."""
        arr = np.asarray(rgb)
        if arr.dtype != np.uint8 or arr.ndim != 3 or arr.shape[2] not in (3, 4):
            raise ValueError(f"an image must be (H, W, 3) uint8 pixels (got {arr.dtype} {arr.shape})")
        key = f"array:{name}"
        self._images[key] = (name, lambda: arr)
        return key, name

    # -- runs
    def text_job(self, text: str, chat: bool):
        """The job that runs the loaded checkpoint on ``text``."""
        ckpt = self.ckpt
        return lambda: run_text_outcome(ckpt, text, chat)

    def image_job(self, key):
        """The job that runs the loaded checkpoint on the offered image ``key``; None if none is offered so."""
        if key not in self._images:
            return None
        ckpt = self.ckpt
        name, read = self._images[key]
        return lambda: run_image_outcome(ckpt, read, name)

    def show(self, outcome: RunOutcome | LongOutcome) -> bool:
        """Hold ``outcome`` as the run shown; True when it comes from another model than the last one."""
        new_model = self.outcome is None or self.outcome.result.model != outcome.result.model
        self.outcome = outcome
        return new_model

    @property
    def long(self) -> bool:
        """True when the run shown keeps no maps (a long decoder input)."""
        return isinstance(self.outcome, LongOutcome)

    def run_description(self) -> str | None:
        """The loaded model's description with how its decoder input was run; None for other runs."""
        out = self.outcome
        dec = out.result if isinstance(out, LongOutcome) else getattr(out.result, "decoder", None)
        if dec is None or self.ckpt is None:
            return None
        return f"{self.ckpt.describe()} — {describe_run(dec)}"

    def grid_maps(self) -> np.ndarray:
        """(L, nh, ...) maps of the layers x heads grid: every map, or max thumbnails of a long input."""
        return self.outcome.thumbs if self.long else self.outcome.result.attentions

    def shows_image(self) -> bool:
        """True when the run shown is an image model's, drawn over its image."""
        return self.outcome.result.kind == "vit" and self.ckpt is not None and self.ckpt.image is not None

    def check_head(self, layer: int, head: int) -> None:
        """ValueError unless the run shown has head ``head`` in layer ``layer``."""
        r = self.outcome.result
        L, nh = (r.n_layer, r.n_head) if self.long else r.attentions.shape[:2]
        if not (0 <= layer < L and 0 <= head < nh):
            raise ValueError(f"no head ({layer}, {head}) in a {L} x {nh} model")

    def head_map(self, layer: int, head: int) -> tuple[np.ndarray, np.ndarray | None]:
        """((T, T) weights, (T, T) bool keys seen or None) of one head of a run that holds its maps."""
        r = self.outcome.result
        m = head_matrix(r, layer, head)  # (T, T)
        T = m.shape[0]
        causal = r.kind in ("gpt2", "decoder")
        mask = np.tril(np.ones((T, T), dtype=bool)) if causal else None  # causal: later keys unseen
        window = r.decoder.windows[layer] if r.kind == "decoder" else 0
        if window:  # a sliding-window layer hides keys `window` or more tokens back too
            mask &= ~np.tril(np.ones((T, T), dtype=bool), -window)
        return m, mask

    def shown_matrix(self, layer: int, head: int) -> np.ndarray | None:
        """(T, T) weights of one head of the run shown; None when they are not held (long inputs)."""
        if self.outcome is None or self.long:
            return None
        return head_matrix(self.outcome.result, layer, head)
