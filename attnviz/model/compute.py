"""Compute requests and responses: one pure function from a session snapshot to everything shown.

``run(request, progress=None, is_cancelled=None) -> ComputeResponse`` is what the UI calls on a
worker thread (and what tests and the CLI call directly). It never raises for bad input: a problem a
person can fix (empty sequence, corrupt image, RoPE with an odd head size, ...) comes back as
``response.ok == False`` with ``response.error`` and the same text in ``response.messages``.
Cancellation is checked between stages, between heads and between query-row chunks; a cancelled run
returns ``response.cancelled == True`` with no matrices.

Pipeline: sources -> :mod:`attnviz.model.sequence` (cached tokenising / patching) -> X + additive
positions -> :mod:`attnviz.model.heads` (q, k, v; RoPE; hand-set components) -> mask design compiled
to a dense bool mask and a BlockMask -> per head:

* dot-product rules (scaled_dot, dot, uniform) without ALiBi: the engine kernel of
  ``state.kernel`` (flash by default), with ``scale`` 1/sqrt(hs), 1 or 0;
* ALiBi (a score bias the engine does not take) and the additive, multiplicative and linear rules:
  the float64 numpy path of :mod:`attnviz.model.score_rules`, in query-row chunks; a message says so;

-> ``combined = Concat(heads) W^O``.

Full (nh, Tq, Tk) matrices (``scores``, ``weights``) are materialised only when Tq and Tk are both at
most ``request.dense_limit`` and ``request.want == "full"``; otherwise they are None, a message says
so, and ``row_weights`` still holds the weights of the requested ``rows`` (e.g. the selected query).
``scores`` are the scaled scores before the mask (ALiBi bias included); masked cells of ``weights``
are exactly 0; a fully masked row has weights 0, output 0 and lse -inf.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from attnviz.engine import attention
from attnviz.engine.blockmask import BlockMask
from attnviz.model.heads import Weights, combine, init_weights, qkv
from attnviz.model.positional import alibi_slopes
from attnviz.model.score_rules import (dot_scale, linear_normalise, masked_softmax, rule_params,
                                       rule_scores)
from attnviz.model.segments import Segment
from attnviz.model.sequence import MAX_TOKENS, Sequence, TokenInfo, assemble, with_positions
from attnviz.model.state import SessionState
from attnviz.sources.errors import SourceError

#: default largest Tq / Tk for which full (nh, Tq, Tk) matrices are returned: at nh=8 one float64
#: matrix of 2048 x 2048 is 268 MB, and a response holds two (scores, weights)
DENSE_LIMIT = 2048

WANTS = ("full", "summary")

#: score cells per engine call: heads are grouped up to this many Tq*Tk cells, so a long run can be
#: cancelled between groups while short ones keep every head in one parallel kernel call
ENGINE_CELLS = 1 << 22


@dataclass(frozen=True, eq=False)
class ComputeRequest:
    """An immutable snapshot of what to compute."""

    request_id: int  # echoed in the response; the UI drops responses that are not the newest
    state: SessionState  # the session snapshot
    want: str = "full"  # "full": matrices when small enough; "summary": never the (nh, Tq, Tk) matrices
    rows: tuple[int, ...] = ()  # query rows whose weights are returned in row_weights at any size
    dense_limit: int = DENSE_LIMIT  # largest Tq / Tk for which full matrices are returned
    max_tokens: int = MAX_TOKENS  # largest sequence accepted (a clear error beyond)

    def __post_init__(self):
        if self.want not in WANTS:
            raise ValueError(f"want must be one of {WANTS}, got {self.want!r}")
        object.__setattr__(self, "rows", tuple(int(r) for r in self.rows))


@dataclass(frozen=True, eq=False)
class ComputeResponse:
    """Everything a panel draws for one request. Arrays are float64 unless noted."""

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
    scores: np.ndarray | None = None  # (nh, Tq, Tk) scaled scores before the mask, or None (large T)
    weights: np.ndarray | None = None  # (nh, Tq, Tk), or None (large T)
    row_weights: dict = field(default_factory=dict)  # query row -> (nh, Tk) weights of request.rows
    output: np.ndarray | None = None  # (nh, Tq, hv) per-head outputs
    lse: np.ndarray | None = None  # (nh, Tq); -inf for a fully masked row
    combined: np.ndarray | None = None  # (Tq, d_model) = Concat(heads) W^O
    mask: np.ndarray | None = None  # (Tq, Tk) or (nh, Tq, Tk) bool, True = may attend
    block_mask: BlockMask | None = None  # tile map for the session's BLOCK_M x BLOCK_N
    tile_counts: dict = field(default_factory=dict)  # {"empty", "partial", "full"} tile numbers
    sparsity: float = 0.0  # percent of tiles the flash kernel skips
    fully_masked: np.ndarray | None = None  # (Tq,) or (nh, Tq) bool: rows with no allowed key
    path: str = ""  # what ran: "engine:flash", "engine:reference", "numpy" ...
    timings: dict = field(default_factory=dict)  # stage -> seconds

    @property
    def Tq(self) -> int:
        return len(self.query_labels)

    @property
    def Tk(self) -> int:
        return len(self.key_labels)

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


def _alibi_rows(slope: float, i0: int, i1: int, Tq: int, Tk: int) -> np.ndarray:
    """Rows i0:i1 of one head's ALiBi bias, as ``positional.alibi_bias`` (queries end-aligned): (r, Tk)."""
    qpos = (Tk - Tq) + np.arange(i0, i1, dtype=np.float64)  # (r,)
    kpos = np.arange(Tk, dtype=np.float64)  # (Tk,)
    return -slope * np.abs(qpos[:, None] - kpos[None, :])  # (r, Tk)


