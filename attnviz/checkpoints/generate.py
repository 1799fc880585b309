"""Generation with a decoder LLM: greedy or seeded sampling over a key/value cache, keeping every step's
attention rows.

The prompt runs as one chunk, then each new token as a chunk of one; a chunk's queries attend to the
cached keys and to each other causally (on sliding layers within the window), exactly the rows of the
full pass's maps (:func:`attnviz.checkpoints.decoder.forward_decoder`) that the chunk's tokens own. The
next token comes from the logits of the last position: the final norm, the head (``lm_head.weight``, or
the embedding table where the model ties them), Gemma 2's final soft-capping; then, when sampling, the
same warpers in the same order as transformers' ``generate``: temperature, top-k, top-p.

A vision-language model (:func:`generate_vlm`: PaliGemma, LLaVA, Idefics3, SmolVLM) reads its picture and
prompt as its own single pass does (:func:`vlm_prefix`: the processor's expanded ids, the projected image
features in place of the image tokens, PaliGemma's prefix seeing itself both ways and its positions from
1) in the first chunk; its language model then decodes over the same cache.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from attnviz.checkpoints.decoder import (_W, _check_ids, causal_band, embed_scale, enter, final_norm, layer_input,
                                         layer_output, layer_qkv, rotary_tables)
from attnviz.checkpoints.decoder_run import MEMORY_SHARE, available_memory
from attnviz.checkpoints.errors import CheckpointError
from attnviz.checkpoints.layers import linear, pick_kernel
from attnviz.engine import attention

HEAD = "lm_head.weight"
HEAD_BIAS = "lm_head.bias"
TOP = 10  # next-token candidates kept per step
FEW_QUERIES = 8  # chunks of at most this many new tokens attend on the naive kernel


@dataclass(frozen=True)
class Sampling:
    """How the next token is chosen: greedy (``sample=False``) or drawn after the warpers."""

    sample: bool = False
    temperature: float = 1.0
    top_k: int = 0  # 0: no top-k filter
    top_p: float = 1.0  # 1: no nucleus filter
    seed: int = 0

    def __post_init__(self):
        if not (np.isfinite(self.temperature) and self.temperature > 0):
            raise CheckpointError(f"temperature must be a positive number (got {self.temperature!r})")
        if isinstance(self.top_k, bool) or not isinstance(self.top_k, (int, np.integer)) or self.top_k < 0:
            raise CheckpointError(f"top-k must be a whole number >= 0 (got {self.top_k!r})")
        if not (0.0 < self.top_p <= 1.0):
            raise CheckpointError(f"top-p must be in (0, 1] (got {self.top_p!r})")


@dataclass
class KVCache:
    """Per layer the rotated keys and the values of every token so far (nkv, T, hd) each."""

    k: list = field(default_factory=list)
    v: list = field(default_factory=list)

    @property
    def length(self) -> int:
        return 0 if not self.k or self.k[0] is None else int(self.k[0].shape[1])


@dataclass(frozen=True, eq=False)
class Generation:
    """A prompt and what the model wrote after it."""

    ids: np.ndarray  # (T,) prompt then generated ids
    n_prompt: int
    attentions: np.ndarray  # (L, nh, T, T) every row as the cached step that computed it
    top_ids: np.ndarray  # (n_new, TOP) the most probable next tokens at each step (after the warpers)
    top_probs: np.ndarray  # (n_new, TOP) their probabilities
    stopped: str  # "eos", "length" or "cancelled"

    @property
    def generated(self) -> np.ndarray:
        """(n_new,) the new tokens only."""
        return self.ids[self.n_prompt:]


def head_matrix(c, weights):
    """The unembedding (vocab, d_model): the model's own head, else the tied embedding table."""
    name = HEAD if HEAD in weights else "embed_tokens.weight" if c.decoder.tied else None
    if name is not None:
        return weights.matrix(name) if hasattr(weights, "matrix") else weights[name]
    raise CheckpointError(f"{c.model_type}: the checkpoint has no language-model head ({HEAD}) and does not tie it "
                          "to the embedding: it was saved as a base model, which cannot generate")


