"""Masks to and from code: ``.npy``, the design's JSON, openpi ``ar_mask`` + ``valid``, a PyTorch
FlexAttention ``mask_mod`` source and xformers-style sequence lengths. The ``mask_mod`` source uses
only comparisons, ``&``, ``|``, ``~``, ``torch.clamp`` and lookups in literal tables, so the same text
runs under torch and under numpy (:func:`evaluate_mask_mod`), which is how it is checked against the
dense mask before it is returned. Imports give a :class:`~attnviz.model.mask.design.MaskDesign`.
"""

from __future__ import annotations

import builtins
import json
import os
import types

import numpy as np

from attnviz.jsontext import JsonRefused, loads_guarded, read_capped
from attnviz.model.mask.analysis import ar_mask_from_mask, seqlens_from_mask
from attnviz.model.mask.design import MaskDesign, resolve_axis
from attnviz.model.mask.paint import CellOverrides
from attnviz.model.mask.presets import design_from_ar_mask, preset_flex_expr, term_design
from attnviz.model.mask.rules import Rule

EXPORT_FORMATS = ("npy", "json", "flex", "ar-mask", "seqlens")
JSON_FORMAT = "attnviz-mask-design"
# a mask file handed in (design JSON, ar_mask JSON) larger than this is not read: the design of a random
# 1000 x 1000 mask is 20 MB and parsing takes about six times the file's size in memory
MAX_JSON_BYTES = 1 << 30
MAX_JSON_DEPTH = 64  # designs nest at most 8 deep, about 30 levels of JSON (a session holds them within 64)


# -- npy ---------------------------------------------------------------------------------------
def save_npy(mask, path) -> None:
    """Write the dense bool mask (Tq, Tk) or (nh, Tq, Tk) to exactly ``path`` (no ``.npy`` is appended)."""
    with open(path, "wb") as f:
        np.save(f, np.asarray(mask, dtype=bool), allow_pickle=False)


def load_npy(path) -> np.ndarray:
    """A bool mask from ``.npy`` (bool or 0/1 numbers, 2-D or 3-D); ValueError otherwise."""
    try:
        arr = np.load(path, allow_pickle=False)
    except (ValueError, EOFError) as exc:
        raise ValueError(f"{os.fspath(path)}: not a readable .npy array ({exc})") from None
    if not isinstance(arr, np.ndarray):
        raise ValueError(f"{os.fspath(path)}: expected one .npy array, got an archive")
    if arr.ndim not in (2, 3):
        raise ValueError(f"{os.fspath(path)}: a mask must be 2-D (Tq, Tk) or 3-D (nh, Tq, Tk), got shape {arr.shape}")
    if arr.dtype != bool:
        if arr.dtype.kind not in "iuf" or not np.all((arr == 0) | (arr == 1)):
            raise ValueError(f"{os.fspath(path)}: a mask must hold booleans or 0/1, got dtype {arr.dtype}")
        arr = arr.astype(bool)
    return arr


def design_from_dense(mask) -> MaskDesign:
    """A design compiling to ``mask`` for any segments of its size (per-head for a 3-D mask): the
    cheapest of allow / deny / causal defaults plus painted cells, or an ar_mask rule when paint would
    be needed and the mask is of that form."""
    m = np.asarray(mask, dtype=bool)
    if m.ndim == 3:
        if m.shape[0] == 0:
            raise ValueError("a 3-D mask needs at least one head")
        base = _design_2d(m[0])
        heads = tuple((h, _design_2d(m[h])) for h in range(1, m.shape[0]) if not np.array_equal(m[h], m[0]))
        return MaskDesign(**{**_fields(base), "heads": heads})
    return _design_2d(m)


def _fields(d: MaskDesign) -> dict:
    return {"default_rule": d.default_rule, "rules": d.rules, "splits": d.splits, "presets": d.presets,
            "overrides": d.overrides}


def _design_2d(m: np.ndarray) -> MaskDesign:
    Tq, Tk = m.shape
    best = None
    for rule in (Rule.allow(), Rule.deny(), Rule.causal()):
        base = rule.evaluate(0, Tq, 0, Tk, Tq, Tk)  # (Tq, Tk)
        diff = np.argwhere(base != m)  # (n, 2)
        if best is None or len(diff) < len(best[1]):
            best = (rule, diff)
    rule, diff = best
    if len(diff) and Tq == Tk:
        try:
            ar, valid = ar_mask_from_mask(m)
        except ValueError:
            pass
        else:
            return design_from_ar_mask(ar, valid)
    vals = np.where(m[diff[:, 0], diff[:, 1]], 1, -1) if len(diff) else np.zeros(0, np.int8)
    return MaskDesign(default_rule=rule, overrides=CellOverrides.from_cells(diff[:, 0], diff[:, 1], vals))


