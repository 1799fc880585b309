"""Mask presets: ready-made designs (none, causal, prefix-LM, block-diagonal, sliding window and the
vision-language-action mask S~*_pi of seed 000) and the evaluators of their preset terms. Presets
defined by the blocks are block rules keyed by segment names, so they follow the segments when token
counts change and stay editable block by block; presets defined in tokens (prefix-LM's L, document
lengths) are a deny-all design OR-ed with a :class:`PresetTerm` re-evaluated for the current Tq / Tk.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import partial
from typing import Callable

import numpy as np

from attnviz.model.mask.design import VLA_ROLES, MaskDesign, PresetTerm, TermEvaluator, register_term, resolve_axis
from attnviz.model.mask.rules import Rule


@dataclass(frozen=True)
class PresetInfo:
    """What the designer needs to offer a preset."""

    title: str  # menu text
    params: tuple[str, ...]  # accepted keyword parameters
    token_defined: bool  # True: evaluated from token counts (a PresetTerm), not block rules


PRESETS: dict[str, PresetInfo] = {
    "none": PresetInfo("None (all allowed)", (), False),
    "causal": PresetInfo("Causal", (), False),
    "prefix_lm": PresetInfo("Prefix-LM", ("L",), True),
    "block_diagonal": PresetInfo("Block-diagonal documents",
                                 ("documents", "lengths", "q_lengths", "kv_lengths", "causal"), False),
    "sliding_window": PresetInfo("Sliding window", ("w", "causal_window"), False),
    "vla": PresetInfo("Vision-language-action (seed 000)", ("roles",), False),
}
_ROLE_WORDS = (  # checked in this order: "expert actions" is E, "fast actions" is A
    ("E", ("expert", "noise", "flow")),
    ("A", ("fast", "action")),
    ("I", ("image", "img", "patch", "cls", "camera", "vision", "pixel")),
    ("P", ("prompt", "text", "state", "lang", "instruction", "proprio")),
)


# -- parameter checks --------------------------------------------------------------------------
def _int(v, what: str, lo: int = 0) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < lo:
        raise ValueError(f"{what} must be an integer >= {lo}, got {v!r}")
    return int(v)


def _lengths(v, what: str) -> list[int]:
    if not isinstance(v, (list, tuple)):
        raise ValueError(f"{what} must be a list of document lengths, got {v!r}")
    return [_int(x, f"each of {what}", 0) for x in v]


def check_preset_params(name: str, params: dict) -> None:
    """ValueError unless ``name`` is a preset and ``params`` are valid for it (types and ranges)."""
    if name not in PRESETS:
        raise ValueError(f"unknown mask preset {name!r}; expected one of {', '.join(PRESETS)}")
    unknown = set(params) - set(PRESETS[name].params)
    if unknown:
        raise ValueError(f"preset {name!r} takes no parameter(s) {sorted(unknown)}"
                         + (f"; it takes {', '.join(PRESETS[name].params)}" if PRESETS[name].params else ""))
    if name == "prefix_lm":
        if "L" not in params:
            raise ValueError("preset 'prefix_lm' needs the prefix length L")
        _int(params["L"], "prefix length L")
    elif name == "sliding_window":
        if "w" not in params:
            raise ValueError("preset 'sliding_window' needs the window w")
        _int(params["w"], "window w", 1)
        if not isinstance(params.get("causal_window", False), bool):
            raise ValueError("causal_window must be true or false")
    elif name == "block_diagonal":
        if not isinstance(params.get("causal", False), bool):
            raise ValueError("causal must be true or false")
        given = [k for k in ("documents", "lengths", "q_lengths", "kv_lengths") if params.get(k) is not None]
        if "documents" in given and len(given) > 1:
            raise ValueError("block_diagonal takes either documents (segment names) or lengths, not both")
        if ("q_lengths" in given) != ("kv_lengths" in given) or ("lengths" in given and "q_lengths" in given):
            raise ValueError("block_diagonal takes lengths, or q_lengths together with kv_lengths")
        for k in ("lengths", "q_lengths", "kv_lengths"):
            if k in given:
                _lengths(params[k], k)
        if "q_lengths" in given and len(params["q_lengths"]) != len(params["kv_lengths"]):
            raise ValueError("q_lengths and kv_lengths must list the same number of documents")
        if "documents" in given:
            docs = params["documents"]
            if not isinstance(docs, (list, tuple)) or any(
                    not isinstance(d, (list, tuple)) or any(not isinstance(n, str) for n in d) for d in docs):
                raise ValueError("documents must be a list of lists of segment names")
            flat = [n for d in docs for n in d]
            if len(set(flat)) != len(flat):
                raise ValueError("a segment may belong to one document only")
    elif name == "vla":
        roles = params.get("roles")
        if roles is not None:
            if not isinstance(roles, dict):
                raise ValueError("roles must map segment names to 'I', 'P', 'A' or 'E'")
            for seg, role in roles.items():
                if role not in VLA_ROLES:
                    raise ValueError(f"role of segment {seg!r} must be one of I, P, A, E, got {role!r}")


# -- presets -----------------------------------------------------------------------------------
def preset(name: str, q_segments=(), k_segments=None, **params) -> MaskDesign:
    """The preset's design for these segments (``k_segments`` None: self-attention)."""
    params = clean_params(params)
    check_preset_params(name, params)
    k_segments = q_segments if k_segments is None else k_segments
    if name == "none":
        return MaskDesign()
    if name == "causal":
        return MaskDesign(default_rule=Rule.causal())
    if name == "sliding_window":
        return MaskDesign(default_rule=Rule.sliding_window(params["w"], params.get("causal_window", False)))
    if name == "vla":
        return _vla(q_segments, k_segments, params.get("roles"))
    if name == "block_diagonal" and not _has_lengths(params):
        inner = Rule.causal() if params.get("causal", False) else Rule.allow()
        doc_of = _documents(q_segments, k_segments, params.get("documents"))
        rules = tuple((q.name, k.name, inner) for q in q_segments for k in k_segments
                      if q.name in doc_of and doc_of.get(q.name) == doc_of.get(k.name))
        return MaskDesign(default_rule=Rule.deny(), rules=rules)
    # token-defined: prefix_lm, block_diagonal with lengths
    return MaskDesign(default_rule=Rule.deny(), presets=(PresetTerm("or", name, json.dumps(params, sort_keys=True)),))