def logits(c, weights, hidden: np.ndarray) -> np.ndarray:
    """(n, vocab) float64 logits of final-normed hidden rows (n, d_model) (Phi's head adds its bias)."""
    bias = None
    if c.decoder.head_bias and HEAD in weights:
        if HEAD_BIAS not in weights:
            raise CheckpointError(f"{c.model_type}: the language-model head has no bias ({HEAD_BIAS}), which the "
                                  "family's head carries")
        bias = np.asarray(weights[HEAD_BIAS], dtype=np.float32)
    z = linear(np.ascontiguousarray(hidden, dtype=np.float32), head_matrix(c, weights), bias).astype(np.float64)
    cap = c.decoder.final_softcap
    if cap:
        z = cap * np.tanh(z / cap)
    return z


def warp(z: np.ndarray, how: Sampling) -> np.ndarray:
    """Probabilities (vocab,) from one row of logits after temperature, top-k and top-p, as transformers'
    TemperatureLogitsWarper, TopKLogitsWarper and TopPLogitsWarper (ties at the top-k edge kept)."""
    z = np.asarray(z, dtype=np.float64) / how.temperature
    if how.top_k and how.top_k < z.size:
        kth = np.partition(z, -how.top_k)[-how.top_k]
        z = np.where(z < kth, -np.inf, z)
    if how.top_p < 1.0:
        order = np.argsort(z, kind="stable")  # ascending, as the warper sorts
        p = np.exp(z[order] - z[order][-1])
        p /= p.sum()
        drop = np.cumsum(p) <= 1.0 - how.top_p
        drop[-1] = False  # the most probable token always stays
        z = z.copy()
        z[order[drop]] = -np.inf
    return _softmax(z)


def _top(prob: np.ndarray) -> np.ndarray:
    """The TOP most probable ids, most probable first (ties: lower id first)."""
    k = min(TOP, prob.size)
    part = np.argpartition(-prob, k - 1)[:k] if k < prob.size else np.arange(prob.size)
    return part[np.lexsort((part, -prob[part]))]


def _softmax(z: np.ndarray) -> np.ndarray:
    p = np.exp(z - z.max())
    return p / p.sum()