# -- JSON --------------------------------------------------------------------------------------
def design_to_json(design: MaskDesign, context: dict | None = None) -> str:
    """The design (rules, sub-blocks, preset terms, painted cells, heads) as versioned JSON text."""
    payload, arrays = design.to_payload()
    doc = {"format": JSON_FORMAT, "version": payload["version"], "design": payload,
           "arrays": {k: {"dtype": str(a.dtype), "shape": list(a.shape), "data": a.tolist()} for k, a in arrays.items()}}
    if context:
        doc["context"] = context
    return json.dumps(doc, indent=1)


def design_from_json(text: str) -> MaskDesign:
    """Parse :func:`design_to_json` output; ValueError on anything invalid."""
    try:
        doc = loads_guarded(text, max_depth=MAX_JSON_DEPTH, max_chars=MAX_JSON_BYTES)
    except JsonRefused as exc:
        raise ValueError(f"mask design JSON {exc}") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"mask design JSON is not valid JSON: {exc}") from None
    if not isinstance(doc, dict) or doc.get("format") != JSON_FORMAT:
        raise ValueError(f"not an attnviz mask design (expected \"format\": \"{JSON_FORMAT}\")")
    raw = doc.get("arrays", {})
    if not isinstance(raw, dict):
        raise ValueError("mask design JSON: 'arrays' must be an object")
    arrays = {}
    for key, spec in raw.items():
        if not isinstance(spec, dict) or "data" not in spec:
            raise ValueError(f"mask design JSON: array {key!r} needs 'data'")
        try:
            arr = np.asarray(spec["data"], dtype=np.int64)
        except (TypeError, ValueError, OverflowError):
            raise ValueError(f"mask design JSON: array {key!r} must hold integers") from None
        arrays[key] = arr.reshape(-1, 3) if arr.size == 0 else arr
    design = doc.get("design")
    if isinstance(design, dict) and "version" not in design:
        design = {**design, "version": doc.get("version")}
    return MaskDesign.from_payload(design, arrays)


# -- openpi ar_mask ----------------------------------------------------------------------------
def save_ar_mask(mask, path) -> tuple[np.ndarray, np.ndarray]:
    """Write the ``ar_mask`` + ``valid`` reproducing ``mask`` (JSON, or ``.npz`` by extension)."""
    ar, valid = ar_mask_from_mask(mask)
    if os.fspath(path).endswith(".npz"):
        np.savez(path, ar_mask=ar.astype(bool), valid=valid)
    else:
        with open(path, "w", encoding="utf-8") as f:
            json.dump({"ar_mask": [int(a) for a in ar], "valid": [bool(v) for v in valid]}, f)
            f.write("\n")
    return ar, valid


def load_ar_mask(path) -> tuple[np.ndarray, np.ndarray]:
    """``(ar_mask, valid)`` from the JSON or ``.npz`` written by :func:`save_ar_mask`."""
    name = os.fspath(path)
    try:
        if name.endswith(".npz"):
            with np.load(path, allow_pickle=False) as z:
                if "ar_mask" not in z:
                    raise ValueError(f"{name}: no 'ar_mask' array")
                ar = z["ar_mask"]
                valid = z["valid"] if "valid" in z else None
        else:
            doc = loads_guarded(read_capped(path, MAX_JSON_BYTES), max_depth=MAX_JSON_DEPTH)
            if not isinstance(doc, dict) or "ar_mask" not in doc:
                raise ValueError(f"{name}: expected an object with 'ar_mask' (and 'valid')")
            ar, valid = doc["ar_mask"], doc.get("valid")
    except JsonRefused as exc:
        raise ValueError(f"{name} {exc}") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"{name}: not valid JSON ({exc})") from None
    except (EOFError, OSError) as exc:
        if isinstance(exc, FileNotFoundError):
            raise
        raise ValueError(f"{name}: not a readable ar_mask file ({exc})") from None
    ar = np.asarray(ar)
    if ar.ndim != 1 or ar.size == 0 or ar.dtype.kind not in "biuf" or not np.all((ar == 0) | (ar == 1)):
        raise ValueError(f"{name}: ar_mask must be a non-empty list of 0/1")
    valid = np.ones(ar.shape, bool) if valid is None else np.asarray(valid)
    if valid.shape != ar.shape or valid.dtype.kind not in "biuf" or not np.all((valid == 0) | (valid == 1)):
        raise ValueError(f"{name}: valid must list one boolean per ar_mask entry")
    return ar.astype(np.int8), valid.astype(bool)


