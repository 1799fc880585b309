"""Compute requests and responses: one pure function from a session snapshot to everything shown.

The UI calls :func:`run` on a worker thread after every edit, so a run never raises for a problem a
person can fix (it comes back as ``ok == False`` with ``error``), stops soon when cancelled, and
recomputes only what the edit changed (:mod:`attnviz.model.compute_cache`). Each run decides a
:class:`Plan` once and then runs its stages with it.
"""

from __future__ import annotations

import math
import time
from contextlib import contextmanager
from dataclasses import dataclass, field, replace

import numpy as np

from attnviz.cancel import Cancelled  # noqa: F401 - raised here, and re-exported for callers
from attnviz.engine import attention, display_matrices, recompute_weights
from attnviz.engine import jitcache
from attnviz.engine.blockmask import FULL, BlockMask
from attnviz.engine.runtime import blas_threads
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
from attnviz.model.state import KernelConfig, SessionState
from attnviz.sources.errors import SourceError

#: largest Tq * Tk compiled to a dense bool mask (64 MB; the panels read it too); larger
#: masks are compiled band by band into an attnviz.engine.TiledMask (tile states and the cells of partial
#: tiles only) and ``response.mask`` is None: a dense mask of 65,536 x 65,536 tokens would be 4.3 GB
DENSE_MASK_TOKENS = 8192
DENSE_MASK_CELLS = DENSE_MASK_TOKENS * DENSE_MASK_TOKENS

#: default largest Tq / Tk for which full (nh, Tq, Tk) matrices are returned: at nh=8 one float32
#: matrix of 2048 x 2048 is 134 MB, and a response holds two (scores, weights)
DENSE_LIMIT = 2048

WANTS = ("full", "summary")
ENGINE_MODES = ("always", "when-compiled", "naive-until-warm")

#: score cells per engine call: heads are grouped up to this many Tq*Tk cells, so a long run can be
#: cancelled between groups while short ones keep every head in one parallel kernel call
ENGINE_CELLS = 1 << 22

#: largest Tq * Tk whose scores and weights are float64 (T = 256 for self-attention: every worked
#: example and printed digit); larger ones are float32 display matrices, as the heatmaps draw them, from
#: one fused engine pass (attnviz.engine.display_matrices) twice as fast, within float32 rounding
EXACT_CELLS = 256 * 256

#: after a mask edit, the changed query rows are recomputed alone when they are at most this share
#: of all rows; beyond it one full batched run is cheaper than gathering and scattering rows
ROW_SHARE = 0.25

#: at most this many (head, changed row, key) cells are recomputed with the float64 formula of
#: :mod:`attnviz.model.score_rules` on the calling thread rather than by a parallel engine launch,
#: whose start-up (waking the worker threads of a busy machine) costs more than a few rows
FORMULA_CELLS = 1 << 20

#: numpy BLAS threads while a run computes (:func:`attnviz.engine.runtime.blas_threads`): the
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
    #                         (attnviz.engine.jitcache.is_warm), so a first start shows results at once;
    #                         "naive-until-warm": on the engine, but until that warm-up the naive kernel
    #                         stands in for flash on inputs of exact matrices (it compiles in about 3 s,
    #                         flash in about 20), so a first start shows the engine's result within seconds
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
    kernel_stand_in: str = ""  # the kernel asked for ("flash") when the naive kernel ran in its place while
    #                            the warm-up compiles it (engine="naive-until-warm"); "" when it ran itself
    recomputed_rows: int = 0  # query rows whose attention this run computed: Tq (all), fewer after a
    #                           mask edit (only the changed rows), 0 when everything was reused

    @property
    def dense(self) -> bool:
        """True when the full scores and weights matrices are present."""
        return self.weights is not None




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
        with blas_threads(BLAS_THREADS):
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
# the plan


