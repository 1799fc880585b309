"""Session commands: every edit of a SessionState as a small frozen command that returns its inverse
(the protocol of :mod:`attnviz.model.command`). Sources are addressed by name (names are unique);
an invalid edit, an unknown source name included, raises ValueError before anything changes.
:class:`SetFields` restores whole top-level fields (the inverse of structural edits). Consecutive commands
with the same ``merge_key`` (a drag stroke, a typing run) become one undo step in the window's undo stack
(:mod:`attnviz.ui.undo`), which keeps each command and its inverse.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Any, ClassVar

from attnviz.model.command import merge_key as _merge_key
from attnviz.model.positional import PositionalConfig
from attnviz.model.score_rules import ScoreRuleConfig
from attnviz.model.state import (FIELDS, WEIGHT_NAMES, CrossConfig, CustomSource, ImageSource,
                                 KernelConfig, QKOverride, SessionState, TextSource, TokenizerSpec, ViewState)


def _find(state: SessionState, name: str) -> int:
    try:
        return state.index_of(name)
    except KeyError:
        raise ValueError(f"there is no source named {name!r}") from None


def _set_source(state: SessionState, i: int, src) -> SessionState:
    srcs = list(state.sources)
    srcs[i] = src
    return replace(state, sources=tuple(srcs))


@dataclass(frozen=True)
class SetFields:
    """Set whole top-level fields; its inverse restores the previous values."""

    changes: tuple[tuple[str, Any], ...]  # (field name, new value) pairs
    label: str = "Edit session"

    def apply(self, state: SessionState):
        for name, _ in self.changes:
            if name not in FIELDS:
                raise ValueError(f"unknown session field {name!r}")
        old = tuple((n, getattr(state, n)) for n, _ in self.changes)
        new = replace(state, **dict(self.changes))
        return new, SetFields(old, self.label)


def _restore(state: SessionState, new: SessionState, label: str, *names: str):
    """(new, SetFields restoring ``names`` of ``state``)."""
    return new, SetFields(tuple((n, getattr(state, n)) for n in names), label)


class _ReplaceField:
    """Base of the commands that replace one whole top-level field, held in the command's field of the
    same name (``state_field``); the inverse is the same command holding the previous value."""

    state_field: ClassVar[str]

    def apply(self, state: SessionState):
        name = self.state_field
        return replace(state, **{name: getattr(self, name)}), type(self)(getattr(state, name), self.label)


# ------------------------------------------------------------------------------------------------
# sources


@dataclass(frozen=True)
class AddSource:
    """Insert a source (at ``index``; None: at the end)."""

    source: Any  # a source spec
    index: int | None = None  # position in the sequence
    label: str = "Add source"

    def apply(self, state: SessionState):
        srcs = list(state.sources)
        i = len(srcs) if self.index is None else max(0, min(int(self.index), len(srcs)))
        srcs.insert(i, self.source)
        return replace(state, sources=tuple(srcs)), RemoveSource(self.source.name, self.label)


@dataclass(frozen=True)
class RemoveSource:
    """Remove a source (and drop it from the cross-attention sides)."""

    name: str
    label: str = "Remove source"

    def apply(self, state: SessionState):
        i = _find(state, self.name)
        srcs = state.sources[:i] + state.sources[i + 1:]
        cross = state.cross
        if cross is not None:
            q = tuple(n for n in cross.queries if n != self.name)
            k = tuple(n for n in cross.keys if n != self.name)
            cross = CrossConfig(q, k) if q and k else None
        new = replace(state, sources=srcs, cross=cross)
        if cross == state.cross:
            return new, AddSource(state.sources[i], i, self.label)
        return _restore(state, new, self.label, "sources", "cross")


def rename_in_mask(design, old: str, new: str):
    """The mask design with block rules, splits and per-head designs that name segment ``old`` renamed."""
    if old == new:
        return design
    ren = lambda n: new if n == old else n  # noqa: E731
    rules = tuple((ren(q), ren(k), r) for q, k, r in design.rules)
    splits = tuple(replace(sp, segment=ren(sp.segment)) for sp in design.splits)
    heads = tuple((h, rename_in_mask(d, old, new)) for h, d in design.heads)
    if rules == design.rules and splits == design.splits and heads == design.heads:
        return design
    return replace(design, rules=rules, splits=splits, heads=heads)


@dataclass(frozen=True)
class RenameSource:
    """Rename a source; the cross-attention and the mask design's block rules follow the new name."""

    name: str
    new_name: str
    label: str = "Rename source"

    def apply(self, state: SessionState):
        i = _find(state, self.name)
        if self.new_name != self.name and any(s.name == self.new_name for s in state.sources):
            raise ValueError(f"a source named {self.new_name!r} already exists")
        srcs = list(state.sources)
        srcs[i] = replace(srcs[i], name=self.new_name)
        cross = state.cross
        if cross is not None:
            ren = lambda names: tuple(self.new_name if n == self.name else n for n in names)  # noqa: E731
            cross = CrossConfig(ren(cross.queries), ren(cross.keys))
        new = replace(state, sources=tuple(srcs), cross=cross, mask=rename_in_mask(state.mask, self.name,
                                                                                   self.new_name))
        return _restore(state, new, self.label, "sources", "cross", "mask")


