"""SessionState: the whole of a session as one immutable tree of frozen dataclasses. Everything a
person sets is here, so that saving and reopening gives the same attention and every edit is a pure
``state -> state`` command; each top-level field has its own change event on ``Session.events``.
Arrays are FrozenArray so the tree compares with ``==`` and hashes; constructors validate and raise
ValueError with a message a person can act on.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field, fields
from typing import ClassVar, Union

import numpy as np

from attnviz.model.frozen import FrozenArray, frozen_float
from attnviz.model.mask.design import MaskDesign
from attnviz.model.positional import PositionalConfig
from attnviz.model.score_rules import ScoreRuleConfig
from attnviz.sources.custom import MAX_BLOCK_TOKENS

_COLOR = re.compile(r"^#[0-9a-fA-F]{6}$")

#: default colours given to new sources, in order (colour-blind friendly Okabe-Ito palette)
PALETTE = ("#0072b2", "#e69f00", "#009e73", "#cc79a7", "#56b4e9", "#d55e00", "#f0e442", "#999999")


def _int(name: str, value, lo: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or int(value) < lo:
        raise ValueError(f"{name} must be an integer >= {lo}, got {value!r}")
    return int(value)


def _name(value) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"a source name must be a non-empty string, got {value!r}")
    if len(value) > 200:
        raise ValueError(f"source name is too long ({len(value)} characters, at most 200)")
    return value


def _color(value) -> str:
    if not isinstance(value, str) or not _COLOR.match(value):
        raise ValueError(f"colour must be written #rrggbb, got {value!r}")
    return value.lower()


# ------------------------------------------------------------------------------------------------
# sources


@dataclass(frozen=True)
class TextSource:
    """Typed text, tokenised by the session's tokenizer into BPE tokens."""

    kind: ClassVar[str] = "text"
    name: str  # segment name shown on the heatmap bands and used by mask rules
    color: str = PALETTE[0]  # band colour (#rrggbb)
    text: str = ""  # the original text; every token keeps its character span in it

    def __post_init__(self):
        _name(self.name)
        object.__setattr__(self, "color", _color(self.color))
        if not isinstance(self.text, str):
            raise ValueError(f"text of source {self.name!r} must be a string")


IMAGE_POLICIES = ("resize", "crop")


@dataclass(frozen=True)
class ImageSource:
    """An image file cut into ViT patches (plus an optional class token)."""

    kind: ClassVar[str] = "image"
    name: str  # segment name
    color: str = PALETTE[1]  # band colour
    data: bytes = b""  # the original file bytes, so a saved session reopens identically
    patch: int = 16  # patch side P in pixels
    policy: str = "resize"  # how the image reaches a multiple of P: "resize" or centre "crop"
    target: tuple[int, int] | None = None  # (H, W) before patching; None: nearest multiples of P
    class_token: bool = True  # prepend a learned-style class token, as ViT does

    def __post_init__(self):
        _name(self.name)
        object.__setattr__(self, "color", _color(self.color))
        if not isinstance(self.data, (bytes, bytearray)):
            raise ValueError(f"image source {self.name!r}: data must be the file's bytes")
        object.__setattr__(self, "data", bytes(self.data))
        _int(f"patch size of image source {self.name!r}", self.patch)
        if self.policy not in IMAGE_POLICIES:
            raise ValueError(f"image source {self.name!r}: policy must be one of {IMAGE_POLICIES}, "
                             f"got {self.policy!r}")
        if self.target is not None:
            t = tuple(self.target)
            if len(t) != 2:
                raise ValueError(f"image source {self.name!r}: target must be (height, width)")
            h = _int(f"target height of image source {self.name!r}", t[0])
            w = _int(f"target width of image source {self.name!r}", t[1])
            if h % self.patch or w % self.patch:
                raise ValueError(f"image source {self.name!r}: target {h}x{w} is not a multiple of the "
                                 f"patch size {self.patch}")
            object.__setattr__(self, "target", (h, w))
        object.__setattr__(self, "class_token", bool(self.class_token))


CUSTOM_GENERATORS = ("zeros", "noise", "file")