@dataclass(frozen=True, eq=False)
class Plan:
    """How one run computes, decided once from the request, the sequences and the cached result."""

    kernel: KernelConfig  # the engine kernel that runs: flash whenever the mask is tiled
    kernel_stand_in: str  # the kernel asked for when the naive one stands in for it (engine="naive-until-warm")
    tiled: bool  # the mask is kept per tile (a TiledMask), never dense: flash kernel only
    stand_in: bool  # the numpy path stands in while the engine's kernels compile
    on_engine: bool  # a dot-product rule on the engine kernel; False: the float64 numpy path
    alibi: bool  # ALiBi positions: a score bias, on the numpy path only (and not for the linear rule)
    full_matrices: bool  # the (nh, Tq, Tk) scores and weights are returned
    display: type  # dtype of scores and weights: np.float64 up to EXACT_CELLS, np.float32 above
    projection_key: tuple  # key of compute_cache.projections
    result_key: tuple  # key of compute_cache.results: all a result depends on but the mask
    scores_key: tuple  # key of compute_cache.scores
    recompute: np.ndarray | None  # query rows to compute: None every row; (R,) the rows whose mask changed
    preview: bool  # request.preview_head is computed first and handed to on_preview

    @property
    def reuses_all(self) -> bool:
        """Nothing changed since the cached result: every row of it is reused."""
        return self.recompute is not None and self.recompute.size == 0


def _plan(request: ComputeRequest, qseq: Sequence, kseq: Sequence,
          wants_preview: bool) -> tuple[Plan, CompiledMask, Result | None]:
    """The plan, the compiled mask and the cached result whose rows it reuses (None: none). The mask is
    compiled here because the rows to recompute are those where it differs from the cached result's."""
    state = request.state
    rule, kernel, Tq, Tk = state.score_rule, state.kernel, qseq.T, kseq.T
    alibi = state.positional.kind == "alibi"
    tiled = Tq * Tk > DENSE_MASK_CELLS
    if tiled and not (rule.engine and not alibi):
        side = math.isqrt(DENSE_MASK_CELLS)
        raise ValueError(f"{Tq:,} x {Tk:,} tokens is beyond the {side:,} x {side:,} a dense mask is made for; the "
                         f"{rule.name} rule{' with ALiBi' if alibi else ''} needs it: use scaled_dot, dot or uniform "
                         "without ALiBi, or a shorter sequence")
    stand_in = (rule.engine and not alibi and not tiled and request.engine == "when-compiled"
                and not jitcache.is_warm())
    on_engine = rule.engine and not alibi and not stand_in
    full = request.want == "full" and Tq <= request.dense_limit and Tk <= request.dense_limit and not tiled
    display = np.float64 if Tq * Tk <= EXACT_CELLS else np.float32
    kernel_stand_in = ""
    if tiled and kernel.name != "flash":
        kernel = replace(kernel, name="flash")
    elif (on_engine and kernel.name == "flash" and full and display == np.float64
          and request.engine == "naive-until-warm" and not jitcache.is_warm()):
        kernel, kernel_stand_in = replace(kernel, name="naive"), "flash"  # its weights come out of the kernel
    projection_key = _projection_key(state, request.max_tokens)
    result_key = (projection_key, state.model.qk_overrides, rule, kernel, full, on_engine)
    previous = cache.results.peek(result_key)
    compiled, changed = _compiled_mask(state, qseq, kseq, previous, tiled)
    recompute = None
    if previous is not None and changed is not None and changed.size <= ROW_SHARE * Tq:
        recompute = changed
    preview_first = (recompute is None and wants_preview and on_engine
                     and preview.wanted(state, request.preview_head, Tq, Tk, full))
    plan = Plan(kernel=kernel, kernel_stand_in=kernel_stand_in, tiled=tiled, stand_in=stand_in, on_engine=on_engine, alibi=alibi, full_matrices=full, display=display,
                projection_key=projection_key, result_key=result_key,
                scores_key=(projection_key, state.model.qk_overrides, rule.name, display), recompute=recompute,
                preview=preview_first)
    return plan, compiled, previous


def _mask_notes(state: SessionState, plan: Plan, cm: CompiledMask, Tq: int, Tk: int) -> list[str]:
    """The kernel that stood in for one that needs a dense mask, and the fully masked rows."""
    notes = []
    if plan.tiled and state.kernel.name != "flash":
        notes.append(f"the {state.kernel.name} kernel needs the dense mask, which is not made for {Tq:,} x {Tk:,} "
                     "tokens: this ran on the flash kernel")
    n_full = int(np.count_nonzero(cm.fully))
    if n_full:
        where = "query rows" if cm.fully.ndim == 1 else "(head, query) rows"
        notes.append(f"{n_full} {where} are fully masked: their weights and output are 0 and lse is -inf")
    return notes