@dataclass(frozen=True)
class RecolourSource:
    """Give a source another band colour (#rrggbb)."""

    name: str
    color: str
    label: str = "Recolour source"

    def apply(self, state: SessionState):
        i = _find(state, self.name)
        old = state.sources[i].color
        return (_set_source(state, i, replace(state.sources[i], color=self.color)),
                RecolourSource(self.name, old, self.label))


@dataclass(frozen=True)
class MoveSource:
    """Move a source to position ``index`` in the sequence."""

    name: str
    index: int
    label: str = "Move source"

    def apply(self, state: SessionState):
        i = _find(state, self.name)
        srcs = list(state.sources)
        src = srcs.pop(i)
        j = max(0, min(int(self.index), len(srcs)))
        srcs.insert(j, src)
        return replace(state, sources=tuple(srcs)), MoveSource(self.name, i, self.label)


@dataclass(frozen=True)
class ReplaceSource:
    """Replace a source's whole spec (same name or a new unique one)."""

    name: str
    source: Any  # the new spec
    label: str = "Edit source"

    def apply(self, state: SessionState):
        i = _find(state, self.name)
        old = state.sources[i]
        if self.source.name != self.name:
            new, _ = RenameSource(self.name, self.source.name).apply(state)
            new = _set_source(new, i, self.source)
            return _restore(state, new, self.label, "sources", "cross", "mask")
        return _set_source(state, i, self.source), ReplaceSource(self.name, old, self.label)


def _typed(state: SessionState, name: str, cls, what: str):
    i = _find(state, name)
    src = state.sources[i]
    if not isinstance(src, cls):
        raise ValueError(f"source {name!r} is not {what}")
    return i, src


@dataclass(frozen=True)
class SetText:
    """Replace the text of a text source."""

    name: str
    text: str
    label: str = "Edit text"

    @property
    def merge_key(self):
        return ("text", self.name)

    def apply(self, state: SessionState):
        i, src = _typed(state, self.name, TextSource, "a text source")
        return _set_source(state, i, replace(src, text=self.text)), SetText(self.name, src.text, self.label)


@dataclass(frozen=True)
class SetImage:
    """Load other image file bytes into an image source."""

    name: str
    data: bytes
    label: str = "Load image"

    def apply(self, state: SessionState):
        i, src = _typed(state, self.name, ImageSource, "an image source")
        return _set_source(state, i, replace(src, data=self.data)), SetImage(self.name, src.data, self.label)


_KEEP = object()


