"""The headless JSON report of a computed session (``attnviz-cli demo NAME --json`` and ``inspect``).

Large sequences give a summary instead of matrices, so the report stays a readable size.
"""

from __future__ import annotations

import math

import numpy as np

from attnviz.engine.blockmask import FULL, tile_sizes
from attnviz.model.compute import ComputeResponse

MAX_JSON_TOKENS = 512


def _num(x: float):
    x = float(x)
    if math.isinf(x) and x < 0:
        return None
    if not math.isfinite(x):
        raise ValueError(f"non-finite value {x} in a response")
    return x


def _matrix(a: np.ndarray) -> list:
    """Nested lists of floats with -inf as None."""
    a = np.asarray(a, dtype=np.float64)
    if a.ndim == 1:
        return [_num(x) for x in a]
    return [_matrix(r) for r in a]


def _density(r) -> float:
    """Share of allowed cells: from the dense mask, or from a long sequence's TiledMask by tiles."""
    if r.mask is not None:
        return float(np.mean(r.mask))
    tm = r.block_mask  # full tiles count whole, partial ones by their stored cells
    sizes = tile_sizes(tm.Tq, tm.Tk, tm.block_m, tm.block_n)  # (nQ, nK) cells per tile
    cells = float((sizes[None] * (tm.tile_state == FULL)).sum())
    used = tm.block_index[tm.block_index >= 0]  # (P,)
    cells += float(tm.blocks[used].sum()) if used.size else 0.0
    return cells / (tm.n_heads * tm.Tq * tm.Tk)


def _segments(segs) -> list[dict]:
    return [{"name": s.name, "start": int(s.start), "stop": int(s.stop)} for s in segs]


def response_to_json(response: ComputeResponse, max_tokens: int = MAX_JSON_TOKENS) -> dict:
    """The ``json.dumps``-ready report of a successful response (ValueError with its error otherwise).

    ``tokens`` / ``segments`` (cross: ``query_*`` / ``key_*``), ``mask`` (Tq x Tk, or nh x Tq x Tk),
    ``heads`` ({scores, weights, output, lse} each; scores are scaled, masked cells -inf, every -inf
    written as null) and ``output`` (Concat(heads) W^O, Tq x d_model). Past ``max_tokens`` (or without
    full matrices) a summary: sizes, segments, tiles and sparsity, fully masked rows and a ``note``.
    """
    r = response
    if not r.ok:
        raise ValueError(r.error or ("the computation was cancelled" if r.cancelled else "the computation failed"))
    out: dict = {}
    if r.cross:
        out["query_tokens"] = list(r.query_labels)
        out["key_tokens"] = list(r.key_labels)
        out["query_segments"] = _segments(r.query_segments)
        out["key_segments"] = _segments(r.key_segments)
    else:
        out["tokens"] = list(r.query_labels)
        out["segments"] = _segments(r.query_segments)
    big = max(r.Tq, r.Tk) > max_tokens
    if big or r.weights is None:
        for key in ("tokens", "query_tokens", "key_tokens"):
            out.pop(key, None)
        why = (f"the sequence has more than {max_tokens} tokens" if big
               else "the full matrices were not computed for this size")
        fm = np.asarray(r.fully_masked)
        out.update({
            "summary": True,
            "note": f"{why}: scores, weights and outputs are not printed; this is a summary",
            "Tq": r.Tq, "Tk": r.Tk, "n_heads": int(r.output.shape[0]),
            "mask_density": _density(r),
            "tiles": {**r.tile_counts, "block_m": int(r.block_mask.block_m), "block_n": int(r.block_mask.block_n)},
            "sparsity": float(r.sparsity),
            "fully_masked_rows": int(np.count_nonzero(fm)),
        })
        return out
    mask = np.asarray(r.mask)
    out["mask"] = mask.tolist()
    heads = []
    for h in range(r.output.shape[0]):
        mh = mask if mask.ndim == 2 else mask[h]
        s = np.where(mh, r.scores[h], -np.inf)  # (Tq, Tk) masked scores are -inf
        heads.append({"scores": _matrix(s), "weights": _matrix(r.weights[h]), "output": _matrix(r.output[h]),
                      "lse": _matrix(r.lse[h])})
    out["heads"] = heads
    out["output"] = _matrix(r.combined)
    return out
