"""CheckpointStudy: one pretrained checkpoint looked at in the Pretrained panel, without Qt. It holds
the loaded checkpoint, its offered images and the last run shown, and hands out loads and forward
passes as plain functions for the panel's worker thread; their results come back through
:meth:`CheckpointStudy.loaded` and :meth:`CheckpointStudy.show`, so the panel only draws what the
study holds.

Vision-language(-action) models get a :class:`VlmOutcome`: the run over image and prompt tokens with
its head summaries, each layer's mean over heads (for the rollout of one query row) and the per-layer
shares of attention the text (or action) tokens give to the image, the text and the first token;
:func:`query_values` and :func:`patch_maps` are what the picture draws for a selected query.

Encoder-decoders get a :class:`~attnviz.checkpoints.seq2seq_study.Seq2SeqOutcome` (teacher-forced on a
target, or the model's own greedy translation) and the study keeps which of its three stacks — encoder
self-attention, decoder self-attention, cross-attention — the grid and the detail map show.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from attnviz.checkpoints.analysis import HeadSummaries, head_summaries
from attnviz.checkpoints.decoder_run import DecoderAttention, run_decoder
from attnviz.checkpoints.hub_cache import FoundCheckpoint, cache_dir, cached_models, describe_folder
from attnviz.checkpoints.loader import Checkpoint, load_checkpoint, ready_models
from attnviz.checkpoints.run import ModelAttention, run_image, run_text
from attnviz.checkpoints import seq2seq_study
from attnviz.checkpoints.seq2seq_study import Seq2SeqOutcome
from attnviz.checkpoints.views import DEFAULT_SENTENCE, head_matrix, session_text
from attnviz.sources.errors import SourceError
from attnviz.sources.image import BUNDLED_IMAGES, bundled_image, load_image

THUMB = 48  # pixels per side of a head's thumbnail in the layers x heads grid
DEFAULT_QUESTION = "What is in the picture?"  # the prompt of a family whose hint gives no example
DEFAULT_TASK = "pick up the cup"  # a robot policy's task instruction when its hint gives no example


class RunOutcome:
    """What a forward-pass job hands back: the attention, its head summaries and the image it saw."""

    __slots__ = ("result", "summaries", "rgb", "image_name")

    def __init__(self, result: ModelAttention, rgb: np.ndarray | None = None, image_name: str = "",
                 summaries: HeadSummaries | None = None):
        self.result = result
        dec = getattr(result, "decoder", None)  # decoder LLMs add attention to the first token and distance
        if summaries is not None:  # given with the run (maps from a file: maps_file.MapsFile.summaries)
            self.summaries = summaries
        else:
            self.summaries = dec.summaries() if dec is not None else head_summaries(result.attentions,
                                                                                    special=result.special)
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
    if ckpt.kind == "maps":  # attention maps from a file (maps_file.py): shown as they are, nothing runs
        return RunOutcome(ckpt.run(), rgb=ckpt.rgb, summaries=ckpt.summaries())
    if ckpt.kind == "decoder":
        return decoder_outcome(ckpt, text, chat=chat)
    if ckpt.kind == "whisper":  # speech: the Audio tab (ui/model_view/audio_view.py) runs it on a clip
        raise ValueError(f"{ckpt.name} is a Whisper speech model: it hears audio; choose a clip (and a text to "
                         "align, or none to transcribe) in the Audio tab")
    if not text.strip():
        raise ValueError("type a sentence for the model to read")
    return RunOutcome(run_text(ckpt, text))


def run_image_outcome(ckpt: Checkpoint, read_image, name: str) -> RunOutcome:
    """``ckpt`` run on the image ``read_image()`` returns."""
    rgb = read_image()  # (H, W, 3) uint8
    return RunOutcome(run_image(ckpt, rgb), rgb=rgb, image_name=name)


# ------------------------------------------------------------------------------------------------
# vision-language(-action) models

QUERY_MODES = ("head", "mean", "rollout")
MODE_LABELS = {"head": "selected head", "mean": "mean over the layer's heads", "rollout": "rollout through the layers"}
# run() options a family may take -> (label beside its field, tooltip)
OPTION_LABELS = {
    "suffix": ("suffix", "the text after the prompt, read causally under the prefix-LM mask (PaliGemma)"),
    "state": ("state", "the robot state as comma-separated numbers x,y,..."),
    "noise_seed": ("noise seed", "seed of the noise the action expert starts from"),
    "time": ("time t", "the flow-matching time in [0, 1] the action expert runs at"),
}
BLOCK_SEGMENTS = ("state", "action", "noise")  # segment names (prefixes) that hold robot tokens, not words
ACTION_SEGMENTS = ("actions", "action")  # where an action expert's query rows sit in the sequence
TEXT_GROUP = "text"  # segments named "text", "text 1" ... are drawn as one line of the share chart


def default_prompt(ckpt) -> str:
    """The (first) example prompt of the family's hint (e.g. "USER: <image>\nWhat is in the picture? ASSISTANT:"),
    else a task for a robot policy (:data:`DEFAULT_TASK`) or :data:`DEFAULT_QUESTION`."""
    m = re.search(r"e\.g\. '(.*?)'", getattr(ckpt, "prompt_hint", "") or "")  # the first example of several
    if m:
        return m.group(1).replace("\\n", "\n")
    return DEFAULT_TASK if "state" in getattr(ckpt, "options", ()) else DEFAULT_QUESTION


def default_options(ckpt) -> dict[str, str]:
    """Field texts the family's options start with: a robot state of zeros of the policy's size (when its
    configuration says it), noise seed 0, flow time 1; other options empty (the family's default)."""
    out: dict[str, str] = {}
    for name in getattr(ckpt, "options", ()):
        if name == "state":
            n = getattr(getattr(ckpt, "spec", None), "state_dim", None)
            out[name] = ",".join(["0"] * int(n)) if isinstance(n, int) and 0 < n <= 64 else ""
        elif name == "noise_seed":
            out[name] = "0"
        elif name == "time":
            out[name] = "1.0"
        elif name in OPTION_LABELS:
            out[name] = ""
    return out


def prompt_to_field(prompt: str) -> str:
    """A prompt as a one-line field shows it: each line break written \\n."""
    return prompt.replace("\r\n", "\n").replace("\n", "\\n")


def prompt_from_field(text: str) -> str:
    """The prompt a one-line field holds: each \\n a line break."""
    return text.replace("\\n", "\n")


def parse_options(names, raw: dict) -> dict:
    """The run() keyword options ``names`` from the texts of their fields; ValueError saying which field is wrong.
    An empty field is left out (the family's default)."""
    out: dict = {}
    for name in names:
        text = str(raw.get(name, "") or "").strip()
        if not text:
            continue
        label = OPTION_LABELS.get(name, (name,))[0]
        if name == "state":
            try:
                vals = [float(v) for v in text.split(",") if v.strip()]
            except ValueError:
                raise ValueError(f"the {label} must be comma-separated numbers x,y,... (got {text!r})") from None
            if not vals or not np.all(np.isfinite(vals)):
                raise ValueError(f"the {label} must hold finite numbers (got {text!r})")
            out[name] = vals
        elif name == "noise_seed":
            if not text.isdigit():
                raise ValueError(f"the {label} must be a whole number >= 0 (got {text!r})")
            out[name] = int(text)
        elif name == "time":
            try:
                t = float(text)
            except ValueError:
                raise ValueError(f"the {label} must be a number in [0, 1] (got {text!r})") from None
            if not 0.0 <= t <= 1.0:
                raise ValueError(f"the {label} must be in [0, 1] (got {text})")
            out[name] = t
        else:
            out[name] = str(raw.get(name))
    return out


def vlm_summaries(attentions: np.ndarray, special: np.ndarray) -> HeadSummaries:
    """:func:`head_summaries` of every layer, with attention to the first token and the mean attention
    distance |i - j| as for decoders; a layer at a time, so no float64 copy of every map is made."""
    a = np.asarray(attentions)  # (L, nh, T, T)
    L, nh, T, _ = a.shape
    per = [head_summaries(a[layer:layer + 1], special=special) for layer in range(L)]
    pos = np.arange(T, dtype=np.float64)
    dist = np.abs(pos[:, None] - pos[None, :])  # (T, T)
    first, distance = np.zeros((L, nh)), np.zeros((L, nh))
    for layer in range(L):
        w = np.asarray(a[layer], dtype=np.float64)  # (nh, T, T)
        live = w.sum(axis=-1) > 0  # (nh, T) rows that see anything
        n = np.maximum(live.sum(axis=-1), 1)  # (nh,)
        first[layer] = np.where(live, w[..., 0], 0.0).sum(axis=-1) / n
        distance[layer] = np.where(live, (w * dist).sum(axis=-1), 0.0).sum(axis=-1) / n
    return HeadSummaries(entropy=np.concatenate([p.entropy for p in per]),
                         to_special=np.concatenate([p.to_special for p in per]),
                         to_self=np.concatenate([p.to_self for p in per]),
                         to_previous=np.concatenate([p.to_previous for p in per]), to_first=first, distance=distance)


def layer_means(attentions: np.ndarray) -> np.ndarray:
    """(L, T, T) float32: each layer's mean over heads (rollout's head fusion)."""
    a = np.asarray(attentions)
    return np.stack([a[layer].mean(axis=0, dtype=np.float64).astype(np.float32) for layer in range(a.shape[0])])


def row_rollout(fused: np.ndarray, query: int) -> np.ndarray:
    """(T,) row ``query`` of the attention rollout of ``fused`` (L, T, T) layer maps (mean fusion, no discard):
    ``e_q M_{L-1} ... M_0`` with ``M = rownorm((A + I) / 2)``, one vector-matrix product per layer, as
    :func:`attnviz.checkpoints.analysis.attention_rollout` computes every row at once."""
    L, T, _ = fused.shape
    if not 0 <= int(query) < T:
        raise ValueError(f"query {query} is out of range for {T} tokens")
    v = np.zeros(T)
    v[int(query)] = 1.0
    for layer in reversed(range(L)):
        f = np.asarray(fused[layer], dtype=np.float64)  # (T, T)
        u = v / (f.sum(axis=-1) + 1.0)  # (T,) v_i / (2 s_i), s_i = (sum_j F_ij + 1) / 2
        v = u @ f + u  # (T,) sum_i u_i (F_ij + delta_ij)
    return v


def action_span(result) -> tuple[int, int] | None:
    """(start, stop) of the sequence's action tokens whose rows the action expert's own maps hold; None
    without such maps (or when they are not tokens of the sequence)."""
    a = getattr(result, "action_attentions", None)
    if a is None:
        return None
    n = a.shape[2]
    for s in result.segments:
        if s.name in ACTION_SEGMENTS and len(s) == n and a.shape[3] == result.T:
            return s.start, s.stop
    return None


def query_rows(result, query: int) -> tuple[np.ndarray, np.ndarray]:
    """((L, nh, T) attention of ``query`` in every layer and head, (T,) the keys it may see): the action
    expert's rows for an action token of a policy, else the language model's."""
    T = result.T
    if not 0 <= int(query) < T:
        raise ValueError(f"query {query} is out of range for {T} tokens")
    span = action_span(result)
    if span is not None and span[0] <= query < span[1]:
        i = int(query) - span[0]
        seen = result.action_mask[i] if result.action_mask is not None else result.mask[query]
        return result.action_attentions[:, :, i, :], np.asarray(seen, dtype=bool)
    return result.attentions[:, :, int(query), :], np.asarray(result.mask[int(query)], dtype=bool)


def query_values(outcome, query: int, mode: str, layer: int = 0, head: int = 0) -> np.ndarray:
    """(T,) what ``query`` gives each token under ``mode``: one head's weights, the mean over the heads of
    ``layer``, or its row of the rollout through every layer of the language model."""
    if mode not in QUERY_MODES:
        raise ValueError(f"unknown view {mode!r}; choose one of {', '.join(QUERY_MODES)}")
    r = outcome.result
    if mode == "rollout":
        span = action_span(r)
        if span is not None and span[0] <= query < span[1]:
            raise ValueError("rollout runs through the language model's layers; an action token's attention "
                             "comes from the action expert: choose a head or the mean over heads")
        return row_rollout(outcome.fused, query)
    rows, _seen = query_rows(r, query)  # (L, nh, T)
    L, nh = rows.shape[:2]
    if not 0 <= layer < L:
        raise ValueError(f"layer {layer} is out of range for {L} layers")
    if mode == "mean":
        return rows[layer].mean(axis=0, dtype=np.float64)  # (T,)
    if not 0 <= head < nh:
        raise ValueError(f"head {head} is out of range for {nh} heads")
    return np.asarray(rows[layer, head], dtype=np.float64)  # (T,)


def patch_maps(result, values: np.ndarray) -> list[np.ndarray]:
    """One (gh, gw) map per patch group of ``values`` (T,): what each image token gets."""
    return [np.asarray(g.token_map(values), dtype=np.float64) for g in result.patches]


def map_levels(maps) -> tuple[float, float]:
    """(0, the largest value) over every group's map, so tiles and images share one colour scale."""
    hi = max((float(np.nanmax(m)) for m in maps if m.size), default=0.0)
    return 0.0, hi if hi > 0 else 1.0


def token_patch(result, token: int) -> tuple[int, int] | None:
    """(group, row-major patch index) of an image token, None for any other token."""
    for g_i, g in enumerate(result.patches):
        hit = np.flatnonzero(g.tokens == int(token))
        if hit.size:
            return g_i, int(hit[0])
    return None


def default_query(result) -> int:
    """The token whose attention is shown first: a policy's first action token, else the last token that
    is not an image token (the one that predicts the answer)."""
    span = action_span(result)
    if span is not None:
        return span[0]
    image = set(result.image_tokens().tolist())
    rest = [t for t in range(result.T) if t not in image]
    return rest[-1] if rest else result.T - 1


class Shares:
    """Per layer, the mean share of attention a set of queries gives to groups of keys (over heads and queries)."""

    __slots__ = ("what", "queries", "lines")

    def __init__(self, what: str, queries: np.ndarray, lines: list[tuple[str, np.ndarray]]):
        self.what = what  # "text tokens that see the image" ... for the chart's title
        self.queries = queries  # (n,) sequence positions of the queries averaged over
        self.lines = lines  # (label, (L,) share per layer) per key group


def share_curves(result) -> Shares:
    """How much the text tokens that may see the image (a policy: its action tokens) give, layer by layer,
    to the image tokens, to the first token, to the text and to each other named segment."""
    T = result.T
    image = result.image_tokens()
    is_image = np.zeros(T, dtype=bool)
    is_image[image] = True
    span = action_span(result)
    if span is not None:
        queries = np.arange(*span)
        maps, rows = result.action_attentions, np.arange(span[1] - span[0])
        what = "action tokens (action expert)"
    else:
        sees_image = result.mask[:, is_image].any(axis=1) if image.size else np.ones(T, dtype=bool)
        queries = np.flatnonzero(~is_image & sees_image)
        maps, rows = result.attentions, queries
        what = "text tokens that may see the image" if image.size else "text tokens"
    groups: dict[str, list[int]] = {}
    if image.size:
        groups["image"] = image.tolist()
    if not is_image[0]:
        groups["first token"] = [0]
    for s in result.segments:
        name = TEXT_GROUP if s.name.startswith(TEXT_GROUP) else s.name
        keys = [t for t in range(max(s.start, 1), s.stop) if not is_image[t]]
        if keys:
            groups.setdefault(name, []).extend(keys)
    lines = [(label, np.asarray(result.share_to(maps, rows, np.array(keys, dtype=np.int64)), dtype=np.float64))
             for label, keys in groups.items()]
    return Shares(what, queries, lines)


def mask_segments(result) -> list[tuple[str, int, int, str, str | None]]:
    """(name, start, stop, kind, VLA role) of each segment, for the mask designer: kind "image" for a run of
    image tokens, "block" for robot state / actions, else "text"; roles I (image), P (prompt, prefix,
    language, state), A (a suffix or action tokens read causally), E (an action expert's tokens)."""
    image = set(result.image_tokens().tolist())
    expert = action_span(result) is not None or getattr(result, "action_attentions", None) is not None
    out = []
    for s in result.segments:
        low = s.name.lower()
        if image & set(range(s.start, s.stop)):
            kind, role = "image", "I"
        elif any(low.startswith(b) for b in BLOCK_SEGMENTS):
            kind = "block"
            role = "P" if low.startswith("state") else ("E" if expert else "A")
        else:
            kind = "text"
            role = "A" if low.startswith("suffix") else "P"
        out.append((s.name, s.start, s.stop, kind, role))
    return out


class VlmOutcome:
    """A vision-language(-action) run as the panel shows it."""

    __slots__ = ("result", "summaries", "fused", "shares", "rgb", "image_name")

    def __init__(self, result, image_names=()):
        self.result = result  # MultimodalAttention
        self.summaries = vlm_summaries(result.attentions, result.special)
        self.fused = layer_means(result.attentions)  # (L, T, T): rollout of a query row on the GUI thread is cheap
        self.shares = share_curves(result)
        self.rgb = result.images[0] if result.images else None
        self.image_name = ", ".join(image_names)


def run_vlm_outcome(ckpt, images, field_text: str, raw_options: dict) -> VlmOutcome:
    """``ckpt`` run on the offered images ``images`` ((name, () -> rgb) each) and the prompt field's text."""
    options = parse_options(ckpt.options, raw_options)
    rgbs = [read() for _name, read in images]
    result = ckpt.run(rgbs, prompt_from_field(field_text), **options)
    return VlmOutcome(result, [name for name, _read in images])


def head_title(result, layer: int, head: int) -> str:
    """'layer 1 · head 3 · kv head 1' (the kv head only for grouped-query attention)."""
    dec = result if isinstance(result, DecoderAttention) else getattr(result, "decoder", None)
    title = f"layer {layer} · head {head}"
    if dec is not None and dec.group > 1:
        title += f" · kv head {dec.kv_head(head)} (shared by {dec.group} heads)"
    elif dec is None and getattr(result, "kv_group", 1) > 1:  # a vision-language model's language model
        g = int(result.kv_group)
        title += f" · kv head {head // g} (shared by {g} heads)"
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
        self.outcome: RunOutcome | LongOutcome | VlmOutcome | Seq2SeqOutcome | None = None
        self.stack = "cross"  # the encoder-decoder stack shown: "encoder", "decoder" or "cross"
        self.term = "weights"  # what the detail map shows of it: "weights", or T5's position-bias term
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
        """The loaded checkpoint's kind ("vit", "decoder", "vlm" ...), None before a load."""
        return None if self.ckpt is None else self.ckpt.kind

    def offered_text(self, state) -> tuple[str, str | None]:
        """(text, note): the session's text for the input, unless the loaded model could not read it
        all; then the default sentence stands in and the note says why."""
        text = session_text(state)
        ckpt = self.ckpt
        if ckpt is not None and ckpt.kind == "maps":  # nothing reads the text: the note says where the maps are from
            return text, f"Attention maps read from {ckpt.folder}: read-only, there is nothing to run."
        if ckpt is not None and ckpt.kind == "seq2seq":
            problem = seq2seq_study.offered_source(ckpt, text) if text != DEFAULT_SENTENCE else None
            if problem is not None:
                return DEFAULT_SENTENCE, (f"The session's text cannot be this model's source ({problem}): it "
                                          "translates the sentence above instead.")
            return text, None
        if ckpt is not None and ckpt.kind != "vlm" and ckpt.tokenizer is not None and text != DEFAULT_SENTENCE:
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

    def offered_prompt(self) -> str:
        """The prompt field's text for the loaded vision-language model: its family's example prompt."""
        return prompt_to_field(default_prompt(self.ckpt)) if self.kind == "vlm" else ""

    # -- runs
    def vlm_job(self, keys, field_text: str, raw_options: dict):
        """The job that runs the loaded vision-language model on the offered images ``keys`` and the prompt
        field's text with the options' field texts; None if an image is not offered so."""
        if any(key not in self._images for key in keys):
            return None
        ckpt = self.ckpt
        images = [self._images[key] for key in keys]
        return lambda: run_vlm_outcome(ckpt, images, field_text, dict(raw_options))

    def maps_job(self):
        """The job that shows the loaded maps file's maps; None while they are the run shown (nothing runs)."""
        ckpt = self.ckpt
        if self.outcome is not None and self.outcome.result is ckpt.run():
            return None
        return lambda: run_text_outcome(ckpt, "")

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

    def seq2seq_job(self, source: str, target: str, max_new_tokens: int, cancel=None):
        """The job that runs the loaded encoder-decoder on ``source``: teacher-forced on ``target``, or its own
        greedy translation (at most ``max_new_tokens``; ``cancel`` () -> bool stops it) when ``target`` is empty."""
        ckpt = self.ckpt
        return lambda: seq2seq_study.run_outcome(ckpt, source, target, max_new_tokens=max_new_tokens, cancel=cancel)

    @property
    def seq2seq(self) -> bool:
        """True when the run shown is an encoder-decoder's."""
        return isinstance(self.outcome, Seq2SeqOutcome)

    def set_stack(self, stack: str, term: str | None = None) -> None:
        """Show the encoder-decoder ``stack`` (and ``term``: "weights" or "bias"); ValueError for another name."""
        if stack not in seq2seq_study.STACKS:
            raise ValueError(f"unknown stack {stack!r}; choose one of {', '.join(seq2seq_study.STACKS)}")
        if term is not None and term not in seq2seq_study.TERMS:
            raise ValueError(f"unknown term {term!r}; choose one of {', '.join(seq2seq_study.TERMS)}")
        self.stack = stack
        if term is not None:
            self.term = term

    def seq2seq_view(self, layer: int, head: int):
        """(values, mask, row labels, column labels, title, value label) of one head of the stack shown; the
        weights when the bias term does not apply to it (cross-attention, or not T5)."""
        out = self.outcome
        term = self.term if (out.t5_bias and self.stack != "cross") else "weights"
        return seq2seq_study.head_view(out, self.stack, layer, head, term)

    def seq2seq_note(self, layer: int, head: int, row: int, col: int) -> str:
        """The readout's extra for one cell of the encoder-decoder map shown (T5: its position-bias term)."""
        out = self.outcome
        term = self.term if (out.t5_bias and self.stack != "cross") else "weights"
        return seq2seq_study.cell_note(out, self.stack, layer, head, row, col, term)

    @property
    def vlm(self) -> bool:
        """True when the run shown is a vision-language(-action) model's."""
        return isinstance(self.outcome, VlmOutcome)

    def show(self, outcome: RunOutcome | LongOutcome | VlmOutcome) -> bool:
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
        """(L, nh, ...) maps of the layers x heads grid: every map, max thumbnails of a long input, or the
        encoder-decoder stack shown."""
        if self.seq2seq:
            return seq2seq_study.stack_maps(self.outcome.result, self.stack)
        return self.outcome.thumbs if self.long else self.outcome.result.attentions

    def grid_summaries(self):
        """The head summaries beside the grid (an encoder-decoder's: those of the stack shown)."""
        return self.outcome.summaries[self.stack] if self.seq2seq else self.outcome.summaries

    def shows_image(self) -> bool:
        """True when the run shown is an image model's, drawn over its image."""
        return (self.outcome.result.kind == "vit" and self.ckpt is not None
                and getattr(self.ckpt, "image", None) is not None)

    def check_head(self, layer: int, head: int) -> None:
        """ValueError unless the run shown has head ``head`` in layer ``layer``."""
        r = self.outcome.result
        L, nh = (r.n_layer, r.n_head) if self.long else self.grid_maps().shape[:2]
        if not (0 <= layer < L and 0 <= head < nh):
            raise ValueError(f"no head ({layer}, {head}) in a {L} x {nh} model")

    def head_map(self, layer: int, head: int) -> tuple[np.ndarray, np.ndarray | None]:
        """((T, T) weights, (T, T) bool keys seen or None) of one head of a run that holds its maps."""
        r = self.outcome.result
        m = head_matrix(r, layer, head)  # (T, T)
        T = m.shape[0]
        if isinstance(self.outcome, VlmOutcome):  # the model's own mask: causal, prefix-LM, a policy's blocks
            return m, np.asarray(r.mask, dtype=bool)
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
        if self.seq2seq:
            return self.seq2seq_view(layer, head)[0]
        return head_matrix(self.outcome.result, layer, head)