def _path_notes(request: ComputeRequest, plan: Plan, Tq: int, Tk: int, dropped_rows: bool) -> list[str]:
    """What a person should know about how the attention is computed and what is returned."""
    rule = request.state.score_rule
    notes = []
    if not plan.full_matrices and request.want == "full":
        notes.append(f"T = {max(Tq, Tk):,} exceeds the dense limit of {request.dense_limit:,}: full score and "
                     "weight matrices are not materialised (use the overview and selected rows)")
    if dropped_rows:
        notes.append("some requested rows are outside the query sequence and were ignored")
    if plan.alibi and rule.engine:
        notes.append("ALiBi adds a bias to the scores, which the engine kernels do not take: this ran on the "
                     "float64 numpy reference path")
    elif plan.alibi and rule.name != "linear":
        notes.append("ALiBi bias added to the scores of the " + rule.name + " rule")
    if not rule.engine:
        notes.append(f"the {rule.name} score rule runs on the float64 numpy path, not on an engine kernel")
    if plan.stand_in:
        notes.append("the engine's kernels are being compiled (the first start after installing): this result "
                     "comes from the float64 numpy path; the engine takes over when they are ready")
    if plan.kernel_stand_in:
        notes.append(f"the {plan.kernel_stand_in} kernel is being compiled (the first start after installing): this "
                     f"result comes from the engine's naive kernel, the same attention; {plan.kernel_stand_in} "
                     "takes over when it is ready")
    if plan.alibi and rule.name == "linear":
        notes.append("ALiBi is a softmax score bias: it is not applied to linear attention")
    return notes


# ------------------------------------------------------------------------------------------------
# the run


class _Stages:
    """Cancellation checks, progress reports and the seconds of each stage of one run."""

    def __init__(self, progress, is_cancelled):
        self.progress = progress
        self.is_cancelled = is_cancelled
        self.timings: dict[str, float] = {}
        self.started = time.perf_counter()

    def check(self, frac: float, stage: str) -> None:
        if self.is_cancelled is not None and self.is_cancelled():
            raise Cancelled()
        if self.progress is not None:
            self.progress(float(frac), stage)

    @contextmanager
    def timed(self, name: str):
        t0 = time.perf_counter()
        yield
        self.timings[name] = time.perf_counter() - t0


@dataclass(frozen=True, eq=False)
class _Attention:
    """The attention of every query row (rows not recomputed are the cached result's)."""

    out: np.ndarray  # (nh, Tq, hv)
    lse: np.ndarray  # (nh, Tq)
    scores: np.ndarray | None  # (nh, Tq, Tk) display dtype, or None (no full matrices)
    weights: np.ndarray | None  # (nh, Tq, Tk) display dtype, or None


def _run(request: ComputeRequest, progress, is_cancelled, on_preview) -> ComputeResponse:
    state = request.state
    stages = _Stages(progress, is_cancelled)
    messages: list[str] = []

    with stages.timed("prepare"):
        stages.check(0.0, "prepare")
        qseq, kseq = assemble(state, messages, request.max_tokens)
    Tq, Tk = qseq.T, kseq.T

    with stages.timed("mask"):
        stages.check(0.05, "mask")
        plan, cm, previous = _plan(request, qseq, kseq, on_preview is not None)
        messages += _mask_notes(state, plan, cm, Tq, Tk)

    stages.check(0.1, "project")
    if plan.preview:
        with stages.timed("preview"):
            on_preview(_head_preview(request, plan, qseq, kseq, cm, stages.started))
        stages.check(0.12, "project")
    with stages.timed("project"):
        proj = _projection(state, qseq, kseq, plan.projection_key)
        q, k = apply_overrides(state.model, proj.q, proj.k, messages)  # (nh, Tq, hs), (nh, Tk, hs)

    selected = [r for r in request.rows if 0 <= r < Tq]
    messages += _path_notes(request, plan, Tq, Tk, dropped_rows=len(selected) != len(request.rows))
    slopes = alibi_slopes(state.model.nh) if plan.alibi else None  # (nh,)

    with stages.timed("attention"):
        att = _attend(plan, state.score_rule, q, k, proj.v, cm, previous, slopes, stages)
        row_weights = _row_weights(state.score_rule, q, k, cm, selected, att.lse, att.weights, plan.on_engine, slopes,
                                   lambda frac, stage: stages.check(0.95, "selected rows"))  # (nh, R, Tk)

    with stages.timed("combine"):
        stages.check(0.95, "combine")
        combined = _combine(plan, att.out, proj.W.W_o, previous)  # (Tq, d_model)
    # q, k, v, lse and the mask stay writable: numba compiles a separate kernel for read-only arrays
    freeze(att.out, combined, att.scores, att.weights)
    if not plan.reuses_all:
        cache.results.put(plan.result_key, Result(cm, att.out, att.lse, combined, att.scores, att.weights))
    if progress is not None:
        progress(1.0, "done")
    bm = cm.block_mask
    return ComputeResponse(
        request_id=request.request_id, ok=True, messages=tuple(messages), cross=state.cross is not None,
        query_labels=qseq.labels, key_labels=kseq.labels, query_segments=qseq.segments,
        key_segments=kseq.segments, query_tokens=qseq.tokens, key_tokens=kseq.tokens,
        X=proj.Xq, X_k=proj.Xk, q=q, k=k, v=proj.v, projections=proj.W, scores=att.scores, weights=att.weights,
        row_weights={r: row_weights[:, i] for i, r in enumerate(selected)}, output=att.out, lse=att.lse,
        combined=combined, mask=cm.mask, block_mask=bm, tile_counts=bm.counts(), sparsity=bm.sparsity(),
        fully_masked=cm.fully, path=f"engine:{plan.kernel.name}" if plan.on_engine else "numpy",
        timings=stages.timings, stand_in=plan.stand_in, kernel_stand_in=plan.kernel_stand_in,
        recomputed_rows=Tq if plan.recompute is None else int(plan.recompute.size))


