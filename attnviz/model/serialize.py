"""SessionState <-> (JSON-able tree, named arrays, named blobs): everything the session-file layer
needs, without any file format, so that a format only stores members by name. Loading is strict
and says where a file is wrong. Round trip: ``load_state(*dump_state(s)) == s``.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from attnviz.model.frozen import FrozenArray
from attnviz.model.mask.design import MaskDesign
from attnviz.model.positional import PositionalConfig
from attnviz.model.score_rules import DEFAULT_CAP, ScoreRuleConfig
from attnviz.model.sequence import MAX_TOKENS
from attnviz.model.state import (MAX_HEADS, MAX_LAYERS, CrossConfig, CustomSource, ImageSource, Interventions,
                                 KernelConfig, MeansFile, ModelConfig, QKOverride, SessionState, TextSource,
                                 TokenizerSpec, ToySource, ViewState, WEIGHT_NAMES)

TOP_KEYS = ("sources", "tokenizer", "cross", "model", "positional", "score_rule", "kernel", "mask", "view")
OPTIONAL_KEYS = ("interventions",)  # written only when set, so other files read as older versions wrote them
INTERVENTIONS_VERSION = 2  # the newest version of the "interventions" tree (its own "version" key)
INTERVENTION_KEYS = ("heads", "mode", "factor", "knockout_layers", "knockout_heads", "patch", "patch_layer",
                     "patch_head", "patch_positions", "clean")  # version 1: every key required
INTERVENTION_KEYS_2 = ("means_file", "stack")  # version 2 adds these (optional: absent is the default)
MEANS_FILE_KEYS = ("path", "size", "digest")
TOKENIZER_BLOB = "tokenizer/tokenizer.json"


# ------------------------------------------------------------------------------------------------
# dump


def _source_tree(i: int, s, arrays: dict, blobs: dict) -> dict:
    d = {"kind": s.kind, "name": s.name, "color": s.color}
    if isinstance(s, TextSource):
        d["text"] = s.text
    elif isinstance(s, ImageSource):
        key = f"sources/{i}/image"
        blobs[key] = s.data
        d.update(image=key, patch=s.patch, policy=s.policy,
                 target=None if s.target is None else list(s.target), class_token=s.class_token)
    elif isinstance(s, CustomSource):
        key = None
        if s.values is not None:
            key = f"sources/{i}/values"
            arrays[key] = np.array(s.values.array)
        d.update(count=s.count, generator=s.generator, seed=s.seed, scale=s.scale, values=key)
    elif isinstance(s, ToySource):
        key = f"sources/{i}/embeddings"
        arrays[key] = np.array(s.embeddings.array)
        d.update(labels=list(s.labels), embeddings=key)
    return d


def dump_state(state: SessionState) -> tuple[dict, dict[str, np.ndarray], dict[str, bytes]]:
    """The state as (tree, arrays, blobs): ``tree`` holds JSON types only, ``arrays`` numeric arrays
    (hand-set embeddings and weights, custom block values, the mask's painted cells ...) and ``blobs``
    bytes (image files, an embedded tokenizer.json). Their names are relative paths of
    ``[a-z0-9_./-]`` (``model/W_q``) that the tree refers to, usable as a format's member names."""
    arrays: dict[str, np.ndarray] = {}
    blobs: dict[str, bytes] = {}
    tree: dict = {"sources": [_source_tree(i, s, arrays, blobs) for i, s in enumerate(state.sources)]}
    tok = state.tokenizer
    if tok.json is not None:
        blobs[TOKENIZER_BLOB] = tok.json.encode("utf-8")
    tree["tokenizer"] = {"name": tok.name, "json": TOKENIZER_BLOB if tok.json is not None else None}
    tree["cross"] = None if state.cross is None else {"queries": list(state.cross.queries),
                                                      "keys": list(state.cross.keys)}
    m = state.model
    weights = {}
    for n in WEIGHT_NAMES:
        w = getattr(m, n)
        weights[n] = None
        if w is not None:
            weights[n] = f"model/{n}"
            arrays[f"model/{n}"] = np.array(w.array)
    tree["model"] = {"d_model": m.d_model, "nh": m.nh, "hs": m.hs, "hv": m.hv, "seed": m.seed,
                     "embed_seed": m.embed_seed, "weights": weights,
                     "qk_overrides": [[o.which, o.head, o.token, o.dim, o.value] for o in m.qk_overrides]}
    tree["positional"] = state.positional.to_dict()
    r = state.score_rule
    tree["score_rule"] = {"name": r.name, "seed": int(r.seed), "hidden": r.hidden}
    if r.name == "softcap" or r.cap != DEFAULT_CAP:  # other rules' files stay as older versions wrote (and read) them
        tree["score_rule"]["cap"] = r.cap
    k = state.kernel
    tree["kernel"] = {"name": k.name, "block_m": k.block_m, "block_n": k.block_n}
    payload, mask_arrays = state.mask.to_payload()
    names = {}
    for j, (name, arr) in enumerate(sorted(mask_arrays.items())):
        key = f"mask/{j}"
        names[name] = key
        arrays[key] = np.asarray(arr)
    tree["mask"] = {"payload": payload, "arrays": names}
    v = state.view
    tree["view"] = {"head": v.head, "query": v.query, "key": v.key, "colormap": v.colormap,
                    "log_scale": v.log_scale, "normalisation": v.normalisation, "matrix": v.matrix,
                    "overlay_opacity": v.overlay_opacity, "layout": v.layout}
    if state.interventions != Interventions():  # a session without interventions is written as before
        tree["interventions"] = _interventions_tree(state.interventions)
    return tree, arrays, blobs


def _interventions_tree(iv: Interventions) -> dict:
    """The tree at the oldest version that holds ``iv`` (1 without a means file or another stack), so a file
    whose interventions version 1 can say stays readable by the attnviz that wrote version 1."""
    tree = {"version": 1, "heads": [list(h) for h in iv.heads], "mode": iv.mode,
            "factor": iv.factor, "knockout_layers": list(iv.knockout_layers),
            "knockout_heads": list(iv.knockout_heads), "patch": iv.patch, "patch_layer": iv.patch_layer,
            "patch_head": iv.patch_head, "patch_positions": list(iv.patch_positions), "clean": iv.clean}
    if iv.means_file is not None:
        m = iv.means_file
        tree.update(version=2, means_file={"path": m.path, "size": m.size, "digest": m.digest})
    if iv.stack != Interventions.stack:
        tree.update(version=2, stack=iv.stack)
    return tree


def _load_interventions(R: "_Reader", d) -> Interventions:
    if not isinstance(d, dict):
        raise ValueError(f"interventions must be a mapping, got {type(d).__name__}")
    version = R.int_(d.get("version"), "interventions.version")
    if version > INTERVENTIONS_VERSION:
        raise ValueError(f"interventions.version is {version}: written by a newer attnviz (this one reads up to "
                         f"{INTERVENTIONS_VERSION}); update attnviz to open it")
    if version < 1:
        raise ValueError(f"interventions.version is {version}; versions start at 1")
    d = R.keys(d, "interventions", ("version",) + INTERVENTION_KEYS, INTERVENTION_KEYS_2 if version >= 2 else ())
    means_file = None
    if d.get("means_file") is not None:
        m = R.keys(d["means_file"], "interventions.means_file", MEANS_FILE_KEYS)
        means_file = MeansFile(path=R.str_(m["path"], "interventions.means_file.path"),
                               size=R.int_(m["size"], "interventions.means_file.size"),
                               digest=R.str_(m["digest"], "interventions.means_file.digest"))
    heads = []
    for j, pair in enumerate(R.list_(d["heads"], "interventions.heads")):
        where = f"interventions.heads[{j}]"
        pair = R.list_(pair, where)
        if len(pair) != 2:
            raise ValueError(f"{where} must be [layer, head]")
        heads.append((R.index(pair[0], f"{where}.layer", MAX_LAYERS, f"the layers an intervention names "
                                                                      f"(at most {MAX_LAYERS})"),
                      R.index(pair[1], f"{where}.head", MAX_HEADS, f"the heads a session can have (at most {MAX_HEADS})")))

    def indices(key: str, stop: int, what: str) -> tuple[int, ...]:
        return tuple(R.index(v, f"interventions.{key}[{j}]", stop, what)
                     for j, v in enumerate(R.list_(d[key], f"interventions.{key}")))

    return Interventions(
        heads=tuple(heads), mode=R.str_(d["mode"], "interventions.mode"),
        factor=R.num(d["factor"], "interventions.factor"),
        knockout_layers=indices("knockout_layers", MAX_LAYERS, f"the layers an intervention names (at most {MAX_LAYERS})"),
        knockout_heads=indices("knockout_heads", MAX_HEADS, f"the heads a session can have (at most {MAX_HEADS})"),
        patch=R.str_(d["patch"], "interventions.patch"),
        patch_layer=R.index(d["patch_layer"], "interventions.patch_layer", MAX_LAYERS,
                            f"the layers an intervention names (at most {MAX_LAYERS})"),
        patch_head=R.index(d["patch_head"], "interventions.patch_head", MAX_HEADS,
                           f"the heads a session can have (at most {MAX_HEADS})"),
        patch_positions=indices("patch_positions", MAX_TOKENS, "the token positions a sequence can have"),
        clean=R.str_(d["clean"], "interventions.clean"), means_file=means_file,
        stack=R.str_(d.get("stack", Interventions.stack), "interventions.stack"))


# ------------------------------------------------------------------------------------------------
# load


class _Reader:
    """Strict access to the tree, tracking which arrays and blobs were used."""

    def __init__(self, arrays, blobs):
        if not isinstance(arrays, dict) or not isinstance(blobs, dict):
            raise ValueError("arrays and blobs must be mappings of name -> value")
        self.arrays, self.blobs = arrays, blobs
        self.used_arrays: set[str] = set()
        self.used_blobs: set[str] = set()

    @staticmethod
    def keys(d, where: str, required: tuple, optional: tuple = ()) -> dict:
        if not isinstance(d, dict):
            raise ValueError(f"{where} must be a mapping, got {type(d).__name__}")
        unknown = sorted(set(d) - set(required) - set(optional))
        if unknown:
            raise ValueError(f"{where}: unknown key(s) {', '.join(map(repr, unknown))}")
        missing = [k for k in required if k not in d]
        if missing:
            raise ValueError(f"{where}: missing key(s) {', '.join(map(repr, missing))}")
        return d

    @staticmethod
    def str_(v, where: str) -> str:
        if not isinstance(v, str):
            raise ValueError(f"{where} must be a string, got {type(v).__name__}")
        return v

    @staticmethod
    def int_(v, where: str, optional: bool = False):
        if v is None and optional:
            return None
        if isinstance(v, bool) or not isinstance(v, int):
            raise ValueError(f"{where} must be an integer, got {v!r}")
        return v

    @staticmethod
    def num(v, where: str) -> float:
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(float(v)):
            raise ValueError(f"{where} must be a finite number, got {v!r}")
        return float(v)

    @staticmethod
    def bool_(v, where: str) -> bool:
        if not isinstance(v, bool):
            raise ValueError(f"{where} must be true or false, got {v!r}")
        return v

    @staticmethod
    def list_(v, where: str) -> list:
        if not isinstance(v, list):
            raise ValueError(f"{where} must be a list, got {type(v).__name__}")
        return v

    @classmethod
    def index(cls, v, where: str, stop: int, what: str, optional: bool = False):
        """An integer index in 0 .. stop - 1; the message names the field and the limit."""
        v = cls.int_(v, where, optional)
        if v is not None and not 0 <= v < stop:
            raise ValueError(f"{where} is {v:,}; {what} are 0 .. {stop - 1:,}")
        return v

    def array(self, key, where: str) -> np.ndarray:
        if not isinstance(key, str) or key not in self.arrays:
            raise ValueError(f"{where} refers to array {key!r}, which is missing")
        arr = self.arrays[key]
        if not isinstance(arr, np.ndarray) or arr.dtype.kind not in "biuf":
            raise ValueError(f"{where}: array {key!r} must hold numbers")
        self.used_arrays.add(key)
        return arr

    def blob(self, key, where: str) -> bytes:
        if not isinstance(key, str) or key not in self.blobs:
            raise ValueError(f"{where} refers to blob {key!r}, which is missing")
        b = self.blobs[key]
        if not isinstance(b, (bytes, bytearray)):
            raise ValueError(f"{where}: blob {key!r} must be bytes")
        self.used_blobs.add(key)
        return bytes(b)


def _load_source(R: _Reader, d, i: int):
    where = f"sources[{i}]"
    if not isinstance(d, dict) or "kind" not in d:
        raise ValueError(f"{where} must be a mapping with a 'kind'")
    kind = d["kind"]
    base = ("kind", "name", "color")
    if kind == "text":
        R.keys(d, where, base + ("text",))
        return TextSource(R.str_(d["name"], f"{where}.name"), R.str_(d["color"], f"{where}.color"),
                          R.str_(d["text"], f"{where}.text"))
    if kind == "image":
        R.keys(d, where, base + ("image", "patch", "policy", "target", "class_token"))
        target = d["target"]
        if target is not None:
            target = R.list_(target, f"{where}.target")
            if len(target) != 2:
                raise ValueError(f"{where}.target must be [height, width]")
            target = tuple(R.int_(t, f"{where}.target") for t in target)
        return ImageSource(R.str_(d["name"], f"{where}.name"), R.str_(d["color"], f"{where}.color"),
                           R.blob(d["image"], f"{where}.image"), R.int_(d["patch"], f"{where}.patch"),
                           R.str_(d["policy"], f"{where}.policy"), target,
                           R.bool_(d["class_token"], f"{where}.class_token"))
    if kind == "custom":
        R.keys(d, where, base + ("count", "generator", "seed", "scale", "values"))
        values = None if d["values"] is None else FrozenArray(R.array(d["values"], f"{where}.values"))
        return CustomSource(R.str_(d["name"], f"{where}.name"), R.str_(d["color"], f"{where}.color"),
                            R.int_(d["count"], f"{where}.count"), R.str_(d["generator"], f"{where}.generator"),
                            R.int_(d["seed"], f"{where}.seed"), R.num(d["scale"], f"{where}.scale"), values)
    if kind == "toy":
        R.keys(d, where, base + ("labels", "embeddings"))
        labels = tuple(R.str_(s, f"{where}.labels") for s in R.list_(d["labels"], f"{where}.labels"))
        return ToySource(R.str_(d["name"], f"{where}.name"), R.str_(d["color"], f"{where}.color"), labels,
                         FrozenArray(R.array(d["embeddings"], f"{where}.embeddings")))
    raise ValueError(f"{where}: unknown source kind {kind!r}")


def load_state(tree: dict, arrays: dict, blobs: dict) -> SessionState:
    """Rebuild a SessionState from ``dump_state`` output. ValueError, saying where, for unknown or
    missing keys, wrong types, shapes or dtypes, non-finite numbers, and arrays or blobs that the tree
    does not refer to."""
    R = _Reader(arrays, blobs)
    R.keys(tree, "session", TOP_KEYS, OPTIONAL_KEYS)
    sources = tuple(_load_source(R, d, i) for i, d in enumerate(R.list_(tree["sources"], "sources")))

    t = R.keys(tree["tokenizer"], "tokenizer", ("name", "json"))
    tok_json = None
    if t["json"] is not None:
        try:
            tok_json = R.blob(t["json"], "tokenizer.json").decode("utf-8")
        except UnicodeDecodeError:
            raise ValueError("the embedded tokenizer.json is not UTF-8 text") from None
    tokenizer = TokenizerSpec(tok_json, R.str_(t["name"], "tokenizer.name"))

    cross = None
    if tree["cross"] is not None:
        c = R.keys(tree["cross"], "cross", ("queries", "keys"))
        cross = CrossConfig(tuple(R.str_(n, "cross.queries") for n in R.list_(c["queries"], "cross.queries")),
                            tuple(R.str_(n, "cross.keys") for n in R.list_(c["keys"], "cross.keys")))

    m = R.keys(tree["model"], "model", ("d_model", "nh", "hs", "hv", "seed", "embed_seed", "weights",
                                        "qk_overrides"))
    w = R.keys(m["weights"], "model.weights", WEIGHT_NAMES)
    hand = {n: None if w[n] is None else FrozenArray(R.array(w[n], f"model.weights.{n}")) for n in WEIGHT_NAMES}
    model = ModelConfig(R.int_(m["d_model"], "model.d_model"), R.int_(m["nh"], "model.nh"),
                        R.int_(m["hs"], "model.hs", True), R.int_(m["hv"], "model.hv", True),
                        R.int_(m["seed"], "model.seed"), R.int_(m["embed_seed"], "model.embed_seed"), **hand)
    overrides = []
    for j, o in enumerate(R.list_(m["qk_overrides"], "model.qk_overrides")):
        where = f"model.qk_overrides[{j}]"
        o = R.list_(o, where)
        if len(o) != 5:
            raise ValueError(f"{where} must be [which, head, token, dim, value]")
        overrides.append(QKOverride(
            R.str_(o[0], f"{where}.which"),
            R.index(o[1], f"{where}.head", model.nh, f"the heads of this model (nh = {model.nh})"),
            R.index(o[2], f"{where}.token", MAX_TOKENS, "the token positions a sequence can have"),
            R.index(o[3], f"{where}.dim", model.head_size, f"the components of a head (hs = {model.head_size})"),
            R.num(o[4], f"{where}.value")))
    if overrides:
        model = replace(model, qk_overrides=tuple(overrides))

    p = R.keys(tree["positional"], "positional", ("kind", "base", "seed", "scale"))
    positional = PositionalConfig(R.str_(p["kind"], "positional.kind"), R.num(p["base"], "positional.base"),
                                  R.int_(p["seed"], "positional.seed"), R.num(p["scale"], "positional.scale"))

    s = R.keys(tree["score_rule"], "score_rule", ("name", "seed", "hidden"), ("cap",))
    score_rule = ScoreRuleConfig(R.str_(s["name"], "score_rule.name"), R.int_(s["seed"], "score_rule.seed"),
                                 R.int_(s["hidden"], "score_rule.hidden", True),
                                 R.num(s.get("cap", DEFAULT_CAP), "score_rule.cap"))

    k = R.keys(tree["kernel"], "kernel", ("name", "block_m", "block_n"))
    kernel = KernelConfig(R.str_(k["name"], "kernel.name"), R.int_(k["block_m"], "kernel.block_m"),
                          R.int_(k["block_n"], "kernel.block_n"))

    mk = R.keys(tree["mask"], "mask", ("payload", "arrays"))
    names = R.keys(mk["arrays"], "mask.arrays", tuple(mk["arrays"]) if isinstance(mk["arrays"], dict) else ())
    mask_arrays = {str(n): R.array(key, f"mask.arrays[{n!r}]") for n, key in names.items()}
    for n, cells in mask_arrays.items():  # painted cells: (n, 3) rows of [query, key, value]
        if cells.ndim == 2 and cells.shape[1] == 3 and cells.shape[0]:
            outside = np.flatnonzero(((cells[:, :2] < 0) | (cells[:, :2] >= MAX_TOKENS)).any(axis=1))
            if outside.size:
                q, k = cells[outside[0], :2].tolist()
                raise ValueError(f"mask.arrays[{n!r}] row {int(outside[0])}: painted cell ({q:,}, {k:,}) is outside "
                                 f"the token positions a sequence can have (0 .. {MAX_TOKENS - 1:,})")
    if not isinstance(mk["payload"], dict):
        raise ValueError("mask.payload must be a mapping")
    per_head = mk["payload"].get("heads", [])
    for j, item in enumerate(per_head if isinstance(per_head, list) else []):
        if isinstance(item, dict):
            R.index(item.get("head"), f"mask.payload.heads[{j}].head", MAX_HEADS,
                    f"the heads a session can have (at most {MAX_HEADS})")
    try:
        mask = MaskDesign.from_payload(mk["payload"], mask_arrays)
    except (KeyError, TypeError, IndexError) as exc:
        raise ValueError(f"mask design: {exc!r}") from None

    v = R.keys(tree["view"], "view", ("head", "query", "key", "colormap", "log_scale", "normalisation", "matrix",
                                      "overlay_opacity", "layout"))
    head = v["head"] if v["head"] == "mean" else R.index(v["head"], "view.head", MAX_HEADS,
                                                         f"the heads a session can have (at most {MAX_HEADS})")
    tokens = "the token positions a sequence can have"
    view = ViewState(head, R.index(v["query"], "view.query", MAX_TOKENS, tokens, True),
                     R.index(v["key"], "view.key", MAX_TOKENS, tokens, True),
                     R.str_(v["colormap"], "view.colormap"), R.bool_(v["log_scale"], "view.log_scale"),
                     R.str_(v["normalisation"], "view.normalisation"), R.str_(v["matrix"], "view.matrix"),
                     R.num(v["overlay_opacity"], "view.overlay_opacity"), R.str_(v["layout"], "view.layout"))

    extra_a = sorted(set(arrays) - R.used_arrays)
    extra_b = sorted(set(blobs) - R.used_blobs)
    if extra_a or extra_b:
        raise ValueError(f"arrays or blobs not referred to by the session: {', '.join(extra_a + extra_b)}")
    interventions = Interventions() if "interventions" not in tree else _load_interventions(R, tree["interventions"])
    return SessionState(sources, tokenizer, cross, model, positional, score_rule, kernel, mask, view, interventions)