@dataclass(frozen=True)
class CustomSource:
    """A block of tokens for another modality (robot state, actions, noise)."""

    kind: ClassVar[str] = "custom"
    name: str  # segment name
    color: str = PALETTE[2]  # band colour
    count: int = 1  # number of tokens
    generator: str = "noise"  # "zeros", seeded Gaussian "noise", or values from a "file"
    seed: int = 0  # noise seed, so the block reproduces
    scale: float = 1.0  # noise standard deviation
    values: FrozenArray | None = None  # (count, width) values loaded from .npy/.csv ("file")

    def __post_init__(self):
        _name(self.name)
        object.__setattr__(self, "color", _color(self.color))
        if _int(f"token count of block {self.name!r}", self.count) > MAX_BLOCK_TOKENS:
            raise ValueError(f"block {self.name!r} has {self.count:,} tokens; a block holds at most "
                             f"{MAX_BLOCK_TOKENS:,}")
        if self.generator not in CUSTOM_GENERATORS:
            raise ValueError(f"block {self.name!r}: generator must be one of {CUSTOM_GENERATORS}, "
                             f"got {self.generator!r}")
        _int(f"seed of block {self.name!r}", self.seed, lo=0)
        if not math.isfinite(float(self.scale)) or float(self.scale) < 0:
            raise ValueError(f"block {self.name!r}: scale must be a finite number >= 0")
        object.__setattr__(self, "scale", float(self.scale))
        if self.generator == "file":
            if self.values is None:
                raise ValueError(f"block {self.name!r}: the 'file' generator needs loaded values")
            vals = frozen_float(self.values, f"values of block {self.name!r}")
            if vals.array.ndim not in (1, 2) or vals.shape[0] != self.count:
                raise ValueError(f"block {self.name!r}: values must have one row per token ({self.count}), "
                                 f"got shape {vals.shape}")
            object.__setattr__(self, "values", vals)
        elif self.values is not None:
            raise ValueError(f"block {self.name!r}: values are only used by the 'file' generator")


@dataclass(frozen=True)
class ToySource:
    """Hand-set tokens: a label and an embedding row each (the seeds' worked examples)."""

    kind: ClassVar[str] = "toy"
    name: str  # segment name
    color: str = PALETTE[3]  # band colour
    labels: tuple[str, ...] = ()  # token labels shown on the heatmap
    embeddings: FrozenArray = field(default_factory=lambda: FrozenArray(np.zeros((0, 1))))  # (n, d_model)

    def __post_init__(self):
        _name(self.name)
        object.__setattr__(self, "color", _color(self.color))
        labels = tuple(self.labels)
        if not all(isinstance(s, str) for s in labels):
            raise ValueError(f"toy source {self.name!r}: labels must be strings")
        object.__setattr__(self, "labels", labels)
        emb = frozen_float(self.embeddings, f"embeddings of toy source {self.name!r}", ndim=2)
        if emb.shape[0] != len(labels):
            raise ValueError(f"toy source {self.name!r}: {len(labels)} labels but {emb.shape[0]} embedding rows")
        object.__setattr__(self, "embeddings", emb)


Source = Union[TextSource, ImageSource, CustomSource, ToySource]
SOURCE_TYPES = {cls.kind: cls for cls in (TextSource, ImageSource, CustomSource, ToySource)}


# ------------------------------------------------------------------------------------------------
# the other top-level fields


@dataclass(frozen=True)
class TokenizerSpec:
    """Which BPE tokenizer text sources use."""

    json: str | None = None  # an embedded tokenizer.json text; None: the bundled default vocabulary
    name: str = "default"  # what the person loaded (file name), shown in the inputs panel

    def __post_init__(self):
        if self.json is not None and not isinstance(self.json, str):
            raise ValueError("an embedded tokenizer must be tokenizer.json text")
        if not isinstance(self.name, str):
            raise ValueError("tokenizer name must be a string")


@dataclass(frozen=True)
class CrossConfig:
    """Cross-attention: queries come from some sources, keys and values from others (Tq != Tk)."""

    queries: tuple[str, ...]  # names of the sources that make the query sequence, in order
    keys: tuple[str, ...]  # names of the sources that make the key/value sequence, in order

    def __post_init__(self):
        q, k = tuple(self.queries), tuple(self.keys)
        if not q or not k:
            raise ValueError("cross-attention needs at least one query source and one key source")
        for n in q + k:
            _name(n)
        if len(set(q)) != len(q) or len(set(k)) != len(k):
            raise ValueError("a source appears twice on one side of the cross-attention")
        object.__setattr__(self, "queries", q)
        object.__setattr__(self, "keys", k)