def run(request: ComputeRequest, progress=None, is_cancelled=None) -> ComputeResponse:
    """Compute everything for ``request`` (pure; see the module docstring)."""
    try:
        return _run(request, progress, is_cancelled)
    except Cancelled:
        return ComputeResponse(request.request_id, ok=False, cancelled=True, messages=("computation cancelled",))
    except (SourceError, ValueError, KeyError) as exc:
        msg = str(exc) if not isinstance(exc, KeyError) else f"unknown name {exc}"
        return ComputeResponse(request.request_id, ok=False, error=msg, messages=(msg,))
    except MemoryError:
        msg = "not enough memory for this sequence: use fewer tokens, fewer heads or the summary view"
        return ComputeResponse(request.request_id, ok=False, error=msg, messages=(msg,))


def _run(request: ComputeRequest, progress, is_cancelled) -> ComputeResponse:
    state = request.state
    messages: list[str] = []
    timings: dict[str, float] = {}

    def check(frac: float, stage: str):
        if is_cancelled is not None and is_cancelled():
            raise Cancelled()
        if progress is not None:
            progress(float(frac), stage)

    t0 = time.perf_counter()
    check(0.0, "prepare")
    qseq, kseq = assemble(state, messages, request.max_tokens)
    Xq = with_positions(state, qseq)  # (Tq, d_model)
    Xk = Xq if kseq is qseq else with_positions(state, kseq)  # (Tk, d_model)
    timings["prepare"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    check(0.05, "project")
    model = state.model
    nh, hs, hv = model.nh, model.head_size, model.value_size
    W = init_weights(model)
    q, k, v = qkv(model, state.positional, Xq, Xk, W, messages)  # (nh, Tq, hs), (nh, Tk, hs), (nh, Tk, hv)
    timings["project"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    check(0.1, "mask")
    Tq, Tk = qseq.T, kseq.T
    mask = compile_mask(state, qseq, kseq)  # (Tq, Tk) or (nh, Tq, Tk)
    kc = state.kernel
    bm = BlockMask.from_dense(mask, kc.block_m, kc.block_n)
    fully = ~mask.any(axis=-1)  # (Tq,) or (nh, Tq)
    n_full = int(np.count_nonzero(fully))
    if n_full:
        where = "query rows" if mask.ndim == 2 else "(head, query) rows"
        messages.append(f"{n_full} {where} are fully masked: their weights and output are 0 and lse is -inf")
    timings["mask"] = time.perf_counter() - t0

    dense = request.want == "full" and Tq <= request.dense_limit and Tk <= request.dense_limit
    if not dense and request.want == "full":
        messages.append(f"T = {max(Tq, Tk):,} exceeds the dense limit of {request.dense_limit:,}: full score and "
                        "weight matrices are not materialised (use the overview and selected rows)")
    rows = [r for r in request.rows if 0 <= r < Tq]
    if len(rows) != len(request.rows):
        messages.append("some requested rows are outside the query sequence and were ignored")

    rule = state.score_rule
    alibi = state.positional.kind == "alibi"
    on_engine = rule.engine and not alibi
    slopes = alibi_slopes(nh) if alibi else None  # (nh,)
    if alibi and rule.engine:
        messages.append("ALiBi adds a bias to the scores, which the engine kernels do not take: this ran on the "
                        "float64 numpy reference path")
    elif alibi:
        messages.append("ALiBi bias added to the scores of the " + rule.name + " rule")
    if not rule.engine:
        messages.append(f"the {rule.name} score rule runs on the float64 numpy path, not on an engine kernel")
    path = f"engine:{kc.name}" if on_engine else "numpy"

    t0 = time.perf_counter()
    out = np.zeros((nh, Tq, hv))  # (nh, Tq, hv)
    lse = np.full((nh, Tq), -np.inf)  # (nh, Tq)
    scores = np.zeros((nh, Tq, Tk)) if dense else None  # (nh, Tq, Tk)
    weights = np.zeros((nh, Tq, Tk)) if dense else None  # (nh, Tq, Tk)
    roww = np.zeros((nh, len(rows), Tk))  # (nh, R, Tk)
    params = rule_params(rule, nh, hs) if not rule.engine else {}
    if on_engine:
        scale = dot_scale(rule.name, hs)
        group = max(1, ENGINE_CELLS // max(1, Tq * Tk))  # heads per engine call
        for h0 in range(0, nh, group):
            h1 = min(nh, h0 + group)
            check(0.15 + 0.8 * h0 / nh, f"heads {h0 + 1}-{h1}/{nh}")
            mg = bm if mask.ndim == 2 else mask[h0:h1]  # BlockMask (tile map reused) or (g, Tq, Tk)
            res = attention(q[h0:h1], k[h0:h1], v[h0:h1], mg, scale=scale, kernel=kc.name, block_m=kc.block_m,
                            block_n=kc.block_n, return_weights=dense)
            out[h0:h1] = res.out  # (g, Tq, hv)
            lse[h0:h1] = res.lse  # (g, Tq)
            if dense:
                weights[h0:h1] = res.weights  # (g, Tq, Tk)
                scores[h0:h1] = (q[h0:h1] @ k[h0:h1].transpose(0, 2, 1)) * scale  # (g, Tq, Tk)
            if rows:
                s_r = (q[h0:h1][:, rows] @ k[h0:h1].transpose(0, 2, 1)) * scale  # (g, R, Tk)
                l_r = lse[h0:h1, rows]  # (g, R)
                with np.errstate(over="ignore"):  # masked cells may exceed lse; they are zeroed below
                    w_r = np.exp(s_r - np.where(np.isfinite(l_r), l_r, 0.0)[..., None])  # (g, R, Tk)
                m_r = mask[rows] if mask.ndim == 2 else mask[h0:h1][:, rows]  # (R, Tk) or (g, R, Tk)
                roww[h0:h1] = np.where(m_r, w_r, 0.0)  # (g, R, Tk)
    for h in range(nh if not on_engine else 0):
        mh = mask if mask.ndim == 2 else mask[h]  # (Tq, Tk)
        # numpy path, in query-row chunks
        chunk = _row_chunk(Tk, (rule.hidden or hs) if rule.name == "additive" else 1)
        for i0 in range(0, Tq, chunk):
            i1 = min(Tq, i0 + chunk)
            check(0.15 + 0.8 * (h + i0 / Tq) / nh, f"head {h + 1}/{nh}")
            qh, kh = q[h:h + 1, i0:i1], k[h:h + 1]  # (1, r, hs), (1, Tk, hs)
            if rule.engine:
                s = (qh @ kh.transpose(0, 2, 1)) * dot_scale(rule.name, hs)  # (1, r, Tk)
            else:
                s = rule_scores(rule, qh, kh, params, head=h)  # (1, r, Tk)
            if alibi and rule.name != "linear":
                s = s + _alibi_rows(slopes[h], i0, i1, Tq, Tk)[None]  # (1, r, Tk)
            mc = mh[i0:i1][None]  # (1, r, Tk)
            if rule.name == "linear":
                w, l = linear_normalise(s, mc)
            else:
                w, l = masked_softmax(s, mc)
            out[h, i0:i1] = w[0] @ v[h]  # (r, hv)
            lse[h, i0:i1] = l[0]
            if dense:
                scores[h, i0:i1] = s[0]
                weights[h, i0:i1] = w[0]
            for ri, r in enumerate(rows):
                if i0 <= r < i1:
                    roww[h, ri] = w[0, r - i0]
    if alibi and rule.name == "linear":
        messages.append("ALiBi is a softmax score bias: it is not applied to linear attention")
    timings["attention"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    check(0.95, "combine")
    combined = combine(out, W.W_o)  # (Tq, d_model)
    timings["combine"] = time.perf_counter() - t0
    if not (np.all(np.isfinite(out)) and np.all(np.isfinite(combined))):
        raise ValueError("the computation produced non-finite values: the scores overflow; "
                         "use smaller embeddings or weights")
    if progress is not None:
        progress(1.0, "done")
    return ComputeResponse(
        request_id=request.request_id, ok=True, messages=tuple(messages), cross=state.cross is not None,
        query_labels=qseq.labels, key_labels=kseq.labels, query_segments=qseq.segments,
        key_segments=kseq.segments, query_tokens=qseq.tokens, key_tokens=kseq.tokens,
        X=Xq, X_k=Xk, q=q, k=k, v=v, projections=W, scores=scores, weights=weights,
        row_weights={r: roww[:, i] for i, r in enumerate(rows)}, output=out, lse=lse, combined=combined,
        mask=mask, block_mask=bm, tile_counts=bm.counts(), sparsity=bm.sparsity(), fully_masked=fully,
        path=path, timings=timings)
