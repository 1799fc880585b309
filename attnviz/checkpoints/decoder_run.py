"""Run a decoder LLM on text of any length up to its context, and read its attention per head.

Long inputs keep only q, k and the log-sum-exp per layer (mode "qk"; "auto" keeps every map while
they fit in :data:`WEIGHTS_BUDGET`), so :class:`DecoderAttention` recomputes maps, overviews and
per-head summaries band by band and never holds a T x T matrix; either mode answers the same questions.
A soft-capped family (Gemma 2) recomputes its maps with the same cap.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attnviz.checkpoints.analysis import HeadSummaries
from attnviz.checkpoints.decoder import DecoderTrace, forward_decoder
from attnviz.checkpoints.decoder_experts import experts_from_record
from attnviz.checkpoints.decoder_moe import recording_experts
from attnviz.checkpoints.decoder_text import encode
from attnviz.checkpoints.errors import CheckpointError
from attnviz.engine import attention_overview, lse_summaries, recompute_weights, runtime
from attnviz.sources.errors import SourceError

WEIGHTS_BUDGET = 256 * 2**20  # bytes of (L, nh, T, T) maps "auto" keeps whole
MEMORY_SHARE = 0.5  # share of the available memory a pass may plan to use
BAND_BYTES = 32 * 2**20  # bytes of weights recomputed at once for summaries and maps


def available_memory() -> int:
    """Bytes of memory available now (8 GiB where the system cannot tell)."""
    return runtime.available_memory() or 8 * 2**30


def pass_bytes(c, T: int, mode: str, itemsize: int = 4) -> int:
    """Planned peak bytes of one pass over T tokens (what is kept plus one layer's work)."""
    s = c.decoder
    hd, nh, nkv = s.head_dim, c.n_head, s.n_kv_head
    kept = c.n_layer * T * ((nh + nkv) * hd + nh) * itemsize  # q, k, lse of every layer
    work = T * (4 * c.d_model + 3 * c.d_ff + 6 * nh * hd) * itemsize  # x, h, q/k/v (expanded), gate/up
    if mode == "weights":
        kept = c.n_layer * nh * T * T * itemsize
        work += nh * T * T * 8 * 2 + T * T  # the reference kernel's float64 scores and weights, the mask
    return kept + work


def token_limit(c, itemsize: int = 4) -> tuple[int, str]:
    """(tokens, why): the longest input a long pass may take now, the context or what memory allows."""
    budget = available_memory() * MEMORY_SHARE
    lo, hi = 1, c.max_positions
    if pass_bytes(c, hi, "qk", itemsize) <= budget:
        return hi, f"the model's context of {hi:,} tokens"
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if pass_bytes(c, mid, "qk", itemsize) <= budget:
            lo = mid
        else:
            hi = mid - 1
    return lo, (f"{lo:,} tokens, what {budget / 2**30:.1f} GiB (half the available memory) holds; "
                f"the model's context is {c.max_positions:,}")


def _dense_overview(m: np.ndarray, out_shape, rows, cols, reduce: str) -> np.ndarray:
    """The overview of a held (T, T) map: each of (H, W) pixels the max / mean of the cells it covers."""
    (r0, r1), (c0, c1) = rows or (0, m.shape[0]), cols or (0, m.shape[1])
    H, W = (int(x) for x in out_shape)
    sub = m[r0:r1, c0:c1].astype(np.float64)  # (R, C)
    re = (np.arange(min(H, sub.shape[0]) + 1) * sub.shape[0]) // min(H, sub.shape[0])  # (H'+1,)
    ce = (np.arange(min(W, sub.shape[1]) + 1) * sub.shape[1]) // min(W, sub.shape[1])  # (W'+1,)
    if reduce == "max":
        img = np.maximum.reduceat(np.maximum.reduceat(sub, re[:-1], axis=0), ce[:-1], axis=1)
    else:
        img = np.add.reduceat(np.add.reduceat(sub, re[:-1], axis=0), ce[:-1], axis=1)
        img /= np.diff(re)[:, None] * np.diff(ce)[None, :]
    img = np.repeat(img, np.diff((np.arange(img.shape[0] + 1) * H) // img.shape[0]), axis=0)
    img = np.repeat(img, np.diff((np.arange(img.shape[1] + 1) * W) // img.shape[1]), axis=1)
    return img.astype(m.dtype)  # (H, W)


def _pool_band(thumb: np.ndarray, w: np.ndarray, r0: int, edges: np.ndarray) -> None:
    """Max of the band's weights w (nh, R, C <= T) (rows r0..) into thumb (nh, s, s) over pixel ``edges``."""
    C = w.shape[-1]
    cols = edges[:-1][edges[:-1] < C]  # pixel columns this band reaches
    wc = np.maximum.reduceat(w, cols, axis=-1)  # (nh, R, n)
    rows = np.arange(r0, r0 + w.shape[1])
    prow = np.searchsorted(edges, rows, side="right") - 1  # (R,) pixel row of each token row
    starts = np.flatnonzero(np.r_[True, prow[1:] != prow[:-1]])
    red = np.maximum.reduceat(wc, starts, axis=1)  # (nh, g, n)
    sub = thumb[:, prow[starts], : cols.size]
    thumb[:, prow[starts], : cols.size] = np.maximum(sub, red)


@dataclass(eq=False)
class DecoderAttention:
    """A decoder's attention on one input: every map, or q, k and lse to recompute any of them."""

    model: str
    tokens: list[str]  # (T,) decoded pieces
    labels: list[str]  # (T,) with whitespace made visible
    special: np.ndarray  # (T,) bool: BOS, EOS and other special tokens
    ids: np.ndarray  # (T,) int64
    spans: list[tuple[int, int]]
    hidden: np.ndarray  # (T, d_model) after the final RMSNorm
    n_layer: int
    n_head: int
    group: int  # query heads per key/value head
    windows: tuple[int, ...]  # per layer sliding window, 0 = full causal
    scale: float
    attentions: np.ndarray | None = None  # (L, nh, T, T) when kept whole (mode "weights")
    softcap: float | None = None  # c of the scores' soft cap c tanh(s / c) (Gemma 2), None without one
    trace: DecoderTrace | None = None  # q, k, lse per layer (mode "qk")
    limit_note: str = ""  # how long inputs may be, and why
    band_bytes: int = BAND_BYTES  # bytes of weights recomputed at once for summaries and thumbnails
    chat: bool = False  # the text was put in the checkpoint's chat template
    # mixtures of experts (Mixtral, Qwen2-MoE, Qwen3-MoE): (L, T, k) the experts each layer's router picked per
    # token, most probable first (-1 on dense layers), and their weights (0 there); None for other decoders
    experts: np.ndarray | None = None
    expert_weights: np.ndarray | None = None

    kind = "decoder"

    @property
    def T(self) -> int:
        return len(self.tokens)

    @property
    def mode(self) -> str:
        return "weights" if self.attentions is not None else "qk"

    def kv_head(self, head: int) -> int:
        """The key/value head query head ``head`` shares."""
        return int(head) // self.group

    def _check(self, layer: int, head: int) -> tuple[int, int]:
        if not (0 <= int(layer) < self.n_layer and 0 <= int(head) < self.n_head):
            raise CheckpointError(f"no head ({layer}, {head}) in a {self.n_layer} x {self.n_head} model")
        return int(layer), int(head)

    def _qk(self, layer: int, head: int):
        tr = self.trace
        return tr.q[layer][head], tr.k[layer][self.kv_head(head)], tr.lse[layer][head], tr.masks[self.windows[layer]]

    def head_map(self, layer: int, head: int) -> np.ndarray:
        """(T, T) weights of one head (recomputed from q, k and lse in mode "qk")."""
        layer, head = self._check(layer, head)
        if self.attentions is not None:
            return self.attentions[layer, head]
        q, k, lse, tm = self._qk(layer, head)
        return recompute_weights(q, k, lse, tm, scale=self.scale, softcap=self.softcap)

    def cells(self, layer: int, head: int, rows: tuple[int, int], cols: tuple[int, int]) -> np.ndarray:
        """(r1-r0, c1-c0) weights of a region (a zoom to cells)."""
        layer, head = self._check(layer, head)
        (r0, r1), (c0, c1) = rows, cols
        if self.attentions is not None:
            return self.attentions[layer, head, r0:r1, c0:c1]
        q, k, lse, tm = self._qk(layer, head)
        w = recompute_weights(q, k, lse, tm, scale=self.scale, rows=slice(r0, r1), softcap=self.softcap)  # (R, T)
        return w[:, c0:c1]

    def overview(self, layer: int, head: int, out_shape, rows=None, cols=None, reduce: str = "max") -> np.ndarray:
        """(H, W) picture of a region: each pixel the max (or mean) of the weights it covers."""
        layer, head = self._check(layer, head)
        if self.attentions is not None:
            return _dense_overview(self.attentions[layer, head], out_shape, rows, cols, reduce)
        q, k, lse, tm = self._qk(layer, head)
        return attention_overview(q, k, lse, tm, scale=self.scale, out_shape=out_shape, rows=rows, cols=cols,
                                  reduce=reduce, softcap=self.softcap)

    def _bands(self, layer: int):
        """(r0, r1, w (nh, r1-r0, T)) bands of every head's weights in ``layer``."""
        T, nh = self.T, self.n_head
        if self.attentions is not None:
            yield 0, T, self.attentions[layer]
            return
        tr = self.trace
        k = np.repeat(tr.k[layer], self.group, axis=0) if self.group > 1 else tr.k[layer]  # (nh, T, hd)
        step = max(1, int(self.band_bytes) // max(1, nh * T * 4))
        for r0 in range(0, T, step):
            r1 = min(T, r0 + step)
            yield r0, r1, recompute_weights(tr.q[layer], k, tr.lse[layer], tr.masks[self.windows[layer]],
                                            scale=self.scale, rows=slice(r0, r1), softcap=self.softcap)

    def summaries(self) -> HeadSummaries:
        """Per (layer, head), averaged over query rows: entropy, attention to special tokens, to self,
        to the previous token (rows 1..), to the first token, and mean attention distance (i - j: the
        mask is causal).  Band by band, over the keys a band can see (j < r1)."""
        return self.summaries_and_thumbnails(0)[0]

    def summaries_and_thumbnails(self, side: int, *, tiles: bool = True) -> tuple[HeadSummaries, np.ndarray | None]:
        """:meth:`summaries` and, in the same pass over the weights, a (L, nh, s, s) max-overview of every
        head (s = min(side, T); None when side is 0): each weight is recomputed once for both. Without the
        maps, by the engine tile by tile (:func:`attnviz.engine.lse_summaries`); ``tiles=False`` recomputes
        bands of weights and reduces them in numpy instead (the slower path, kept for the benchmark)."""
        L, nh, T = self.n_layer, self.n_head, self.T
        s_px = min(int(side), T)
        thumbs = np.zeros((L, nh, s_px, s_px), dtype=np.float32) if s_px else None
        edges = (np.arange(s_px + 1) * T) // s_px if s_px else None  # (s+1,) pixel edges over tokens
        out = {k: np.zeros((L, nh)) for k in ("entropy", "to_special", "to_self", "to_previous", "to_first", "distance")}
        special = np.asarray(self.special, dtype=np.float32)  # (T,)
        pos = np.arange(T, dtype=np.float32)  # (T,)
        tiny = np.float32(1e-30)
        if self.attentions is None and tiles:  # only q, k and lse are kept: every weight once, tile by tile
            tr = self.trace
            for layer in range(L):
                k = np.repeat(tr.k[layer], self.group, axis=0) if self.group > 1 else tr.k[layer]  # (nh, T, hd)
                sums, th = lse_summaries(tr.q[layer], k, tr.lse[layer], tr.masks[self.windows[layer]],
                                         scale=self.scale, softcap=self.softcap, special=special, side=s_px)
                for key in out:
                    out[key][layer] = sums[key]
                if thumbs is not None:
                    thumbs[layer] = th
            for key in out:
                out[key] /= max(T - 1, 1) if key == "to_previous" else T
            return HeadSummaries(**out), thumbs
        for layer in range(L):
            for r0, r1, w in self._bands(layer):
                w = np.asarray(w, dtype=np.float32)[..., :r1]  # (nh, R, r1): keys after the last row are masked
                R = r1 - r0
                rows = np.arange(r0, r1)
                ar = np.arange(R)
                out["entropy"][layer] -= (w * np.log(np.maximum(w, tiny))).sum(axis=(1, 2), dtype=np.float64)
                out["to_special"][layer] += (w @ special[:r1]).sum(axis=1, dtype=np.float64)
                out["to_self"][layer] += w[:, ar, rows].sum(axis=1, dtype=np.float64)
                prev = rows >= 1
                out["to_previous"][layer] += w[:, ar[prev], rows[prev] - 1].sum(axis=1, dtype=np.float64)
                out["to_first"][layer] += w[..., 0].sum(axis=1, dtype=np.float64)
                dist = rows[None, :] * w.sum(axis=-1, dtype=np.float64) - (w @ pos[:r1])  # (nh, R) sum_j w_ij (i - j)
                out["distance"][layer] += dist.sum(axis=1)
                if thumbs is not None:
                    _pool_band(thumbs[layer], w, r0, edges)
        for key in out:
            out[key] /= max(T - 1, 1) if key == "to_previous" else T
        return HeadSummaries(**out), thumbs


def count_tokens(ckpt, text: str, *, chat: bool = False) -> int:
    """Tokens ``text`` gives with the checkpoint's tokenizer and BOS/EOS (or in its chat template),
    checked against the limits."""
    limit, why = token_limit(ckpt.config)
    try:
        return len(encode(ckpt.tokenizer, ckpt.special_tokens, text, limit, chat=chat, model=ckpt.name))
    except SourceError as exc:
        raise CheckpointError(f"{ckpt.name}: {exc} (the limit is {why})") from None


def run_decoder(ckpt, text: str, *, dtype=np.float32, kernel: str = "auto", mode: str = "auto",
                max_tokens: int | None = None, chat: bool = False, weights_budget: int | None = None,
                band_bytes: int = BAND_BYTES) -> DecoderAttention:
    """Tokenise ``text`` with the checkpoint's tokenizer (BOS as configured; with ``chat``, in its chat
    template) and run the decoder.  ``weights_budget``: bytes of maps mode "auto" keeps whole (default
    :data:`WEIGHTS_BUDGET`); ``band_bytes``: bytes of weights the summaries recompute at once.  A
    soft-capped family (Gemma 2) runs mode "qk" on the naive kernel (flash has no soft-capping), and
    refuses kernel "flash" in mode "weights" with a CheckpointError naming the kernels that work."""
    if ckpt.kind != "decoder":
        raise CheckpointError(f"{ckpt.name} is a {ckpt.config.model_type} model, not a decoder LLM")
    if mode not in ("auto", "weights", "qk"):
        raise CheckpointError(f"mode must be auto, weights or qk (got {mode!r})")
    c = ckpt.config
    item = np.dtype(dtype).itemsize
    limit, why = token_limit(c, item)
    if max_tokens is not None:
        limit, why = min(limit, int(max_tokens)), why if int(max_tokens) >= limit else f"{int(max_tokens):,} tokens asked for"
    try:
        toks = encode(ckpt.tokenizer, ckpt.special_tokens, text, limit, chat=chat, model=ckpt.name)
    except SourceError as exc:
        raise CheckpointError(f"{ckpt.name}: {exc} (the limit is {why})") from None
    if toks.ids.max() >= c.vocab_size:
        raise CheckpointError(f"token id {int(toks.ids.max())} is outside the model's {c.vocab_size}-row embedding table")
    T = len(toks)
    keep_all = c.n_layer * c.n_head * T * T * item
    if mode == "auto":
        mode = "weights" if keep_all <= (WEIGHTS_BUDGET if weights_budget is None else int(weights_budget)) else "qk"
    if mode == "weights" and pass_bytes(c, T, "weights", item) > available_memory() * MEMORY_SHARE:
        raise CheckpointError(
            f"every attention map of {T:,} tokens needs {keep_all / 2**30:.2f} GiB, more than half the available "
            "memory; run it keeping only q, k and the log-sum-exp (mode 'qk')"
        )
    s = c.decoder
    experts = expert_weights = None
    if s.moe is not None:  # the routers' choices are kept from the same pass (a few numbers per token)
        with recording_experts() as rec:
            res, hidden = forward_decoder(c, ckpt.weights, toks.ids, dtype=dtype, kernel=kernel, keep=mode)
        experts, expert_weights = experts_from_record(c, rec, T, dtype)
    else:
        res, hidden = forward_decoder(c, ckpt.weights, toks.ids, dtype=dtype, kernel=kernel, keep=mode)
    return DecoderAttention(
        model=ckpt.name, tokens=list(toks.pieces), labels=toks.labels(), special=np.asarray(toks.special, dtype=bool),
        ids=toks.ids, spans=list(toks.spans), hidden=hidden, n_layer=c.n_layer, n_head=c.n_head, group=s.group,
        windows=tuple(s.window(i) for i in range(c.n_layer)), scale=s.scale, softcap=s.attn_softcap,
        attentions=res if mode == "weights" else None, trace=res if mode == "qk" else None, limit_note=why,
        band_bytes=int(band_bytes), chat=bool(chat), experts=experts, expert_weights=expert_weights,
    )