def _chunk(c, W, x: np.ndarray, start: int, cache: KVCache, kernel: str,
           stream: list | None = None, edit=None, masks: dict | None = None,
           offset: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """The decoder over n new input rows x (n, C) at positions start.. start + n - 1, reading and extending
    the cache; returns (final-normed hidden (n, C), attention rows (L, nh, n, start + n)). ``stream``, when
    given, receives the residual stream (n, C) entering each layer and leaving the last (L + 1 arrays).
    ``edit`` (an :class:`attnviz.checkpoints.interventions.Edit`) may change, per layer, the residual
    stream entering it (``edit.residual(i, x)``), the mask (``edit.mask(i, m)``: (n, T) -> (n, T) or
    (nh, n, T)) and the heads' outputs before the output projection (``edit.heads(i, out)``, (nh, n, hd)).
    ``masks`` {window: (n, T) bool} replaces the causal rows for the layers with that window (a
    vision-language prefix that sees itself both ways); ``offset`` is added to the rotary positions
    (PaliGemma counts them from 1)."""
    s = c.decoder
    n = x.shape[0]
    T = start + n
    nh, g = c.n_head, s.group
    dtype = x.dtype
    kernel = pick_kernel(kernel, s.attn_softcap, cells=nh * n * T)
    if kernel == "flash" and n <= FEW_QUERIES:
        kernel = "naive"  # a step's one query row: flash's tiles cost more than they save
    pos = np.arange(start, T) + int(offset)
    rows = np.empty((c.n_layer, nh, n, T), dtype=dtype)
    rot: dict = {}
    masks = dict(masks or {})
    x = enter(c, W, x, pos)  # (n, C) with the learned positions' rows where the family has them
    for i in range(c.n_layer):
        if edit is not None:
            x = edit.residual(i, x)
        if stream is not None:
            stream.append(x)
        cos, sin = rotary_tables(c, i, pos, dtype, rot)  # (n, rd) each
        h = layer_input(c, W, i, x)  # (n, C)
        q, k, v = layer_qkv(c, W, i, h, cos, sin, pos)  # (nh, n, hd), (nkv, n, hd) x 2
        if start:
            k = np.concatenate([cache.k[i], k], axis=1)  # (nkv, T, hd)
            v = np.concatenate([cache.v[i], v], axis=1)
        cache.k[i], cache.v[i] = k, np.ascontiguousarray(v, dtype=dtype)
        kx = np.repeat(k, g, axis=0) if g > 1 else k  # (nh, T, hd)
        vx = np.repeat(cache.v[i], g, axis=0) if g > 1 else cache.v[i]
        window = s.window(i)
        if window not in masks:
            masks[window] = causal_band(window)(start, T, T)  # (n, T) the chunk's rows of the causal mask
        mask = masks[window] if edit is None else edit.mask(i, masks[window])
        try:
            res = attention(q, kx, vx, mask, scale=s.scale, kernel=kernel, return_weights=True,
                            softcap=s.attn_softcap)
        except ValueError as exc:
            raise CheckpointError(f"layer {i}: {exc}") from None
        rows[i] = res.weights
        out = res.out.astype(dtype, copy=False)  # (nh, n, hd) each head's output
        if edit is not None:
            out = edit.heads(i, out)
        x = layer_output(c, W, i, x, h, out)  # (n, C)
    if stream is not None:
        stream.append(x)
    return final_norm(c, W, x), rows


@dataclass(frozen=True, eq=False)
class Progress:
    """One chunk as a generation computes it, handed to ``on_progress``: the prompt (``top_ids`` None) or
    one new token with the distribution it was chosen from."""

    start: int  # sequence position of the chunk's first token
    ids: np.ndarray  # (n,) the chunk's token ids (the expanded prompt, or the one new token)
    rows: np.ndarray  # (L, nh, n, start + n) float32: the chunk's attention rows over everything so far
    stream: np.ndarray  # (L + 1, n, C) float32: the residual stream entering each layer and leaving the last
    top_ids: np.ndarray | None = None  # (TOP,) the most probable next tokens of the step that chose it
    top_probs: np.ndarray | None = None  # (TOP,) their probabilities (after the warpers when sampling)
    chosen_prob: float | None = None  # the probability of the token drawn (it may be outside the top)

    @property
    def stop(self) -> int:
        return self.start + int(self.ids.size)


def _check_request(c, n_prompt: int, max_new_tokens) -> None:
    if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, (int, np.integer)) or max_new_tokens < 0:
        raise CheckpointError(f"max new tokens must be a whole number >= 0 (got {max_new_tokens!r})")
    limit = c.max_positions or (n_prompt + max_new_tokens)
    if n_prompt + max_new_tokens > limit:
        raise CheckpointError(f"{n_prompt:,} prompt tokens + {max_new_tokens:,} new ones exceed the model's "
                              f"{limit:,} positions")
    L, nh = c.n_layer, c.n_head
    T_max = n_prompt + max_new_tokens
    need = L * nh * T_max * T_max * 4
    if need > available_memory() * MEMORY_SHARE:
        raise CheckpointError(f"keeping every step's attention over {T_max:,} tokens needs {need / 2**30:.1f} GiB "
                              f"({L} layers x {nh} heads x {T_max:,}^2), more than half the available memory; "
                              "shorten the prompt or generate fewer tokens")


def generate(c, weights, prompt_ids, *, max_new_tokens: int = 32, how: Sampling = Sampling(),
             eos_ids=(), kernel: str = "auto", cancelled=None, on_step=None, on_progress=None) -> Generation:
    """Continue ``prompt_ids`` (T0,) by up to ``max_new_tokens`` tokens, stopping after one of ``eos_ids``.
    ``cancelled()`` is asked before every step (True: stop and return what was written); ``on_step(i,
    token)`` is told each new token; ``on_progress(Progress)`` gets the prompt's chunk and then every new
    token's once its own attention rows are in. float32 throughout, as the checked single pass."""
    if np.size(prompt_ids) == 0:
        raise CheckpointError("generation needs at least one prompt token")
    ids = _check_ids(c, prompt_ids)
    _check_request(c, ids.size, max_new_tokens)
    W = _W(weights, np.float32)
    head_matrix(c, W._w)  # a base model without a head is refused before any work
    x = W.rows("embed_tokens.weight", ids)  # (T0, C)
    scale = embed_scale(c, np.float32)
    if scale is not None:
        x = x * scale
    return _decode(c, W, ids, x, max_new_tokens=max_new_tokens, how=how, eos_ids=eos_ids, kernel=kernel,
                   cancelled=cancelled, on_step=on_step, on_progress=on_progress)


