"""A session built around a real model's mask, to study and export it in the mask designer: one source
per named segment of the model's sequence with exactly its number of tokens (image tokens and robot
blocks as custom blocks, text runs as hand-set tokens labelled with the model's own token text), and a
mask design that reproduces the model's mask cell for cell (:func:`attnviz.model.mask.segmented.design_for_segments`),
remembering each segment's role in the vision-language-action preset so that the seed-000 mask can be
laid over it for comparison.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attnviz.model.mask.segmented import design_for_segments
from attnviz.model.positional import PositionalConfig
from attnviz.model.segments import Segment
from attnviz.model.state import PALETTE, CustomSource, ModelConfig, SessionState, ToySource, ViewState

SEGMENT_KINDS = ("image", "text", "block")  # image tokens, words of the prompt, robot state / actions / noise
MAX_LABEL_CHARS = 60  # a token label longer than this is cut (hand-set token labels are shown on axes)


@dataclass(frozen=True)
class ModelSegment:
    """One named run of a model's sequence and what its tokens are."""

    name: str  # the model's segment name ("image", "prefix", "suffix", "state", "actions" ...)
    start: int  # first token
    stop: int  # one past the last token
    kind: str  # "image", "text" or "block" (see SEGMENT_KINDS)
    role: str | None = None  # VLA role I / P / A / E the preset gives this segment, None: asked when needed

    def __post_init__(self):
        if self.kind not in SEGMENT_KINDS:
            raise ValueError(f"segment {self.name!r}: kind must be one of {SEGMENT_KINDS}, got {self.kind!r}")
        if not 0 <= self.start < self.stop:
            raise ValueError(f"segment {self.name!r}: need 0 <= start < stop, got {self.start}, {self.stop}")


def unique_names(names) -> list[str]:
    """The names made unique in order: a repeated name becomes 'name 2', 'name 3' ..."""
    out: list[str] = []
    used: set[str] = set()
    for raw in names:
        base = (str(raw).strip() or "tokens")[:60]
        name, i = base, 2
        while name in used:
            name, i = f"{base} {i}", i + 1
        used.add(name)
        out.append(name)
    return out


def _label(text: str) -> str:
    s = str(text) or "∅"
    return s if len(s) <= MAX_LABEL_CHARS else s[:MAX_LABEL_CHARS - 1] + "…"


def session_for_model_mask(mask, segments, labels=None, d_model: int = 64, nh: int = 4) -> SessionState:
    """A new session whose sources are ``segments`` (ModelSegment, tiling the sequence in order) and whose
    mask design compiles to ``mask`` (bool (T, T)) exactly. ``labels`` (T,) name the text tokens; the
    tokens' vectors are seeded noise (this session studies the mask, not the model's numbers)."""
    m = np.asarray(mask)
    segs = list(segments)
    if not segs:
        raise ValueError("the model's sequence has no segments")
    T = m.shape[0] if m.ndim == 2 else -1
    if labels is not None and len(labels) != T:
        raise ValueError(f"{len(labels)} token labels for a {T}-token mask")
    names = unique_names(s.name for s in segs)
    sources = []
    rng = np.random.default_rng(0)
    for i, (seg, name) in enumerate(zip(segs, names)):
        colour = PALETTE[i % len(PALETTE)]
        n = seg.stop - seg.start
        if seg.kind == "text" and labels is not None:
            toks = tuple(_label(t) for t in labels[seg.start:seg.stop])
            sources.append(ToySource(name, colour, labels=toks, embeddings=rng.normal(0, 1, (n, d_model))))
        else:
            sources.append(CustomSource(name, colour, count=n, generator="noise", seed=i + 1))
    renamed = [Segment(name, s.start, s.stop) for s, name in zip(segs, names)]
    design = design_for_segments(m, renamed)
    roles = {name: s.role for s, name in zip(segs, names) if s.role is not None}
    if roles:
        design = design.with_roles(roles)
    return SessionState(sources=tuple(sources), model=ModelConfig(d_model=d_model, nh=nh),
                        positional=PositionalConfig("sinusoidal"), mask=design, view=ViewState(matrix="weights"))