def clean_params(params: dict) -> dict:
    """Preset parameters as plain JSON values (None dropped, numpy values and tuples made lists)."""
    out = {}
    for k, v in params.items():
        if v is None:
            continue
        if isinstance(v, np.ndarray):
            v = v.tolist()
        if isinstance(v, tuple):
            v = list(v)
        if isinstance(v, np.generic):
            v = v.item()
        if k == "documents" and isinstance(v, list):
            v = [list(d) if isinstance(d, tuple) else d for d in v]
        out[k] = v
    return json.loads(json.dumps(out)) if _json_ok(out) else out


def _json_ok(v) -> bool:
    try:
        json.dumps(v)
        return True
    except (TypeError, ValueError):
        return False


def _has_lengths(params: dict) -> bool:
    return params.get("lengths") is not None or params.get("q_lengths") is not None


def _documents(q_segments, k_segments, documents) -> dict[str, int]:
    if documents is None:
        names = [s.name for s in q_segments] + [s.name for s in k_segments]
        return {n: i for i, n in enumerate(dict.fromkeys(names))}
    return {n: i for i, doc in enumerate(documents) for n in doc}


def vla_roles(segments, roles: dict | None = None, strict: bool = True) -> dict[str, str]:
    """Segment name -> VLA role, from ``roles`` first, else from the name; ValueError when a segment
    has none (``strict=False``: such segments are left out)."""
    roles = dict(roles or {})
    out = {}
    for seg in segments:
        if seg.name in roles:
            out[seg.name] = roles[seg.name]
            continue
        role = _role_from_name(seg.name)
        if role is None:
            if not strict:
                continue
            raise ValueError(f"segment {seg.name!r} has no VLA role: name it image / prompt / state / fast / "
                             f"expert, or pass roles={{{seg.name!r}: 'I'|'P'|'A'|'E'}}")
        out[seg.name] = role
    return out