def _decode(c, W, ids: np.ndarray, x0: np.ndarray, *, max_new_tokens: int, how: Sampling, eos_ids, kernel: str,
            cancelled, on_step, on_progress, masks: dict | None = None, offset: int = 0) -> Generation:
    """The prompt's rows x0 (T0, C) (scaled as the first layer takes them; ``masks`` {window: (T0, T0)} their
    own mask when not causal) in one chunk, then one chunk per new token over the cache."""
    L, nh = c.n_layer, c.n_head
    T_max = ids.size + max_new_tokens
    eos = {int(e) for e in eos_ids}
    rng = np.random.default_rng(how.seed)
    cache = KVCache([None] * c.n_layer, [None] * c.n_layer)
    scale = embed_scale(c, np.float32)
    atts = np.zeros((L, nh, T_max, T_max), dtype=np.float32)
    out = list(int(t) for t in ids)
    tops_i, tops_p = [], []
    chosen = None
    stopped = None
    start = 0
    new_ids = ids
    x = x0
    fed = []  # the rows fed so far, for a pass that recomputes the cache
    recompute_at = _recompute_length(c)
    while True:
        stream: list | None = [] if on_progress is not None else None
        fed.append(np.ascontiguousarray(x, dtype=np.float32))
        n = new_ids.size
        if start and start <= recompute_at < start + n and masks is None:
            # Phi-3 with longrope: the first step past the original context recomputes every key with the
            # long factors (transformers' Phi3ForCausalLM drops its cache there); the step's own rows are kept
            cache = KVCache([None] * c.n_layer, [None] * c.n_layer)
            hidden, rows = _chunk(c, W, np.concatenate(fed), 0, cache, kernel, stream, offset=offset)
            rows, hidden = rows[:, :, -n:], hidden[-n:]
            if stream is not None:
                stream[:] = [r[-n:] for r in stream]
        else:
            hidden, rows = _chunk(c, W, fed[-1], start, cache, kernel, stream,
                                  masks=masks if start == 0 else None, offset=offset)
        atts[:, :, start:start + n, :start + n] = rows
        if on_progress is not None:  # the rows as a view of the maps kept: a listener holds no second copy
            top = (tops_i[-1], tops_p[-1]) if start else (None, None)
            on_progress(Progress(start=start, ids=np.array(new_ids, dtype=np.int64),
                                 rows=atts[:, :, start:start + n, :start + n],
                                 stream=np.stack(stream), top_ids=top[0], top_probs=top[1], chosen_prob=chosen))
        start += n
        if stopped is not None:  # the last token's own rows are in: done
            break
        if len(out) - ids.size == max_new_tokens:
            stopped = "length"
            break
        if cancelled is not None and cancelled():
            stopped = "cancelled"
            break
        z = logits(c, W._w, hidden[-1:])[0]
        prob = warp(z, how) if how.sample else _softmax(z)
        top = _top(prob)
        tops_i.append(top)
        tops_p.append(prob[top])
        token = int(rng.choice(prob.size, p=prob)) if how.sample else int(np.argmax(prob))
        chosen = float(prob[token])
        out.append(token)
        if on_step is not None:
            on_step(len(out) - ids.size - 1, token)
        if token in eos:
            stopped = "eos"
        new_ids = np.array([token], dtype=np.int64)
        x = W.rows("embed_tokens.weight", new_ids)  # (1, C)
        if scale is not None:
            x = x * scale
    T = start
    k = min(TOP, c.vocab_size)
    return Generation(ids=np.array(out[:T], dtype=np.int64), n_prompt=int(ids.size),
                      attentions=atts if T == T_max else np.ascontiguousarray(atts[:, :, :T, :T]),
                      top_ids=np.array(tops_i, dtype=np.int64).reshape(-1, k),
                      top_probs=np.array(tops_p, dtype=np.float64).reshape(-1, k), stopped=stopped)


def _recompute_length(c) -> int:
    """The length past which a generation recomputes its cache once (-1: never): transformers' Phi-3 does so
    when the sequence first passes original_max_position_embeddings, which with longrope changes every key."""
    rope = c.decoder.rope
    if c.model_type == "phi3" and rope.rope_type == "longrope":
        return rope.original_max_positions
    return -1


# ---- vision-language models: the image+prompt prefix once, then the cache ------------------------------
VLM_HEADS = ("lm_head.weight", "language_model.lm_head.weight", "model.lm_head.weight")  # where a VLM keeps its head