def _head_preview(request: ComputeRequest, plan: Plan, qseq: Sequence, kseq: Sequence, cm: CompiledMask,
                  started: float) -> preview.HeadPreview:
    """The display matrices of ``request.preview_head``, from the cached projections when there are
    some, else from that head's own q and k (W_q and W_k alone)."""
    state, h = request.state, request.preview_head
    p = cache.projections.peek(plan.projection_key)
    if p is None:
        q_h, k_h = preview.head_qk(state.model, state.positional, *_rows(state, qseq, kseq),
                                   *query_key_weights(_base_model(state)), h)  # (1, Tq, hs), (1, Tk, hs)
    else:
        q_h, k_h = (a[h:h + 1] for a in apply_overrides(state.model, p.q, p.k))  # (1, Tq, hs), (1, Tk, hs)
    return preview.head_preview(request.request_id, state, qseq, kseq, q_h, k_h, cm, h, started, EXACT_CELLS,
                                plan.kernel)


def _attend(plan: Plan, rule, q, k, v, cm: CompiledMask, previous: Result | None, slopes,
            stages: _Stages) -> _Attention:
    """out, lse, scores and weights of every row: the rows of ``plan.recompute`` computed (every row
    when None) and the others taken from ``previous``."""
    if plan.reuses_all:
        return _Attention(previous.out, previous.lse, previous.scores, previous.weights)
    if not plan.on_engine:
        return _numpy_rows(plan, rule, q, k, v, cm, previous, slopes, stages.check)
    if plan.recompute is not None:
        return _engine_changed_rows(plan, rule, q, k, v, cm, previous, stages.check)
    spent: dict[str, float] = {}
    att = _engine_all_rows(plan, rule, q, k, v, cm, stages.check, spent)
    stages.timings.update({f"attention.{part}": seconds for part, seconds in spent.items()})
    return att


def _combine(plan: Plan, out: np.ndarray, W_o: np.ndarray, previous: Result | None) -> np.ndarray:
    """Concat(heads) W^O (Tq, d_model) of the recomputed rows, the others from ``previous``; ValueError
    when a recomputed row is not finite."""
    rows = plan.recompute
    if rows is None:
        combined = combine(out, W_o)  # (Tq, d_model)
        finite = np.all(np.isfinite(out)) and np.all(np.isfinite(combined))
    elif rows.size:
        combined = previous.combined.copy()  # (Tq, d_model)
        combined[rows] = combine(out[:, rows], W_o)  # (R, d_model)
        finite = np.all(np.isfinite(out[:, rows])) and np.all(np.isfinite(combined[rows]))
    else:
        combined, finite = previous.combined, True
    if not finite:
        raise ValueError("the computation produced non-finite values: the scores overflow; "
                         "use smaller embeddings or weights")
    return combined


def _copy(a: np.ndarray) -> np.ndarray:
    """A writable copy of ``a`` in a recycled buffer (:mod:`attnviz.model.buffers`)."""
    out = buffers.take(a.shape, a.dtype)
    np.copyto(out, a)
    return out


def _zeros(shape: tuple[int, ...], dtype) -> np.ndarray:
    out = buffers.take(shape, dtype)
    out.fill(0)
    return out