def _role_from_name(name: str) -> str | None:
    low = name.lower()
    return next((r for r, words in _ROLE_WORDS if any(w in low for w in words)), None)


ROLE_OF_KIND = {"image": "I", "text": "P"}  # source kinds whose tokens have one VLA role whatever their name


def infer_vla_roles(segments, sources=(), remembered: dict | None = None) -> tuple[dict[str, str], list[str]]:
    """(segment name -> VLA role, names of the segments with no sure role) for ``segments`` (the query
    and key segments of a session, each named after its source). A role the person chose before
    (``remembered``) comes first, then the kind of the segment's source (image -> I, text -> P),
    then the name (custom blocks such as "state", "fast actions", "expert actions"). Segments that
    none of these places are left out of the mapping and listed, in order, for the person to
    choose."""
    remembered = dict(remembered or {})
    kinds = {getattr(s, "name", None): getattr(s, "kind", "") for s in sources}
    roles: dict[str, str] = {}
    unsure: list[str] = []
    for seg in segments:
        name = seg.name
        if name in roles or name in unsure:
            continue
        role = remembered.get(name) if remembered.get(name) in VLA_ROLES else None
        role = role or ROLE_OF_KIND.get(kinds.get(name, "")) or _role_from_name(name)
        if role is None:
            unsure.append(name)
        else:
            roles[name] = role
    return roles, unsure


def _vla_rule(rq: str, rk: str) -> Rule:
    # roles: I image, P prompt / state, A FAST action tokens, E action-expert tokens
    if rq in "IP":
        return Rule.allow() if rk in "IP" else Rule.deny()
    if rq == "A":
        return Rule.allow() if rk in "IP" else (Rule.causal() if rk == "A" else Rule.deny())
    return Rule.allow() if rk in "IPE" else Rule.deny()  # E


def _vla(q_segments, k_segments, roles, strict: bool = True) -> MaskDesign:
    qr = vla_roles(q_segments, roles, strict)
    kr = vla_roles(k_segments, roles, strict)
    rules = tuple((q.name, k.name, _vla_rule(qr[q.name], kr[k.name])) for q in q_segments for k in k_segments
                  if q.name in qr and k.name in kr)
    return MaskDesign(default_rule=Rule.deny(), rules=rules)


# -- evaluation of preset terms ----------------------------------------------------------------
def preset_mask(name: str, q_segments, k_segments, Tq: int, Tk: int, **params) -> np.ndarray:
    """The preset as a dense bool (Tq, Tk) for these segments and lengths."""
    check_preset_params(name, params)
    q_segments, Tq = resolve_axis(q_segments, Tq)
    k_segments, Tk = resolve_axis(k_segments, Tk)
    pq = np.arange(Tq, dtype=np.int64)[:, None] + (Tk - Tq)  # (Tq, 1) aligned query positions
    pk = np.arange(Tk, dtype=np.int64)[None, :]  # (1, Tk)
    if name == "prefix_lm":
        return np.broadcast_to((pk < params["L"]) | (pk <= pq), (Tq, Tk)).copy()
    if name == "block_diagonal" and _has_lengths(params):
        qd, kd = document_ids(params, Tq, Tk)
        m = qd[:, None] == kd[None, :]  # (Tq, Tk)
        if params.get("causal", False):
            m &= pk <= pq
        return m
    return term_design(name, q_segments, k_segments, params).compile(q_segments, k_segments, Tq, Tk)


