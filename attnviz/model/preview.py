"""A first picture of one head, computed before the rest of a long run: when an edit changes the
projections or the score rule every head is computed again, but the heatmap shows one head, so
:func:`head_preview` computes only that one and the heatmap redraws while the other heads, the
combined output and the diagnostics follow in the full response (timings: see benchmarks/README.md).
A preview holds the same numbers the response holds for that head, to float32 rounding.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace

import numpy as np

from attnviz.engine import attention, display_matrices
from attnviz.engine.blockmask import FULL
from attnviz.engine.runtime import one_thread
from attnviz.model import buffers
from attnviz.model.compute_cache import CompiledMask
from attnviz.model.heads import apply_overrides, project
from attnviz.model.positional import apply_rope
from attnviz.model.score_rules import dot_scale
from attnviz.model.segments import Segment
from attnviz.model.state import KernelConfig, ModelConfig, SessionState

#: a preview is made when the whole run covers at least this many (head, query, key) cells (T = 256
#: at 8 heads): below it the full run is about as quick as a preview would be
PREVIEW_CELLS = 1 << 19


class AxisLengths:
    """Tq and Tk of a result that carries ``query_labels`` and ``key_labels``."""

    @property
    def Tq(self) -> int:
        return len(self.query_labels)

    @property
    def Tk(self) -> int:
        return len(self.key_labels)


@dataclass(frozen=True, eq=False)
class HeadPreview(AxisLengths):
    """One head's display matrices, delivered before the full response; arrays read-only."""

    request_id: int  # the request this is a first part of
    head: int  # which head
    nh: int  # number of heads of the full response
    scores: np.ndarray  # (Tq, Tk) scaled scores before the mask, in the response's display dtype
    weights: np.ndarray  # (Tq, Tk) the same dtype; masked cells and fully masked rows 0
    mask: np.ndarray  # (Tq, Tk) bool, True = may attend
    query_labels: tuple[str, ...]
    key_labels: tuple[str, ...]
    query_segments: tuple[Segment, ...]
    key_segments: tuple[Segment, ...]
    cross: bool  # cross-attention (query and key sequences differ)
    seconds: float  # from the start of the run to this preview


def wanted(state: SessionState, head, Tq: int, Tk: int, dense: bool) -> bool:
    """True when a preview of ``head`` is worth computing for a full run of this state on the engine
    (the caller asks only for runs on an engine kernel)."""
    nh = state.model.nh
    if not isinstance(head, int) or isinstance(head, bool) or not 0 <= head < nh or nh < 2:
        return False
    return dense and nh * Tq * Tk >= PREVIEW_CELLS


def head_qk(model: ModelConfig, positional, Xq: np.ndarray, Xk: np.ndarray, W_q: np.ndarray, W_k: np.ndarray,
            h: int):
    """q (1, Tq, hs) and k (1, Tk, hs) of head ``h`` alone, as :func:`attnviz.model.heads.qkv` computes
    them for every head (RoPE and the head's hand-set components included). The weights do not
    depend on v."""
    if Xk is Xq:  # self-attention: one product for both
        qk = project(Xq, np.stack((W_q[h], W_k[h])))  # (2, T, hs)
        q, k = qk[:1], qk[1:]  # (1, T, hs) each
    else:
        q = project(Xq, W_q[h:h + 1])  # (1, Tq, hs)
        k = project(Xk, W_k[h:h + 1])  # (1, Tk, hs)
    if positional.kind == "rope":
        q = apply_rope(q, None, positional.base)  # (1, Tq, hs)
        k = apply_rope(k, None, positional.base)  # (1, Tk, hs)
    own = tuple(replace(o, head=0) for o in model.qk_overrides if o.head == h)
    if own:
        q, k = apply_overrides(replace(model, qk_overrides=own), q, k)
    return np.ascontiguousarray(q), np.ascontiguousarray(k)


def head_preview(request_id: int, state: SessionState, qseq, kseq, q_h, k_h, cm: CompiledMask, h: int,
                 started: float, exact_cells: int, kernel: KernelConfig | None = None) -> HeadPreview:
    """The preview of head ``h`` from its q_h (1, Tq, hs), k_h (1, Tk, hs) and the compiled mask;
    ``started`` is the run's perf_counter start; matrices of at most ``exact_cells`` cells are float64,
    as the response's are; ``kernel``: the one the run uses (default the session's)."""
    with one_thread():  # one head's few milliseconds: two threads only wait for each other on a busy machine
        return _head_preview(request_id, state, qseq, kseq, q_h, k_h, cm, h, started, exact_cells,
                             kernel or state.kernel)


def _head_preview(request_id: int, state: SessionState, qseq, kseq, q_h, k_h, cm: CompiledMask, h: int,
                  started: float, exact_cells: int, kc: KernelConfig) -> HeadPreview:
    scale = dot_scale(state.score_rule.name, q_h.shape[2])
    bm = cm.block_mask.heads(h, h + 1)
    Tq, Tk = q_h.shape[1], k_h.shape[1]
    kw = dict(scale=scale, kernel=kc.name, block_m=kc.block_m, block_n=kc.block_n)
    if Tq * Tk <= exact_cells:  # the kernel's own float64 weights and the float64 scores, as the response
        res = attention(q_h, k_h, np.zeros((1, Tk, 1)), bm, return_weights=True, **kw)  # lse does not need v
        weights = res.weights  # (1, Tq, Tk)
        scores = np.matmul(q_h, k_h.transpose(0, 2, 1))  # (1, Tq, Tk)
        scores *= scale
    else:
        # lse from the float32 kernel (half the time of the float64 one): the display pass divides every
        # row by its sum, which cancels any error of lse common to the row, so the weights agree with
        # the response's to float32 rounding and the scores (same fused pass, same tiles) are identical
        q32, k32 = q_h.astype(np.float32), k_h.astype(np.float32)  # (1, Tq, hs), (1, Tk, hs)
        res = attention(q32, k32, np.zeros((1, Tk, 1), dtype=np.float32), bm, **kw)  # lse does not need v
        weights = buffers.take((1, Tq, Tk), np.float32)  # (1, Tq, Tk)
        scores = buffers.take((1, Tq, Tk), np.float32)  # (1, Tq, Tk)
        masked = not bool(np.all(bm.tile_state == FULL))
        display_matrices(q32, k32, res.lse, bm if masked else None, weights=weights, scores=scores, scale=scale)
    mask = cm.mask if cm.mask.ndim == 2 else cm.mask[h]  # (Tq, Tk)
    for a in (weights, scores):
        a.setflags(write=False)
    return HeadPreview(request_id=request_id, head=h, nh=state.model.nh, scores=scores[0], weights=weights[0],
                       mask=mask, query_labels=qseq.labels, key_labels=kseq.labels,
                       query_segments=qseq.segments, key_segments=kseq.segments, cross=state.cross is not None,
                       seconds=time.perf_counter() - started)
