"""Compute requests and responses: one pure function from a session snapshot to everything shown.

``run(request, progress=None, is_cancelled=None) -> ComputeResponse`` is what the UI calls on a
worker thread (and what tests and the CLI call directly). It never raises for bad input: a problem a
person can fix (empty sequence, corrupt image, RoPE with an odd head size, ...) comes back as
``response.ok == False`` with ``response.error`` and the same text in ``response.messages``.
Cancellation is checked between stages, between heads and between query-row chunks; a cancelled run
returns ``response.cancelled == True`` with no matrices.

Pipeline: sources -> :mod:`attnviz.model.sequence` (cached tokenising / patching) -> X + additive
positions -> :mod:`attnviz.model.heads` (q, k, v; RoPE; hand-set components) -> mask design compiled
to a dense bool mask and a BlockMask (beyond ``DENSE_MASK_CELLS``: band by band into a TiledMask,
``response.mask`` None, flash kernel only) -> per head:

* dot-product rules (scaled_dot, dot, uniform) without ALiBi: the engine kernel of
  ``state.kernel`` (flash by default), with ``scale`` 1/sqrt(hs), 1 or 0, gives out and lse;
* ALiBi (a score bias the engine does not take) and the additive, multiplicative and linear rules:
  the float64 numpy path of :mod:`attnviz.model.score_rules`, in query-row chunks; a message says so;

-> ``combined = Concat(heads) W^O``.

Full (nh, Tq, Tk) matrices (``scores``, ``weights``) are materialised only when Tq and Tk are both at
most ``request.dense_limit`` and ``request.want == "full"``; otherwise they are None, a message says
so, and ``row_weights`` still holds the weights of the requested ``rows`` (e.g. the selected query).
``scores`` are the scaled scores before the mask (ALiBi bias included); masked cells of ``weights``
are exactly 0; a fully masked row has weights 0, output 0 and lse -inf.

Precision. ``X``, ``q``, ``k``, ``v``, ``output``, ``lse`` and ``combined`` are always float64 (the
float64 kernels). ``scores`` and ``weights`` are display matrices: float64 when Tq * Tk <=
:data:`EXACT_CELLS` (every worked example and printed digit: there the engine kernel's own float64
weights are returned), float32 above it, as the heatmaps draw them. In float32 both come from one
fused engine pass (:func:`attnviz.engine.display_matrices`): float32 tile products of q and k (twice
as fast as float64 ones) and the weights exp(score - lse) from the kernel's lse, each row divided by
its sum: they differ from the float64 ones by float32 rounding only (within twice the error of a plain
float32 softmax, as the engine's accuracy rule asks).

Preview (:mod:`attnviz.model.preview`): when a run recomputes every query row of a large sequence
and ``request.preview_head`` names a head, that head's display matrices are computed first (its own
q and k, a kernel call for its lse and the display pass) and handed to ``on_preview``, so the heatmap
can show the edit while the other heads are computed.

Large display matrices are written into recycled buffers (:mod:`attnviz.model.buffers`): a fresh
32 MiB array costs more in page faults than the pass that fills it.

Reuse (:mod:`attnviz.model.compute_cache`): an edit recomputes only what it changes. Tokens, X and
q/k/v are reused unless sources, tokenizer, model or positions change; the scores unless q/k or the
rule change; and after a mask edit only the query rows whose mask changed get new out, lse,
weights and combined rows (``response.recomputed_rows`` says how many; softmax runs per row, so the
others are the same numbers a full run gives). A view edit recomputes nothing. Arrays of a response
may be shared with the caches and with earlier responses: treat them as read-only. ``scores``,
``weights``, ``output``, ``combined``, ``X`` and ``fully_masked`` are flagged so; ``q``, ``k``,
``v``, ``lse`` and ``mask`` are not, because numba compiles a separate kernel for read-only
arguments and the panels pass these to the engine.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace

import numpy as np

from attnviz.engine import attention, display_matrices, recompute_weights
from attnviz.engine import jitcache
from attnviz.engine.blockmask import FULL, BlockMask
from attnviz.engine.tiled_mask import TiledMask
from attnviz.model import buffers
from attnviz.model import compute_cache as cache
from attnviz.model import preview
from attnviz.model.compute_cache import CompiledMask, Projection, Result, freeze
from attnviz.model.heads import Weights, apply_overrides, combine, init_weights, query_key_weights, qkv
from attnviz.model.positional import alibi_slopes
from attnviz.model.score_rules import (dot_scale, linear_normalise, masked_softmax, rule_params,
                                       rule_scores)
from attnviz.model.segments import Segment
from attnviz.model.sequence import MAX_TOKENS, Sequence, TokenInfo, assemble, with_positions
from attnviz.model.state import SessionState
from attnviz.sources.errors import SourceError

#: largest Tq * Tk compiled to a dense bool mask (64 MB); larger masks are compiled band by band into an
#: attnviz.engine.TiledMask (tile states and the cells of partial tiles only) and ``response.mask`` is
#: None: a dense mask of 65,536 x 65,536 tokens would be 4.3 GB
DENSE_MASK_TOKENS = 8192
DENSE_MASK_CELLS = DENSE_MASK_TOKENS * DENSE_MASK_TOKENS

#: default largest Tq / Tk for which full (nh, Tq, Tk) matrices are returned: at nh=8 one float32
#: matrix of 2048 x 2048 is 134 MB, and a response holds two (scores, weights)
DENSE_LIMIT = 2048

WANTS = ("full", "summary")
ENGINE_MODES = ("always", "when-compiled")

#: score cells per engine call: heads are grouped up to this many Tq*Tk cells, so a long run can be
#: cancelled between groups while short ones keep every head in one parallel kernel call
ENGINE_CELLS = 1 << 22

#: largest Tq * Tk whose scores and weights are float64 (T = 256 for self-attention); larger ones are
#: float32 display matrices (see the module docstring)
EXACT_CELLS = 256 * 256

#: after a mask edit, the changed query rows are recomputed alone when they are at most this share
#: of all rows; beyond it one full batched run is cheaper than gathering and scattering rows
ROW_SHARE = 0.25

#: at most this many (head, changed row, key) cells are recomputed with the float64 formula of
#: :mod:`attnviz.model.score_rules` on the calling thread rather than by a parallel engine launch,
#: whose start-up (waking the worker threads of a busy machine) costs more than a few rows
FORMULA_CELLS = 1 << 20

#: numpy BLAS threads while a run computes (:func:`attnviz.model.compute_cache.blas_threads`): the
#: engine kernels are parallel already, and two BLAS threads next to numba's pool ran 2-4x slower
BLAS_THREADS = 1


@dataclass(frozen=True, eq=False)
class ComputeRequest:
    """An immutable snapshot of what to compute."""

    request_id: int  # echoed in the response; the UI drops responses that are not the newest
    state: SessionState  # the session snapshot
    want: str = "full"  # "full": matrices when small enough; "summary": never the (nh, Tq, Tk) matrices
    rows: tuple[int, ...] = ()  # query rows whose weights are returned in row_weights at any size
    dense_limit: int = DENSE_LIMIT  # largest Tq / Tk for which full matrices are returned
    max_tokens: int = MAX_TOKENS  # largest sequence accepted (a clear error beyond)
    engine: str = "always"  # "always": dot-product rules on the engine kernels; "when-compiled": on the
    #                         float64 numpy path until a warm-up has compiled the kernels
    #                         (attnviz.engine.jitcache.is_warm), so a first start shows results at once
    preview_head: int | None = None  # the head a person is looking at: when every row of a large
    #                                  sequence is recomputed, this head alone is computed first and
    #                                  handed to run()'s on_preview (attnviz.model.preview)

    def __post_init__(self):
        if self.want not in WANTS:
            raise ValueError(f"want must be one of {WANTS}, got {self.want!r}")
        if self.engine not in ENGINE_MODES:
            raise ValueError(f"engine must be one of {ENGINE_MODES}, got {self.engine!r}")
        object.__setattr__(self, "rows", tuple(int(r) for r in self.rows))


@dataclass(frozen=True, eq=False)
class ComputeResponse(preview.AxisLengths):
    """Everything a panel draws for one request. Arrays are float64 unless noted; treat them as read-only."""

    request_id: int
    ok: bool = False  # False: see error
    cancelled: bool = False  # the run stopped because is_cancelled() said so
    error: str | None = None  # the problem, for a person, when not ok
    messages: tuple[str, ...] = ()  # warnings and notes a person should see
    cross: bool = False  # True for cross-attention (query and key sequences differ)
    query_labels: tuple[str, ...] = ()  # (Tq,)
    key_labels: tuple[str, ...] = ()  # (Tk,)
    query_segments: tuple[Segment, ...] = ()
    key_segments: tuple[Segment, ...] = ()
    query_tokens: tuple[TokenInfo, ...] = ()  # (Tq,) where each query token came from
    key_tokens: tuple[TokenInfo, ...] = ()  # (Tk,)
    X: np.ndarray | None = None  # (Tq, d_model) query-side rows, positions added
    X_k: np.ndarray | None = None  # (Tk, d_model) key-side rows, positions added (X for self-attention)
    q: np.ndarray | None = None  # (nh, Tq, hs) after RoPE and hand-set components
    k: np.ndarray | None = None  # (nh, Tk, hs)
    v: np.ndarray | None = None  # (nh, Tk, hv)
    projections: Weights | None = None  # W_q, W_k, W_v, W_o actually used
    scores: np.ndarray | None = None  # (nh, Tq, Tk) scaled scores before the mask, or None (large T);
    #                                   float32 when Tq * Tk > EXACT_CELLS
    weights: np.ndarray | None = None  # (nh, Tq, Tk), or None (large T); float32 when Tq * Tk > EXACT_CELLS
    row_weights: dict = field(default_factory=dict)  # query row -> (nh, Tk) weights of request.rows
    output: np.ndarray | None = None  # (nh, Tq, hv) per-head outputs
    lse: np.ndarray | None = None  # (nh, Tq); -inf for a fully masked row
    combined: np.ndarray | None = None  # (Tq, d_model) = Concat(heads) W^O
    mask: np.ndarray | None = None  # (Tq, Tk) or (nh, Tq, Tk) bool, True = may attend; None above
    #                                 DENSE_MASK_CELLS (then block_mask is a TiledMask)
    block_mask: BlockMask | TiledMask | None = None  # tile map for the session's BLOCK_M x BLOCK_N
    tile_counts: dict = field(default_factory=dict)  # {"empty", "partial", "full"} tile numbers
    sparsity: float = 0.0  # percent of tiles the flash kernel skips
    fully_masked: np.ndarray | None = None  # (Tq,) or (nh, Tq) bool: rows with no allowed key
    path: str = ""  # what ran: "engine:flash", "engine:reference", "numpy" ...
    timings: dict = field(default_factory=dict)  # stage -> seconds
    stand_in: bool = False  # the numpy path stood in for the engine while its kernels compile (engine="when-compiled")
    recomputed_rows: int = 0  # query rows whose attention this run computed: Tq (all), fewer after a
    #                           mask edit (only the changed rows), 0 when everything was reused

    @property
    def dense(self) -> bool:
        """True when the full scores and weights matrices are present."""
        return self.weights is not None


class Cancelled(Exception):
    """Raised inside run() when is_cancelled() turns true; run() returns a cancelled response."""


def compile_mask(state: SessionState, qseq: Sequence, kseq: Sequence) -> np.ndarray:
    """The session's mask design compiled for these sequences: (Tq, Tk) or (nh, Tq, Tk) bool."""
    nh = state.model.nh
    m = np.asarray(state.mask.compile(list(qseq.segments), list(kseq.segments), qseq.T, kseq.T, nh=nh))
    if m.dtype != np.bool_ or m.shape not in ((qseq.T, kseq.T), (nh, qseq.T, kseq.T)):
        raise ValueError(f"the mask design compiled to {m.dtype} {m.shape}, expected bool "
                         f"({qseq.T}, {kseq.T}) or ({nh}, {qseq.T}, {kseq.T})")
    return m