@dataclass(frozen=True, order=True)
class QKOverride:
    """A hand-set component of one head's query or key vector (applied after projection and RoPE)."""

    which: str  # "q" or "k"
    head: int  # head index
    token: int  # query token index (for "q") or key token index (for "k")
    dim: int  # component within the head vector
    value: float  # the value that replaces the computed component

    def __post_init__(self):
        if self.which not in ("q", "k"):
            raise ValueError(f"a hand-set component is on 'q' or 'k', got {self.which!r}")
        for n in ("head", "token", "dim"):
            _int(f"hand-set component {n}", getattr(self, n), lo=0)
        if not math.isfinite(float(self.value)):
            raise ValueError("a hand-set component must be a finite number")
        object.__setattr__(self, "value", float(self.value))

    @property
    def key(self) -> tuple[str, int, int, int]:
        return (self.which, self.head, self.token, self.dim)


WEIGHT_NAMES = ("W_q", "W_k", "W_v", "W_o")
MAX_HEADS = 256  # the most heads a session's attention layer has: head indices are 0 .. MAX_HEADS - 1


@dataclass(frozen=True)
class ModelConfig:
    """Sizes, seeds and optional hand-set weights of the attention layer."""

    d_model: int = 64  # embedding width of every token
    nh: int = 4  # number of heads
    hs: int | None = None  # query/key size per head; None: d_model // nh (seed 000: d_k = d_model / h)
    hv: int | None = None  # value size per head; None: same as the head size
    seed: int = 0  # seed of W_q, W_k, W_v, W_o when not hand-set
    embed_seed: int = 0  # seed of token, patch and class-token embeddings
    W_q: FrozenArray | None = None  # hand-set (nh, d_model, hs) or None (seeded)
    W_k: FrozenArray | None = None  # hand-set (nh, d_model, hs) or None (seeded)
    W_v: FrozenArray | None = None  # hand-set (nh, d_model, hv) or None (seeded)
    W_o: FrozenArray | None = None  # hand-set (nh * hv, d_model) or None (seeded)
    qk_overrides: tuple[QKOverride, ...] = ()  # hand-set q/k components, sorted, one per position

    def __post_init__(self):
        d, nh = _int("d_model", self.d_model), _int("the number of heads nh", self.nh)
        if self.hs is None and d % nh:
            raise ValueError(f"d_model={d} is not divisible by nh={nh}: pick a head count that divides "
                             f"d_model, or set the head size hs explicitly")
        if self.hs is not None:
            _int("head size hs", self.hs)
        if self.hv is not None:
            _int("value size hv", self.hv)
        _int("model seed", self.seed, lo=0)
        _int("embedding seed", self.embed_seed, lo=0)
        if d > 4096 or nh > MAX_HEADS or self.head_size > 4096 or self.value_size > 4096:
            raise ValueError(f"model sizes are limited to d_model <= 4096, nh <= {MAX_HEADS}, hs and hv <= 4096")
        shapes = {"W_q": (nh, d, self.head_size), "W_k": (nh, d, self.head_size),
                  "W_v": (nh, d, self.value_size), "W_o": (nh * self.value_size, d)}
        for name, shape in shapes.items():
            w = getattr(self, name)
            if w is not None:
                object.__setattr__(self, name, frozen_float(w, f"hand-set {name}", shape=shape))
        ov = tuple(sorted(self.qk_overrides))
        keys = [o.key for o in ov]
        if len(set(keys)) != len(keys):
            raise ValueError("two hand-set values for the same q/k component")
        for o in ov:
            if o.head >= nh or o.dim >= self.head_size:
                raise ValueError(f"hand-set {o.which} component (head {o.head}, dim {o.dim}) is outside "
                                 f"nh={nh}, hs={self.head_size}")
        object.__setattr__(self, "qk_overrides", ov)

    @property
    def head_size(self) -> int:
        """hs: the query/key size per head."""
        return int(self.hs) if self.hs is not None else self.d_model // self.nh

    @property
    def value_size(self) -> int:
        """hv: the value size per head."""
        return int(self.hv) if self.hv is not None else self.head_size

    @property
    def handset(self) -> bool:
        """True when any weight or q/k component is hand-set (a toy session)."""
        return any(getattr(self, n) is not None for n in WEIGHT_NAMES) or bool(self.qk_overrides)