def preset_rows(name: str, q_segments, k_segments, Tq: int, Tk: int, r0: int, r1: int, **params) -> np.ndarray:
    """Rows r0:r1 of :func:`preset_mask`: bool (r1-r0, Tk), without making the other rows."""
    check_preset_params(name, params)
    q_segments, Tq = resolve_axis(q_segments, Tq)
    k_segments, Tk = resolve_axis(k_segments, Tk)
    pq = np.arange(r0, r1, dtype=np.int64)[:, None] + (Tk - Tq)  # (r1-r0, 1) aligned query positions
    pk = np.arange(Tk, dtype=np.int64)[None, :]  # (1, Tk)
    if name == "prefix_lm":
        return np.broadcast_to((pk < params["L"]) | (pk <= pq), (r1 - r0, Tk)).copy()
    if name == "block_diagonal" and _has_lengths(params):
        qd, kd = document_ids(params, Tq, Tk)
        m = qd[r0:r1, None] == kd[None, :]  # (r1-r0, Tk)
        if params.get("causal", False):
            m &= pk <= pq
        return m
    return term_design(name, q_segments, k_segments, params).compile_rows(q_segments, k_segments, Tq, Tk,
                                                                          rows=(r0, r1))


def term_design(name: str, q_segments, k_segments, params: dict) -> MaskDesign:
    """The design a block-rule preset term stands for with these segments. A term outlives the
    segments it was made for, so a ``vla`` term denies a segment without a role instead of failing."""
    if name == "vla":
        return _vla(q_segments, k_segments, params.get("roles"), strict=False)
    return preset(name, q_segments, k_segments, **params)


def document_ids(params: dict, Tq: int, Tk: int) -> tuple[np.ndarray, np.ndarray]:
    """Document index of every query and key for block_diagonal with lengths.

    Lengths past the sequence end are cut; tokens after the last listed document form one more
    document (index = number of documents) on both axes.
    """
    ql = params.get("q_lengths", params.get("lengths"))
    kl = params.get("kv_lengths", params.get("lengths"))

    def ids(lengths, T):
        ends = np.cumsum(np.minimum(np.asarray(lengths, dtype=object), T).astype(np.int64))  # (n_docs,)
        return np.searchsorted(ends, np.arange(T, dtype=np.int64), side="right").astype(np.int64)  # (T,)

    return ids(ql, Tq), ids(kl, Tk)


def preset_flex_expr(name: str, params: dict, Tq: int, Tk: int,
                     add_table: Callable[[list, str], str]) -> str | None:
    """A tensor expression for a token-defined preset over ``q_idx``/``kv_idx`` (None: rule preset)."""
    off = Tk - Tq
    pq = f"(q_idx + {off})" if off else "q_idx"
    if name == "prefix_lm":
        return f"((kv_idx < {int(params['L'])}) | (kv_idx <= {pq}))"
    if name == "block_diagonal" and _has_lengths(params):
        qd, kd = document_ids(params, Tq, Tk)
        # one spare entry past each end (distinct ids) keeps out-of-range indices harmless
        qn = add_table(qd.tolist() + [-1], "int64")
        kn = add_table(kd.tolist() + [-2], "int64")
        expr = f"({qn}[torch.clamp(q_idx, 0, {Tq})] == {kn}[torch.clamp(kv_idx, 0, {Tk})])"
        if params.get("causal", False):
            expr = f"({expr} & (kv_idx <= {pq}))"
        return expr
    return None


# -- openpi ar_mask ----------------------------------------------------------------------------
def design_from_ar_mask(ar, valid=None) -> MaskDesign:
    """A design reproducing openpi's ``make_attn_mask(ar, valid)`` over the whole sequence
    (a global-position ar_mask default rule)."""
    return MaskDesign(default_rule=Rule.ar_mask(ar, valid, align="global"))


for _name in PRESETS:  # how a design evaluates its preset terms
    register_term(_name, TermEvaluator(partial(check_preset_params, _name), partial(preset_mask, _name),
                                       partial(preset_rows, _name)))