@dataclass(frozen=True)
class SetPatch:
    """Change an image source's patch size, resize/crop policy, target size or class token."""

    name: str
    patch: int | None = None  # None: unchanged
    policy: str | None = None  # None: unchanged
    target: Any = _KEEP  # (H, W), None (automatic) or unchanged
    class_token: bool | None = None  # None: unchanged
    label: str = "Change patching"

    def apply(self, state: SessionState):
        i, src = _typed(state, self.name, ImageSource, "an image source")
        ch = {}
        if self.patch is not None:
            ch["patch"] = self.patch
        if self.policy is not None:
            ch["policy"] = self.policy
        if self.target is not _KEEP:
            ch["target"] = self.target
        if self.class_token is not None:
            ch["class_token"] = self.class_token
        new = replace(src, **ch)
        return _set_source(state, i, new), SetPatch(self.name, src.patch, src.policy, src.target,
                                                   src.class_token, self.label)


@dataclass(frozen=True)
class SetCustomBlock:
    """Change a custom block's count, generator, seed, scale or values (None: unchanged)."""

    name: str
    count: int | None = None
    generator: str | None = None
    seed: int | None = None
    scale: float | None = None
    values: Any = _KEEP  # FrozenArray / array, None (no values) or unchanged
    label: str = "Edit block"

    def apply(self, state: SessionState):
        i, src = _typed(state, self.name, CustomSource, "a custom block")
        ch = {k: getattr(self, k) for k in ("count", "generator", "seed", "scale") if getattr(self, k) is not None}
        if self.values is not _KEEP:
            ch["values"] = self.values
        new = replace(src, **ch)
        return _set_source(state, i, new), ReplaceSource(self.name, src, self.label)


# ------------------------------------------------------------------------------------------------
# model settings


@dataclass(frozen=True)
class SetTokenizer(_ReplaceField):
    """Use another tokenizer for text sources."""

    tokenizer: TokenizerSpec
    label: str = "Change tokenizer"
    state_field: ClassVar[str] = "tokenizer"


@dataclass(frozen=True)
class SetCross(_ReplaceField):
    """Switch to cross-attention (a CrossConfig) or back to self-attention (None)."""

    cross: CrossConfig | None
    label: str = "Change attention type"
    state_field: ClassVar[str] = "cross"


@dataclass(frozen=True)
class SetModel:
    """Change model sizes or seeds: ``changes`` are (ModelConfig field, value) pairs.

    Hand-set weights whose shape no longer fits raise ValueError unless ``drop_handset`` is True,
    which also drops them (and hand-set q/k components).
    """

    changes: tuple[tuple[str, Any], ...]
    drop_handset: bool = False
    label: str = "Change model settings"

    def apply(self, state: SessionState):
        allowed = {"d_model", "nh", "hs", "hv", "seed", "embed_seed"}
        bad = [n for n, _ in self.changes if n not in allowed]
        if bad:
            raise ValueError(f"SetModel cannot change {', '.join(bad)}; use SetWeight or SetQKComponent")
        ch = dict(self.changes)
        if self.drop_handset:
            ch.update({n: None for n in WEIGHT_NAMES}, qk_overrides=())
        new = replace(state, model=replace(state.model, **ch))
        return _restore(state, new, self.label, "model")


@dataclass(frozen=True)
class SetWeight:
    """Hand-set one projection matrix (W_q, W_k, W_v or W_o), or None to go back to the seeded one."""

    which: str
    value: Any  # array of the right shape, or None
    label: str = "Set weights"

    def apply(self, state: SessionState):
        if self.which not in WEIGHT_NAMES:
            raise ValueError(f"unknown weight {self.which!r}; choose one of {', '.join(WEIGHT_NAMES)}")
        old = getattr(state.model, self.which)
        new = replace(state, model=replace(state.model, **{self.which: self.value}))
        return new, SetWeight(self.which, old, self.label)


