"""What the window's panels draw, taken out of a ``ComputeResponse``: matrices, rows and cells, pure
numpy. For long sequences (``response.weights is None``) a row or cell is recomputed from ``q``, ``k``
and ``lse`` as ``w_ij = exp(q_i . k_j * scale - lse_i)`` on allowed cells, which is exact for the
dot-product rules that ran on an engine kernel; :func:`engine_scale` says when that holds.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attnviz.model.display.cell_geometry import AXIS_LABEL_CHARS, compact_label  # noqa: F401 - callers import them here
from attnviz.model.score_rules import dot_scale

MATRICES = ("weights", "scores", "output", "mask")


@dataclass(frozen=True)
class MatrixView:
    """One 2-D matrix ready for the heatmap widget."""

    values: np.ndarray  # (Tq, Tk) or (Tq, hv) float
    allowed: np.ndarray | None  # (Tq, Tk) bool, False = masked; None: nothing masked
    col_labels: tuple[str, ...]  # key labels, or value dimensions for the output
    value_label: str  # colorbar label: "weight", "score", "output", "allowed"
    per_key: bool  # True when columns are keys (bands and key readout make sense)


def n_heads(resp) -> int:
    """Number of heads in a response (0 when it holds no projections)."""
    return 0 if resp is None or resp.q is None else int(resp.q.shape[0])


def check_head(resp, head) -> int | str:
    """``head`` when it names a head of ``resp`` or "mean"; else head 0 (a stale selection)."""
    if head == "mean":
        return "mean"
    return head if isinstance(head, int) and 0 <= head < n_heads(resp) else 0


def head_mask(resp, head) -> np.ndarray:
    """(Tq, Tk) bool allowed cells of ``head`` ("mean": allowed in any head); ValueError for a long
    sequence whose mask is only held per tile (``response.mask`` None)."""
    m = resp.mask
    if m is None:
        raise ValueError(f"the mask of {resp.Tq:,} x {resp.Tk:,} tokens is held per tile, not cell by cell")
    if m.ndim == 2:
        return m
    return m.any(axis=0) if head == "mean" else m[head]


def mask_rows(resp, rows) -> np.ndarray:
    """(nh or 1, R, Tk) bool allowed cells of query ``rows``, from the dense mask or, for a long
    sequence, from its TiledMask (``response.block_mask``)."""
    idx = np.asarray(rows, dtype=np.int64).reshape(-1)  # (R,)
    m = resp.mask
    if m is None:
        return resp.block_mask.rows(idx)  # (nh or 1, R, Tk)
    return m[idx][None] if m.ndim == 2 else m[:, idx]


def fully_masked_rows(resp, head) -> np.ndarray | None:
    """(Tq,) bool rows with no allowed key for ``head`` ("mean": in every head); None if unknown."""
    f = resp.fully_masked
    if f is None:
        return None
    if f.ndim == 1:
        return f
    return f.all(axis=0) if head == "mean" else f[head]


def _pick(stack: np.ndarray, head) -> np.ndarray:
    """(nh, A, B) -> (A, B): one head or the mean over heads."""
    return stack.mean(axis=0) if head == "mean" else stack[head]


def matrix_view(resp, matrix: str, head) -> MatrixView | None:
    """The ``matrix`` of ``head`` for the heatmap, or None when the response does not hold it
    (scores and weights of a long sequence: use the overview)."""
    if matrix not in MATRICES:
        raise ValueError(f"unknown matrix {matrix!r}; choose one of {', '.join(MATRICES)}")
    head = check_head(resp, head)
    keys = tuple(resp.key_labels)
    if matrix == "output":
        out = _pick(resp.output, head)  # (Tq, hv)
        return MatrixView(out, None, tuple(f"d{i}" for i in range(out.shape[1])), "output", False)
    if matrix == "mask":
        if resp.mask is None:
            return None  # a long sequence's mask is held per tile
        allowed = head_mask(resp, head)  # (Tq, Tk)
        return MatrixView(allowed.astype(np.float32), allowed, keys, "allowed", True)
    stack = resp.weights if matrix == "weights" else resp.scores
    if stack is None:
        return None
    return MatrixView(_pick(stack, head), head_mask(resp, head), keys, "weight" if matrix == "weights" else "score",
                      True)


_last_compact: list = [None, 0, ()]  # (labels, max_chars, result) of the last call


def compact_labels(labels, max_chars: int = AXIS_LABEL_CHARS) -> tuple[str, ...]:
    """:func:`compact_label` of every label (the last answer is kept: consecutive responses of one
    sequence share their label tuple, and 1024 labels take about 1 ms)."""
    last = _last_compact
    if last[0] is labels and last[1] == max_chars:
        return last[2]
    out = tuple(compact_label(s, max_chars) for s in labels)
    if isinstance(labels, tuple):
        last[:] = [labels, max_chars, out]
    return out


def engine_scale(state) -> float | None:
    """The softmax scale of the session's dot-product rule when its lse is exp-of-scaled-score
    (an engine kernel ran), else None (other rules or ALiBi)."""
    rule = state.score_rule
    if not rule.engine or state.positional.kind == "alibi":
        return None
    return dot_scale(rule.name, state.model.head_size)


def row_weights(resp, row: int, scale: float | None) -> np.ndarray | None:
    """(nh, Tk) weights of query ``row`` for every head, from the full matrix, the requested rows,
    or recomputed from q, k and lse; None when none of these can give them."""
    if resp is None or not resp.ok or not 0 <= row < resp.Tq:
        return None
    if resp.weights is not None:
        return resp.weights[:, row]  # (nh, Tk)
    if row in resp.row_weights:
        return resp.row_weights[row]  # (nh, Tk)
    if scale is None:
        return None
    s = np.einsum("hd,hkd->hk", resp.q[:, row], resp.k) * scale  # (nh, Tk)
    lse = resp.lse[:, row]  # (nh,)
    m = mask_rows(resp, [row])[:, 0]  # (nh or 1, Tk)
    finite = np.isfinite(lse)
    with np.errstate(over="ignore", invalid="ignore"):
        w = np.exp(s - np.where(finite, lse, 0.0)[:, None])  # (nh, Tk)
    return np.where(m & finite[:, None], w, 0.0)  # (nh, Tk)


def cell_values(resp, row: int, col: int, head, scale: float | None) -> tuple[float | None, float | None, bool]:
    """(score, weight, allowed) of cell (row, col) for ``head`` ("mean": averaged over heads).

    Score and weight are None when the response cannot give them."""
    head = check_head(resp, head)
    m = mask_rows(resp, [row])[:, 0, col]  # (nh or 1,)
    allowed = bool(m.any() if head == "mean" or m.shape[0] == 1 else m[head])
    if resp.scores is not None:
        score = float(_pick(resp.scores[:, row:row + 1, col:col + 1], head)[0, 0])
    elif scale is not None:
        s = np.einsum("hd,hd->h", resp.q[:, row], resp.k[:, col]) * scale  # (nh,)
        score = float(s.mean() if head == "mean" else s[head])
    else:
        score = None
    rw = row_weights(resp, row, scale)
    weight = None if rw is None else float(_pick(rw[:, None, col:col + 1], head)[0, 0])
    return score, weight, allowed


@dataclass(frozen=True)
class ImageKeys:
    """Where an image source's patches sit among the keys."""

    source: str  # the image source's name
    grid: tuple[int, int]  # (gh, gw) patch grid
    patch_keys: np.ndarray  # (gh * gw,) key index of each row-major patch
    class_key: int | None  # key index of its class token, if any