KERNEL_NAMES = ("flash", "naive", "reference")


@dataclass(frozen=True)
class KernelConfig:
    """Which engine kernel runs the dot-product score rules, and the flash tile sizes."""

    name: str = "flash"  # engine kernel; other score rules always use the float64 numpy path
    block_m: int = 64  # BLOCK_M: query rows per flash tile
    block_n: int = 64  # BLOCK_N: key columns per flash tile

    def __post_init__(self):
        if self.name not in KERNEL_NAMES:
            raise ValueError(f"unknown kernel {self.name!r}; choose one of {', '.join(KERNEL_NAMES)}")
        _int("BLOCK_M", self.block_m)
        _int("BLOCK_N", self.block_n)
        if self.block_m > 4096 or self.block_n > 4096:
            raise ValueError("tile sizes are limited to 4096")


VIEW_MATRICES = ("weights", "scores", "output", "mask")
NORMALISATIONS = ("scaled", "unscaled", "uniform")


@dataclass(frozen=True)
class ViewState:
    """What the panels show; saved with the session so it reopens where the person left it."""

    head: int | str = 0  # selected head index, or "mean" for the average over heads
    query: int | None = None  # selected query token (row); None: none selected
    key: int | None = None  # selected key token (column) for the q.k breakdown; None: none
    colormap: str = "viridis"  # heatmap colormap name
    log_scale: bool = False  # colour by log(weight)
    normalisation: str = "scaled"  # seed 002's diagnostic: "scaled", "unscaled" (no sqrt d_k), "uniform"
    matrix: str = "weights"  # which matrix the heatmap shows: weights, scores, output or mask
    overlay_opacity: float = 0.6  # opacity of attention drawn over the image
    layout: str = ""  # reference to the saved dock layout (the UI's own key)

    def __post_init__(self):
        if isinstance(self.head, str):
            if self.head != "mean":
                raise ValueError(f"selected head must be a head index or 'mean', got {self.head!r}")
        else:
            object.__setattr__(self, "head", _int("selected head", self.head, lo=0))
        for n in ("query", "key"):
            v = getattr(self, n)
            if v is not None:
                object.__setattr__(self, n, _int(f"selected {n} token", v, lo=0))
        if not isinstance(self.colormap, str) or not self.colormap:
            raise ValueError("colormap must be a non-empty name")
        object.__setattr__(self, "log_scale", bool(self.log_scale))
        if self.normalisation not in NORMALISATIONS:
            raise ValueError(f"normalisation must be one of {NORMALISATIONS}, got {self.normalisation!r}")
        if self.matrix not in VIEW_MATRICES:
            raise ValueError(f"shown matrix must be one of {VIEW_MATRICES}, got {self.matrix!r}")
        op = float(self.overlay_opacity)
        if not (0.0 <= op <= 1.0):
            raise ValueError(f"overlay opacity must be between 0 and 1, got {self.overlay_opacity!r}")
        object.__setattr__(self, "overlay_opacity", op)
        if not isinstance(self.layout, str):
            raise ValueError("layout reference must be a string")


INTERVENTION_MODES = ("zero", "mean", "scale")  # what happens to the chosen heads' outputs
PATCH_KINDS = ("none", "head", "residual")  # what is copied from the clean prompt's pass
MAX_LAYERS = 1024  # the most layers an intervention names (a pretrained decoder has far fewer)
MAX_CLEAN_CHARS = 100_000  # the longest clean prompt kept in a session


def _index_tuple(name: str, values, stop: int) -> tuple[int, ...]:
    out = tuple(sorted({_int(name, v, lo=0) for v in values}))
    if out and out[-1] >= stop:
        raise ValueError(f"{name} {out[-1]} is out of range (0 .. {stop - 1})")
    return out


# the attention the edited heads belong to: an encoder-decoder's (decoder, encoder, cross), a SmolVLA policy's (vlm:
# the VLM's prefix layers, expert: the action expert's)
INTERVENTION_STACKS = ("decoder", "encoder", "cross", "vlm", "expert")
MAX_PATH_CHARS = 4096  # the longest file path kept in a session