@dataclass(frozen=True)
class SetQKComponent:
    """Hand-set component ``dim`` of head ``head``'s query (``which="q"``) or key of token ``token``.

    ``value`` None removes the hand-set value (the computed component shows again).
    """

    which: str
    head: int
    token: int
    dim: int
    value: float | None
    label: str = "Edit q/k component"

    @property
    def merge_key(self):
        return ("qk", self.which, self.head, self.token, self.dim)

    def apply(self, state: SessionState):
        key = (self.which, self.head, self.token, self.dim)
        ov = {o.key: o for o in state.model.qk_overrides}
        old = ov.get(key)
        if self.value is None:
            ov.pop(key, None)
        else:
            ov[key] = QKOverride(*key, self.value)
        new = replace(state, model=replace(state.model, qk_overrides=tuple(ov.values())))
        return new, SetQKComponent(*key, None if old is None else old.value, self.label)


@dataclass(frozen=True)
class SetPositional(_ReplaceField):
    """Use another positional encoding."""

    positional: PositionalConfig
    label: str = "Change positional encoding"
    state_field: ClassVar[str] = "positional"


@dataclass(frozen=True)
class SetScoreRule(_ReplaceField):
    """Use another score rule."""

    score_rule: ScoreRuleConfig
    label: str = "Change score rule"
    state_field: ClassVar[str] = "score_rule"


@dataclass(frozen=True)
class SetKernel:
    """Change the engine kernel or the flash tile sizes (None: unchanged)."""

    name: str | None = None
    block_m: int | None = None
    block_n: int | None = None
    label: str = "Change kernel"

    def apply(self, state: SessionState):
        k = state.kernel
        new = KernelConfig(self.name or k.name, self.block_m or k.block_m, self.block_n or k.block_n)
        return replace(state, kernel=new), SetKernel(k.name, k.block_m, k.block_n, self.label)


# ------------------------------------------------------------------------------------------------
# mask and view


@dataclass(frozen=True)
class SetMask(_ReplaceField):
    """Replace the whole mask design (a preset, an import)."""

    mask: Any  # MaskDesign
    label: str = "Set mask"
    state_field: ClassVar[str] = "mask"


@dataclass(frozen=True)
class EditMask:
    """A mask-design command (``attnviz.model.mask.commands``) lifted to the session."""

    inner: Any  # a command whose apply(design) -> (design, inverse)
    label_override: str | None = None

    @property
    def label(self) -> str:
        return self.label_override or getattr(self.inner, "label", "Edit mask")

    @property
    def merge_key(self):
        k = _merge_key(self.inner)
        return None if k is None else ("mask", k)

    def apply(self, state: SessionState):
        design, inv = self.inner.apply(state.mask)
        return replace(state, mask=design), EditMask(inv, self.label_override)


VIEW_FIELDS = tuple(f.name for f in fields(ViewState))


@dataclass(frozen=True)
class SetView:
    """Change view fields: ``changes`` are (ViewState field, value) pairs."""

    changes: tuple[tuple[str, Any], ...]
    label: str = "Change view"

    @property
    def merge_key(self):
        return ("view",) + tuple(sorted(n for n, _ in self.changes))

    def apply(self, state: SessionState):
        bad = [n for n, _ in self.changes if n not in VIEW_FIELDS]
        if bad:
            raise ValueError(f"unknown view field(s): {', '.join(bad)}")
        old = tuple((n, getattr(state.view, n)) for n, _ in self.changes)
        new = replace(state, view=replace(state.view, **dict(self.changes)))
        return new, SetView(old, self.label)


def set_view(**changes) -> SetView:
    """``SetView`` from keyword arguments: ``set_view(head=2, query=5)``."""
    return SetView(tuple(changes.items()))


def set_model(drop_handset: bool = False, **changes) -> SetModel:
    """``SetModel`` from keyword arguments: ``set_model(d_model=64, nh=8)``."""
    return SetModel(tuple(changes.items()), drop_handset)