def _engine_args(plan: Plan, rule, q: np.ndarray, cm: CompiledMask):
    """(scale, whether some cell is masked, keyword arguments of attnviz.engine.attention)."""
    kernel = plan.kernel
    scale = dot_scale(rule.name, q.shape[2])
    masked = not bool(np.all(cm.block_mask.tile_state == FULL))
    exact = plan.display == np.float64  # small matrices: the kernel's own float64 weights
    kw = dict(scale=scale, kernel=kernel.name, block_m=kernel.block_m, block_n=kernel.block_n,
              return_weights=plan.full_matrices and exact)
    return scale, masked, kw


def _engine_changed_rows(plan: Plan, rule, q, k, v, cm: CompiledMask, previous: Result, check) -> _Attention:
    """After a mask edit on the engine path: the rows ``plan.recompute`` patched into copies of
    ``previous``'s arrays (the scores do not depend on the mask: they are kept)."""
    idx, mask = plan.recompute, cm.mask  # (R,)
    nh, Tk = q.shape[0], k.shape[1]
    scale, masked, kw = _engine_args(plan, rule, q, cm)
    check(0.15, f"{idx.size} changed rows")
    out, lse = previous.out.copy(), previous.lse.copy()  # (nh, Tq, hv), (nh, Tq)
    scores, weights = previous.scores, None
    if nh * idx.size * Tk <= FORMULA_CELLS:  # a few rows: the float64 formula, on this thread
        w_r = np.empty((nh, idx.size, Tk))  # (nh, R, Tk)
        for h, c0, c1, _, w, l in _numpy_chunks(rule, q, k, mask, idx, None, check):
            w_r[h, c0:c1] = w[0]
            lse[h, idx[c0:c1]] = l[0]
            out[h, idx[c0:c1]] = w[0] @ v[h]  # (r, hv)
    else:
        mr = mask[idx] if mask.ndim == 2 else mask[:, idx]  # (R, Tk) or (nh, R, Tk)
        res = attention(q[:, idx], k, v, mr, **kw)
        out[:, idx] = res.out  # (nh, R, hv)
        lse[:, idx] = res.lse  # (nh, R)
        w_r = res.weights  # (nh, R, Tk) or None
    if plan.full_matrices:
        weights = _copy(previous.weights)  # (nh, Tq, Tk)
        if plan.display == np.float64:
            weights[:, idx] = w_r  # (nh, R, Tk)
        else:
            w_r = np.empty((nh, idx.size, Tk), dtype=plan.display)  # (nh, R, Tk)
            mr = mask[idx] if mask.ndim == 2 else mask[:, idx]  # (R, Tk) or (nh, R, Tk)
            display_matrices(q[:, idx], k, lse[:, idx], mr if masked else None, weights=w_r,
                             given_scores=np.ascontiguousarray(scores[:, idx]), scale=scale)
            weights[:, idx] = w_r
    return _Attention(out, lse, scores, weights)