@dataclass(frozen=True)
class MeansFile:
    """The corpus sweep file a mean ablation takes its head means from, and what it held when it was chosen:
    its size in bytes and the SHA-256 of its head means (layers x heads x head size, float64 little-endian,
    the shape first), so that a session reopened later can say the file is missing or has changed."""

    path: str
    size: int
    digest: str  # 64 lowercase hex digits

    def __post_init__(self):
        if not isinstance(self.path, str) or not self.path.strip() or "\0" in self.path:
            raise ValueError("the head means file must be a non-empty path")
        if len(self.path) > MAX_PATH_CHARS:
            raise ValueError(f"the head means file's path has {len(self.path):,} characters; at most "
                             f"{MAX_PATH_CHARS:,}")
        if _int("the head means file's size", self.size, lo=0) >= 1 << 62:
            raise ValueError(f"the head means file's size {self.size} is out of range")
        object.__setattr__(self, "size", int(self.size))
        if not isinstance(self.digest, str) or len(self.digest) != 64 \
                or any(ch not in "0123456789abcdef" for ch in self.digest):
            raise ValueError("the head means file's digest must be 64 lowercase hex digits (SHA-256)")


@dataclass(frozen=True)
class Interventions:
    """Edits of a pretrained model's forward pass, made in the Pretrained workspace's Intervene tab:
    the chosen heads' outputs zeroed, set to their mean over the positions (or to a corpus sweep file's
    means, ``means_file``) or scaled; the session's mask knocking out attention edges in chosen layers (and
    heads); one head's output or the residual stream entering a layer copied from a clean prompt of the same
    length. On an encoder-decoder the heads belong to ``stack`` (its decoder's self-attention, its encoder's,
    or the cross-attention); other models have one attention and ignore it. The default is no intervention."""

    heads: tuple[tuple[int, int], ...] = ()  # (layer, head) pairs edited, sorted, each once
    mode: str = "zero"  # one of INTERVENTION_MODES
    factor: float = 0.0  # the scale of the heads' outputs (mode "scale")
    knockout_layers: tuple[int, ...] = ()  # layers whose attention the session's mask restricts; () none
    knockout_heads: tuple[int, ...] = ()  # heads of those layers restricted; () every head
    patch: str = "none"  # one of PATCH_KINDS
    patch_layer: int = 0  # the layer patched (a head's output, or the stream entering it)
    patch_head: int = 0  # the head patched (patch "head")
    patch_positions: tuple[int, ...] = ()  # token positions of the residual patch; () every position
    clean: str = ""  # the clean prompt the patch is taken from
    means_file: MeansFile | None = None  # mode "mean": the corpus sweep file of the means; None: the positions'
    stack: str = "decoder"  # one of INTERVENTION_STACKS (read by encoder-decoders only)

    def __post_init__(self):
        if self.means_file is not None and not isinstance(self.means_file, MeansFile):
            raise ValueError(f"the head means file must be a MeansFile, got {type(self.means_file).__name__}")
        if self.stack not in INTERVENTION_STACKS:
            raise ValueError(f"intervention stack must be one of {INTERVENTION_STACKS}, got {self.stack!r}")
        heads = set()
        for pair in self.heads:
            if not isinstance(pair, (tuple, list)) or len(pair) != 2:
                raise ValueError(f"an intervention head is (layer, head), got {pair!r}")
            layer, head = _int("intervention layer", pair[0], lo=0), _int("intervention head", pair[1], lo=0)
            if layer >= MAX_LAYERS or head >= MAX_HEADS:
                raise ValueError(f"intervention head {layer}.{head} is out of range (layers below {MAX_LAYERS}, "
                                 f"heads below {MAX_HEADS})")
            heads.add((layer, head))
        object.__setattr__(self, "heads", tuple(sorted(heads)))
        if self.mode not in INTERVENTION_MODES:
            raise ValueError(f"intervention mode must be one of {INTERVENTION_MODES}, got {self.mode!r}")
        if isinstance(self.factor, bool) or not isinstance(self.factor, (int, float, np.integer, np.floating)) \
                or not math.isfinite(float(self.factor)):
            raise ValueError(f"the scale factor must be a finite number, got {self.factor!r}")
        object.__setattr__(self, "factor", float(self.factor))
        object.__setattr__(self, "knockout_layers", _index_tuple("knockout layer", self.knockout_layers, MAX_LAYERS))
        object.__setattr__(self, "knockout_heads", _index_tuple("knockout head", self.knockout_heads, MAX_HEADS))
        if self.patch not in PATCH_KINDS:
            raise ValueError(f"patch must be one of {PATCH_KINDS}, got {self.patch!r}")
        if _int("patch layer", self.patch_layer, lo=0) >= MAX_LAYERS:
            raise ValueError(f"patch layer {self.patch_layer} is out of range (0 .. {MAX_LAYERS - 1})")
        if _int("patch head", self.patch_head, lo=0) >= MAX_HEADS:
            raise ValueError(f"patch head {self.patch_head} is out of range (0 .. {MAX_HEADS - 1})")
        object.__setattr__(self, "patch_layer", int(self.patch_layer))
        object.__setattr__(self, "patch_head", int(self.patch_head))
        object.__setattr__(self, "patch_positions", _index_tuple("patch position", self.patch_positions, 1 << 16))
        if not isinstance(self.clean, str):
            raise ValueError("the clean prompt must be a string")
        if len(self.clean) > MAX_CLEAN_CHARS:
            raise ValueError(f"the clean prompt has {len(self.clean):,} characters; at most {MAX_CLEAN_CHARS:,}")

    @property
    def active(self) -> bool:
        """True when anything is changed in the pass (heads edited, edges knocked out or a patch)."""
        return bool(self.heads) or bool(self.knockout_layers) or self.patch != "none"