@dataclass(frozen=True, eq=False)
class VlmPrefix:
    """A vision-language model's prompt as its language model reads it: the expanded ids (image tokens
    included), the rows entering the first layer (scaled; the projected image features in place of the
    image tokens), the prefix's own mask where it is not causal, the rotary offset and each token's piece."""

    ids: np.ndarray  # (T0,) int64 as the processor expands them
    x: np.ndarray  # (T0, C) float32
    masks: dict | None  # {window: (T0, T0) bool} or None (causal)
    offset: int  # added to the rotary positions (PaliGemma: 1)
    pieces: list  # (T0,) token text (an image token as the processor writes it)
    is_image: np.ndarray  # (T0,) bool


class _WithHead(Mapping):
    """A language model's tensors (a PartView) plus its untied head, read from the checkpoint's own files."""

    def __init__(self, view, head):
        self._v, self._head = view, head

    def __getitem__(self, name):
        return np.asarray(self._head) if name == HEAD else self._v[name]

    def __contains__(self, name) -> bool:
        return name == HEAD or name in self._v

    def __iter__(self):
        yield from self._v
        yield HEAD

    def __len__(self) -> int:
        return len(self._v) + 1

    def rows(self, name, index):
        return self._v.rows(name, index)

    def matrix(self, name):
        return self._head if name == HEAD else self._v.matrix(name)


def vlm_text_weights(ckpt):
    """The language model's weights of a vision-language checkpoint with its head: the embedding where the
    text model ties them, else the untied ``lm_head.weight`` the family loaders leave unread, found in the
    checkpoint's files and checked (floating point, (vocab, d_model), finite)."""
    from attnviz.checkpoints.parts import PartView
    from attnviz.checkpoints.safetensors_file import StoredTensors
    from attnviz.checkpoints.weights import FLOAT_DTYPES

    c = ckpt.spec.text
    view = PartView(ckpt.weights, "text")
    if c.decoder.tied:
        return view
    files = getattr(ckpt.weights, "files", None)
    store = StoredTensors(files) if files else None
    stored = next((n for n in VLM_HEADS if store is not None and n in store.stored_names()), None)
    if stored is None:
        raise CheckpointError(f"{ckpt.name}: the checkpoint has no language-model head (none of "
                              f"{', '.join(VLM_HEADS)}) and does not tie it to the embedding: it cannot generate")
    want = (c.vocab_size, c.d_model)
    if store.stored_dtype(stored) not in FLOAT_DTYPES or tuple(store.stored_shape(stored)) != want:
        raise CheckpointError(f"tensor {stored!r} is {store.stored_dtype(stored)} {tuple(store.stored_shape(stored))}, "
                              f"not a floating-point {want} head of this language model")
    if not store.check_finite(stored):
        raise CheckpointError(f"tensor {stored!r} contains NaN or infinite values")
    store.select({HEAD: stored})
    return _WithHead(view, store.matrix(HEAD))


