"""Generation with a decoder LLM: greedy or seeded sampling over a key/value cache, keeping every step's
attention rows.

The prompt runs as one chunk, then each new token as a chunk of one; a chunk's queries attend to the
cached keys and to each other causally (on sliding layers within the window), exactly the rows of the
full pass's maps (:func:`attnviz.checkpoints.decoder.forward_decoder`) that the chunk's tokens own. The
next token comes from the logits of the last position: the final norm, the head (``lm_head.weight``, or
the embedding table where the model ties them), Gemma 2's final soft-capping; then, when sampling, the
same warpers in the same order as transformers' ``generate``: temperature, top-k, top-p.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from attnviz.checkpoints.decoder import (_W, _check_ids, causal_band, embed_scale, rms_norm,
                                         rms_norm_plus_one)
from attnviz.checkpoints.decoder_run import MEMORY_SHARE, available_memory
from attnviz.checkpoints.errors import CheckpointError
from attnviz.checkpoints.layers import activation, linear, merge_heads, pick_kernel, split_heads
from attnviz.checkpoints.rope import cos_sin, inverse_frequencies, rotate
from attnviz.engine import attention

HEAD = "lm_head.weight"
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
    """(n, vocab) float64 logits of final-normed hidden rows (n, d_model)."""
    z = linear(np.ascontiguousarray(hidden, dtype=np.float32), head_matrix(c, weights), None).astype(np.float64)
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
           stream: list | None = None, edit=None) -> tuple[np.ndarray, np.ndarray]:
    """The decoder over n new input rows x (n, C) at positions start.. start + n - 1, reading and extending
    the cache; returns (final-normed hidden (n, C), attention rows (L, nh, n, start + n)). ``stream``, when
    given, receives the residual stream (n, C) entering each layer and leaving the last (L + 1 arrays).
    ``edit`` (an :class:`attnviz.checkpoints.interventions.Edit`) may change, per layer, the residual
    stream entering it (``edit.residual(i, x)``), the mask (``edit.mask(i, m)``: (n, T) -> (n, T) or
    (nh, n, T)) and the heads' outputs before the output projection (``edit.heads(i, out)``, (nh, n, hd))."""
    s = c.decoder
    n = x.shape[0]
    T = start + n
    hd, nh, nkv, g = s.head_dim, c.n_head, s.n_kv_head, s.group
    dtype = x.dtype
    norm = rms_norm_plus_one if s.norm_plus_one else rms_norm
    kernel = pick_kernel(kernel, s.attn_softcap)
    if kernel == "flash" and n <= FEW_QUERIES:
        kernel = "naive"  # a step's one query row: flash's tiles cost more than they save
    pos = np.arange(start, T)
    rows = np.empty((c.n_layer, nh, n, T), dtype=dtype)
    rot: dict = {}
    masks: dict[int, np.ndarray] = {}
    for i in range(c.n_layer):
        if edit is not None:
            x = edit.residual(i, x)
        if stream is not None:
            stream.append(x)
        p, a, m = f"layers.{i}.", f"layers.{i}.self_attn.", f"layers.{i}.mlp."
        rope = s.rope_for(i)
        if rope not in rot:
            inv, af = inverse_frequencies(rope, hd, dtype)
            cos, sin = cos_sin(pos, inv, af)  # (n, hd) each
            rot[rope] = cos.astype(dtype, copy=False), sin.astype(dtype, copy=False)
        cos, sin = rot[rope]
        h = norm(x, W[p + "input_layernorm.weight"], c.ln_eps)  # (n, C)
        q = split_heads(linear(h, W.matrix(a + "q_proj.weight"), W.get(a + "q_proj.bias")), nh)  # (nh, n, hd)
        k = split_heads(linear(h, W.matrix(a + "k_proj.weight"), W.get(a + "k_proj.bias")), nkv)  # (nkv, n, hd)
        v = split_heads(linear(h, W.matrix(a + "v_proj.weight"), W.get(a + "v_proj.bias")), nkv)  # (nkv, n, hd)
        if s.qk_norm:
            q = norm(q, W[a + "q_norm.weight"], c.ln_eps)
            k = norm(k, W[a + "k_norm.weight"], c.ln_eps)
        q = np.ascontiguousarray(rotate(q, cos, sin), dtype=dtype)  # (nh, n, hd)
        k = np.ascontiguousarray(rotate(k, cos, sin), dtype=dtype)  # (nkv, n, hd)
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
        o = linear(merge_heads(out), W.matrix(a + "o_proj.weight"), W.get(a + "o_proj.bias"))
        if s.sandwich_norm:
            x = x + norm(o, W[p + "post_attention_layernorm.weight"], c.ln_eps)
            h = norm(x, W[p + "pre_feedforward_layernorm.weight"], c.ln_eps)
        else:
            x = x + o
            h = norm(x, W[p + "post_attention_layernorm.weight"], c.ln_eps)
        gate = activation(c.act, linear(h, W.matrix(m + "gate_proj.weight"), W.get(m + "gate_proj.bias")))
        gate *= linear(h, W.matrix(m + "up_proj.weight"), W.get(m + "up_proj.bias"))
        f = linear(gate, W.matrix(m + "down_proj.weight"), W.get(m + "down_proj.bias"))  # (n, C)
        if s.sandwich_norm:
            f = norm(f, W[p + "post_feedforward_layernorm.weight"], c.ln_eps)
        x = x + f
    if stream is not None:
        stream.append(x)
    return norm(x, W["norm.weight"], c.ln_eps), rows