def _default_mask():
    return MaskDesign.default()


# ------------------------------------------------------------------------------------------------
# the session


@dataclass(frozen=True)
class SessionState:
    """The whole session. Immutable: edit with ``dataclasses.replace`` or, better, commands."""

    sources: tuple = ()  # Source specs in sequence order
    tokenizer: TokenizerSpec = field(default_factory=TokenizerSpec)  # BPE vocabulary for text sources
    cross: CrossConfig | None = None  # None: self-attention over all sources
    model: ModelConfig = field(default_factory=ModelConfig)  # sizes, seeds, hand-set weights
    positional: PositionalConfig = field(default_factory=PositionalConfig)  # positional encoding
    score_rule: ScoreRuleConfig = field(default_factory=ScoreRuleConfig)  # how q and k make a score
    kernel: KernelConfig = field(default_factory=KernelConfig)  # engine kernel and tile sizes
    mask: object = field(default_factory=_default_mask)  # MaskDesign
    view: ViewState = field(default_factory=ViewState)  # what the panels show
    interventions: Interventions = field(default_factory=Interventions)  # edits of a pretrained decoder's pass

    def __post_init__(self):
        srcs = tuple(self.sources)
        for s in srcs:
            if type(s) not in SOURCE_TYPES.values():
                raise ValueError(f"not a source spec: {type(s).__name__}")
        names = [s.name for s in srcs]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ValueError(f"source names must be unique; repeated: {', '.join(map(repr, dup))}")
        object.__setattr__(self, "sources", srcs)
        for s in srcs:
            if isinstance(s, ToySource) and len(s.labels) and s.embeddings.shape[1] != self.model.d_model:
                raise ValueError(f"toy source {s.name!r} has {s.embeddings.shape[1]}-dimensional embeddings "
                                 f"but d_model is {self.model.d_model}")
        if self.cross is not None:
            known = set(names)
            missing = [n for n in self.cross.queries + self.cross.keys if n not in known]
            if missing:
                raise ValueError(f"cross-attention names unknown sources: {', '.join(map(repr, missing))}")
        for name, typ in (("tokenizer", TokenizerSpec), ("model", ModelConfig), ("positional", PositionalConfig),
                          ("score_rule", ScoreRuleConfig), ("kernel", KernelConfig), ("view", ViewState),
                          ("interventions", Interventions)):
            if not isinstance(getattr(self, name), typ):
                raise ValueError(f"{name} must be a {typ.__name__}")

    def source(self, name: str):
        """The source named ``name`` (KeyError if none)."""
        for s in self.sources:
            if s.name == name:
                return s
        raise KeyError(name)

    def index_of(self, name: str) -> int:
        """Position of the source named ``name`` in ``sources`` (KeyError if none)."""
        for i, s in enumerate(self.sources):
            if s.name == name:
                return i
        raise KeyError(name)


#: top-level field names, in order; each has a change event on Session.events
FIELDS = tuple(f.name for f in fields(SessionState))