# -- xformers seqlens --------------------------------------------------------------------------
def seqlens_document(mask) -> dict:
    """The block-diagonal lengths of ``mask`` with the xformers call that rebuilds it."""
    s = seqlens_from_mask(mask)
    call = "BlockDiagonalMask.from_seqlens(q_seqlen, kv_seqlen)" + (".make_causal()" if s["causal"] else "")
    return {**s, "xformers": call}


# -- FlexAttention mask_mod --------------------------------------------------------------------
class _Emitter:
    def __init__(self):
        self.tables: list[str] = []
        self.table_names: list[str] = []
        self._seen: dict = {}
        self.functions: list[str] = []
        self._n_fn = 0

    def add_table(self, values: list, dtype: str) -> str:
        key = (tuple(values), dtype)
        if key not in self._seen:
            name = f"_T{len(self._seen)}"
            self._seen[key] = name
            self.table_names.append(name)
            self.tables.append(f"{name} = torch.tensor({_literal(values)}, dtype=torch.{dtype})")
        return self._seen[key]

    def add_paint(self, overrides: CellOverrides, Tq: int, Tk: int) -> str:
        runs = [(r, c0, min(c1, Tk), v) for r, c0, c1, v in overrides.runs() if r < Tq and c0 < Tk]
        name = f"_T{len(self._seen)}"
        self._seen[("paint", len(self._seen))] = name
        self.table_names.append(name)
        self.tables.append(
            f"# painted cells: 1 allow, -1 deny, 0 follow the rules; one spare row and column stay 0\n"
            f"{name} = torch.zeros(({Tq + 1}, {Tk + 1}), dtype=torch.int8)\n"
            f"for _r, _c0, _c1, _v in {_literal(runs)}:\n"
            f"    {name}[_r, _c0:_c1] = _v")
        return name

    def new_function(self, stem: str) -> str:
        self._n_fn += 1
        return f"_{stem}_{self._n_fn}"


def _literal(values) -> str:
    return repr(list(values))


def _shift(var: str, delta: int) -> str:
    if delta == 0:
        return var
    return f"({var} + {delta})" if delta > 0 else f"({var} - {-delta})"


def _design_function(design: MaskDesign, q_segments, k_segments, Tq: int, Tk: int, em: _Emitter, stem: str) -> str:
    """Emit a function ``name(q_idx, kv_idx)`` computing ``design`` (no per-head part); return name."""
    name = em.new_function(stem)
    body = ["all_ = (q_idx == q_idx) & (kv_idx == kv_idx)"]
    d = design.default_rule
    if d.align == "global":
        body.append(f"m = {_rule_on(d, 'all_', _shift('q_idx', Tk - Tq), 'kv_idx', em)}")
    else:
        body.append("m = ~all_")
    for bq, bk, r in design.block_pairs(q_segments, k_segments, Tq, Tk):
        body.append(f"# {bq.name or 'all'} -> {bk.name or 'all'}: {r.label()}")
        sel = (f"((q_idx >= {bq.start}) & (q_idx < {bq.stop}) & "
               f"(kv_idx >= {bk.start}) & (kv_idx < {bk.stop}))")
        if r.kind == "allow":
            body.append(f"m = {sel} | m")
            continue
        if r.kind == "deny":
            body.append(f"m = ~{sel} & m")
            continue
        if r.align == "global":
            pq, pk = _shift("q_idx", Tk - Tq), "kv_idx"
        else:
            nq, nk = len(bq), len(bk)
            pq, pk = _shift("q_idx", -bq.start + (nk - nq)), _shift("kv_idx", -bk.start)
        body.append(f"sel = {sel}")
        body.append(f"m = (sel & {r.flex_expr(pq, pk, em.add_table)}) | (~sel & m)")
    for term in design.presets:
        op = "&" if term.op == "and" else "|"
        if term.design is not None:
            fn = _design_function(term.design, q_segments, k_segments, Tq, Tk, em, "term")
            body.append(f"m = m {op} {fn}(q_idx, kv_idx)")
            continue
        expr = preset_flex_expr(term.name, term.params, Tq, Tk, em.add_table)
        if expr is None:
            sub = term_design(term.name, q_segments, k_segments, term.params)
            fn = _design_function(sub, q_segments, k_segments, Tq, Tk, em, term.name)
            expr = f"{fn}(q_idx, kv_idx)"
        body.append(f"m = m {op} ({expr})")
    if design.overrides:
        paint = em.add_paint(design.overrides, Tq, Tk)
        body.append(f"ov = {paint}[torch.clamp(q_idx, 0, {Tq}), torch.clamp(kv_idx, 0, {Tk})]")
        body.append("m = (m & (ov != -1)) | (ov == 1)")
    body.append("return m")
    em.functions.append(f"def {name}(q_idx, kv_idx):\n" + "\n".join("    " + line for line in body))
    return name