def vlm_prefix(ckpt, images, text: str, kernel: str = "auto") -> VlmPrefix:
    """The family's processor and vision tower on ``images`` and ``text``, as its forward pass runs them."""
    from attnviz.checkpoints import decoder as dec
    from attnviz.checkpoints.parts import PartView

    images = list(images) if images is not None else []
    if len(images) > ckpt.n_images:
        raise CheckpointError(f"{ckpt.name} takes {ckpt.n_images} image{'s' if ckpt.n_images > 1 else ''} per "
                              f"prompt; {len(images)} were given")
    if not isinstance(text, str):
        raise CheckpointError(f"the prompt must be text (got {type(text).__name__})")
    spec, f32 = ckpt.spec, np.float32
    c = spec.text
    tw = PartView(ckpt.weights, "text")
    masks, offset = None, 0
    if ckpt.family == "paligemma":
        from attnviz.checkpoints import paligemma as pg
        from attnviz.checkpoints.paligemma_processor import process

        if len(images) != 1:
            raise CheckpointError(f"{ckpt.name} reads one picture with every prompt; {len(images)} were given")
        px = process(ckpt.tokenizer, spec.processor, images[0], text, None, image_token_id=spec.image_token_id,
                     max_tokens=pg.MAX_TOKENS)
        ids, is_image, pieces = px.ids, px.is_image, list(px.pieces)
        text_ids = ids[~is_image]
        if text_ids.size and int(text_ids.max()) >= c.vocab_size:
            raise CheckpointError(f"token id {int(text_ids.max())} is outside the language model's {c.vocab_size}-row "
                                  "embedding table")
        _, feats = pg.image_features(spec, ckpt.weights, px.pixels, f32, kernel)  # (P, d)
        lookup = np.where(is_image, 0, ids) if spec.image_token_id >= c.vocab_size else ids
        embeds = dec.embed_tokens(c, tw, lookup, f32)  # (T0, C)
        embeds[is_image] = feats / dec.embed_scale(c, f32)  # the scale below gives back the projector's rows
        both = dec.block_sequence_masks(c, np.where(px.token_type_ids == 0, 0, -1))
        masks = {w: both["sliding_attention" if w else "full_attention"] for w in {c.decoder.window(i)
                                                                                    for i in range(c.n_layer)}}
        offset = 1  # PaliGemma counts positions from 1
    elif ckpt.family == "llava":
        from attnviz.checkpoints import llava
        from attnviz.checkpoints.decoder_text import encode
        from attnviz.checkpoints.preprocess import preprocess_image
        from attnviz.checkpoints.vlm_common import check_ids
        from attnviz.sources.errors import SourceError

        if not text.strip():
            raise CheckpointError("the prompt is empty; write a question about the picture")
        prompt = llava.expand_prompt(spec, text, len(images))
        try:
            toks = encode(ckpt.tokenizer, ckpt.special_tokens, prompt, llava.MAX_TOKENS, model=ckpt.name)
        except SourceError as exc:
            raise CheckpointError(f"{ckpt.name}: {exc}") from None
        ids, pieces = toks.ids, list(toks.pieces)
        check_ids(ids, c.vocab_size)
        is_image = ids == spec.image_token_id
        if int(is_image.sum()) != spec.n_image_tokens * len(images):
            raise CheckpointError(f"the prompt's text itself contains {spec.image_token!r}; it may appear only as the "
                                  "placeholder")
        embeds = dec.embed_tokens(c, tw, ids, f32)
        if images:
            _, feats = llava._features(spec, ckpt.weights, preprocess_image(images[0], spec.image), f32, kernel)
            embeds[is_image] = feats
    elif ckpt.family in ("idefics3", "smolvlm"):
        from attnviz.checkpoints import idefics3
        from attnviz.checkpoints.idefics3_processor import IMAGE, check_placeholders, process_images, tokenise

        check_placeholders(spec.prompt, text, len(images))
        processed = process_images(images, spec.steps)
        pt = tokenise(spec.prompt, ckpt.tokenizer, ckpt.special_tokens, text, processed, idefics3.MAX_TOKENS,
                      model=ckpt.name)
        ids, pieces = pt.tokens.ids, list(pt.tokens.pieces)
        if ids.size and int(ids.max()) >= c.vocab_size:
            raise CheckpointError(f"token id {int(ids.max())} is outside the language model's {c.vocab_size}-row "
                                  "embedding table: tokenizer and weights do not belong together")
        is_image = ids == spec.image_token_id
        role_image = np.array([r == IMAGE for r in pt.role], dtype=bool)
        if (not np.array_equal(is_image, role_image)
                or int(is_image.sum()) != processed.pixel_values.shape[0] * spec.prompt.image_seq_len):
            raise CheckpointError(f"the prompt's text itself contains {spec.prompt.image_token!r} tokens; it may "
                                  "appear only as the placeholder, once per picture")
        embeds = dec.embed_tokens(c, tw, ids, f32)
        if processed.frames:
            feats, _ = idefics3.image_features(spec, ckpt.weights, processed, f32, kernel, False)
            embeds[is_image] = feats
    else:
        raise CheckpointError(f"{ckpt.name} is a {ckpt.family} model; generation with a picture runs PaliGemma, "
                              "LLaVA, Idefics3 and SmolVLM")
    scale = dec.embed_scale(c, f32)
    x = embeds if scale is None else embeds * scale
    if not np.isfinite(x).all():
        raise CheckpointError("the image features are not finite numbers")
    return VlmPrefix(ids=np.asarray(ids, dtype=np.int64), x=np.ascontiguousarray(x, dtype=f32), masks=masks,
                     offset=offset, pieces=pieces, is_image=np.asarray(is_image, dtype=bool))