def generate(c, weights, prompt_ids, *, max_new_tokens: int = 32, how: Sampling = Sampling(),
             eos_ids=(), kernel: str = "auto", cancelled=None, on_step=None) -> Generation:
    """Continue ``prompt_ids`` (T0,) by up to ``max_new_tokens`` tokens, stopping after one of ``eos_ids``.
    ``cancelled()`` is asked before every step (True: stop and return what was written); ``on_step(i,
    token)`` is told each new token. float32 throughout, as the checked single pass."""
    if np.size(prompt_ids) == 0:
        raise CheckpointError("generation needs at least one prompt token")
    ids = _check_ids(c, prompt_ids)
    if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, (int, np.integer)) or max_new_tokens < 0:
        raise CheckpointError(f"max new tokens must be a whole number >= 0 (got {max_new_tokens!r})")
    limit = c.max_positions or (ids.size + max_new_tokens)
    if ids.size + max_new_tokens > limit:
        raise CheckpointError(f"{ids.size:,} prompt tokens + {max_new_tokens:,} new ones exceed the model's "
                              f"{limit:,} positions")
    L, nh = c.n_layer, c.n_head
    T_max = ids.size + max_new_tokens
    need = L * nh * T_max * T_max * 4
    if need > available_memory() * MEMORY_SHARE:
        raise CheckpointError(f"keeping every step's attention over {T_max:,} tokens needs {need / 2**30:.1f} GiB "
                              f"({L} layers x {nh} heads x {T_max:,}^2), more than half the available memory; "
                              "shorten the prompt or generate fewer tokens")
    W = _W(weights, np.float32)
    head_matrix(c, W._w)  # a base model without a head is refused before any work
    eos = {int(e) for e in eos_ids}
    rng = np.random.default_rng(how.seed)
    cache = KVCache([None] * c.n_layer, [None] * c.n_layer)
    scale = embed_scale(c, np.float32)
    atts = np.zeros((L, nh, T_max, T_max), dtype=np.float32)
    out = list(int(t) for t in ids)
    tops_i, tops_p = [], []
    stopped = None
    start = 0
    new_ids = ids
    while True:
        x = W.rows("embed_tokens.weight", new_ids)  # (n, C)
        if scale is not None:
            x = x * scale
        hidden, rows = _chunk(c, W, np.ascontiguousarray(x, dtype=np.float32), start, cache, kernel)
        n = new_ids.size
        atts[:, :, start:start + n, :start + n] = rows
        start += n
        if stopped is not None:  # the last token's own rows are in: done
            break
        if len(out) - ids.size == max_new_tokens:
            stopped = "length"
            break
        if cancelled is not None and cancelled():
            stopped = "cancelled"
            break
        prob = warp(logits(c, W._w, hidden[-1:])[0], how) if how.sample else _softmax(logits(c, W._w, hidden[-1:])[0])
        top = _top(prob)
        tops_i.append(top)
        tops_p.append(prob[top])
        token = int(rng.choice(prob.size, p=prob)) if how.sample else int(np.argmax(prob))
        out.append(token)
        if on_step is not None:
            on_step(len(out) - ids.size - 1, token)
        if token in eos:
            stopped = "eos"
        new_ids = np.array([token], dtype=np.int64)
    T = start
    k = min(TOP, c.vocab_size)
    return Generation(ids=np.array(out[:T], dtype=np.int64), n_prompt=int(ids.size),
                      attentions=np.ascontiguousarray(atts[:, :, :T, :T]),
                      top_ids=np.array(tops_i, dtype=np.int64).reshape(-1, k),
                      top_probs=np.array(tops_p, dtype=np.float64).reshape(-1, k), stopped=stopped)


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
    norm = rms_norm_plus_one if c.decoder.norm_plus_one else rms_norm
    rows = np.stack([h[pos] for h in stream])  # (L + 1, C)
    probs = np.array([_softmax(z) for z in logits(c, weights, norm(rows, W["norm.weight"], c.ln_eps))])
    kk = min(int(k), probs.shape[1])
    top = np.argsort(-probs, axis=1, kind="stable")[:, :kk]
    return LogitLens(position=pos, top_ids=top, top_probs=np.take_along_axis(probs, top, axis=1), probs=probs)