def _rule_on(rule: Rule, all_: str, pq: str, pk: str, em: _Emitter) -> str:
    if rule.kind == "allow":
        return all_
    if rule.kind == "deny":
        return f"~{all_}"
    return f"{all_} & {rule.flex_expr(pq, pk, em.add_table)}"


#: largest Tq * Tk a dense mask is made for here (as in attnviz.model.compute): the mask_mod is checked
#: against it up to this size, and the dense formats are written up to it
VERIFY_CELLS = 8192 * 8192


def flex_mask_mod_source(design: MaskDesign, q_segments, k_segments=None, Tq: int | None = None,
                         Tk: int | None = None, nh: int | None = None, verify: bool = True) -> str:
    """Python source defining ``mask_mod(b, h, q_idx, kv_idx)`` for FlexAttention.

    Reproduces ``design.compile(q_segments, k_segments, Tq, Tk, nh)`` exactly for
    ``0 <= q_idx < Tq``, ``0 <= kv_idx < Tk`` (and every head when ``nh`` is given); with
    ``verify`` the source is evaluated with numpy and compared before it is returned.
    """
    if k_segments is None:
        k_segments, Tk = q_segments, Tq if Tk is None else Tk
    q_segments, Tq = resolve_axis(q_segments, Tq)
    k_segments, Tk = resolve_axis(k_segments, Tk)
    em = _Emitter()
    shared = _design_function(design, q_segments, k_segments, Tq, Tk, em, "mask")  # heads are added below
    lines = [f"m = {shared}(q_idx, kv_idx)"]
    own = [h for h, _ in design.heads if nh is not None and h < nh]
    for h in own:
        fn = _design_function(design.head_design(h), q_segments, k_segments, Tq, Tk, em, f"head{h}")
        lines.append(f"m = ((h == {h}) & {fn}(q_idx, kv_idx)) | (~(h == {h}) & m)")
    lines.append("return m")
    heads_note = (f"Heads {', '.join(map(str, own))} have their own masks; the others share one."
                  if own else "All heads share one mask.")
    parts = [
        f'"""FlexAttention mask_mod generated by attnviz from a mask design.\n\n'
        f"Query length {Tq}, key length {Tk}. {heads_note} True = the query may attend to the key.\n"
        f"Use: block_mask = create_block_mask(mask_mod, B=None, H=None, Q_LEN={Tq}, KV_LEN={Tk})\n"
        f"(pass H=number of heads when heads differ). The lookup tables are CPU tensors: call\n"
        f'move_tables(device) once before building a block mask on another device.\n"""',
        "import torch",
        *em.tables,
        "def move_tables(device):\n"
        '    """Move the lookup tables to ``device``."""\n'
        + (f"    global {', '.join(em.table_names)}\n"
           + "\n".join(f"    {t} = {t}.to(device)" for t in em.table_names) if em.table_names else "    return None"),
        *em.functions,
        "def mask_mod(b, h, q_idx, kv_idx):\n" + "\n".join("    " + line for line in lines),
    ]
    source = "\n\n\n".join(parts) + "\n"
    if verify and Tq * Tk <= VERIFY_CELLS:  # beyond it the dense check alone would take gigabytes
        expected = design.compile(q_segments, k_segments, Tq, Tk, nh)
        got = evaluate_mask_mod(source, Tq, Tk, nh if expected.ndim == 3 else None)
        if got.shape != expected.shape or not np.array_equal(got, expected):
            raise RuntimeError("generated mask_mod does not reproduce the dense mask (a bug in attnviz)")
    return source


def numpy_torch_shim() -> types.SimpleNamespace:
    """The few torch names the generated source uses, mapped to numpy."""
    return types.SimpleNamespace(
        tensor=lambda data, dtype=None: np.array(data, dtype=dtype),
        zeros=lambda shape, dtype=None: np.zeros(shape, dtype=dtype),
        clamp=np.clip, int8=np.int8, int64=np.int64, bool=np.bool_,
    )