def generate_vlm(ckpt, images, text: str, *, max_new_tokens: int = 32, how: Sampling = Sampling(), eos_ids=(),
                 kernel: str = "auto", cancelled=None, on_step=None, on_progress=None,
                 prefix: VlmPrefix | None = None) -> Generation:
    """A vision-language model (PaliGemma, LLaVA, Idefics3, SmolVLM) continues ``text`` about ``images``: the
    image and prompt prefix computed once (PaliGemma's seeing itself both ways), then each new token over
    the cache. ``prefix`` (from :func:`vlm_prefix`) skips the processor and vision tower when given."""
    if getattr(ckpt, "kind", None) != "vlm":
        raise CheckpointError(f"{getattr(ckpt, 'name', ckpt)!r} is not a vision-language model")
    c = ckpt.spec.text
    if prefix is None:
        prefix = vlm_prefix(ckpt, images, text, kernel)
    if prefix.ids.size == 0:
        raise CheckpointError("generation needs at least one prompt token")
    _check_request(c, prefix.ids.size, max_new_tokens)
    W = _W(vlm_text_weights(ckpt), np.float32)
    return _decode(c, W, prefix.ids, prefix.x, max_new_tokens=max_new_tokens, how=how, eos_ids=eos_ids,
                   kernel=kernel, cancelled=cancelled, on_step=on_step, on_progress=on_progress,
                   masks=prefix.masks, offset=prefix.offset)


def next_distribution(c, weights, ids, how: Sampling = Sampling()) -> np.ndarray:
    """(vocab,) float64: the next-token probabilities after ``ids`` (T,) (after the warpers when sampling)."""
    if np.size(ids) == 0:
        raise CheckpointError("the next token needs at least one token before it")
    ids = _check_ids(c, ids)
    W = _W(weights, np.float32)
    x = W.rows("embed_tokens.weight", ids)
    scale = embed_scale(c, np.float32)
    if scale is not None:
        x = x * scale
    cache = KVCache([None] * c.n_layer, [None] * c.n_layer)
    hidden, _ = _chunk(c, W, np.ascontiguousarray(x, dtype=np.float32), 0, cache, "auto")
    z = logits(c, weights, hidden[-1:])[0]
    return warp(z, how) if how.sample else _softmax(z)


@dataclass(frozen=True, eq=False)
class LogitLens:
    """What each layer's residual stream at one position would predict through the final norm and the
    unembedding: row 0 is the embedding, row L the model's own output."""

    position: int
    top_ids: np.ndarray  # (L + 1, k)
    top_probs: np.ndarray  # (L + 1, k)
    probs: np.ndarray  # (L + 1, vocab) float64


def logit_lens(c, weights, ids, position: int = -1, k: int = TOP) -> LogitLens:
    """The logit lens of ``ids`` (T,) at ``position`` (negative: from the end): every layer's hidden state
    there through the final norm (Gemma's (1 + w) one included) and the head, softmax, the top ``k``."""
    if np.size(ids) == 0:
        raise CheckpointError("the logit lens needs at least one token")
    ids = _check_ids(c, ids)
    T = ids.size
    if isinstance(position, bool) or not isinstance(position, (int, np.integer)) or not -T <= position < T:
        raise CheckpointError(f"position {position!r} is outside the {T} tokens")
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise CheckpointError(f"k must be a whole number >= 1 (got {k!r})")
    pos = int(position) % T
    W = _W(weights, np.float32)
    x = W.rows("embed_tokens.weight", ids)
    scale = embed_scale(c, np.float32)
    if scale is not None:
        x = x * scale
    stream: list = []
    _chunk(c, W, np.ascontiguousarray(x, dtype=np.float32), 0, KVCache([None] * c.n_layer, [None] * c.n_layer),
           "auto", stream)
    rows = np.stack([h[pos] for h in stream])  # (L + 1, C)
    probs = np.array([_softmax(z) for z in logits(c, weights, final_norm(c, W, rows))])
    kk = min(int(k), probs.shape[1])
    top = np.argsort(-probs, axis=1, kind="stable")[:, :kk]
    return LogitLens(position=pos, top_ids=top, top_probs=np.take_along_axis(probs, top, axis=1), probs=probs)