def _row_chunk(Tk: int, width: int = 1) -> int:
    """Query rows per chunk so a (rows, Tk, width) float64 block stays near 16 MB."""
    return max(1, (1 << 21) // max(1, Tk * width))


def _alibi_rows(slope: float, rows: np.ndarray, Tq: int, Tk: int) -> np.ndarray:
    """Query ``rows`` of one head's ALiBi bias, as ``positional.alibi_bias`` (queries end-aligned): (r, Tk)."""
    qpos = (Tk - Tq) + np.asarray(rows, dtype=np.float64)  # (r,)
    kpos = np.arange(Tk, dtype=np.float64)  # (Tk,)
    return -slope * np.abs(qpos[:, None] - kpos[None, :])  # (r, Tk)


def run(request: ComputeRequest, progress=None, is_cancelled=None, on_preview=None) -> ComputeResponse:
    """Compute everything for ``request`` (pure; see the module docstring).

    ``on_preview(HeadPreview)``, when given, is called once, on this thread, with the display matrices
    of ``request.preview_head`` before the other heads are computed, when the run recomputes every
    query row of a sequence large enough for that to matter (:func:`attnviz.model.preview.wanted`).
    """
    try:
        with cache.blas_threads(BLAS_THREADS):
            return _run(request, progress, is_cancelled, on_preview)
    except Cancelled:
        return ComputeResponse(request.request_id, ok=False, cancelled=True, messages=("computation cancelled",))
    except (SourceError, ValueError, KeyError) as exc:
        msg = str(exc) if not isinstance(exc, KeyError) else f"unknown name {exc}"
        return ComputeResponse(request.request_id, ok=False, error=msg, messages=(msg,))
    except MemoryError:
        msg = "not enough memory for this sequence: use fewer tokens, fewer heads or the summary view"
        return ComputeResponse(request.request_id, ok=False, error=msg, messages=(msg,))


# ------------------------------------------------------------------------------------------------
# stages that are cached


def _base_model(state: SessionState):
    """The model without hand-set q/k components (they are applied after the cached projections)."""
    model = state.model
    return replace(model, qk_overrides=()) if model.qk_overrides else model


def _projection_key(state: SessionState, max_tokens: int) -> tuple:
    """All the projections (X with positions, W, q, k, v) depend on."""
    return (state.sources, state.tokenizer, state.cross, _base_model(state), state.positional, int(max_tokens))


def _rows(state: SessionState, qseq: Sequence, kseq: Sequence):
    """Xq (Tq, d_model), Xk (Tk, d_model) with positions (read-only; Xk is Xq for self-attention)."""
    Xq = with_positions(state, qseq)  # (Tq, d_model)
    Xk = Xq if kseq is qseq else with_positions(state, kseq)  # (Tk, d_model)
    return Xq, Xk


def _projection(state: SessionState, qseq: Sequence, kseq: Sequence, key: tuple) -> Projection:
    """X with positions, W and q, k, v before hand-set components (cached under ``key``)."""
    p = cache.projections.peek(key)
    if p is None:
        Xq, Xk = _rows(state, qseq, kseq)
        W = init_weights(_base_model(state))
        q, k, v = qkv(_base_model(state), state.positional, Xq, Xk, W)  # (nh, Tq, hs), (nh, Tk, hs), (nh, Tk, hv)
        q, k, v = (np.ascontiguousarray(a) for a in (q, k, v))  # the kernels would copy them on every call
        p = Projection(Xq, Xk, W, q, k, v)
        cache.projections.put(key, p)
    return p


def _tiled_mask(state: SessionState, qseq: Sequence, kseq: Sequence) -> CompiledMask:
    """The mask design as a TiledMask at the session's tile size, compiled one band of BLOCK_M query
    rows at a time (the dense mask is never made); ``mask`` is None."""
    kc, nh = state.kernel, state.model.nh
    qs, ks = list(qseq.segments), list(kseq.segments)

    def band(r0: int, r1: int) -> np.ndarray:
        return np.asarray(state.mask.compile_rows(qs, ks, qseq.T, kseq.T, nh=nh, rows=(r0, r1)))  # (r, Tk) or (nh, r, Tk)

    tm = TiledMask.from_bands(band, qseq.T, kseq.T, kc.block_m, kc.block_n)
    return CompiledMask(None, tm, tm.fully if tm.n_heads > 1 else tm.fully[0])


def _compiled_mask(state: SessionState, qseq: Sequence, kseq: Sequence, prev: Result | None,
                   tiled: bool) -> tuple[CompiledMask, np.ndarray | None]:
    """The compiled mask (cached on the design object; ``tiled``: a TiledMask, never dense) and the
    query rows where it differs from ``prev``'s mask: (R,) int64, or None when there is nothing to
    compare with (always for a tiled mask)."""
    kc = state.kernel
    rest = (qseq.segments, kseq.segments, qseq.T, kseq.T, state.model.nh, kc.block_m, kc.block_n)
    pm = prev.compiled if prev is not None else None
    cm = cache.cached_mask(state.mask, rest)
    if cm is not None:
        if pm is cm:
            return cm, np.zeros(0, dtype=np.int64)
        if pm is not None and pm.mask is not None and cm.mask is not None and pm.mask.shape == cm.mask.shape:
            return cm, cache.changed_rows(pm.mask, cm.mask)
        return cm, None
    if tiled:  # never dense: band by band into a TiledMask
        cm = _tiled_mask(state, qseq, kseq)
        cache.store_mask(state.mask, rest, cm)
        return cm, None
    mask = np.ascontiguousarray(compile_mask(state, qseq, kseq))  # (Tq, Tk) or (nh, Tq, Tk)
    if not mask.flags.writeable:  # the kernels read it as it is: one array type, never copied
        mask = mask.copy()
    rows = None
    if pm is not None and pm.mask is not None and pm.mask.shape == mask.shape:
        rows = cache.changed_rows(pm.mask, mask)  # (R,)
        fully = pm.fully.copy()  # (Tq,) or (nh, Tq)
        fully[..., rows] = ~mask[..., rows, :].any(axis=-1)
    else:
        fully = ~mask.any(axis=-1)  # (Tq,) or (nh, Tq)
    freeze(fully)
    bm = cache.block_mask(mask, kc.block_m, kc.block_n, None if rows is None else pm.block_mask, rows)
    cm = CompiledMask(mask, bm, fully)
    cache.store_mask(state.mask, rest, cm)
    return cm, rows


# ------------------------------------------------------------------------------------------------
# the pipeline


def _run(request: ComputeRequest, progress, is_cancelled, on_preview) -> ComputeResponse:
    state = request.state
    messages: list[str] = []
    timings: dict[str, float] = {}
    started = time.perf_counter()

    def check(frac: float, stage: str):
        if is_cancelled is not None and is_cancelled():
            raise Cancelled()
        if progress is not None:
            progress(float(frac), stage)

    t0 = time.perf_counter()
    check(0.0, "prepare")
    qseq, kseq = assemble(state, messages, request.max_tokens)
    timings["prepare"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    check(0.05, "mask")
    model = state.model
    nh, hs, hv = model.nh, model.head_size, model.value_size
    Tq, Tk = qseq.T, kseq.T
    kc = state.kernel
    rule = state.score_rule
    alibi = state.positional.kind == "alibi"
    tiled = Tq * Tk > DENSE_MASK_CELLS  # the mask is never dense (a TiledMask): flash kernel only
    if tiled and not (rule.engine and not alibi):
        raise ValueError(f"{Tq:,} x {Tk:,} tokens is beyond the {DENSE_MASK_TOKENS:,} x {DENSE_MASK_TOKENS:,} "
                         f"a dense mask is made for; the {rule.name} rule{' with ALiBi' if alibi else ''} needs "
                         "it: use scaled_dot, dot or uniform without ALiBi, or a shorter sequence")
    compiling = (rule.engine and not alibi and not tiled and request.engine == "when-compiled"
                 and not jitcache.is_warm())
    on_engine = rule.engine and not alibi and not compiling
    dense = request.want == "full" and Tq <= request.dense_limit and Tk <= request.dense_limit and not tiled
    disp = np.float64 if Tq * Tk <= EXACT_CELLS else np.float32  # display dtype of scores and weights
    pkey = _projection_key(state, request.max_tokens)
    rkey = (pkey, model.qk_overrides, rule, kc, dense, on_engine)  # all a result depends on but the mask
    prev = cache.results.peek(rkey)
    cm, changed = _compiled_mask(state, qseq, kseq, prev, tiled)
    mask, bm, fully = cm.mask, cm.block_mask, cm.fully
    n_full = int(np.count_nonzero(fully))
    if tiled and kc.name != "flash":
        messages.append(f"the {kc.name} kernel needs the dense mask, which is not made for {Tq:,} x {Tk:,} tokens: "
                        "this ran on the flash kernel")
        kc = replace(kc, name="flash")
        state = replace(state, kernel=kc)
    if n_full:
        where = "query rows" if fully.ndim == 1 else "(head, query) rows"
        messages.append(f"{n_full} {where} are fully masked: their weights and output are 0 and lse is -inf")
    # which query rows to compute: all, or only those whose mask changed since the cached result
    idx = None  # None: every row
    if prev is not None and changed is not None and changed.size <= ROW_SHARE * Tq:
        idx = changed  # (R,)
    timings["mask"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    check(0.1, "project")
    if idx is None and on_preview is not None and on_engine and preview.wanted(state, request.preview_head, Tq, Tk,
                                                                                dense):
        h = request.preview_head
        p = cache.projections.peek(pkey)
        if p is None:  # only this head's q and k, from W_q and W_k alone
            q_h, k_h = preview.head_qk(model, state.positional, *_rows(state, qseq, kseq),
                                       *query_key_weights(_base_model(state)), h)  # (1, Tq, hs), (1, Tk, hs)
        else:
            q_h, k_h = (a[h:h + 1] for a in apply_overrides(model, p.q, p.k))  # (1, Tq, hs), (1, Tk, hs)
        on_preview(preview.head_preview(request.request_id, state, qseq, kseq, q_h, k_h, cm, h, started,
                                        EXACT_CELLS))
        timings["preview"] = time.perf_counter() - t0
        check(0.12, "project")
        t0 = time.perf_counter()
    proj = _projection(state, qseq, kseq, pkey)
    q, k = apply_overrides(model, proj.q, proj.k, messages)  # (nh, Tq, hs), (nh, Tk, hs)
    v, W = proj.v, proj.W  # (nh, Tk, hv)
    timings["project"] = time.perf_counter() - t0

    if not dense and request.want == "full":
        messages.append(f"T = {max(Tq, Tk):,} exceeds the dense limit of {request.dense_limit:,}: full score and "
                        "weight matrices are not materialised (use the overview and selected rows)")
    rows = [r for r in request.rows if 0 <= r < Tq]
    if len(rows) != len(request.rows):
        messages.append("some requested rows are outside the query sequence and were ignored")

    slopes = alibi_slopes(nh) if alibi else None  # (nh,)
    if alibi and rule.engine:
        messages.append("ALiBi adds a bias to the scores, which the engine kernels do not take: this ran on the "
                        "float64 numpy reference path")
    elif alibi:
        messages.append("ALiBi bias added to the scores of the " + rule.name + " rule")
    if not rule.engine:
        messages.append(f"the {rule.name} score rule runs on the float64 numpy path, not on an engine kernel")
    if compiling:
        messages.append("the engine's kernels are being compiled (the first start after installing): this result "
                        "comes from the float64 numpy path; the engine takes over when they are ready")
    path = f"engine:{kc.name}" if on_engine else "numpy"

    t0 = time.perf_counter()
    if idx is not None and idx.size == 0:
        out, lse, combined, scores, weights = prev.out, prev.lse, prev.combined, prev.scores, prev.weights
    else:
        args = (state, q, k, v, cm, dense, disp, idx, prev, check)
        if on_engine:
            spent: dict[str, float] = {}
            out, lse, scores, weights = _engine_rows(*args, skey=(pkey, model.qk_overrides, rule.name, disp),
                                                     spent=spent)
            timings.update({f"attention.{k_}": v_ for k_, v_ in spent.items()})
        else:
            out, lse, scores, weights = _numpy_rows(*args, slopes=slopes)
    if alibi and rule.name == "linear":
        messages.append("ALiBi is a softmax score bias: it is not applied to linear attention")
    roww = _row_weights(state, q, k, cm, rows, lse, weights, on_engine, slopes,
                        lambda frac, stage: check(0.95, "selected rows"))
    timings["attention"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    check(0.95, "combine")
    if idx is None:
        combined = combine(out, W.W_o)  # (Tq, d_model)
        finite = np.all(np.isfinite(out)) and np.all(np.isfinite(combined))
    elif idx.size:
        combined = prev.combined.copy()  # (Tq, d_model)
        combined[idx] = combine(out[:, idx], W.W_o)  # (R, d_model)
        finite = np.all(np.isfinite(out[:, idx])) and np.all(np.isfinite(combined[idx]))
    else:
        finite = True
    timings["combine"] = time.perf_counter() - t0
    if not finite:
        raise ValueError("the computation produced non-finite values: the scores overflow; "
                         "use smaller embeddings or weights")
    freeze(out, combined, scores, weights)
    if idx is None or idx.size:
        cache.results.put(rkey, Result(cm, out, lse, combined, scores, weights))
    if progress is not None:
        progress(1.0, "done")
    return ComputeResponse(
        request_id=request.request_id, ok=True, messages=tuple(messages), cross=state.cross is not None,
        query_labels=qseq.labels, key_labels=kseq.labels, query_segments=qseq.segments,
        key_segments=kseq.segments, query_tokens=qseq.tokens, key_tokens=kseq.tokens,
        X=proj.Xq, X_k=proj.Xk, q=q, k=k, v=v, projections=W, scores=scores, weights=weights,
        row_weights={r: roww[:, i] for i, r in enumerate(rows)}, output=out, lse=lse, combined=combined,
        mask=mask, block_mask=bm, tile_counts=bm.counts(), sparsity=bm.sparsity(), fully_masked=fully,
        path=path, timings=timings, stand_in=compiling, recomputed_rows=Tq if idx is None else int(idx.size))


def _copy(a: np.ndarray) -> np.ndarray:
    """A writable copy of ``a`` in a recycled buffer (:mod:`attnviz.model.buffers`)."""
    out = buffers.take(a.shape, a.dtype)
    np.copyto(out, a)
    return out


def _zeros(shape: tuple[int, ...], dtype) -> np.ndarray:
    out = buffers.take(shape, dtype)
    out.fill(0)
    return out


def _engine_rows(state, q, k, v, cm: CompiledMask, dense: bool, disp, idx, prev: Result | None, check, skey,
                 spent: dict):
    """out, lse, scores, weights of a dot-product rule on the engine kernel: every row (``idx`` None),
    or rows ``idx`` patched into copies of ``prev``'s arrays. A full run adds the seconds of its parts
    (``kernel``, ``scores``, ``weights``) to ``spent``."""
    kc, rule = state.kernel, state.score_rule
    nh, Tq, _ = q.shape
    Tk, hv = k.shape[1], v.shape[2]
    scale = dot_scale(rule.name, q.shape[2])
    exact = disp == np.float64  # small matrices: the kernel's own float64 weights
    mask, bm = cm.mask, cm.block_mask
    masked = not bool(np.all(bm.tile_state == FULL))  # some cell is masked
    kw = dict(scale=scale, kernel=kc.name, block_m=kc.block_m, block_n=kc.block_n, return_weights=dense and exact)

    if idx is not None:  # a mask edit: only the changed rows
        check(0.15, f"{idx.size} changed rows")
        out, lse = prev.out.copy(), prev.lse.copy()  # (nh, Tq, hv), (nh, Tq)
        scores, weights = prev.scores, None
        if nh * idx.size * Tk <= FORMULA_CELLS:  # a few rows: the float64 formula, on this thread
            w_r = np.empty((nh, idx.size, Tk))  # (nh, R, Tk)
            for h, c0, c1, _, w, l in _numpy_chunks(state, q, k, mask, idx, None, check):
                w_r[h, c0:c1] = w[0]
                lse[h, idx[c0:c1]] = l[0]
                out[h, idx[c0:c1]] = w[0] @ v[h]  # (r, hv)
        else:
            mr = mask[idx] if mask.ndim == 2 else mask[:, idx]  # (R, Tk) or (nh, R, Tk)
            res = attention(q[:, idx], k, v, mr, **kw)
            out[:, idx] = res.out  # (nh, R, hv)
            lse[:, idx] = res.lse  # (nh, R)
            w_r = res.weights  # (nh, R, Tk) or None
        if dense:
            weights = _copy(prev.weights)  # (nh, Tq, Tk)
            if exact:
                weights[:, idx] = w_r  # (nh, R, Tk)
            else:
                w_r = np.empty((nh, idx.size, Tk), dtype=disp)  # (nh, R, Tk)
                mr = mask[idx] if mask.ndim == 2 else mask[:, idx]  # (R, Tk) or (nh, R, Tk)
                display_matrices(q[:, idx], k, lse[:, idx], mr if masked else None, weights=w_r,
                                 given_scores=np.ascontiguousarray(scores[:, idx]), scale=scale)
                weights[:, idx] = w_r
        return out, lse, scores, weights

    out = np.empty((nh, Tq, hv))  # (nh, Tq, hv)
    lse = np.empty((nh, Tq))  # (nh, Tq)
    scores = weights = None
    new_scores = False
    if dense:
        scores = cache.scores.peek(skey)
        if scores is None:
            scores, new_scores = buffers.take((nh, Tq, Tk), disp), True  # (nh, Tq, Tk)
        weights = buffers.take((nh, Tq, Tk), disp)  # (nh, Tq, Tk)
    for part in ("kernel", "scores", "weights") if dense else ("kernel",):
        spent[part] = 0.0
    group = max(1, ENGINE_CELLS // max(1, Tq * Tk))  # heads per engine call
    for h0 in range(0, nh, group):
        h1 = min(nh, h0 + group)
        check(0.15 + 0.8 * h0 / nh, f"heads {h0 + 1}-{h1}/{nh}")
        mg = bm.heads(h0, h1)  # (g, Tq, Tk) or the shared (Tq, Tk) mask, its arrays and tile map reused
        t0 = time.perf_counter()
        res = attention(q[h0:h1], k[h0:h1], v[h0:h1], mg, **kw)
        out[h0:h1] = res.out  # (g, Tq, hv)
        lse[h0:h1] = res.lse  # (g, Tq)
        t1 = time.perf_counter()
        spent["kernel"] += t1 - t0
        if dense and exact:
            if new_scores:
                np.matmul(q[h0:h1], k[h0:h1].transpose(0, 2, 1), out=scores[h0:h1])  # (g, Tq, Tk)
                scores[h0:h1] *= scale
            spent["scores"] += time.perf_counter() - t1
            weights[h0:h1] = res.weights  # (g, Tq, Tk)
        elif dense:  # float32 scores and weights in one fused engine pass
            q32, k32 = q[h0:h1].astype(np.float32), k[h0:h1].astype(np.float32)  # (g, Tq, hs), (g, Tk, hs)
            display_matrices(q32, k32, res.lse, mg if masked else None, weights=weights[h0:h1],
                             scores=scores[h0:h1] if new_scores else None,
                             given_scores=None if new_scores else scores[h0:h1], scale=scale)
            spent["weights"] += time.perf_counter() - t1
    if new_scores:
        freeze(scores)
        cache.scores.put(skey, scores)
    return out, lse, scores, weights


def _numpy_chunks(state, q, k, mask, idx, slopes, check):
    """Yield (h, c0, c1, s, w, lse) for chunks of query rows on the float64 numpy path.

    Rows are ``idx[c0:c1]`` (``c0:c1`` itself when idx is None); s (1, r, Tk) scores, w (1, r, Tk)
    weights, lse (1, r).
    """
    rule = state.score_rule
    nh, Tq, hs = q.shape
    Tk = k.shape[1]
    n = Tq if idx is None else len(idx)
    params = rule_params(rule, nh, hs) if not rule.engine else {}
    alibi = slopes is not None
    chunk = _row_chunk(Tk, (rule.hidden or hs) if rule.name == "additive" else 1)
    for h in range(nh):
        mh = mask if mask.ndim == 2 else mask[h]  # (Tq, Tk)
        for c0 in range(0, n, chunk):
            c1 = min(n, c0 + chunk)
            check(0.15 + 0.8 * (h + c0 / n) / nh, f"head {h + 1}/{nh}")
            sel = slice(c0, c1) if idx is None else idx[c0:c1]
            qh, kh = q[h:h + 1, sel], k[h:h + 1]  # (1, r, hs), (1, Tk, hs)
            if rule.engine:
                s = (qh @ kh.transpose(0, 2, 1)) * dot_scale(rule.name, hs)  # (1, r, Tk)
            else:
                s = rule_scores(rule, qh, kh, params, head=h)  # (1, r, Tk)
            if alibi and rule.name != "linear":
                qrows = np.arange(c0, c1) if idx is None else idx[c0:c1]  # (r,)
                s = s + _alibi_rows(slopes[h], qrows, Tq, Tk)[None]  # (1, r, Tk)
            mc = mh[sel][None]  # (1, r, Tk)
            if rule.name == "linear":
                w, l = linear_normalise(s, mc)
            else:
                w, l = masked_softmax(s, mc)
            yield h, c0, c1, s, w, l


def _numpy_rows(state, q, k, v, cm: CompiledMask, dense: bool, disp, idx, prev: Result | None, check, slopes):
    """out, lse, scores, weights on the float64 numpy path: every row (``idx`` None), or rows ``idx``
    patched into copies of ``prev``'s arrays (the scores do not depend on the mask: they are kept)."""
    nh, Tq, _ = q.shape
    Tk, hv = k.shape[1], v.shape[2]
    if idx is None:
        out = np.zeros((nh, Tq, hv))  # (nh, Tq, hv)
        lse = np.full((nh, Tq), -np.inf)  # (nh, Tq)
        scores = _zeros((nh, Tq, Tk), disp) if dense else None  # (nh, Tq, Tk)
        weights = _zeros((nh, Tq, Tk), disp) if dense else None  # (nh, Tq, Tk)
        for h, c0, c1, s, w, l in _numpy_chunks(state, q, k, cm.mask, None, slopes, check):
            out[h, c0:c1] = w[0] @ v[h]  # (r, hv)
            lse[h, c0:c1] = l[0]
            if dense:
                scores[h, c0:c1] = s[0]
                weights[h, c0:c1] = w[0]
        return out, lse, scores, weights
    out, lse = prev.out.copy(), prev.lse.copy()
    scores = prev.scores
    weights = _copy(prev.weights) if dense else None
    for h, c0, c1, s, w, l in _numpy_chunks(state, q, k, cm.mask, idx, slopes, check):
        r = idx[c0:c1]  # (r,)
        out[h, r] = w[0] @ v[h]  # (r, hv)
        lse[h, r] = l[0]
        if dense:
            weights[h, r] = w[0]
    return out, lse, scores, weights


def _row_weights(state, q, k, cm: CompiledMask, rows: list[int], lse, weights, on_engine: bool, slopes, check):
    """(nh, R, Tk) weights of the requested query rows, at any T."""
    nh, Tk = q.shape[0], k.shape[1]
    if not rows:
        return np.zeros((nh, 0, Tk))
    if weights is not None and not on_engine:
        return weights[:, rows]  # (nh, R, Tk)
    if on_engine:
        scale = dot_scale(state.score_rule.name, q.shape[2])
        mask = cm.mask if cm.mask is not None else cm.block_mask  # a TiledMask gives only these rows
        return recompute_weights(q, k, lse, mask, scale=scale, rows=rows)  # (nh, R, Tk) float64
    roww = np.zeros((nh, len(rows), Tk))  # (nh, R, Tk)
    for h, c0, c1, _, w, _ in _numpy_chunks(state, q, k, cm.mask, np.asarray(rows), slopes, check):
        roww[h, c0:c1] = w[0]
    return roww