def image_keys(tokens, source: str) -> ImageKeys | None:
    """The key positions of image source ``source`` in ``tokens`` (a response's key_tokens)."""
    patch_keys: dict[int, int] = {}
    grid, cls = None, None
    for j, t in enumerate(tokens):
        if t.source != source or t.kind != "image":
            continue
        grid = t.grid
        if t.patch is None:
            cls = j
        else:
            patch_keys[t.patch] = j
    if grid is None or len(patch_keys) != grid[0] * grid[1]:
        return None
    keys = np.array([patch_keys[p] for p in range(grid[0] * grid[1])], dtype=np.int64)  # (N,)
    return ImageKeys(source, tuple(grid), keys, cls)


def patch_weights(row_w: np.ndarray, keys: ImageKeys, head) -> np.ndarray:
    """(gh, gw) weights of one query over an image's patches from its (nh, Tk) row weights."""
    w = row_w.mean(axis=0) if head == "mean" else row_w[head]  # (Tk,)
    return w[keys.patch_keys].reshape(keys.grid)  # (gh, gw)


def default_query(tokens, source: str) -> int | None:
    """The query token the image panel shows when none is selected: the image's class token, else
    its first patch (``tokens`` are the response's query_tokens)."""
    first = None
    for i, t in enumerate(tokens):
        if t.source == source and t.kind == "image":
            if t.patch is None:
                return i
            if first is None:
                first = i
    return first


def token_of_patch(tokens, source: str, patch: int) -> int | None:
    """Index among ``tokens`` of patch ``patch`` of image source ``source``."""
    for i, t in enumerate(tokens):
        if t.source == source and t.kind == "image" and t.patch == patch:
            return i
    return None


def query_offset(resp, name: str) -> int | None:
    """Index of the first query token of source ``name`` in the last response, or None."""
    if resp is None or not resp.ok:
        return None
    for seg in resp.query_segments:
        if seg.name == name:
            return seg.start
    return None