def _engine_all_rows(plan: Plan, rule, q, k, v, cm: CompiledMask, check, spent: dict) -> _Attention:
    """Every row on the engine kernel, heads grouped up to ENGINE_CELLS per call; adds the seconds of
    its parts (``kernel``, ``scores``, ``weights``) to ``spent``."""
    nh, Tq, _ = q.shape
    Tk, hv = k.shape[1], v.shape[2]
    full, exact = plan.full_matrices, plan.display == np.float64
    scale, masked, kw = _engine_args(plan, rule, q, cm)
    out = np.empty((nh, Tq, hv))  # (nh, Tq, hv)
    lse = np.empty((nh, Tq))  # (nh, Tq)
    scores = weights = None
    new_scores = False
    if full:
        scores = cache.scores.peek(plan.scores_key)
        if scores is None:
            scores, new_scores = buffers.take((nh, Tq, Tk), plan.display), True  # (nh, Tq, Tk)
        weights = buffers.take((nh, Tq, Tk), plan.display)  # (nh, Tq, Tk)
    for part in ("kernel", "scores", "weights") if full else ("kernel",):
        spent[part] = 0.0
    group = max(1, ENGINE_CELLS // max(1, Tq * Tk))  # heads per engine call
    for h0 in range(0, nh, group):
        h1 = min(nh, h0 + group)
        check(0.15 + 0.8 * h0 / nh, f"heads {h0 + 1}-{h1}/{nh}")
        mg = cm.block_mask.heads(h0, h1)  # (g, Tq, Tk) or the shared (Tq, Tk) mask, its arrays and tile map reused
        t0 = time.perf_counter()
        res = attention(q[h0:h1], k[h0:h1], v[h0:h1], mg, **kw)
        out[h0:h1] = res.out  # (g, Tq, hv)
        lse[h0:h1] = res.lse  # (g, Tq)
        t1 = time.perf_counter()
        spent["kernel"] += t1 - t0
        if full and exact:
            if new_scores:
                np.matmul(q[h0:h1], k[h0:h1].transpose(0, 2, 1), out=scores[h0:h1])  # (g, Tq, Tk)
                scores[h0:h1] *= scale
            spent["scores"] += time.perf_counter() - t1
            weights[h0:h1] = res.weights  # (g, Tq, Tk)
        elif full:  # float32 scores and weights in one fused engine pass
            q32, k32 = q[h0:h1].astype(np.float32), k[h0:h1].astype(np.float32)  # (g, Tq, hs), (g, Tk, hs)
            display_matrices(q32, k32, res.lse, mg if masked else None, weights=weights[h0:h1],
                             scores=scores[h0:h1] if new_scores else None,
                             given_scores=None if new_scores else scores[h0:h1], scale=scale)
            spent["weights"] += time.perf_counter() - t1
    if new_scores:
        freeze(scores)
        cache.scores.put(plan.scores_key, scores)
    return _Attention(out, lse, scores, weights)


def _numpy_chunks(rule, q, k, mask, idx, slopes, check):
    """Yield (h, c0, c1, s, w, lse) for chunks of query rows on the float64 numpy path.

    Rows are ``idx[c0:c1]`` (``c0:c1`` itself when idx is None); s (1, r, Tk) scores, w (1, r, Tk)
    weights, lse (1, r).
    """
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


def _numpy_rows(plan: Plan, rule, q, k, v, cm: CompiledMask, previous: Result | None, slopes, check) -> _Attention:
    """The float64 numpy path: every row (``plan.recompute`` None), or the rows ``plan.recompute``
    patched into copies of ``previous``'s arrays (the scores do not depend on the mask: they are kept)."""
    nh, Tq, _ = q.shape
    Tk, hv = k.shape[1], v.shape[2]
    idx, full = plan.recompute, plan.full_matrices
    if idx is None:
        out = np.zeros((nh, Tq, hv))  # (nh, Tq, hv)
        lse = np.full((nh, Tq), -np.inf)  # (nh, Tq)
        scores = _zeros((nh, Tq, Tk), plan.display) if full else None  # (nh, Tq, Tk)
        weights = _zeros((nh, Tq, Tk), plan.display) if full else None  # (nh, Tq, Tk)
        for h, c0, c1, s, w, l in _numpy_chunks(rule, q, k, cm.mask, None, slopes, check):
            out[h, c0:c1] = w[0] @ v[h]  # (r, hv)
            lse[h, c0:c1] = l[0]
            if full:
                scores[h, c0:c1] = s[0]
                weights[h, c0:c1] = w[0]
        return _Attention(out, lse, scores, weights)
    out, lse = previous.out.copy(), previous.lse.copy()
    weights = _copy(previous.weights) if full else None
    for h, c0, c1, s, w, l in _numpy_chunks(rule, q, k, cm.mask, idx, slopes, check):
        r = idx[c0:c1]  # (r,)
        out[h, r] = w[0] @ v[h]  # (r, hv)
        lse[h, r] = l[0]
        if full:
            weights[h, r] = w[0]
    return _Attention(out, lse, previous.scores, weights)


def _row_weights(rule, q, k, cm: CompiledMask, rows: list[int], lse, weights, on_engine: bool, slopes, check):
    """(nh, R, Tk) weights of the requested query rows, at any T."""
    nh, Tk = q.shape[0], k.shape[1]
    if not rows:
        return np.zeros((nh, 0, Tk))
    if weights is not None and (not on_engine or weights.dtype == np.float64):
        return weights[:, rows]  # (nh, R, Tk): the numpy path's, or the kernel's own float64 weights
    if on_engine:
        scale = dot_scale(rule.name, q.shape[2])
        mask = cm.mask if cm.mask is not None else cm.block_mask  # a TiledMask gives only these rows
        return recompute_weights(q, k, lse, mask, scale=scale, rows=rows)  # (nh, R, Tk) float64
    roww = np.zeros((nh, len(rows), Tk))  # (nh, R, Tk)
    for h, c0, c1, _, w, _ in _numpy_chunks(rule, q, k, cm.mask, np.asarray(rows), slopes, check):
        roww[h, c0:c1] = w[0]
    return roww