def evaluate_mask_mod(source: str, Tq: int, Tk: int, nh: int | None = None) -> np.ndarray:
    """Run generated ``mask_mod`` source with numpy on index grids -> bool (Tq, Tk) or (nh, Tq, Tk)."""
    shim = numpy_torch_shim()

    def _import(name, *args, **kwargs):
        if name == "torch":
            return shim
        return builtins.__import__(name, *args, **kwargs)

    env = {"__builtins__": {**vars(builtins), "__import__": _import}, "__name__": "attnviz_mask_mod"}
    exec(compile(source, "<mask_mod>", "exec"), env)
    q = np.arange(Tq, dtype=np.int64)[:, None]  # (Tq, 1)
    k = np.arange(Tk, dtype=np.int64)[None, :]  # (1, Tk)
    if nh is None:
        out = env["mask_mod"](np.int64(0), np.int64(0), q, k)
        return np.broadcast_to(np.asarray(out, dtype=bool), (Tq, Tk)).copy()
    h = np.arange(nh, dtype=np.int64)[:, None, None]  # (nh, 1, 1)
    out = env["mask_mod"](np.int64(0), h, q[None], k[None])
    return np.broadcast_to(np.asarray(out, dtype=bool), (nh, Tq, Tk)).copy()


# -- one entry for the CLI and the designer ----------------------------------------------------
def export_mask(design: MaskDesign, fmt: str, path, q_segments, k_segments=None, Tq: int | None = None,
                Tk: int | None = None, nh: int | None = None) -> None:
    """Write the design in format ``fmt`` (one of EXPORT_FORMATS) for these segments and lengths."""
    if fmt not in EXPORT_FORMATS:
        raise ValueError(f"unknown mask export format {fmt!r}; expected one of {', '.join(EXPORT_FORMATS)}")
    if k_segments is None:
        k_segments, Tk = q_segments, Tq if Tk is None else Tk
    q_segments, Tq = resolve_axis(q_segments, Tq)
    k_segments, Tk = resolve_axis(k_segments, Tk)
    if fmt == "json":
        context = {"q_segments": [s.to_dict() for s in q_segments], "k_segments": [s.to_dict() for s in k_segments],
                   "Tq": Tq, "Tk": Tk}
        _write_text(path, design_to_json(design, context))
        return
    if fmt == "flex":
        _write_text(path, flex_mask_mod_source(design, q_segments, k_segments, Tq, Tk, nh))
        return
    if Tq * Tk > VERIFY_CELLS:
        raise ValueError(f"the {fmt} format holds the dense mask, which is not made for {Tq:,} x {Tk:,} tokens "
                         "(more than 8,192 x 8,192): export the FlexAttention mask_mod (flex) or the design (json)")
    mask = design.compile(q_segments, k_segments, Tq, Tk, nh)
    if fmt == "npy":
        save_npy(mask, path)
    elif fmt == "ar-mask":
        save_ar_mask(mask, path)
    else:
        _write_text(path, json.dumps(seqlens_document(mask)) + "\n")


def import_mask(path, fmt: str | None = None) -> MaskDesign:
    """A design from ``.npy``, the design JSON, or an ar_mask file (JSON/``.npz``); ``fmt`` None
    guesses from the extension and, for JSON, the content."""
    name = os.fspath(path)
    if fmt is None:
        if name.endswith(".npy"):
            fmt = "npy"
        elif name.endswith(".npz"):
            fmt = "ar-mask"
        else:
            try:
                doc = loads_guarded(read_capped(path, MAX_JSON_BYTES), max_depth=MAX_JSON_DEPTH)
            except JsonRefused as exc:
                raise ValueError(f"{name} {exc}") from None
            except json.JSONDecodeError as exc:
                raise ValueError(f"{name}: not .npy and not valid JSON ({exc})") from None
            fmt = "ar-mask" if isinstance(doc, dict) and "ar_mask" in doc else "json"
    if fmt == "npy":
        return design_from_dense(load_npy(path))
    if fmt == "ar-mask":
        ar, valid = load_ar_mask(path)
        return design_from_ar_mask(ar, valid)
    if fmt == "json":
        try:
            text = read_capped(path, MAX_JSON_BYTES)
        except JsonRefused as exc:
            raise ValueError(f"{name} {exc}") from None
        return design_from_json(text)
    raise ValueError(f"cannot import masks of format {fmt!r}; expected npy, json or ar-mask")


def _write_text(path, text: str) -> None:
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


__all__ = [
    "EXPORT_FORMATS", "save_npy", "load_npy", "design_from_dense", "design_to_json", "design_from_json",
    "save_ar_mask", "load_ar_mask", "seqlens_document", "flex_mask_mod_source", "evaluate_mask_mod",
    "numpy_torch_shim", "export_mask", "import_mask",
]
